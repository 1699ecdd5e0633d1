/* SPDX-License-Identifier: MIT */
/*
 * A disk of its own for the benchmark's secondary. This machine has one disk, so a pair's two
 * backing files share it and each node's flushes queue behind the other's, which two servers
 * never see; with the secondary's file on tmpfs its flushes cost nothing, which flatters it.
 * Preloaded into the secondary's hakd (io-engine pool, whose workers call fdatasync through the
 * C library), this makes every fdatasync and fsync sleep FLUSHDELAY_US microseconds first: an
 * independent device whose cache flush takes that long, however many run at once.
 * bench/replication.sh builds it for PEER_FLUSH_US=.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>

static long delay_us(void)
{
	static long us = -1;
	if (us < 0) {
		const char *s = getenv("FLUSHDELAY_US");
		us = s ? strtol(s, NULL, 10) : 0;
		if (us < 0)
			us = 0;
	}
	return us;
}

static void flush_sleep(void)
{
	/* A thread's timer slack (50 us by default) would lengthen every sleep by up to that
	 * much: PEER_FLUSH_US=69 slept about 130 us. Timer slack is per thread. */
	static __thread int slack_set;
	int saved = errno;
	long us = delay_us();
	struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000};
	if (!slack_set) {
		prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
		slack_set = 1;
	}
	while (us > 0 && nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
	errno = saved;
}

/* Sleep, then call the C library's function NAME (looked up once into *real). */
static int delayed(int (**real)(int), const char *name, int fd)
{
	if (!*real)
		*real = (int (*)(int))dlsym(RTLD_NEXT, name);
	flush_sleep();
	return (*real)(fd);
}

int fdatasync(int fd)
{
	static int (*real)(int);
	return delayed(&real, "fdatasync", fd);
}

int fsync(int fd)
{
	static int (*real)(int);
	return delayed(&real, "fsync", fd);
}
