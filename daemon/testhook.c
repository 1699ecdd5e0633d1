/* SPDX-License-Identifier: MIT */
#include "testhook.h"

#ifdef HAK_TESTHOOKS_BUILT
#include <stdlib.h>

#include "log.h"

static unsigned long corrupt_every, corrupt_seen;

void testhook_init(void)
{
	const char *s = getenv("HAK_TEST_CORRUPT_EVERY");
	char *end = NULL;
	if (!s)
		return;
	corrupt_every = strtoul(s, &end, 10);
	if (!end || *end || corrupt_every == 0) {
		log_err("Ignoring HAK_TEST_CORRUPT_EVERY='%s': it must be a positive number.", s);
		corrupt_every = 0;
		return;
	}
	log_warn("Test hook armed: every %lu-th checksummed payload received is corrupted.",
	         corrupt_every);
}

bool testhook_corrupt(uint8_t *data, size_t len)
{
	if (!corrupt_every || len == 0 || ++corrupt_seen % corrupt_every != 0)
		return false;
	data[corrupt_seen % len] ^= 0x40;
	return true;
}
#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int testhook_unused;
#endif
