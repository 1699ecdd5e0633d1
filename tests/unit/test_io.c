/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the io module. Every engine test runs once per engine (loop index = io_kind),
 * on temp files under /var/tmp (ext4 here: holes, SEEK_DATA and ZERO_RANGE are real).
 */
#include "io/io.h"
#include "lib/log.h"

#include <check.h>
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define KIB 1024ull
#define MIB (1024ull * 1024)

static struct ev_loop *loop;
static struct io_engine *eng;
static int fd = -1;

static void engine_start(enum io_kind kind, unsigned depth)
{
	loop = ev_loop_new(EVFLAG_AUTO);
	ck_assert_ptr_nonnull(loop);
	ck_assert_int_eq(io_engine_create(loop, kind, depth, &eng), 0);
	ck_assert_str_eq(io_engine_name(eng), kind == IO_KIND_URING ? "uring" : "pool");
}

/* A fresh temp file, unlinked at once so nothing is left behind even if a test dies. */
static int temp_open(int extra_flags)
{
	char path[] = "/var/tmp/hak-test-io-XXXXXX";
	int tfd = mkstemp(path);
	int dfd;

	ck_assert_int_ge(tfd, 0);
	if (extra_flags) {
		dfd = open(path, O_RDWR | extra_flags);
		ck_assert_int_ge(dfd, 0);
		close(tfd);
		tfd = dfd;
	}
	unlink(path);
	return tfd;
}

static void setup(enum io_kind kind, unsigned depth)
{
	engine_start(kind, depth);
	fd = temp_open(0);
}

static void teardown(void)
{
	if (eng)
		io_engine_destroy(eng);
	eng = NULL;
	if (loop)
		ev_loop_destroy(loop);
	loop = NULL;
	if (fd >= 0)
		close(fd);
	fd = -1;
}

static uint8_t *abuf(size_t len)
{
	void *p = NULL;

	ck_assert_int_eq(posix_memalign(&p, 4096, len ? len : 1), 0);
	return p;
}

/* Content that differs per byte position and per seed, so misplaced data is caught. */
static void pattern(uint8_t *buf, size_t len, uint64_t off, unsigned seed)
{
	for (size_t i = 0; i < len; i++) {
		uint64_t x = (off + i) * 2654435761u + seed * 40503u;

		buf[i] = (uint8_t)(x >> 11 ^ x >> 3);
	}
}

static int is_zero(const uint8_t *buf, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i])
			return 0;
	return 1;
}

static void count_done(struct io_req *req)
{
	(*(int *)req->data)++;
}

/* Submits one request, checks done() is not called inside io_submit, drains, returns res. */
static int64_t run_req(struct io_req *req)
{
	int calls = 0;

	req->done = count_done;
	req->data = &calls;
	ck_assert_int_eq(io_submit(eng, req), 0);
	ck_assert_int_eq(calls, 0);
	ck_assert_int_eq(io_drain(eng, 10.0), 0);
	ck_assert_int_eq(calls, 1);
	return req->res;
}

static int64_t do_io(enum io_op op, unsigned flags, int rfd, void *buf, uint64_t off, uint64_t len)
{
	struct io_req req = {
	    .op = op, .flags = flags, .fd = rfd, .buf = buf, .off = off, .len = len};

	return run_req(&req);
}

static unsigned seekmap(int rfd, uint64_t off, uint64_t len, struct io_extent *map, unsigned max)
{
	struct io_req req = {
	    .op = IO_OP_SEEKMAP, .fd = rfd, .off = off, .len = len, .map = map, .map_max = max};

	ck_assert_int_eq(run_req(&req), (int64_t)len);
	return req.map_count;
}

static void check_extent(const struct io_extent *e, uint64_t len, int hole)
{
	ck_assert_uint_eq(e->len, len);
	ck_assert_int_eq(e->hole, hole);
}

START_TEST(test_write_read)
{
	uint8_t *w = abuf(MIB), *r = abuf(MIB), small[100];
	int dfd;

	setup(_i, 64);
	pattern(w, MIB, 0, 1);
	ck_assert_int_eq(do_io(IO_OP_WRITE, 0, fd, w, 0, MIB), (int64_t)MIB);
	/* An unaligned small write over the middle. */
	pattern(small, sizeof(small), 5000, 2);
	ck_assert_int_eq(do_io(IO_OP_WRITE, 0, fd, small, 5000, sizeof(small)), 100);
	memcpy(w + 5000, small, sizeof(small));
	memset(r, 0xAA, MIB);
	ck_assert_int_eq(do_io(IO_OP_READ, 0, fd, r, 0, MIB), (int64_t)MIB);
	ck_assert_mem_eq(r, w, MIB);
	/* Independently of the engine's read path. */
	ck_assert_int_eq(pread(fd, r, MIB, 0), (ssize_t)MIB);
	ck_assert_mem_eq(r, w, MIB);

	/* O_DIRECT: callers' buffers are 4096-aligned, so the same path works. */
	dfd = temp_open(O_DIRECT);
	pattern(w, 64 * KIB, 0, 3);
	ck_assert_int_eq(do_io(IO_OP_WRITE, 0, dfd, w, 8 * KIB, 64 * KIB), (int64_t)(64 * KIB));
	memset(r, 0xAA, 64 * KIB);
	ck_assert_int_eq(do_io(IO_OP_READ, 0, dfd, r, 8 * KIB, 64 * KIB), (int64_t)(64 * KIB));
	ck_assert_mem_eq(r, w, 64 * KIB);
	close(dfd);
	free(w);
	free(r);
	teardown();
}
END_TEST

