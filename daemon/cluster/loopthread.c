/* SPDX-License-Identifier: MIT */
#include "loopthread.h"

#include <errno.h>
#include <unistd.h>

#include "lib/proc.h"
#include "lib/testhook.h"

static void stop_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	(void)w;
	(void)revents;
	ev_break(loop, EVBREAK_ALL);
}

/* The loop turns: the watchdog check (lib/alive.h) knows this thread is not stuck. */
static void alive_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct loopthread *t = w->data;

	(void)loop;
	(void)revents;
	/* The stall test hook: hang here as a thread stuck in a system call would, yet still
	 * leave when stopped, so the test's hakd can exit. */
	while (testhook_stall(t->name) && !atomic_load(&t->stopping))
		usleep(100 * 1000);
	alive_beat(t->alive);
}

static void notify_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	struct loopthread *t = w->data;

	(void)loop;
	(void)revents;
	if (t->notify)
		t->notify(t->arg);
}

static void *loopthread_run(void *arg)
{
	struct loopthread *t = arg;

	/* Heartbeats and votes must not wait behind a busy CPU's time slice (hakd's I/O threads
	 * are SCHED_BATCH by default); deadtimes are long enough that failing to set it is
	 * harmless. */
	(void)proc_sched_batch(false);
	if (t->first)
		t->first(t->arg);
	ev_run(t->loop, 0);
	return NULL;
}

int loopthread_init(struct loopthread *t, struct ev_loop *main_loop, void (*notify)(void *),
                    void *arg)
{
	t->main_loop = main_loop;
	t->notify = notify;
	t->arg = arg;
	t->loop = ev_loop_new(EVFLAG_AUTO | EVFLAG_NOSIGMASK);
	if (!t->loop) {
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

int loopthread_start(struct loopthread *t, void (*first)(void *))
{
	int e;

	t->first = first;
	if (!t->name)
		t->name = "loop";
	t->alive = alive_register(t->name);
	ev_timer_init(&t->alive_tick, alive_cb, LOOPTHREAD_ALIVE_INTERVAL,
	              LOOPTHREAD_ALIVE_INTERVAL);
	t->alive_tick.data = t;
	ev_timer_start(t->loop, &t->alive_tick);
	ev_async_init(&t->stop_async, stop_cb);
	ev_async_start(t->loop, &t->stop_async);
	ev_async_init(&t->notify_async, notify_cb);
	t->notify_async.data = t;
	ev_async_start(t->main_loop, &t->notify_async);
	e = pthread_create(&t->thread, NULL, loopthread_run, t);
	if (e) {
		errno = e;
		return -1;
	}
	t->started = true;
	return 0;
}

void loopthread_notify(struct loopthread *t)
{
	ev_async_send(t->main_loop, &t->notify_async);
}

void loopthread_stop(struct loopthread *t)
{
	if (t->started) {
		atomic_store(&t->stopping, true);
		ev_async_send(t->loop, &t->stop_async);
		pthread_join(t->thread, NULL);
		t->started = false;
	}
	alive_unregister(t->alive);
	t->alive = NULL;
	if (t->main_loop && ev_is_active(&t->notify_async))
		ev_async_stop(t->main_loop, &t->notify_async);
	if (t->loop)
		ev_loop_destroy(t->loop);
	t->loop = NULL;
}
