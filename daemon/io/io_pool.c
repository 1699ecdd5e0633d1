/* SPDX-License-Identifier: MIT */
/*
 * The thread-pool engine (see io.c for the flow), also the helper pool of the uring engine for
 * SEEKMAP and CACHE. Workers share a mutex+condvar FIFO for submissions and a second lock for the
 * completion list, so finishing never waits behind submitting. A worker writes the eventfd only
 * when it puts a request on an empty completion list: the loop takes the whole list at once, so
 * one wakeup covers every completion that piled up meanwhile.
 */
#include "io_int.h"
#include "lib/alive.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/proc.h"
#include "lib/testhook.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

/* Bounded chunks keep one transfer inside what a single syscall returns in full. */
#define IO_POOL_MAX_CHUNK (1u << 30)

static int64_t io_exec_read(struct io_req *req)
{
	char *buf = req->buf;
	ssize_t r;

	while (req->done_bytes < req->len) {
		uint64_t left = req->len - req->done_bytes;

		r = pread(req->fd, buf + req->done_bytes,
		          left < IO_POOL_MAX_CHUNK ? left : IO_POOL_MAX_CHUNK,
		          (off_t)(req->off + req->done_bytes));
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r < 0)
			return -errno;
		if (r == 0) {
			/* End of file: the rest of the range reads as zeroes. */
			memset(buf + req->done_bytes, 0, left);
			break;
		}
		req->done_bytes += (uint64_t)r;
	}
	return (int64_t)req->len;
}

static int io_sync_retry(int fd, int data_only)
{
	int r;

	do {
		r = data_only ? fdatasync(fd) : fsync(fd);
	} while (r < 0 && errno == EINTR);
	return r < 0 ? -errno : 0;
}

static int64_t io_exec_write(struct io_req *req)
{
	int flags = (req->flags & IO_F_FUA) ? RWF_DSYNC : 0, sync_after = 0;
	ssize_t r;

	while (req->done_bytes < req->len) {
		uint64_t left = req->len - req->done_bytes;
		struct iovec iov = {
		    .iov_base = (char *)req->buf + req->done_bytes,
		    .iov_len = left < IO_POOL_MAX_CHUNK ? left : IO_POOL_MAX_CHUNK,
		};

		r = pwritev2(req->fd, &iov, 1, (off_t)(req->off + req->done_bytes), flags);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r < 0 && flags && (errno == EOPNOTSUPP || errno == ENOSYS)) {
			/* Kernel before 4.7: no RWF_DSYNC, so make it durable afterwards. */
			flags = 0;
			sync_after = 1;
			continue;
		}
		if (r < 0)
			return -errno;
		/* A write that moves nothing would be retried forever. */
		if (r == 0)
			return -EIO;
		req->done_bytes += (uint64_t)r;
	}
	if (sync_after) {
		int s = io_sync_retry(req->fd, 1);

		if (s < 0)
			return s;
	}
	return (int64_t)req->len;
}

/* Appends an extent, merging with the previous one of the same kind. 0 when map is full. */
static int io_map_add(struct io_req *req, uint64_t len, int hole)
{
	struct io_extent *last = req->map_count ? &req->map[req->map_count - 1] : NULL;

	if (last && last->hole == hole) {
		last->len += len;
		return 1;
	}
	if (req->map_count == req->map_max)
		return 0;
	req->map[req->map_count].len = len;
	req->map[req->map_count].hole = hole;
	req->map_count++;
	return 1;
}

/* SEEK_DATA/SEEK_HOLE errors meaning "this file cannot tell": everything counts as data, which
 * is always a safe answer. */
static int io_seek_unsupported(int err)
{
	return err == EINVAL || err == ENOTSUP || err == EOPNOTSUPP;
}