START_TEST(test_fua)
{
	uint8_t *w = abuf(64 * KIB), *r = abuf(64 * KIB);
	struct io_stats st;

	setup(_i, 64);
	pattern(w, 64 * KIB, 12 * KIB, 4);
	ck_assert_int_eq(do_io(IO_OP_WRITE, IO_F_FUA, fd, w, 12 * KIB, 64 * KIB),
	                 (int64_t)(64 * KIB));
	ck_assert_int_eq(pread(fd, r, 64 * KIB, 12 * KIB), (ssize_t)(64 * KIB));
	ck_assert_mem_eq(r, w, 64 * KIB);
	io_engine_stats(eng, &st);
	ck_assert_uint_eq(st.submitted, 1);
	ck_assert_uint_eq(st.completed, 1);
	ck_assert_uint_eq(st.errors, 0);
	ck_assert_uint_eq(st.in_flight, 0);
	free(w);
	free(r);
	teardown();
}
END_TEST

START_TEST(test_sync)
{
	uint8_t *w = abuf(16 * KIB);
	int rofd;
	char path[64];

	setup(_i, 64);
	pattern(w, 16 * KIB, 0, 5);
	ck_assert_int_eq(do_io(IO_OP_WRITE, 0, fd, w, 0, 16 * KIB), (int64_t)(16 * KIB));
	ck_assert_int_eq(do_io(IO_OP_FDATASYNC, 0, fd, NULL, 0, 0), 0);
	ck_assert_int_eq(do_io(IO_OP_WRITE, 0, fd, w, 16 * KIB, 16 * KIB), (int64_t)(16 * KIB));
	ck_assert_int_eq(do_io(IO_OP_FSYNC, 0, fd, NULL, 0, 0), 0);
	/* A read-only descriptor may be synced too (the secondary opens backing stores so). */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	rofd = open(path, O_RDONLY);
	ck_assert_int_ge(rofd, 0);
	ck_assert_int_eq(do_io(IO_OP_FDATASYNC, 0, rofd, NULL, 0, 0), 0);
	close(rofd);
	free(w);
	teardown();
}
END_TEST

START_TEST(test_read_eof)
{
	uint8_t *w = abuf(6000), *r = abuf(16 * KIB);

	setup(_i, 64);
	pattern(w, 6000, 0, 6);
	ck_assert_int_eq(pwrite(fd, w, 6000, 0), 6000);
	memset(r, 0xAA, 16 * KIB);
	ck_assert_int_eq(do_io(IO_OP_READ, 0, fd, r, 0, 16 * KIB), (int64_t)(16 * KIB));
	ck_assert_mem_eq(r, w, 6000);
	ck_assert(is_zero(r + 6000, 16 * KIB - 6000));
	/* Wholly past the end. */
	memset(r, 0xAA, 16 * KIB);
	ck_assert_int_eq(do_io(IO_OP_READ, 0, fd, r, MIB, 8 * KIB), (int64_t)(8 * KIB));
	ck_assert(is_zero(r, 8 * KIB));
	ck_assert_uint_eq(r[8 * KIB], 0xAA);
	free(w);
	free(r);
	teardown();
}
END_TEST

#define MANY 1000

