/* SPDX-License-Identifier: MIT */
/* libFuzzer harness: one control-socket request line through the JSON dispatcher. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/control.h"

static json_t *echo(void *ctx, json_t *req, char *err, size_t errlen)
{
	(void)ctx;
	(void)err;
	(void)errlen;
	return json_pack("{s:O?}", "arg", json_object_get(req, "arg"));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct control *ctl;
	if (!ctl) {
		if (control_create(NULL, NULL, &ctl) < 0 ||
		    control_register(ctl, "status", CONTROL_READ, echo, NULL) < 0 ||
		    control_register(ctl, "primary", CONTROL_ADMIN, echo, NULL) < 0)
			abort();
	}
	/* Both levels: a read-only caller's refusal must be a reply line like any other. The
	 * length's parity picks one, so the seed corpus keeps its meaning. */
	struct control_caller who = {.level = size & 1 ? CONTROL_READ : CONTROL_ADMIN, .uid = 1000};
	/* Every line must get one reply line that is itself valid JSON with an "ok" member (#26: a
	 * request holding invalid UTF-8 got none and the client was dropped). */
	char *out = control_handle_line(ctl, &who, (const char *)data, size);
	if (!out)
		abort();
	size_t n = strlen(out);
	json_t *r = n && out[n - 1] == '\n' ? json_loadb(out, n - 1, 0, NULL) : NULL;
	if (!json_is_boolean(json_object_get(r, "ok")) ||
	    (json_is_false(json_object_get(r, "ok")) &&
	     !json_is_string(json_object_get(r, "error"))))
		abort();
	json_decref(r);
	free(out);
	return 0;
}
