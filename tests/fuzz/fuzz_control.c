/* SPDX-License-Identifier: MIT */
/* libFuzzer harness: one control-socket request line through the JSON dispatcher. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

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
		    control_register(ctl, "status", echo, NULL) < 0)
			abort();
	}
	char *out = control_handle_line(ctl, (const char *)data, size);
	if (!out)
		abort();
	free(out);
	return 0;
}
