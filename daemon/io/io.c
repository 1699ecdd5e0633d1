/* SPDX-License-Identifier: MIT */
/*
 * Backing-store I/O engine: the part shared by both engines (create/destroy, submit, drain, the
 * libev watchers). The engines themselves are in io_uring.c and io_pool.c.
 *
 * Why two engines: io_uring gives the lowest latency and the fewest syscalls at queue depth
 * (one io_uring_enter per loop iteration for the whole batch, cached reads complete inline), but it
 * is missing on old kernels, disabled by the io_uring_disabled sysctl on some distributions and
 * blocked by many container seccomp profiles. The pool (pread/pwrite on worker threads) works
 * everywhere, so hakd never refuses to start for want of io_uring. Both are tested with the same
 * unit tests. io_uring cannot express SEEK_DATA/SEEK_HOLE or fadvise, so those always run on
 * worker threads, even with the uring engine (which then keeps four helpers, also used for buffered
 * writes: see IO_F_BUFFERED).
 *
 * How a request flows:
 *  1. io_submit() (loop thread) validates and counts it, then queues it without any syscall:
 *     uring: an SQE is prepared right away while fewer than `depth` requests are in the ring
 *     (otherwise it waits on an intrusive backlog FIFO); pool: it joins a loop-local batch.
 *  2. Before the loop sleeps, an ev_prepare watcher at EV_MAXPRI calls io_uring_submit once for
 *     all prepared SQEs, then reaps the CQEs that are already there (page-cached reads complete
 *     during the submit), so those requests complete without a trip through epoll. A second one
 *     at EV_MINPRI, after the sockets are flushed, hands the pool batch to the workers under one
 *     lock.
 *  3. Everything else completes asynchronously and is signalled on ONE eventfd: the kernel writes
 *     it when it posts a CQE (io_uring_register_eventfd), a worker writes it when it puts a
 *     finished request on the empty completion list. The ev_io on that eventfd reads it once, then
 *     reaps the CQ ring and the completion list.
 *  4. Reaping resubmits short transfers and -EAGAIN/-EINTR, frees ring slots for the backlog, and
 *     calls io_complete() -> req->done() on the loop thread. Callbacks may submit again; those
 *     requests go out with the next ev_prepare batch.
 */
#include "io_int.h"
#include "lib/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define IO_DEFAULT_DEPTH        128
#define IO_POOL_DEFAULT_THREADS 4
#define IO_POOL_MAX_THREADS     8
#define IO_HELPER_THREADS       4
/* Submit/reap rounds in one ev_prepare: enough to chain a few inline completions into new
 * submissions, bounded so a stream of cached reads cannot starve the sockets. */
#define IO_PREP_ROUNDS 4
#define IO_RETRY_DELAY 0.001

static const char *const kind_names[] = {"auto", "uring", "pool"};

int io_kind_parse(const char *s, enum io_kind *out)
{
	for (unsigned i = 0; s && i < sizeof(kind_names) / sizeof(kind_names[0]); i++) {
		if (strcmp(s, kind_names[i]) == 0) {
			*out = (enum io_kind)i;
			return 0;
		}
	}
	errno = EINVAL;
	return -1;
}

const char *io_engine_name(const struct io_engine *eng)
{
	return eng->use_ring ? "uring" : "pool";
}

void io_engine_stats(const struct io_engine *eng, struct io_stats *out)
{
	*out = eng->stats;
}

void io_complete(struct io_engine *eng, struct io_req *req, int64_t res)
{
	req->res = res;
	eng->stats.completed++;
	if (res < 0)
		eng->stats.errors++;
	/* The engine keeps the loop alive only while it has work (see io_submit). */
	if (--eng->stats.in_flight == 0)
		ev_unref(eng->loop);
	req->done(req);
}

/* Reads the eventfd, then reaps everything it may stand for. Reading first matters: whatever is
 * posted after the read writes the eventfd again, so no completion is left without a wakeup. */
static void io_efd_consume(struct io_engine *eng)
{
	uint64_t cnt;

	if (read(eng->efd, &cnt, sizeof(cnt)) < 0 && errno != EAGAIN && errno != EINTR)
		log_warn("Reading the I/O completion eventfd %d failed: %s.", eng->efd,
		         strerror(errno));
	io_pool_reap(eng);
	if (eng->use_ring)
		io_ring_reap(eng);
}

static void io_efd_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	io_efd_consume(w->data);
}

