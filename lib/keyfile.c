/* SPDX-License-Identifier: MIT */
#include "keyfile.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int keyfile_parse(const uint8_t *text, size_t len, const char *what, struct key_bytes *key,
                  char *err, size_t errlen)
{
	if (len > 0 && text[len - 1] == '\n')
		len--;
	if (len < KEYFILE_MIN || len > KEYFILE_MAX) {
		snprintf(err, errlen,
		         "The %s has %zu bytes; it needs %u to %u (for example the output of "
		         "'head -c 32 /dev/urandom | base64').",
		         what, len, KEYFILE_MIN, KEYFILE_MAX);
		errno = EINVAL;
		return -1;
	}
	memcpy(key->bytes, text, len);
	key->len = len;
	return 0;
}

int keyfile_load(const char *path, const char *what, struct key_bytes *key, char *err,
                 size_t errlen)
{
	uint8_t buf[KEYFILE_MAX + 2];
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
	rc = keyfile_parse(buf, (size_t)n, what, key, err, errlen);
	e = errno;
out:
	if (fd >= 0)
		close(fd);
	OPENSSL_cleanse(buf, sizeof(buf));
	if (rc < 0)
		errno = e;
	return rc;
}

int keyfile_stamp(const char *path, struct file_stamp *out)
{
	struct stat st;
	memset(out, 0, sizeof(*out));
	if (!path)
		return 0;
	if (stat(path, &st) < 0)
		return errno == ENOENT ? 0 : -1;
	out->ino = (uint64_t)st.st_ino;
	out->size = (uint64_t)st.st_size;
	out->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	return 0;
}
