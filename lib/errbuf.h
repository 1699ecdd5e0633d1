/* SPDX-License-Identifier: MIT */
/*
 * The caller's error buffer: functions that fail with a sentence for the operator take
 * (char *err, size_t errlen) and fill it here. A NULL or empty buffer means the caller does not
 * want the sentence.
 */
#ifndef HAK_ERRBUF_H
#define HAK_ERRBUF_H

#include <stddef.h>

/* Format into err (cut to fit, always terminated); nothing when err is NULL or len is 0. errno is
 * left as it was, so a caller can describe a failure and still return its errno. */
void errbuf_set(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
