/* SPDX-License-Identifier: MIT */
/*
 * The io_uring engine (see io.c for the flow). All of this runs on the loop thread: the ring is
 * never touched by the helper threads, so it needs no locking.
 */
#include "io_int.h"
#include "lib/log.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/uio.h>

/* One SQE moves at most this much; the kernel caps a read/write near 2 GiB anyway, and the rest
 * goes through the short-transfer path. */
#define IO_RING_MAX_CHUNK (1u << 30)
#define IO_RING_BATCH     64

/* Without these the engine cannot serve every io_op; an older kernel gets the pool instead. */
static const unsigned char io_ring_ops[] = {IORING_OP_READ, IORING_OP_WRITE, IORING_OP_FSYNC,
                                            IORING_OP_FALLOCATE};

static int io_ring_probe(struct io_uring *ring, const char **why)
{
	struct io_uring_probe *probe = io_uring_get_probe_ring(ring);
	int ret = 0;

	if (!probe) {
		*why = "the kernel cannot report its io_uring opcodes";
		return -ENOSYS;
	}
	for (unsigned i = 0; i < sizeof(io_ring_ops); i++) {
		if (!io_uring_opcode_supported(probe, io_ring_ops[i])) {
			*why = "the kernel lacks an io_uring opcode for read, write, fsync or "
			       "fallocate";
			ret = -EOPNOTSUPP;
			break;
		}
	}
	io_uring_free_probe(probe);
	return ret;
}

static int io_ring_setup(struct io_ring *r, unsigned depth)
{
	/* SUBMIT_ALL: one bad SQE must not hold back the rest of the batch (5.18+).
	 * CLAMP: a large depth gets the kernel maximum instead of EINVAL. */
	unsigned flags = IORING_SETUP_SUBMIT_ALL | IORING_SETUP_CLAMP;
	struct io_uring_params p;
	int ret;

	for (;;) {
		memset(&p, 0, sizeof(p));
		p.flags = flags;
		ret = io_uring_queue_init_params(depth, &r->ring, &p);
		if (ret == -EINVAL && (flags & IORING_SETUP_SUBMIT_ALL)) {
			flags &= ~IORING_SETUP_SUBMIT_ALL;
			continue;
		}
		/* Before 5.12 ring memory counts against RLIMIT_MEMLOCK: settle for less. */
		if (ret == -ENOMEM && depth > 1) {
			depth /= 2;
			continue;
		}
		break;
	}
	if (ret == 0) {
		r->depth = r->ring.sq.ring_entries < depth ? r->ring.sq.ring_entries : depth;
		r->ready = 1;
	}
	return ret;
}

int io_ring_init(struct io_engine *eng, unsigned depth, const char **why)
{
	struct io_ring *r = &eng->ring;
	int ret;

	ret = io_ring_setup(r, depth);
	if (ret < 0) {
		*why = "io_uring_queue_init failed";
		goto out;
	}
	ret = io_ring_probe(&r->ring, why);
	if (ret < 0)
		goto out;
	ret = io_uring_register_eventfd(&r->ring, eng->efd);
	if (ret < 0) {
		*why = "io_uring_register_eventfd failed";
		goto out;
	}
	if (r->depth < depth)
		log_info("The io_uring I/O engine runs with depth %u instead of %u.", r->depth,
		         depth);
out:
	if (ret < 0) {
		io_ring_exit(eng);
		errno = -ret;
		return -1;
	}
	return 0;
}

void io_ring_exit(struct io_engine *eng)
{
	if (eng->ring.ready)
		io_uring_queue_exit(&eng->ring.ring);
	eng->ring.ready = 0;
}

/* Hands the prepared SQEs to the kernel; no-op when there are none. */
static void io_ring_enter(struct io_engine *eng)
{
	struct io_ring *r = &eng->ring;
	int ret;

	if (!io_uring_sq_ready(&r->ring))
		return;
	ret = io_uring_submit(&r->ring);
	if (ret >= 0)
		return;
	/* The SQEs stay in the ring and go with the next submit. The timer makes sure there is a
	 * next one even if nothing else wakes the loop. */
	if (ret != -EAGAIN && ret != -EBUSY && ret != -EINTR && !r->submit_warned) {
		log_warn("io_uring_submit failed with %d SQEs ready: %s; retrying.",
		         io_uring_sq_ready(&r->ring), strerror(-ret));
		r->submit_warned = 1;
	}
	if (!ev_is_active(&eng->retry_w))
		ev_timer_start(eng->loop, &eng->retry_w);
}