START_TEST(test_many)
{
	static struct io_req reqs[MANY];
	uint8_t *w = abuf(MANY * 4 * KIB), *r = abuf(MANY * 4 * KIB);
	struct io_stats st;
	int calls = 0;

	setup(_i, 16);
	pattern(w, MANY * 4 * KIB, 0, 7);
	memset(r, 0xAA, MANY * 4 * KIB);
	for (int pass = 0; pass < 2; pass++) {
		calls = 0;
		for (unsigned i = 0; i < MANY; i++) {
			/* Scattered order: request i touches block (i * 7) % MANY. */
			unsigned blk = (i * 7) % MANY;

			reqs[i] = (struct io_req){.op = pass ? IO_OP_READ : IO_OP_WRITE,
			                          .fd = fd,
			                          .buf = (pass ? r : w) + blk * 4 * KIB,
			                          .off = blk * 4 * KIB,
			                          .len = 4 * KIB,
			                          .done = count_done,
			                          .data = &calls};
			ck_assert_int_eq(io_submit(eng, &reqs[i]), 0);
		}
		io_engine_stats(eng, &st);
		ck_assert_uint_eq(st.in_flight, MANY);
		ck_assert_int_eq(calls, 0);
		ck_assert_int_eq(io_drain(eng, 20.0), 0);
		ck_assert_int_eq(calls, MANY);
		for (unsigned i = 0; i < MANY; i++)
			ck_assert_int_eq(reqs[i].res, (int64_t)(4 * KIB));
	}
	ck_assert_mem_eq(r, w, MANY * 4 * KIB);
	io_engine_stats(eng, &st);
	ck_assert_uint_eq(st.submitted, 2 * MANY);
	ck_assert_uint_eq(st.completed, 2 * MANY);
	ck_assert_uint_eq(st.errors, 0);
	ck_assert_uint_eq(st.in_flight, 0);
	free(w);
	free(r);
	teardown();
}
END_TEST

/* Each completion submits the next request from inside done(): such submissions must still be
 * flushed by the loop, or the chain stalls. */
struct chain {
	struct io_req req;
	uint8_t *buf;
	unsigned left;
	unsigned completed;
	int64_t bad_res;
};

static void chain_done(struct io_req *req)
{
	struct chain *c = req->data;

	c->completed++;
	if (req->res != (int64_t)req->len)
		c->bad_res = req->res;
	if (--c->left == 0)
		return;
	req->op = req->op == IO_OP_WRITE ? IO_OP_READ : IO_OP_WRITE;
	req->off = (c->left % 64) * 4 * KIB;
	ck_assert_int_eq(io_submit(eng, req), 0);
}

START_TEST(test_chain)
{
	struct chain c = {.left = 300};

	setup(_i, 4);
	c.buf = abuf(4 * KIB);
	pattern(c.buf, 4 * KIB, 0, 8);
	c.req = (struct io_req){.op = IO_OP_WRITE,
	                        .fd = fd,
	                        .buf = c.buf,
	                        .len = 4 * KIB,
	                        .done = chain_done,
	                        .data = &c};
	ck_assert_int_eq(io_submit(eng, &c.req), 0);
	ck_assert_int_eq(io_drain(eng, 10.0), 0);
	ck_assert_uint_eq(c.completed, 300);
	ck_assert_uint_eq(c.left, 0);
	ck_assert_int_eq(c.bad_res, 0);
	free(c.buf);
	teardown();
}
END_TEST

/* Large buffered writes to one file run one at a time, in submission order (the lane in
 * io_pool.c); other requests and other files go on beside them. */
#define LANE_WRITES 24
#define LANE_LEN    (256 * KIB)

struct lane_log {
	unsigned order[LANE_WRITES];
	unsigned n;
};

static uint8_t *lane_bufs[LANE_WRITES];

static void lane_done(struct io_req *req)
{
	struct lane_log *log = req->data;
	unsigned k = 0;

	while (k < LANE_WRITES && lane_bufs[k] != req->buf)
		k++;
	log->order[log->n++] = k;
}

START_TEST(test_lane)
{
	static struct io_req reqs[2][LANE_WRITES], small[LANE_WRITES];
	struct lane_log logs[2] = {0};
	uint8_t **w = lane_bufs, *r = abuf(LANE_LEN), *sbuf = abuf(4 * KIB);
	int fds[2], calls = 0;

	setup(_i, 16);
	fds[0] = fd;
	fds[1] = temp_open(0);
	for (unsigned k = 0; k < LANE_WRITES; k++) {
		w[k] = abuf(LANE_LEN);
		pattern(w[k], LANE_LEN, 0, 20 + k);
	}
	pattern(sbuf, 4 * KIB, 0, 19);
	for (unsigned k = 0; k < LANE_WRITES; k++) {
		for (unsigned f = 0; f < 2; f++) {
			reqs[f][k] = (struct io_req){.op = IO_OP_WRITE,
			                             .flags = IO_F_BUFFERED,
			                             .fd = fds[f],
			                             .buf = w[k],
			                             .len = LANE_LEN,
			                             .done = lane_done,
			                             .data = &logs[f]};
			ck_assert_int_eq(io_submit(eng, &reqs[f][k]), 0);
		}
		small[k] = (struct io_req){.op = IO_OP_WRITE,
		                           .flags = IO_F_BUFFERED,
		                           .fd = fd,
		                           .buf = sbuf,
		                           .off = LANE_LEN + k * 4 * KIB,
		                           .len = 4 * KIB,
		                           .done = count_done,
		                           .data = &calls};
		ck_assert_int_eq(io_submit(eng, &small[k]), 0);
	}
	ck_assert_int_eq(io_drain(eng, 20.0), 0);
	ck_assert_int_eq(calls, LANE_WRITES);
	for (unsigned f = 0; f < 2; f++) {
		ck_assert_uint_eq(logs[f].n, LANE_WRITES);
		for (unsigned k = 0; k < LANE_WRITES; k++) {
			ck_assert_uint_eq(logs[f].order[k], k);
			ck_assert_int_eq(reqs[f][k].res, (int64_t)LANE_LEN);
		}
		/* All wrote the same range: the last one submitted must be what is there. */
		ck_assert_int_eq(do_io(IO_OP_READ, 0, fds[f], r, 0, LANE_LEN), (int64_t)LANE_LEN);
		ck_assert_mem_eq(r, w[LANE_WRITES - 1], LANE_LEN);
	}
	ck_assert_int_eq(do_io(IO_OP_READ, 0, fd, r, LANE_LEN, 4 * KIB), (int64_t)(4 * KIB));
	ck_assert_mem_eq(r, sbuf, 4 * KIB);
	for (unsigned k = 0; k < LANE_WRITES; k++)
		free(w[k]);
	free(r);
	free(sbuf);
	close(fds[1]);
	teardown();
}
END_TEST

