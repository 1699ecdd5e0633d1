/* SPDX-License-Identifier: MIT */
#include "keyfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The largest key file read whole: larger ones are reported by their size, not read. */
#define KEYFILE_READ_MAX 4096u

int keyfile_parse(const uint8_t *text, size_t len, const char *what, size_t min, size_t max,
                  uint8_t *key, size_t *keylen, char *err, size_t errlen)
{
	if (len > 0 && text[len - 1] == '\n')
		len--;
	if (len < min || len > max) {
		snprintf(err, errlen,
		         "The %s has %zu bytes; it needs %zu to %zu (for example the output of "
		         "'head -c 32 /dev/urandom | base64').",
		         what, len, min, max);
		errno = EINVAL;
		return -1;
	}
	memcpy(key, text, len);
	*keylen = len;
	return 0;
}

int keyfile_load(const char *path, const char *what, size_t min, size_t max, uint8_t *key,
                 size_t *keylen, char *err, size_t errlen)
{
	uint8_t buf[KEYFILE_READ_MAX + 2];
	struct stat st;
	ssize_t n = -1;
	int fd, rc = -1, e = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		e = errno;
		snprintf(err, errlen, "Cannot open the %s file %s: %s.", what, path, strerror(e));
		goto out;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (st.st_mode & 077)) {
		e = EPERM;
		snprintf(err, errlen,
		         "The %s file %s must be a regular file readable by its owner only; run "
		         "'chmod 600 %s'.",
		         what, path, path);
		goto out;
	}
	n = read(fd, buf, sizeof(buf));
	if (n < 0) {
		e = errno;
		snprintf(err, errlen, "Cannot read the %s file %s: %s.", what, path, strerror(e));
		goto out;
	}
	rc = keyfile_parse(buf, (size_t)n, what, min, max, key, keylen, err, errlen);
	e = errno;
out:
	if (fd >= 0)
		close(fd);
	explicit_bzero(buf, sizeof(buf));
	if (rc < 0)
		errno = e;
	return rc;
}