static int64_t io_exec_seekmap(struct io_req *req)
{
	uint64_t pos = req->off, end = req->off + req->len, data, hole;
	int no_holes = 0;
	struct stat st;
	off_t r;

	if (fstat(req->fd, &st) < 0)
		return -errno;
	/* A block device has no holes to report (and some report none coherently). */
	no_holes = S_ISBLK(st.st_mode);
	while (pos < end) {
		r = no_holes ? (off_t)pos : lseek(req->fd, (off_t)pos, SEEK_DATA);
		if (r < 0 && io_seek_unsupported(errno)) {
			no_holes = 1;
			r = (off_t)pos;
		} else if (r < 0 && errno == ENXIO) {
			r = (off_t)end; /* no data after pos: a hole to the end */
		} else if (r < 0) {
			return -errno;
		}
		data = (uint64_t)r < end ? (uint64_t)r : end;
		if (data > pos && !io_map_add(req, data - pos, 1))
			break;
		pos = data;
		if (pos >= end)
			break;
		r = no_holes ? (off_t)end : lseek(req->fd, (off_t)pos, SEEK_HOLE);
		if (r < 0 && (errno == ENXIO || io_seek_unsupported(errno)))
			r = (off_t)end; /* truncated meanwhile or no support: call it data */
		else if (r < 0)
			return -errno;
		hole = (uint64_t)r < end ? (uint64_t)r : end;
		/* A concurrent change can make SEEK_HOLE answer pos itself; data is the safe call.
		 */
		if (hole <= pos)
			hole = end;
		if (!io_map_add(req, hole - pos, 0))
			break;
		pos = hole;
	}
	return (int64_t)req->len;
}

static int64_t io_exec_fallocate(struct io_req *req, int mode)
{
	if (fallocate(req->fd, mode | FALLOC_FL_KEEP_SIZE, (off_t)req->off, (off_t)req->len) < 0)
		return -errno;
	return (int64_t)req->len;
}

static int64_t io_exec(struct io_req *req)
{
	int r;

	switch (req->op) {
	case IO_OP_READ:
		return io_exec_read(req);
	case IO_OP_WRITE:
		return io_exec_write(req);
	case IO_OP_FDATASYNC:
	case IO_OP_FSYNC:
		r = io_sync_retry(req->fd, req->op == IO_OP_FDATASYNC);
		return r < 0 ? r : (int64_t)req->len;
	case IO_OP_PUNCH:
		return io_exec_fallocate(req, FALLOC_FL_PUNCH_HOLE);
	case IO_OP_ZERO:
		return io_exec_fallocate(req, FALLOC_FL_ZERO_RANGE);
	case IO_OP_SEEKMAP:
		return io_exec_seekmap(req);
	case IO_OP_CACHE:
		/* posix_fadvise returns the error number instead of setting errno. */
		r = posix_fadvise(req->fd, (off_t)req->off, (off_t)req->len, POSIX_FADV_WILLNEED);
		return r ? -r : (int64_t)req->len;
	default:
		return -EINVAL;
	}
}

static void io_pool_done(struct io_pool *p, struct io_req *req)
{
	uint64_t one = 1;
	int was_empty;

	pthread_mutex_lock(&p->done_lock);
	was_empty = !p->done.head && !p->loop_waiting;
	io_fifo_push(&p->done, req);
	pthread_mutex_unlock(&p->done_lock);
	/* The loop reads the eventfd before taking the list, so a push onto a non-empty list is
	 * covered by the wakeup its first entry caused. A loop that is polling the list takes it
	 * under the lock when it stops, so it needs no wakeup either. */
	if (was_empty) {
		while (write(p->efd, &one, sizeof(one)) < 0 && errno == EINTR)
			;
	}
}

/*
 * A worker that just finished polls the queue for a short while before it sleeps on the condvar.
 * At queue depth 1 the next request arrives one client round trip after the reply, and catching
 * it here saves the futex wake-up and the sleep/wake context switches (each costs several
 * microseconds, much more on a paravirtualised guest). One worker at most spins, and only right
 * after a job, so an idle daemon burns nothing. Called and returns with p->lock held.
 */
#define IO_POOL_SPIN_NS 60000
/* The loop's side of the same idea: with at most this many requests out, it polls for their
 * completion for a few microseconds (a page-cache write takes about that) instead of sleeping in
 * epoll and being woken through the eventfd. */
#define IO_POOL_LOOP_SPIN_MAXQ 1
/* Only small transfers complete within a spin; a 1M write takes hundreds of microseconds, and
 * spinning for it took CPU from the other workers (1M writes at QD8: 1.03x nbdkit with spins on
 * every request, 1.18x without). */