/* Pinned to one CPU, a batch of buffered writes wakes a single worker (io_pool_cpu_bound); that
 * worker must still get through the whole batch, lane writes included, and no request may be
 * left without a worker. */
START_TEST(test_one_cpu_batch)
{
	static struct io_req reqs[MANY + 2];
	uint8_t *w = abuf(MANY * 4 * KIB), *big = abuf(LANE_LEN), *r = abuf(MANY * 4 * KIB);
	cpu_set_t one;
	int calls = 0;

	CPU_ZERO(&one);
	CPU_SET(sched_getcpu(), &one);
	/* Check runs each test in its own child, so the pinning ends with it. */
	ck_assert_int_eq(sched_setaffinity(0, sizeof(one), &one), 0);
	setup(_i, 16);
	pattern(w, MANY * 4 * KIB, 0, 30);
	pattern(big, LANE_LEN, 0, 31);
	/* Two lane writes, first and in the middle of the batch, among MANY scattered 4K ones. */
	for (unsigned i = 0, k = 0; i < MANY + 2; i++) {
		int is_big = i == 0 || i == MANY / 2;
		unsigned blk = is_big ? 0 : (k++ * 7) % MANY;

		reqs[i] = (struct io_req){.op = IO_OP_WRITE,
		                          .flags = IO_F_BUFFERED,
		                          .fd = fd,
		                          .buf = is_big ? big : w + blk * 4 * KIB,
		                          .off = is_big ? MANY * 4 * KIB : blk * 4 * KIB,
		                          .len = is_big ? LANE_LEN : 4 * KIB,
		                          .done = count_done,
		                          .data = &calls};
		ck_assert_int_eq(io_submit(eng, &reqs[i]), 0);
	}
	ck_assert_int_eq(io_drain(eng, 20.0), 0);
	ck_assert_int_eq(calls, MANY + 2);
	for (unsigned i = 0; i < MANY + 2; i++)
		ck_assert_int_eq(reqs[i].res, (int64_t)reqs[i].len);
	ck_assert_int_eq(do_io(IO_OP_READ, 0, fd, r, 0, MANY * 4 * KIB), (int64_t)(MANY * 4 * KIB));
	ck_assert_mem_eq(r, w, MANY * 4 * KIB);
	ck_assert_int_eq(do_io(IO_OP_READ, 0, fd, r, MANY * 4 * KIB, LANE_LEN), (int64_t)LANE_LEN);
	ck_assert_mem_eq(r, big, LANE_LEN);
	free(w);
	free(big);
	free(r);
	teardown();
}
END_TEST

START_TEST(test_punch)
{
	uint8_t *w = abuf(64 * KIB), *r = abuf(64 * KIB);
	struct io_extent map[8];

	setup(_i, 64);
	pattern(w, 64 * KIB, 0, 9);
	ck_assert_int_eq(do_io(IO_OP_WRITE, 0, fd, w, 0, 64 * KIB), (int64_t)(64 * KIB));
	ck_assert_int_eq(do_io(IO_OP_FSYNC, 0, fd, NULL, 0, 0), 0);
	ck_assert_int_eq(do_io(IO_OP_PUNCH, 0, fd, NULL, 16 * KIB, 16 * KIB), (int64_t)(16 * KIB));
	memset(r, 0xAA, 64 * KIB);
	ck_assert_int_eq(do_io(IO_OP_READ, 0, fd, r, 0, 64 * KIB), (int64_t)(64 * KIB));
	ck_assert_mem_eq(r, w, 16 * KIB);
	ck_assert(is_zero(r + 16 * KIB, 16 * KIB));
	ck_assert_mem_eq(r + 32 * KIB, w + 32 * KIB, 32 * KIB);
	/* KEEP_SIZE: the file did not shrink. */
	ck_assert_int_eq(lseek(fd, 0, SEEK_END), (off_t)(64 * KIB));
	ck_assert_uint_eq(seekmap(fd, 0, 64 * KIB, map, 8), 3);
	check_extent(&map[0], 16 * KIB, 0);
	check_extent(&map[1], 16 * KIB, 1);
	check_extent(&map[2], 32 * KIB, 0);
	free(w);
	free(r);
	teardown();
}
END_TEST

