/* SPDX-License-Identifier: MIT */
/*
 * Backing-store I/O engine. The main libev loop must never block on disk, so every disk operation
 * is submitted here and completes later through a callback run on the loop thread.
 *
 * Two engines behind one interface:
 *  - "uring": io_uring (liburing); completions are signalled on an eventfd watched by libev.
 *    Submissions are batched and flushed once per loop iteration (ev_prepare), or when the
 *    submission queue is full.
 *  - "pool": a pread/pwrite worker-thread pool; used when io_uring is unavailable (old kernel,
 *    seccomp, io_uring_disabled sysctl) or when asked for.
 * Operations io_uring cannot express (SEEK_DATA maps, fadvise) always run on a small helper pool.
 *
 * Both engines complete the whole request: short reads and writes are resubmitted for the rest;
 * a read past end of file is completed with zeroes. The callback sees res = bytes transferred
 * (the full length) or a negative errno.
 */
#ifndef HAK_IO_H
#define HAK_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct ev_loop;
struct io_engine;

enum io_kind { IO_KIND_AUTO = 0, IO_KIND_URING, IO_KIND_POOL };

enum io_op {
	IO_OP_READ = 0, /* pread into buf (len bytes at off) */
	IO_OP_WRITE, /* pwrite from buf; IO_F_FUA makes it durable (RWF_DSYNC) before completion */
	IO_OP_FDATASYNC, /* fdatasync(fd) */
	IO_OP_FSYNC,     /* fsync(fd) */
	IO_OP_PUNCH,     /* fallocate(PUNCH_HOLE|KEEP_SIZE) over [off, off+len) */
	IO_OP_ZERO,      /* fallocate(ZERO_RANGE) over [off, off+len); -EOPNOTSUPP if unsupported */
	IO_OP_SEEKMAP,   /* fill map/map_count with data/hole extents of [off, off+len) */
	IO_OP_CACHE,     /* posix_fadvise(WILLNEED) over [off, off+len) */
	IO_OP__COUNT
};

#define IO_F_FUA (1u << 0)
/*
 * The fd is not O_DIRECT. With the uring engine, buffered WRITEs then run on the worker threads:
 * io_uring cannot complete a buffered ext4 write without blocking, so it punts every one to an
 * io-wq worker hashed by inode, which serialises all of a volume's writes behind one kernel
 * thread; pwrite from several threads measured faster (see bench/nbd.sh).
 */
#define IO_F_BUFFERED (1u << 1)

/* One extent of an IO_OP_SEEKMAP answer. */
struct io_extent {
	uint64_t len;
	int hole; /* 1: reads as zeroes and is unallocated */
};

struct io_req {
	enum io_op op;
	unsigned flags; /* IO_F_* */
	int fd;
	void *buf; /* READ / WRITE data; must stay valid until completion */
	uint64_t off;
	uint64_t len;
	/* IO_OP_SEEKMAP: caller provides map[map_max]; engine sets map_count (≥ 1 on success).
	 * The extents cover [off, off+sum(len)) with sum(len) ≤ len (fewer when map_max is hit). */
	struct io_extent *map;
	unsigned map_max;
	unsigned map_count;

	int64_t res;                      /* set before done(): len on success, -errno on failure */
	void (*done)(struct io_req *req); /* called on the loop thread, exactly once */
	void *data;                       /* caller's */

	/* Engine private. */
	uint64_t done_bytes;
	struct io_req *next;
};

struct io_stats {
	uint64_t submitted;
	uint64_t completed;
	uint64_t errors;
	uint64_t in_flight;
};

/*
 * Create an engine on loop. kind AUTO tries io_uring and falls back to the pool (logging why).
 * depth: maximum requests in flight (io_uring SQ size; the pool queues beyond its threads).
 * Returns 0 or -1 with errno.
 */
int io_engine_create(struct ev_loop *loop, enum io_kind kind, unsigned depth,
                     struct io_engine **out);
/* Waits for every request in flight to complete (their callbacks run), then frees the engine. */
void io_engine_destroy(struct io_engine *eng);
/*
 * The CPU policy of the engine's worker threads from their next job on: SCHED_BATCH or normal
 * (the caller sets its own thread's: see sched-policy in hak.conf(5)). io_uring's own kernel
 * workers keep the policy of the thread that created them.
 */
void io_engine_set_batch(struct io_engine *eng, bool batch);
/* "uring" or "pool". */
const char *io_engine_name(const struct io_engine *eng);
/* Parse "auto|uring|pool". 0 or -1 with errno=EINVAL. */
int io_kind_parse(const char *s, enum io_kind *out);

/*
 * Clear req and aim it: op on fd over [off, off+len) with buf, completing in done(req) with data.
 * Callers then add flags (IO_F_*) or a SEEKMAP map before io_submit().
 */
static inline void io_req_prep(struct io_req *req, enum io_op op, int fd, uint64_t off,
                               uint64_t len, void *buf, void (*done)(struct io_req *req),
                               void *data)
{
	*req = (struct io_req){
	    .op = op, .fd = fd, .off = off, .len = len, .buf = buf, .done = done, .data = data};
}

/*
 * Queue req. Never blocks and never calls req->done() from inside io_submit(): completion is always
 * delivered later from the loop. Returns 0, or -1 with errno (EINVAL for a bad op).
 */
int io_submit(struct io_engine *eng, struct io_req *req);
/* Run the loop until no request is in flight, or timeout_s passes. 0, or -1 with ETIMEDOUT. */
int io_drain(struct io_engine *eng, double timeout_s);
void io_engine_stats(const struct io_engine *eng, struct io_stats *out);

#endif