#define IO_POOL_SPIN_MAX_LEN (64u * 1024u)
#define IO_POOL_LOOP_SPIN_NS 25000

#if defined(__x86_64__) || defined(__i386__)
#define io_cpu_relax() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define io_cpu_relax() __asm__ __volatile__("yield")
#else
#define io_cpu_relax() __asm__ __volatile__("" ::: "memory")
#endif

static void io_pool_spin(struct io_pool *p)
{
	int64_t t0, ns = 0;

	if (p->ncpus < 2 || p->spinning || p->stop)
		return;
	p->spinning++;
	pthread_mutex_unlock(&p->lock);
	t0 = clock_mono_ns();
	for (unsigned i = 0; ns < IO_POOL_SPIN_NS; i++) {
		if (__atomic_load_n(&p->queued, __ATOMIC_ACQUIRE))
			break;
		io_cpu_relax();
		if (i % 32 == 0)
			ns = clock_mono_ns() - t0;
	}
	pthread_mutex_lock(&p->lock);
	p->spinning--;
}

/*
 * A buffered write only copies into the page cache: it never waits for the disk (dirty page
 * throttling aside), so more workers than CPUs cannot finish a batch of them sooner. Each extra
 * one woken costs a wake-up, a sleep and usually a preemption of the loop thread, and a woken
 * worker keeps taking jobs until the queue is empty anyway. So a batch wakes at most one worker
 * per CPU the daemon may run on for these, and one per request for everything else (reads,
 * direct and FUA writes, syncs), which waits for the device and gains from a deeper queue.
 * Measured with the replication bench (each daemon pinned to one CPU, 4K random writes, QD32,
 * sync mode, two alternating pairs): CPU per write 9.1 and 9.3 us against 10.2 and 9.9 on the
 * primary, 8.4 and 8.4 against 10.3 and 9.0 on the secondary; IOPS 48.4k and 45.3k against
 * 44.7k and 46.1k, within this machine's noise.
 */
static int io_pool_cpu_bound(const struct io_req *req)
{
	return req->op == IO_OP_WRITE && (req->flags & IO_F_BUFFERED) && !(req->flags & IO_F_FUA);
}

/*
 * The lane: large buffered writes to one file run one at a time. A buffered write holds the
 * file's inode lock exclusively for the whole copy into the page cache (ext4, xfs, btrfs), so
 * writers of one file take turns anyway, and every extra writer adds a lock hand-off and a
 * sleep/wake-up. For 256 KiB copies that doubled the cost on one CPU (fio, one file, one CPU:
 * 1 writer 1497 MiB/s, 4 writers 769); the resync target and the secondary of a streaming client
 * write exactly that way. Small writes stay parallel: their copy is short, and with several
 * writers one can fault in pages or be throttled while another copies. FUA writes stay parallel
 * too, so that one write's flush never holds up the next.
 */
#define IO_POOL_LANE_MIN (128u * 1024u)

static int io_pool_lane_wants(const struct io_req *req)
{
	return io_pool_cpu_bound(req) && req->len >= IO_POOL_LANE_MIN;
}

static int io_pool_lane_fd_busy(const struct io_pool *p, int fd)
{
	for (unsigned i = 0; i < p->lane_nbusy; i++)
		if (p->lane_busy[i] == fd)
			return 1;
	return 0;
}

/* The oldest lane request whose file no worker is writing, or NULL. The lane keeps submission
 * order and each file's first request is taken first, so one file's writes start in order. With
 * take, the request leaves the lane and its file becomes busy. Called with p->lock held. */
static struct io_req *io_pool_lane_next(struct io_pool *p, int take)
{
	struct io_req *prev = NULL, *q;

	for (q = p->lane.head; q; prev = q, q = q->next) {
		if (io_pool_lane_fd_busy(p, q->fd))
			continue;
		if (!take)
			break;
		if (prev)
			prev->next = q->next;
		else
			p->lane.head = q->next;
		if (p->lane.tail == q)
			p->lane.tail = prev;
		p->lane.n--;
		q->next = NULL;
		p->lane_busy[p->lane_nbusy++] = q->fd;
		break;
	}
	return q;
}