START_TEST(test_zero)
{
	uint8_t *w = abuf(64 * KIB), *r = abuf(64 * KIB);

	setup(_i, 64);
	pattern(w, 64 * KIB, 0, 10);
	ck_assert_int_eq(do_io(IO_OP_WRITE, 0, fd, w, 0, 64 * KIB), (int64_t)(64 * KIB));
	ck_assert_int_eq(do_io(IO_OP_ZERO, 0, fd, NULL, 4 * KIB, 8 * KIB), (int64_t)(8 * KIB));
	/* Unaligned edges too: ZERO_RANGE zeroes partial blocks. */
	ck_assert_int_eq(do_io(IO_OP_ZERO, 0, fd, NULL, 40000, 1000), 1000);
	memset(r, 0xAA, 64 * KIB);
	ck_assert_int_eq(do_io(IO_OP_READ, 0, fd, r, 0, 64 * KIB), (int64_t)(64 * KIB));
	ck_assert_mem_eq(r, w, 4 * KIB);
	ck_assert(is_zero(r + 4 * KIB, 8 * KIB));
	ck_assert_mem_eq(r + 12 * KIB, w + 12 * KIB, 40000 - 12 * KIB);
	ck_assert(is_zero(r + 40000, 1000));
	ck_assert_mem_eq(r + 41000, w + 41000, 64 * KIB - 41000);
	ck_assert_int_eq(lseek(fd, 0, SEEK_END), (off_t)(64 * KIB));
	free(w);
	free(r);
	teardown();
}
END_TEST

/* 1 MiB sparse file: data [0,4K), [256K,264K), [1M-4K,1M); holes elsewhere. */
static void sparse_layout(void)
{
	uint8_t buf[8 * KIB];

	pattern(buf, sizeof(buf), 0, 11);
	ck_assert_int_eq(ftruncate(fd, MIB), 0);
	ck_assert_int_eq(pwrite(fd, buf, 4 * KIB, 0), (ssize_t)(4 * KIB));
	ck_assert_int_eq(pwrite(fd, buf, 8 * KIB, 256 * KIB), (ssize_t)(8 * KIB));
	ck_assert_int_eq(pwrite(fd, buf, 4 * KIB, MIB - 4 * KIB), (ssize_t)(4 * KIB));
	ck_assert_int_eq(fsync(fd), 0);
}

START_TEST(test_seekmap)
{
	struct io_extent map[16];

	setup(_i, 64);
	sparse_layout();
	ck_assert_uint_eq(seekmap(fd, 0, MIB, map, 16), 5);
	check_extent(&map[0], 4 * KIB, 0);
	check_extent(&map[1], 252 * KIB, 1);
	check_extent(&map[2], 8 * KIB, 0);
	check_extent(&map[3], MIB - 4 * KIB - 264 * KIB, 1);
	check_extent(&map[4], 4 * KIB, 0);
	/* Unaligned start inside data, end beyond EOF (reads as zeroes: a hole). */
	ck_assert_uint_eq(seekmap(fd, 2 * KIB, MIB + 62 * KIB, map, 16), 6);
	check_extent(&map[0], 2 * KIB, 0);
	check_extent(&map[1], 252 * KIB, 1);
	check_extent(&map[2], 8 * KIB, 0);
	check_extent(&map[3], MIB - 4 * KIB - 264 * KIB, 1);
	check_extent(&map[4], 4 * KIB, 0);
	check_extent(&map[5], 64 * KIB, 1);
	/* Wholly inside a hole, and wholly inside data. */
	ck_assert_uint_eq(seekmap(fd, 8 * KIB, 192 * KIB, map, 16), 1);
	check_extent(&map[0], 192 * KIB, 1);
	ck_assert_uint_eq(seekmap(fd, 258 * KIB, 4 * KIB, map, 16), 1);
	check_extent(&map[0], 4 * KIB, 0);
	teardown();
}
END_TEST

