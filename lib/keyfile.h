/* SPDX-License-Identifier: MIT */
/*
 * Secret key files (the heartbeat key, the replication link's TLS pre-shared key): one text
 * format and one set of checks, so every key of the cluster is made and guarded the same way.
 */
#ifndef HAK_KEYFILE_H
#define HAK_KEYFILE_H

#include <stddef.h>
#include <stdint.h>

/*
 * The key in a file's contents: the bytes after one trailing newline is dropped (so
 * `head -c 32 /dev/urandom | base64 > key` and raw bytes both work), min to max of them, copied
 * into key (max bytes) with their count in *keylen. what names the key in messages ("heartbeat
 * key"). Returns 0, or -1 with errno EINVAL and a sentence in err.
 */
int keyfile_parse(const uint8_t *text, size_t len, const char *what, size_t min, size_t max,
                  uint8_t *key, size_t *keylen, char *err, size_t errlen);
/* Read path, which must be a regular file that group and others cannot read (errno EPERM
 * otherwise), and keyfile_parse it. */
int keyfile_load(const char *path, const char *what, size_t min, size_t max, uint8_t *key,
                 size_t *keylen, char *err, size_t errlen);

#endif
