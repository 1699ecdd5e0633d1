/* SPDX-License-Identifier: MIT */
/*
 * Private to the io module (io.c, io_uring.c, io_pool.c): the engine layout and the calls the
 * three files make into each other. Nothing outside daemon/io*.c includes this.
 */
#ifndef HAK_IO_INT_H
#define HAK_IO_INT_H

#include <stdbool.h>

#include "io.h"

#include <ev.h>
#include <liburing.h>
#include <pthread.h>

/* Intrusive FIFO through io_req.next: queuing never allocates. */
struct io_fifo {
	struct io_req *head;
	struct io_req *tail;
	unsigned n;
};

/* Worker threads: the whole pool engine, or the helpers of the uring engine (SEEKMAP, CACHE and
 * buffered writes). */
struct io_pool {
	pthread_mutex_t lock; /* guards queue, lane, lane_busy, idle, stop */
	pthread_cond_t cond;
	struct io_fifo queue;
	struct io_fifo lane; /* large buffered writes: one at a time per file (io_pool.c) */
	int *lane_busy;      /* fds a worker is writing a lane request to, nthreads at most */
	unsigned lane_nbusy;
	unsigned idle;     /* workers waiting on cond */
	unsigned spinning; /* workers polling the queue before they sleep (at most one) */
	unsigned queued;   /* queue.n + lane.n, also read without the lock by the spinning worker */
	int stop;
	/* The CPU policy the workers should run with (1 SCHED_BATCH, 0 normal, -1 as inherited):
	 * each applies it to itself before its next job (io_engine_set_batch). */
	int want_batch;

	pthread_mutex_t done_lock; /* guards done, loop_waiting */
	struct io_fifo done;
	int loop_waiting; /* the loop polls done itself: workers skip the eventfd */

	/* Loop thread only. */
	struct io_fifo batch; /* submitted, not yet handed to the workers */
	unsigned outstanding; /* handed to the workers, not yet reaped: skips the lock when 0 */
	unsigned small_out;   /* of those, transfers short enough to wait for by spinning */
	pthread_t *threads;
	unsigned nthreads;
	int efd;
	int started;    /* lock, cond and done_lock exist */
	unsigned ncpus; /* CPUs the process may run on, at start (workers spin only if ≥ 2) */
};

struct io_ring {
	struct io_uring ring;
	unsigned depth;         /* requests the kernel may hold at once (SQ entries) */
	unsigned in_ring;       /* prepared SQEs plus requests the kernel holds */
	struct io_fifo backlog; /* beyond depth: waiting for a slot */
	int submit_warned;
	int ready;
};

struct io_engine {
	struct ev_loop *loop;
	int use_ring; /* 1: uring engine; 0: pool engine */
	int efd;      /* one eventfd for CQEs and pool completions */
	ev_io efd_w;
	ev_prepare prep_w; /* EV_MAXPRI: ring submit and inline reaps */
	ev_prepare pool_w; /* EV_MINPRI: hands the pool its batch after the sockets */
	ev_idle wake_w;    /* keeps the next poll from sleeping after completions in ev_prepare */
	ev_timer retry_w;  /* wakes the loop to retry a transiently failed io_uring_submit */
	ev_timer drain_w;  /* io_drain deadline */
	int drain_expired;
	struct io_stats stats;
	struct io_pool pool;
	struct io_ring ring;
};

static inline void io_fifo_push(struct io_fifo *f, struct io_req *req)
{
	req->next = NULL;
	if (f->tail)
		f->tail->next = req;
	else
		f->head = req;
	f->tail = req;
	f->n++;
}

static inline struct io_req *io_fifo_pop(struct io_fifo *f)
{
	struct io_req *req = f->head;

	if (req) {
		f->head = req->next;
		if (!f->head)
			f->tail = NULL;
		f->n--;
		req->next = NULL;
	}
	return req;
}

/* Moves all of src to the end of dst. */
static inline void io_fifo_splice(struct io_fifo *dst, struct io_fifo *src)
{
	if (!src->head)
		return;
	if (dst->tail)
		dst->tail->next = src->head;
	else
		dst->head = src->head;
	dst->tail = src->tail;
	dst->n += src->n;
	src->head = src->tail = NULL;
	src->n = 0;
}

/* io.c: account a finished request and run its callback (loop thread). */
void io_complete(struct io_engine *eng, struct io_req *req, int64_t res);

/* io_uring.c */
/* On failure, *why names the step that failed (for the fallback warning); errno says why. */
int io_ring_init(struct io_engine *eng, unsigned depth, const char **why);
void io_ring_exit(struct io_engine *eng);
void io_ring_queue(struct io_engine *eng, struct io_req *req);
void io_ring_submit(struct io_engine *eng);
unsigned io_ring_reap(struct io_engine *eng);

/* io_pool.c */
int io_pool_init(struct io_engine *eng, unsigned nthreads);
void io_pool_exit(struct io_engine *eng);
void io_pool_set_batch(struct io_engine *eng, bool batch);
void io_pool_queue(struct io_engine *eng, struct io_req *req);
void io_pool_flush(struct io_engine *eng);
unsigned io_pool_reap(struct io_engine *eng);
unsigned io_pool_wait_briefly(struct io_engine *eng);

#endif