static void io_pool_lane_release(struct io_pool *p, int fd)
{
	for (unsigned i = 0; i < p->lane_nbusy; i++) {
		if (p->lane_busy[i] == fd) {
			p->lane_busy[i] = p->lane_busy[--p->lane_nbusy];
			break;
		}
	}
}

static int io_pool_has_work(struct io_pool *p)
{
	return p->queue.head || io_pool_lane_next(p, 0);
}

static void io_pool_set_queued(struct io_pool *p)
{
	__atomic_store_n(&p->queued, p->queue.n + p->lane.n, __ATOMIC_RELEASE);
}

static void *io_pool_worker(void *arg)
{
	struct io_pool *p = arg;
	struct io_req *req;
	int spun = 1; /* no spin before the first job */
	int lane, fd, batch = -1, want;
	/* Idle is no stall: the slot is parked while the worker waits for work and beats from
	 * each request's start, so a request stuck in the kernel stops the watchdog's feeding. */
	struct alive_slot *alive = alive_register("io");

	pthread_mutex_lock(&p->lock);
	for (;;) {
		if (!spun && !io_pool_has_work(p))
			io_pool_spin(p);
		spun = 1;
		while (!io_pool_has_work(p) && !p->stop) {
			if (p->want_batch >= 0 && p->want_batch != batch) {
				/* a new policy (io_pool_set_batch woke us): take it now, not at the
				 * next job, so a waiting worker never starts one under the old */
				batch = p->want_batch; /* tried once: a refusal is not retried */
				pthread_mutex_unlock(&p->lock);
				(void)proc_sched_batch(batch);
				pthread_mutex_lock(&p->lock);
				continue;
			}
			p->idle++;
			alive_park(alive);
			pthread_cond_wait(&p->cond, &p->lock);
			p->idle--;
		}
		/* The lane first: it occupies one worker per file at most, so it cannot starve the
		 * queue, and the queue could starve it. */
		req = io_pool_lane_next(p, 1);
		lane = req != NULL;
		if (!req)
			req = io_fifo_pop(&p->queue);
		/* After a big transfer the next one is no round trip away: sleep. */
		spun = req && req->len > IO_POOL_SPIN_MAX_LEN;
		io_pool_set_queued(p);
		if (!req)
			break; /* stopping, queue empty */
		want = p->want_batch;
		pthread_mutex_unlock(&p->lock);
		alive_beat(alive);
		while (testhook_stall("io") && !__atomic_load_n(&p->stop, __ATOMIC_RELAXED))
			usleep(100 * 1000); /* the stall test hook: a request that never returns */
		if (want != batch && want >= 0) {
			batch = want;
			(void)proc_sched_batch(batch);
		}
		req->res = io_exec(req);
		/* Read before io_pool_done: from then on the loop owns (and may free) req. */
		fd = req->fd;
		io_pool_done(p, req);
		pthread_mutex_lock(&p->lock);
		if (lane)
			io_pool_lane_release(p, fd);
	}
	pthread_mutex_unlock(&p->lock);
	alive_unregister(alive);
	return NULL;
}

