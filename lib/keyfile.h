/* SPDX-License-Identifier: MIT */
/*
 * Shared secrets read from key files: the cluster's heartbeat and witness key and the
 * replication link's authentication key. A key file holds at least KEYFILE_MIN bytes (one
 * trailing newline is dropped, so `head -c 32 /dev/urandom | base64 > key` and raw bytes both
 * work) and must be readable by its owner only.
 */
#ifndef HAK_KEYFILE_H
#define HAK_KEYFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KEYFILE_MIN 16u   /* bytes of key material, at least */
#define KEYFILE_MAX 1024u /* bytes of a key file, at most */

struct key_bytes {
	uint8_t bytes[KEYFILE_MAX];
	size_t len;
};

/* The key from a key file's contents; what names it in the message ("heartbeat key"). Returns 0,
 * or -1 with errno EINVAL and a sentence in err. */
int keyfile_parse(const uint8_t *text, size_t len, const char *what, struct key_bytes *key,
                  char *err, size_t errlen);
/* Read path (a regular file not readable by group or others) and keyfile_parse it. -1 with
 * errno (EPERM for a file others may read) and a sentence in err. */
int keyfile_load(const char *path, const char *what, struct key_bytes *key, char *err,
                 size_t errlen);

/* What tells a replaced file from the one read before: inode, size and modification time. */
struct file_stamp {
	uint64_t ino, size;
	int64_t mtime_ns;
};
/* path's stamp; a missing file (or NULL path) stamps as zeroes. 0, or -1 with errno. */
int keyfile_stamp(const char *path, struct file_stamp *out);
static inline bool file_stamp_same(const struct file_stamp *a, const struct file_stamp *b)
{
	return a->ino == b->ino && a->size == b->size && a->mtime_ns == b->mtime_ns;
}

#endif
