/* SPDX-License-Identifier: MIT */
/*
 * Page-aligned payload buffers recycled through per-size free lists. Requests of 4 KiB to 32 MiB
 * come and go at high rates; glibc would mmap/munmap the large ones every time. Buffers are
 * 4096-aligned so O_DIRECT works. Loop-thread only (no locking).
 */
#ifndef HAK_BUF_H
#define HAK_BUF_H

#include <stddef.h>

/* A buffer of at least len bytes (len ≥ 1), or NULL with errno=ENOMEM. */
void *buf_get(size_t len);
/*
 * A buffer of at least len bytes whose byte at offset `at` (0 to 4088) is 4096-aligned, or NULL
 * with errno=ENOMEM (EINVAL for another `at`). For a received frame whose data, after a small
 * header of `at` bytes, goes to an O_DIRECT file without being copied again. at 0 is buf_get;
 * otherwise it comes from the class of len + 4096 - at, and the start of its page records that
 * size, so buf_put(p, len) takes it back like any other buffer.
 */
void *buf_get_at(size_t len, size_t at);
/* Return a buffer obtained with buf_get(len) or buf_get_at(len, ...) (the same len). NULL is
 * ignored. */
void buf_put(void *p, size_t len);
/*
 * Free the cached buffers that nobody took since the previous call, and return how many bytes
 * that was. Called every few seconds: a burst (a resync's window, a client's large writes) leaves
 * up to the cache's limit behind, which a quiet daemon should not keep resident; buffers in
 * steady use stay cached.
 */
size_t buf_age(void);
/* Free everything cached (at exit, so leak checkers stay quiet). */
void buf_trim(void);
/* Bytes currently cached in the free lists. */
size_t buf_cached(void);

#endif