START_TEST(test_map_max)
{
	struct io_extent map[4];

	setup(_i, 64);
	sparse_layout();
	ck_assert_uint_eq(seekmap(fd, 0, MIB, map, 2), 2);
	check_extent(&map[0], 4 * KIB, 0);
	check_extent(&map[1], 252 * KIB, 1);
	ck_assert_uint_eq(seekmap(fd, 0, MIB, map, 1), 1);
	check_extent(&map[0], 4 * KIB, 0);
	ck_assert_uint_eq(seekmap(fd, 4 * KIB, MIB, map, 3), 3);
	check_extent(&map[0], 252 * KIB, 1);
	check_extent(&map[1], 8 * KIB, 0);
	check_extent(&map[2], MIB - 4 * KIB - 264 * KIB, 1);
	teardown();
}
END_TEST

START_TEST(test_cache)
{
	uint8_t *w = abuf(64 * KIB);
	struct io_stats st;

	setup(_i, 64);
	pattern(w, 64 * KIB, 0, 12);
	ck_assert_int_eq(pwrite(fd, w, 64 * KIB, 0), (ssize_t)(64 * KIB));
	ck_assert_int_eq(do_io(IO_OP_CACHE, 0, fd, NULL, 0, 64 * KIB), (int64_t)(64 * KIB));
	io_engine_stats(eng, &st);
	ck_assert_uint_eq(st.errors, 0);
	ck_assert_uint_eq(st.completed, 1);
	free(w);
	teardown();
}
END_TEST

START_TEST(test_bad_fd)
{
	uint8_t *buf = abuf(4 * KIB);
	struct io_extent map[4];
	struct io_req req = {
	    .op = IO_OP_SEEKMAP, .fd = 1000, .len = 4 * KIB, .map = map, .map_max = 4};
	struct io_stats st;
	const int bad = 1000;

	setup(_i, 64);
	ck_assert_int_eq(fcntl(bad, F_GETFD), -1);
	ck_assert_int_eq(do_io(IO_OP_READ, 0, bad, buf, 0, 4 * KIB), -EBADF);
	ck_assert_int_eq(do_io(IO_OP_WRITE, 0, bad, buf, 0, 4 * KIB), -EBADF);
	ck_assert_int_eq(do_io(IO_OP_WRITE, IO_F_FUA, bad, buf, 0, 4 * KIB), -EBADF);
	ck_assert_int_eq(do_io(IO_OP_FDATASYNC, 0, bad, NULL, 0, 0), -EBADF);
	ck_assert_int_eq(do_io(IO_OP_FSYNC, 0, bad, NULL, 0, 0), -EBADF);
	ck_assert_int_eq(do_io(IO_OP_PUNCH, 0, bad, NULL, 0, 4 * KIB), -EBADF);
	ck_assert_int_eq(do_io(IO_OP_ZERO, 0, bad, NULL, 0, 4 * KIB), -EBADF);
	ck_assert_int_eq(do_io(IO_OP_CACHE, 0, bad, NULL, 0, 4 * KIB), -EBADF);
	ck_assert_int_eq(run_req(&req), -EBADF);
	io_engine_stats(eng, &st);
	ck_assert_uint_eq(st.submitted, 9);
	ck_assert_uint_eq(st.completed, 9);
	ck_assert_uint_eq(st.errors, 9);
	ck_assert_uint_eq(st.in_flight, 0);
	free(buf);
	teardown();
}
END_TEST

START_TEST(test_destroy_inflight)
{
	static struct io_req reqs[300];
	uint8_t *w = abuf(300 * 4 * KIB), *r = abuf(300 * 4 * KIB);
	int calls = 0;

	setup(_i, 32);
	pattern(w, 300 * 4 * KIB, 0, 13);
	for (unsigned i = 0; i < 300; i++) {
		reqs[i] = (struct io_req){.op = IO_OP_WRITE,
		                          .fd = fd,
		                          .buf = w + i * 4 * KIB,
		                          .off = i * 4 * KIB,
		                          .len = 4 * KIB,
		                          .done = count_done,
		                          .data = &calls,
		                          .res = 12345};
		ck_assert_int_eq(io_submit(eng, &reqs[i]), 0);
	}
	/* Nothing ran the loop: destroy itself must finish all of them. */
	ck_assert_int_eq(calls, 0);
	io_engine_destroy(eng);
	eng = NULL;
	ck_assert_int_eq(calls, 300);
	for (unsigned i = 0; i < 300; i++)
		ck_assert_int_eq(reqs[i].res, (int64_t)(4 * KIB));
	ck_assert_int_eq(pread(fd, r, 300 * 4 * KIB, 0), (ssize_t)(300 * 4 * KIB));
	ck_assert_mem_eq(r, w, 300 * 4 * KIB);
	free(w);
	free(r);
	teardown();
}
END_TEST

