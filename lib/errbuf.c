/* SPDX-License-Identifier: MIT */
#include "errbuf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

void errbuf_set(char *err, size_t len, const char *fmt, ...)
{
	int e = errno;
	va_list ap;

	if (!err || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
	errno = e;
}
