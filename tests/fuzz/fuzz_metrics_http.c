/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness: the metrics endpoint's HTTP request parser on arbitrary bytes. Checks that
 * the verdict is one the server knows how to answer, that a verdict reached on a prefix of the
 * request stands whatever follows (the server answers as soon as it has one), and that the
 * response for it is built.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "ctl/metrics_http.h"

static void check_known(int v)
{
	if (v != 0 && v != 200 && v != 400 && v != 404 && v != 405 && v != 431)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	int whole = mhttp_parse(buf, size);
	check_known(whole);
	/* a few prefixes: where the input itself says, its half, all but the last byte */
	size_t cuts[3] = {size ? data[0] % (size + 1) : 0, size / 2, size ? size - 1 : 0};
	for (size_t i = 0; i < 3; i++) {
		int part = mhttp_parse(buf, cuts[i]);
		check_known(part);
		if (part != 0 && part != whole)
			abort();
	}
	if (whole) {
		size_t len;
		char *r = mhttp_response(whole, "x 1\n", 4, &len);
		if (!r || len < 17)
			abort();
		free(r);
	}
	return 0;
}