int io_pool_init(struct io_engine *eng, unsigned nthreads)
{
	struct io_pool *p = &eng->pool;
	cpu_set_t cpus;
	sigset_t all, old;
	char name[16];
	int err = 0;

	p->efd = eng->efd;
	p->want_batch = -1;
	/* Spinning only pays when the thread waited for runs on another CPU meanwhile; pinned to a
	 * single CPU (taskset, cgroup cpuset), a spinner just delays the thread it waits for. */
	p->ncpus = sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? (unsigned)CPU_COUNT(&cpus) : 1;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	pthread_mutex_init(&p->done_lock, NULL);
	p->started = 1;
	p->threads = calloc(nthreads, sizeof(*p->threads));
	p->lane_busy = calloc(nthreads, sizeof(*p->lane_busy));
	if (!p->threads || !p->lane_busy) {
		err = errno;
		goto out;
	}
	/* Workers must not take the daemon's signals: libev handles them on the loop thread. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (unsigned i = 0; i < nthreads; i++) {
		err = pthread_create(&p->threads[i], NULL, io_pool_worker, p);
		if (err) {
			log_err("Cannot start I/O worker thread %u of %u: %s.", i + 1, nthreads,
			        strerror(err));
			break;
		}
		snprintf(name, sizeof(name), "hakd-io%u", i % 100);
		pthread_setname_np(p->threads[i], name);
		p->nthreads++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
out:
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

void io_pool_exit(struct io_engine *eng)
{
	struct io_pool *p = &eng->pool;

	if (!p->started)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = 1;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	for (unsigned i = 0; i < p->nthreads; i++)
		pthread_join(p->threads[i], NULL);
	free(p->threads);
	p->threads = NULL;
	free(p->lane_busy);
	p->lane_busy = NULL;
	p->nthreads = 0;
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->done_lock);
	p->started = 0;
}

void io_pool_queue(struct io_engine *eng, struct io_req *req)
{
	io_fifo_push(&eng->pool.batch, req);
}

void io_pool_flush(struct io_engine *eng)
{
	struct io_pool *p = &eng->pool;
	struct io_fifo lane = {0}, queue = {0};
	struct io_req *q;
	unsigned n = p->batch.n, cpu_bound = 0;

	if (!n)
		return;
	p->outstanding += n;
	while ((q = io_fifo_pop(&p->batch))) {
		p->small_out += q->len <= IO_POOL_SPIN_MAX_LEN;
		cpu_bound += io_pool_cpu_bound(q);
		io_fifo_push(io_pool_lane_wants(q) ? &lane : &queue, q);
	}
	n -= cpu_bound;
	n += cpu_bound < p->ncpus ? cpu_bound : p->ncpus;
	pthread_mutex_lock(&p->lock);
	io_fifo_splice(&p->queue, &queue);
	io_fifo_splice(&p->lane, &lane);
	io_pool_set_queued(p);
	/* A spinning worker takes a job without a wake-up; it rechecks the queue under the lock
	 * before it sleeps, so skipping the signal cannot lose a job. A lane request that must wait
	 * for its file wakes a worker for nothing, which is cheaper than counting. */
	n -= n < p->spinning ? n : p->spinning;
	if (n && n >= p->idle)
		pthread_cond_broadcast(&p->cond);
	else
		for (unsigned i = 0; i < n; i++)
			pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

unsigned io_pool_reap(struct io_engine *eng)
{
	struct io_pool *p = &eng->pool;
	struct io_fifo done;
	struct io_req *req;
	unsigned n = 0;

	if (!p->outstanding)
		return 0;
	pthread_mutex_lock(&p->done_lock);
	done = p->done;
	p->done.head = p->done.tail = NULL;
	p->done.n = 0;
	pthread_mutex_unlock(&p->done_lock);
	p->outstanding -= done.n;
	while ((req = io_fifo_pop(&done))) {
		p->small_out -= req->len <= IO_POOL_SPIN_MAX_LEN;
		io_complete(eng, req, req->res);
		n++;
	}
	return n;
}

/* Loop thread, from the ev_prepare watcher right before the loop would sleep. */
unsigned io_pool_wait_briefly(struct io_engine *eng)
{
	struct io_pool *p = &eng->pool;
	int64_t t0, ns = 0;

	if (p->ncpus < 2 || !p->outstanding || p->outstanding > IO_POOL_LOOP_SPIN_MAXQ ||
	    p->small_out < p->outstanding)
		return 0;
	pthread_mutex_lock(&p->done_lock);
	p->loop_waiting = !p->done.head;
	pthread_mutex_unlock(&p->done_lock);
	t0 = clock_mono_ns();
	for (unsigned i = 0; p->loop_waiting && ns < IO_POOL_LOOP_SPIN_NS; i++) {
		if (__atomic_load_n(&p->done.head, __ATOMIC_ACQUIRE))
			break;
		io_cpu_relax();
		if (i % 32 == 0)
			ns = clock_mono_ns() - t0;
	}
	pthread_mutex_lock(&p->done_lock);
	p->loop_waiting = 0;
	pthread_mutex_unlock(&p->done_lock);
	return io_pool_reap(eng);
}

void io_pool_set_batch(struct io_engine *eng, bool batch)
{
	struct io_pool *p = &eng->pool;
	if (!p->started)
		return;
	pthread_mutex_lock(&p->lock);
	p->want_batch = batch;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
}