static void io_wake_cb(struct ev_loop *loop, ev_idle *w, int revents)
{
	(void)revents;
	ev_idle_stop(loop, w);
}

/* Completions reaped while the loop polls the pool were never signalled on the eventfd, so the
 * poll that follows would sleep although callbacks just ran: a caller running the loop until one
 * fired (ev_run(EVRUN_ONCE), io_drain) would wait for the next unrelated event. An active idle
 * watcher makes that poll return at once. */
static void io_prep_wait_briefly(struct io_engine *eng)
{
	if (!io_pool_wait_briefly(eng))
		return;
	/* Callbacks may have queued more work (a follow-up write). */
	if (eng->use_ring)
		io_ring_submit(eng);
	io_pool_flush(eng);
	ev_idle_start(eng->loop, &eng->wake_w);
}

static void io_prep_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
	struct io_engine *eng = w->data;

	(void)loop;
	(void)revents;
	if (!eng->use_ring)
		return;
	for (int i = 0; i < IO_PREP_ROUNDS; i++) {
		io_ring_submit(eng);
		if (!io_ring_reap(eng))
			break;
	}
	/* Callbacks of the last round may have queued more. */
	io_ring_submit(eng);
	/* The eventfd is deliberately left unread. The kernel wrote it when it posted the CQEs
	 * reaped here, so the poll that follows does not sleep: a caller running the loop until a
	 * callback has fired (ev_run(EVRUN_ONCE), io_drain) gets control back at once. */
}

/*
 * The pool's batch goes to the workers last, after every other prepare watcher has flushed its
 * sockets. Waking a worker lets it preempt the loop on a busy CPU, and it then runs the whole
 * batch of writes first: kicked before the sockets, a primary's data reached the peer only after
 * its own local writes had finished, and a secondary's acks waited the same way, so the two nodes
 * took turns instead of writing in parallel (sync 4K QD32: the peer's socket held every write in
 * flight, unread, for the ~0.6 ms the primary spent in pwrite).
 */
static void io_pool_prep_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
	struct io_engine *eng = w->data;

	(void)loop;
	(void)revents;
	io_pool_flush(eng);
	/* Buffered writes run on the helpers even with the ring (see IO_F_BUFFERED). */
	io_prep_wait_briefly(eng);
}

static void io_retry_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	/* Nothing to do: waking up runs the ev_prepare, which submits again. */
	(void)loop;
	(void)w;
	(void)revents;
}

static void io_drain_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct io_engine *eng = w->data;

	(void)loop;
	(void)revents;
	eng->drain_expired = 1;
}

static void io_engine_free(struct io_engine *eng, int watching)
{
	if (watching) {
		/* The three watchers were unreferenced after start; libev wants the reference back
		 * before they stop. */
		ev_ref(eng->loop);
		ev_ref(eng->loop);
		ev_ref(eng->loop);
		ev_io_stop(eng->loop, &eng->efd_w);
		ev_prepare_stop(eng->loop, &eng->prep_w);
		ev_prepare_stop(eng->loop, &eng->pool_w);
		ev_idle_stop(eng->loop, &eng->wake_w);
		ev_timer_stop(eng->loop, &eng->retry_w);
		ev_timer_stop(eng->loop, &eng->drain_w);
	}
	io_pool_exit(eng);
	io_ring_exit(eng);
	if (eng->efd >= 0)
		close(eng->efd);
	free(eng);
}

static void io_engine_watch(struct io_engine *eng)
{
	ev_io_init(&eng->efd_w, io_efd_cb, eng->efd, EV_READ);
	eng->efd_w.data = eng;
	ev_prepare_init(&eng->prep_w, io_prep_cb);
	eng->prep_w.data = eng;
	/* Flush before other prepare watchers, which may be waiting on the flush's effects. */
	ev_set_priority(&eng->prep_w, EV_MAXPRI);
	ev_prepare_init(&eng->pool_w, io_pool_prep_cb);
	eng->pool_w.data = eng;
	ev_set_priority(&eng->pool_w, EV_MINPRI);
	ev_idle_init(&eng->wake_w, io_wake_cb);
	ev_timer_init(&eng->retry_w, io_retry_cb, IO_RETRY_DELAY, 0.);
	ev_timer_init(&eng->drain_w, io_drain_cb, 0., 0.);
	eng->drain_w.data = eng;
	ev_io_start(eng->loop, &eng->efd_w);
	ev_prepare_start(eng->loop, &eng->prep_w);
	ev_prepare_start(eng->loop, &eng->pool_w);
	/* An idle engine must not keep ev_run() from returning; io_submit takes a reference
	 * while requests are in flight. */
	ev_unref(eng->loop);
	ev_unref(eng->loop);
	ev_unref(eng->loop);
}

