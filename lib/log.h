/* SPDX-License-Identifier: MIT */
/*
 * One logging module for hakd: stderr in the foreground, syslog (and so the journal) as a
 * service. Messages are full sentences; the caller supplies values, the module adds the level and,
 * when given, the "[volume] (role) " prefix.
 */
#ifndef HAK_LOG_H
#define HAK_LOG_H

enum log_level { LOG_LVL_ERR = 0, LOG_LVL_WARN, LOG_LVL_NOTICE, LOG_LVL_INFO, LOG_LVL_DEBUG };

/* Send messages to syslog (ident "hakd") instead of stderr. */
void log_open_syslog(const char *ident);
void log_set_level(enum log_level level);
enum log_level log_get_level(void);
/* Parse "err|warn|notice|info|debug"; returns -1 with errno=EINVAL on anything else. */
int log_level_parse(const char *name, enum log_level *out);

void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same with a "[vol] (role) " prefix; either may be NULL. */
void log_vol(enum log_level level, const char *vol, const char *role, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define log_err(...)    log_msg(LOG_LVL_ERR, __VA_ARGS__)
#define log_warn(...)   log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_notice(...) log_msg(LOG_LVL_NOTICE, __VA_ARGS__)
#define log_info(...)   log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...)                                                                             \
	do {                                                                                       \
		if (log_get_level() >= LOG_LVL_DEBUG)                                              \
			log_msg(LOG_LVL_DEBUG, __VA_ARGS__);                                       \
	} while (0)

#endif
