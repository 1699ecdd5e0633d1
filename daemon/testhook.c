/* SPDX-License-Identifier: MIT */
#include "testhook.h"

#ifdef HAK_TESTHOOKS_BUILT
#include <stdlib.h>

#include "log.h"

static unsigned long corrupt_every, corrupt_seen, refuse_direct;

static void refuse_direct_init(void)
{
	const char *s = getenv("HAK_TEST_DIRECT_EINVAL");
	char *end = NULL;
	if (!s)
		return;
	refuse_direct = strtoul(s, &end, 10);
	if (!end || *end || refuse_direct == 0) {
		log_err("Ignoring HAK_TEST_DIRECT_EINVAL='%s': it must be a positive number.", s);
		refuse_direct = 0;
		return;
	}
	log_warn("Test hook armed: the first %lu direct resync writes are reported as refused.",
	         refuse_direct);
}

void testhook_init(void)
{
	const char *s = getenv("HAK_TEST_CORRUPT_EVERY");
	char *end = NULL;
	refuse_direct_init();
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

bool testhook_refuse_direct(void)
{
	if (!refuse_direct)
		return false;
	refuse_direct--;
	return true;
}
#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int testhook_unused;
#endif
