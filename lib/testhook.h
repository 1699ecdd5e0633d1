/* SPDX-License-Identifier: MIT */
/*
 * Fault injection for the test builds only. Compiled in when the build has AddressSanitizer (the
 * build the tests run, `make SAN=1`) or -DHAK_TEST_HOOKS; in any other build the functions are
 * constants and the environment is never read, so a production hakd cannot be made to corrupt
 * data by a stray variable.
 *
 *   HAK_TEST_CORRUPT_EVERY=N   flip one byte of every Nth checksummed payload received, after
 *                              the sender computed its checksum and before the receiver checks it
 *                              (what a bad NIC or a broken offload would do).
 *   HAK_TEST_DIRECT_EINVAL=N   refuse the first N direct (O_DIRECT) resync writes with EINVAL
 *                              before they reach the disk (what a backing store whose direct
 *                              I/O rules are stricter than 4 KiB alignment does).
 *   HAK_TEST_NO_FALLOCATE=1    the peer's punch and zero-range requests fail with EOPNOTSUPP
 *                              before they reach the store (a device without discard).
 *   HAK_TEST_STALL_THREAD=NAME[:S]  S seconds (default 0) after start, the threads whose name
 *                              begins with NAME (heartbeat, witness, io) stop making progress:
 *                              a loop thread hangs in its callback, an I/O worker in its next
 *                              request (what a thread stuck in the kernel looks like to the
 *                              watchdog check).
 */
#ifndef HAK_TESTHOOK_H
#define HAK_TESTHOOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__SANITIZE_ADDRESS__) || defined(HAK_TEST_HOOKS)
#define HAK_TESTHOOKS_BUILT 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HAK_TESTHOOKS_BUILT 1
#endif
#endif

#ifdef HAK_TESTHOOKS_BUILT
/* Reads the environment once; logs when a hook is armed. */
void testhook_init(void);
/* Corrupts data (len > 0) when its turn has come; true if it did. */
bool testhook_corrupt(uint8_t *data, size_t len);
/* True while a direct write is to be refused. */
bool testhook_refuse_direct(void);
/* True when punch / zero-range requests are to fail as unsupported. */
bool testhook_refuse_fallocate(void);
/* True when the thread called name is to stall now (HAK_TEST_STALL_THREAD). Thread-safe. */
bool testhook_stall(const char *name);
#else
static inline void testhook_init(void)
{
}
static inline bool testhook_corrupt(uint8_t *data, size_t len)
{
	(void)data;
	(void)len;
	return false;
}
static inline bool testhook_refuse_direct(void)
{
	return false;
}
static inline bool testhook_refuse_fallocate(void)
{
	return false;
}
static inline bool testhook_stall(const char *name)
{
	(void)name;
	return false;
}
#endif

#endif