START_TEST(test_invalid)
{
	struct io_req req = {.op = IO_OP__COUNT, .fd = 0, .done = count_done};
	struct io_stats st;

	setup(_i, 64);
	errno = 0;
	ck_assert_int_eq(io_submit(eng, &req), -1);
	ck_assert_int_eq(errno, EINVAL);
	req = (struct io_req){.op = IO_OP_SEEKMAP, .fd = fd, .len = 4096, .done = count_done};
	ck_assert_int_eq(io_submit(eng, &req), -1);
	ck_assert_int_eq(errno, EINVAL);
	req = (struct io_req){.op = IO_OP_READ, .fd = fd, .len = 4096, .buf = &st};
	ck_assert_int_eq(io_submit(eng, &req), -1);
	ck_assert_int_eq(errno, EINVAL);
	req = (struct io_req){.op = IO_OP_READ,
	                      .fd = fd,
	                      .len = 16,
	                      .off = UINT64_MAX - 8,
	                      .buf = &st,
	                      .done = count_done};
	ck_assert_int_eq(io_submit(eng, &req), -1);
	ck_assert_int_eq(errno, EINVAL);
	io_engine_stats(eng, &st);
	ck_assert_uint_eq(st.submitted, 0);
	ck_assert_int_eq(io_drain(eng, 1.0), 0);
	teardown();
}
END_TEST

START_TEST(test_kind_parse)
{
	enum io_kind k = IO_KIND_POOL;

	ck_assert_int_eq(io_kind_parse("auto", &k), 0);
	ck_assert_int_eq(k, IO_KIND_AUTO);
	ck_assert_int_eq(io_kind_parse("uring", &k), 0);
	ck_assert_int_eq(k, IO_KIND_URING);
	ck_assert_int_eq(io_kind_parse("pool", &k), 0);
	ck_assert_int_eq(k, IO_KIND_POOL);
	const char *bad[] = {"", "URING", "pool ", "threads", "uringx", NULL};
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		errno = 0;
		ck_assert_int_eq(io_kind_parse(bad[i], &k), -1);
		ck_assert_int_eq(errno, EINVAL);
		ck_assert_int_eq(k, IO_KIND_POOL);
	}
}
END_TEST

START_TEST(test_auto_uring)
{
	loop = ev_loop_new(EVFLAG_AUTO);
	ck_assert_ptr_nonnull(loop);
	ck_assert_int_eq(io_engine_create(loop, IO_KIND_AUTO, 0, &eng), 0);
	ck_assert_str_eq(io_engine_name(eng), "uring");
	teardown();
}
END_TEST

