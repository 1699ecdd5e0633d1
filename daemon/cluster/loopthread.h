/* SPDX-License-Identifier: MIT */
/*
 * A thread that runs its own libev loop beside the main loop, for work that must never wait
 * behind it: the heartbeats and the witness client. The owner puts its watchers on loop between
 * loopthread_init and loopthread_start; from then on only the thread touches them. The thread
 * wakes the main loop with loopthread_notify(), which calls notify(arg) there.
 */
#ifndef HAK_LOOPTHREAD_H
#define HAK_LOOPTHREAD_H

#include <ev.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "lib/alive.h"

/* How often a loop thread stamps its liveness (lib/alive.h), in seconds. */
#define LOOPTHREAD_ALIVE_INTERVAL 0.5

struct loopthread {
	struct ev_loop *loop; /* the thread's own */
	struct ev_loop *main_loop;
	ev_async stop_async;   /* main loop -> thread: leave the loop */
	ev_async notify_async; /* thread -> main loop: call notify */
	ev_timer alive_tick;   /* in the thread: stamps alive */
	struct alive_slot *alive;
	const char
	    *name; /* for the watchdog's messages and the stall test hook; set before start */
	atomic_bool stopping;
	pthread_t thread;
	bool started;
	void (*first)(void *arg);  /* in the thread, before its loop runs; may be NULL */
	void (*notify)(void *arg); /* in the main loop; may be NULL */
	void *arg;
};

/* Create t's loop (t zeroed before). 0, or -1 with errno ENOMEM. */
int loopthread_init(struct loopthread *t, struct ev_loop *main_loop, void (*notify)(void *),
                    void *arg);
/* Start the thread, which calls first(arg) and then runs the loop. 0, or -1 with errno. */
int loopthread_start(struct loopthread *t, void (*first)(void *));
/* From the thread: have the main loop call notify(arg) soon (calls coalesce). */
void loopthread_notify(struct loopthread *t);
/* From the main loop: stop and join the thread and destroy its loop. Safe at any stage after
 * t was zeroed, and twice. */
void loopthread_stop(struct loopthread *t);

#endif
