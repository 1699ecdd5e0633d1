/* SPDX-License-Identifier: MIT */
#include "testhook.h"

#ifdef HAK_TESTHOOKS_BUILT
#include <stdlib.h>

#include "log.h"

static unsigned long corrupt_every, corrupt_seen, refuse_direct, refuse_fallocate;

/* The positive number in environment variable name, or 0 (unset, or said why it is ignored). */
static unsigned long env_count(const char *name)
{
	const char *s = getenv(name);
	char *end = NULL;
	unsigned long n;
	if (!s)
		return 0;
	n = strtoul(s, &end, 10);
	if (!end || *end || n == 0) {
		log_err("Ignoring %s='%s': it must be a positive number.", name, s);
		return 0;
	}
	return n;
}

void testhook_init(void)
{
	corrupt_every = env_count("HAK_TEST_CORRUPT_EVERY");
	if (corrupt_every)
		log_warn("Test hook armed: every %lu-th checksummed payload received is corrupted.",
		         corrupt_every);
	refuse_direct = env_count("HAK_TEST_DIRECT_EINVAL");
	if (refuse_direct)
		log_warn("Test hook armed: the first %lu direct resync writes are refused "
		         "before they are written.",
		         refuse_direct);
	refuse_fallocate = env_count("HAK_TEST_NO_FALLOCATE");
	if (refuse_fallocate)
		log_warn("Test hook armed: the peer's punch and zero-range requests fail as "
		         "unsupported.");
}

bool testhook_refuse_fallocate(void)
{
	return refuse_fallocate != 0;
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
