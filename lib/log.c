/* SPDX-License-Identifier: MIT */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>

#include "clock.h"

static enum log_level cur_level = LOG_LVL_INFO;
static int use_syslog;
/* Heartbeat and I/O worker threads log too; one line must never interleave with another. */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const level_names[] = {"err", "warn", "notice", "info", "debug"};
static const int syslog_prio[] = {LOG_ERR, LOG_WARNING, LOG_NOTICE, LOG_INFO, LOG_DEBUG};

void log_open_syslog(const char *ident)
{
	openlog(ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
	use_syslog = 1;
}

void log_set_level(enum log_level level)
{
	cur_level = level;
}

enum log_level log_get_level(void)
{
	return cur_level;
}

int log_level_parse(const char *name, enum log_level *out)
{
	for (unsigned i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
		if (strcmp(name, level_names[i]) == 0) {
			*out = (enum log_level)i;
			return 0;
		}
	}
	errno = EINVAL;
	return -1;
}

static void log_emit(enum log_level level, const char *prefix, const char *fmt, va_list ap)
{
	char line[2048];
	int saved = errno;

	if (level > cur_level)
		goto out;
	vsnprintf(line, sizeof(line), fmt, ap);
	if (use_syslog) {
		syslog(syslog_prio[level], "%s%s", prefix, line);
		goto out;
	}
	char stamp[CLOCK_STAMP_LEN];
	clock_format_time(stamp, sizeof(stamp), clock_wall_ms());
	pthread_mutex_lock(&log_lock);
	fprintf(stderr, "%s hakd %s: %s%s\n", stamp, level_names[level], prefix, line);
	pthread_mutex_unlock(&log_lock);
out:
	errno = saved;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_emit(level, "", fmt, ap);
	va_end(ap);
}

void log_vol(enum log_level level, const char *vol, const char *role, const char *fmt, ...)
{
	char prefix[160] = "";
	va_list ap;

	if (vol && role)
		snprintf(prefix, sizeof(prefix), "[%s] (%s) ", vol, role);
	else if (vol)
		snprintf(prefix, sizeof(prefix), "[%s] ", vol);
	va_start(ap, fmt);
	log_emit(level, prefix, fmt, ap);
	va_end(ap);
}