/* Like a container's seccomp profile: io_uring_setup fails with ENOSYS. */
static int deny_io_uring(void)
{
	struct sock_filter f[] = {
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -1;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

/* Runs in a child (the filter cannot be removed); returns the step that failed, 0 if none. */
static int fallback_child(void)
{
	uint8_t *w = abuf(8 * KIB), *r = abuf(8 * KIB);
	struct io_req req = {.fd = -1, .len = 8 * KIB, .done = count_done};
	int calls = 0;

	if (deny_io_uring() < 0)
		return 1;
	loop = ev_loop_new(EVFLAG_AUTO);
	errno = 0;
	if (io_engine_create(loop, IO_KIND_URING, 32, &eng) != -1 || errno != ENOSYS)
		return 2;
	if (io_engine_create(loop, IO_KIND_AUTO, 32, &eng) < 0)
		return 3;
	if (strcmp(io_engine_name(eng), "pool") != 0)
		return 4;
	req.fd = temp_open(0);
	req.data = &calls;
	pattern(w, 8 * KIB, 0, 15);
	req.op = IO_OP_WRITE;
	req.buf = w;
	if (io_submit(eng, &req) < 0 || io_drain(eng, 10.0) < 0 || req.res != (int64_t)(8 * KIB))
		return 5;
	req.op = IO_OP_READ;
	req.buf = r;
	if (io_submit(eng, &req) < 0 || io_drain(eng, 10.0) < 0 || req.res != (int64_t)(8 * KIB))
		return 6;
	if (calls != 2 || memcmp(w, r, 8 * KIB) != 0)
		return 7;
	close(req.fd);
	teardown();
	free(w);
	free(r);
	return 0;
}

START_TEST(test_auto_fallback)
{
	int status;
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(fallback_child());
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 0);
}
END_TEST

/* A uring read of an empty pipe stays pending (the pool has no such op: pread on a pipe fails at
 * once), which gives io_drain a request that really does not finish in time. */
START_TEST(test_drain_timeout)
{
	uint8_t buf[16];
	int p[2], calls = 0;
	struct io_req req = {
	    .op = IO_OP_READ, .buf = buf, .len = 5, .done = count_done, .data = &calls};

	engine_start(IO_KIND_URING, 8);
	ck_assert_int_eq(pipe(p), 0);
	req.fd = p[0];
	ck_assert_int_eq(io_submit(eng, &req), 0);
	errno = 0;
	ck_assert_int_eq(io_drain(eng, 0.2), -1);
	ck_assert_int_eq(errno, ETIMEDOUT);
	ck_assert_int_eq(calls, 0);
	/* Two writes: the short first read must be resubmitted for the rest. */
	ck_assert_int_eq(write(p[1], "ab", 2), 2);
	ck_assert_int_eq(io_drain(eng, 0.2), -1);
	ck_assert_int_eq(write(p[1], "cde", 3), 3);
	ck_assert_int_eq(io_drain(eng, 5.0), 0);
	ck_assert_int_eq(calls, 1);
	ck_assert_int_eq(req.res, 5);
	ck_assert_mem_eq(buf, "abcde", 5);
	close(p[0]);
	close(p[1]);
	teardown();
}
END_TEST

static void noop_timer_cb(struct ev_loop *l, ev_timer *w, int revents)
{
	(void)l;
	(void)w;
	(void)revents;
}

/* Page-cached reads complete inside the ev_prepare submit. With another watcher keeping the loop
 * alive (a long timer, like the daemon's), the loop must not then sleep in the poll. */
START_TEST(test_no_sleep_after_inline)
{
	uint8_t *w = abuf(64 * KIB), *r = abuf(64 * KIB);
	ev_timer keepalive;
	ev_tstamp t0;

	setup(_i, 64);
	ev_timer_init(&keepalive, noop_timer_cb, 100., 0.);
	ev_timer_start(loop, &keepalive);
	pattern(w, 64 * KIB, 0, 14);
	ck_assert_int_eq(pwrite(fd, w, 64 * KIB, 0), (ssize_t)(64 * KIB));
	for (int i = 0; i < 20; i++) {
		memset(r, 0, 64 * KIB);
		ev_now_update(loop);
		t0 = ev_now(loop);
		ck_assert_int_eq(do_io(IO_OP_READ, 0, fd, r, 0, 64 * KIB), (int64_t)(64 * KIB));
		ev_now_update(loop);
		ck_assert_double_lt(ev_now(loop) - t0, 1.0);
		ck_assert_mem_eq(r, w, 64 * KIB);
	}
	ev_timer_stop(loop, &keepalive);
	free(w);
	free(r);
	teardown();
}
END_TEST

static Suite *io_suite(void)
{
	Suite *s = suite_create("io");
	TCase *tc = tcase_create("engines");
	TCase *misc = tcase_create("misc");

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_write_read, IO_KIND_URING, IO_KIND_POOL + 1);
	tcase_add_loop_test(tc, test_fua, IO_KIND_URING, IO_KIND_POOL + 1);
	tcase_add_loop_test(tc, test_sync, IO_KIND_URING, IO_KIND_POOL + 1);
	tcase_add_loop_test(tc, test_read_eof, IO_KIND_URING, IO_KIND_POOL + 1);
	tcase_add_loop_test(tc, test_many, IO_KIND_URING, IO_KIND_POOL + 1);
	tcase_add_loop_test(tc, test_chain, IO_KIND_URING, IO_KIND_POOL + 1);
	tcase_add_loop_test(tc, test_lane, IO_KIND_URING, IO_KIND_POOL + 1);
	tcase_add_loop_test(tc, test_one_cpu_batch, IO_KIND_URING, IO_KIND_POOL + 1);
	tcase_add_loop_test(tc, test_punch, IO_KIND_URING, IO_KIND_POOL + 1);
	tcase_add_loop_test(tc, test_zero, IO_KIND_URING, IO_KIND_POOL + 1);
	tcase_add_loop_test(tc, test_seekmap, IO_KIND_URING, IO_KIND_POOL + 1);
	tcase_add_loop_test(tc, test_map_max, IO_KIND_URING, IO_KIND_POOL + 1);
	tcase_add_loop_test(tc, test_cache, IO_KIND_URING, IO_KIND_POOL + 1);
	tcase_add_loop_test(tc, test_bad_fd, IO_KIND_URING, IO_KIND_POOL + 1);
	tcase_add_loop_test(tc, test_destroy_inflight, IO_KIND_URING, IO_KIND_POOL + 1);
	tcase_add_loop_test(tc, test_invalid, IO_KIND_URING, IO_KIND_POOL + 1);
	tcase_add_loop_test(tc, test_no_sleep_after_inline, IO_KIND_URING, IO_KIND_POOL + 1);
	suite_add_tcase(s, tc);
	tcase_set_timeout(misc, 30);
	tcase_add_test(misc, test_kind_parse);
	tcase_add_test(misc, test_auto_uring);
	tcase_add_test(misc, test_auto_fallback);
	tcase_add_test(misc, test_drain_timeout);
	suite_add_tcase(s, misc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(io_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