static unsigned io_pool_threads(unsigned depth)
{
	if (!depth)
		return IO_POOL_DEFAULT_THREADS;
	return depth < IO_POOL_MAX_THREADS ? depth : IO_POOL_MAX_THREADS;
}

int io_engine_create(struct ev_loop *loop, enum io_kind kind, unsigned depth,
                     struct io_engine **out)
{
	struct io_engine *eng = NULL;
	const char *why = NULL;
	int ret = -1, err = 0;

	if (!loop || !out || kind > IO_KIND_POOL) {
		err = EINVAL;
		goto out;
	}
	eng = calloc(1, sizeof(*eng));
	if (!eng) {
		err = errno;
		goto out;
	}
	eng->loop = loop;
	eng->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (eng->efd < 0) {
		err = errno;
		log_err("Cannot create the I/O completion eventfd: %s.", strerror(err));
		goto out;
	}
	if (kind != IO_KIND_POOL) {
		if (io_ring_init(eng, depth ? depth : IO_DEFAULT_DEPTH, &why) == 0) {
			eng->use_ring = 1;
		} else if (kind == IO_KIND_URING) {
			err = errno;
			log_err("The io_uring I/O engine cannot start (%s: %s).", why,
			        strerror(err));
			goto out;
		} else {
			log_warn(
			    "io_uring is unavailable (%s: %s); using the thread-pool I/O engine.",
			    why, strerror(errno));
		}
	}
	if (io_pool_init(eng, eng->use_ring ? IO_HELPER_THREADS : io_pool_threads(depth)) < 0) {
		err = errno;
		goto out;
	}
	io_engine_watch(eng);
	*out = eng;
	eng = NULL;
	ret = 0;
out:
	if (eng)
		io_engine_free(eng, 0);
	if (ret)
		errno = err;
	return ret;
}

void io_engine_destroy(struct io_engine *eng)
{
	if (!eng)
		return;
	io_drain(eng, 0);
	io_engine_free(eng, 1);
}

static int io_req_valid(const struct io_req *req)
{
	if (!req || !req->done || (unsigned)req->op >= IO_OP__COUNT)
		return 0;
	/* off + len must fit an off_t: the kernel would reject it later, less clearly. */
	if (req->off > (uint64_t)INT64_MAX || req->len > (uint64_t)INT64_MAX - req->off)
		return 0;
	if ((req->op == IO_OP_READ || req->op == IO_OP_WRITE) && req->len && !req->buf)
		return 0;
	if (req->op == IO_OP_SEEKMAP && (!req->map || !req->map_max || !req->len))
		return 0;
	return 1;
}

int io_submit(struct io_engine *eng, struct io_req *req)
{
	if (!io_req_valid(req)) {
		errno = EINVAL;
		return -1;
	}
	req->res = 0;
	req->done_bytes = 0;
	req->map_count = 0;
	req->next = NULL;
	eng->stats.submitted++;
	if (eng->stats.in_flight++ == 0)
		ev_ref(eng->loop);
	if (eng->use_ring && req->op != IO_OP_SEEKMAP && req->op != IO_OP_CACHE &&
	    !(req->op == IO_OP_WRITE && (req->flags & IO_F_BUFFERED)))
		io_ring_queue(eng, req);
	else
		io_pool_queue(eng, req);
	return 0;
}

/* timeout_s <= 0 waits without limit. */
int io_drain(struct io_engine *eng, double timeout_s)
{
	int ret = 0;

	if (!eng->stats.in_flight)
		return 0;
	eng->drain_expired = 0;
	if (timeout_s > 0) {
		ev_now_update(eng->loop);
		ev_timer_set(&eng->drain_w, timeout_s, 0.);
		ev_timer_start(eng->loop, &eng->drain_w);
	}
	while (eng->stats.in_flight) {
		if (eng->drain_expired) {
			ret = -1;
			break;
		}
		ev_run(eng->loop, EVRUN_ONCE);
	}
	ev_timer_stop(eng->loop, &eng->drain_w);
	if (ret)
		errno = ETIMEDOUT;
	return ret;
}

void io_engine_set_batch(struct io_engine *eng, bool batch)
{
	io_pool_set_batch(eng, batch);
}