static int io_ring_prep(struct io_engine *eng, struct io_req *req)
{
	struct io_ring *r = &eng->ring;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
	uint64_t left = req->len - req->done_bytes;
	unsigned n = left < IO_RING_MAX_CHUNK ? (unsigned)left : IO_RING_MAX_CHUNK;
	char *buf = (char *)req->buf + req->done_bytes;
	uint64_t off = req->off + req->done_bytes;

	if (!sqe) {
		/* The SQ is full with this iteration's batch: send it now rather than wait. */
		io_ring_enter(eng);
		sqe = io_uring_get_sqe(&r->ring);
		if (!sqe)
			return -1;
	}
	switch (req->op) {
	case IO_OP_READ:
		io_uring_prep_read(sqe, req->fd, buf, n, off);
		break;
	case IO_OP_WRITE:
		io_uring_prep_write(sqe, req->fd, buf, n, off);
		if (req->flags & IO_F_FUA)
			sqe->rw_flags = RWF_DSYNC;
		break;
	case IO_OP_FDATASYNC:
		io_uring_prep_fsync(sqe, req->fd, IORING_FSYNC_DATASYNC);
		break;
	case IO_OP_FSYNC:
		io_uring_prep_fsync(sqe, req->fd, 0);
		break;
	case IO_OP_PUNCH:
		io_uring_prep_fallocate(sqe, req->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		                        (off_t)req->off, (off_t)req->len);
		break;
	default: /* IO_OP_ZERO; SEEKMAP and CACHE never come here (io_submit) */
		io_uring_prep_fallocate(sqe, req->fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
		                        (off_t)req->off, (off_t)req->len);
		break;
	}
	io_uring_sqe_set_data(sqe, req);
	r->in_ring++;
	return 0;
}

void io_ring_queue(struct io_engine *eng, struct io_req *req)
{
	struct io_ring *r = &eng->ring;

	/* Nothing overtakes requests already waiting for a slot. */
	if (r->backlog.head || r->in_ring >= r->depth || io_ring_prep(eng, req) < 0)
		io_fifo_push(&r->backlog, req);
}

/* Moves backlog requests into free ring slots. */
static void io_ring_fill(struct io_engine *eng)
{
	struct io_ring *r = &eng->ring;

	while (r->backlog.head && r->in_ring < r->depth) {
		if (io_ring_prep(eng, r->backlog.head) < 0)
			break;
		io_fifo_pop(&r->backlog);
	}
}

void io_ring_submit(struct io_engine *eng)
{
	io_ring_fill(eng);
	io_ring_enter(eng);
}

static void io_ring_cqe(struct io_engine *eng, struct io_req *req, int res)
{
	if (res == -EAGAIN || res == -EINTR) {
		io_ring_queue(eng, req);
		return;
	}
	if (res < 0) {
		io_complete(eng, req, res);
		return;
	}
	if (req->op == IO_OP_READ || req->op == IO_OP_WRITE) {
		if (res == 0 && req->done_bytes < req->len) {
			/* A write that moves nothing would be resubmitted forever. */
			if (req->op == IO_OP_WRITE) {
				io_complete(eng, req, -EIO);
				return;
			}
			/* End of file: the rest of the range reads as zeroes. */
			memset((char *)req->buf + req->done_bytes, 0, req->len - req->done_bytes);
			req->done_bytes = req->len;
		}
		req->done_bytes += (unsigned)res;
		if (req->done_bytes < req->len) {
			io_ring_queue(eng, req);
			return;
		}
	}
	io_complete(eng, req, (int64_t)req->len);
}

unsigned io_ring_reap(struct io_engine *eng)
{
	struct io_ring *r = &eng->ring;
	struct io_uring_cqe *cqes[IO_RING_BATCH];
	struct io_req *reqs[IO_RING_BATCH];
	int res[IO_RING_BATCH];
	unsigned n, total = 0;

	while ((n = io_uring_peek_batch_cqe(&r->ring, cqes, IO_RING_BATCH)) > 0) {
		for (unsigned i = 0; i < n; i++) {
			reqs[i] = io_uring_cqe_get_data(cqes[i]);
			res[i] = cqes[i]->res;
		}
		/* Release the CQEs before any callback runs: a callback may reap again (a nested
		 * loop) and must not see them twice. */
		io_uring_cq_advance(&r->ring, n);
		r->in_ring -= n;
		io_ring_fill(eng);
		for (unsigned i = 0; i < n; i++)
			io_ring_cqe(eng, reqs[i], res[i]);
		total += n;
	}
	return total;
}
