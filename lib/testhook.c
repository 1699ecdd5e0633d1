/* SPDX-License-Identifier: MIT */
#include "testhook.h"

#ifdef HAK_TESTHOOKS_BUILT
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"

static unsigned long corrupt_every, corrupt_seen, refuse_direct, refuse_fallocate;
static char stall_name[32];
static int64_t stall_at_ms; /* monotonic */

/* HAK_TEST_STALL_THREAD=NAME[:SECONDS] */
static void stall_init(void)
{
	const char *s = getenv("HAK_TEST_STALL_THREAD");
	const char *colon;
	unsigned long secs = 0;
	if (!s || !*s)
		return;
	colon = strchr(s, ':');
	if (colon) {
		char *end = NULL;
		secs = strtoul(colon + 1, &end, 10);
		if (!end || *end) {
			log_err("Ignoring HAK_TEST_STALL_THREAD='%s': use NAME or NAME:SECONDS.",
			        s);
			return;
		}
	}
	snprintf(stall_name, sizeof(stall_name), "%.*s", (int)(colon ? colon - s : (long)strlen(s)),
	         s);
	stall_at_ms = clock_mono_ms() + (int64_t)secs * 1000;
	log_warn("Test hook armed: the threads called %s* stop making progress %lu s from now.",
	         stall_name, secs);
}

bool testhook_stall(const char *name)
{
	return stall_name[0] && strncmp(name, stall_name, strlen(stall_name)) == 0 &&
	       clock_mono_ms() >= stall_at_ms;
}

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
	stall_init();
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
