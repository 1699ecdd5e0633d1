/* SPDX-License-Identifier: MIT */
/*
 * Child processes run from the event loop: resource start/stop/monitor commands and hooks. The
 * loop never waits for one: posix_spawn starts it in its own process group, an ev_child watcher
 * reaps it, a timer enforces its time limit (SIGTERM to the whole group, SIGKILL 3 s later), and
 * the last bytes of its output are kept for the log line that reports a failure.
 */
#ifndef HAK_PROC_H
#define HAK_PROC_H

#include <spawn.h>
#include <stdbool.h>

struct ev_loop;
struct proc;

#define PROC_OUTPUT_MAX 512u

struct proc_result {
	bool exited;                  /* exit code valid; else killed by signo */
	int code;                     /* exit status */
	int signo;                    /* the signal that ended it */
	bool timed_out;               /* it ran past its time limit and was killed */
	char output[PROC_OUTPUT_MAX]; /* the end of its stdout+stderr, printable */
};

typedef void (*proc_done_fn)(void *ctx, const struct proc_result *res);

/*
 * Runs argv (argv[0] looked up in PATH) with stdin from /dev/null, extra environment entries
 * env (NULL-terminated "K=V" list, may be NULL). done is called exactly once, from the loop,
 * unless proc_cancel comes first. Returns 0, or -1 with errno (the spawn failed; no callback).
 * The loop must be the default loop (libev reaps children there only).
 */
int proc_run(struct ev_loop *loop, char *const argv[], char *const env[], double timeout,
             proc_done_fn done, void *ctx, struct proc **out);
/* Kills the process group and forgets it: no callback. */
void proc_cancel(struct proc *p);
/* "exit status 3", "killed by signal 9", "timed out after 5.0 s": for messages. */
void proc_describe(const struct proc_result *res, double timeout, char *buf, unsigned len);
/*
 * The calling thread's CPU policy: SCHED_BATCH when batch (hakd's I/O threads, global
 * sched-policy), SCHED_OTHER otherwise. 0, or -1 with errno.
 */
int proc_sched_batch(bool batch);
/* Spawn attributes that give a child the normal CPU policy, whatever the spawning thread has:
 * posix_spawnattr_init plus POSIX_SPAWN_SETSCHEDULER; a caller that sets more flags must keep
 * that one. */
void proc_spawnattr_init(posix_spawnattr_t *at);
/* Runs a shell command line: /bin/sh -c CMD. */
int proc_run_shell(struct ev_loop *loop, const char *cmd, char *const env[], double timeout,
                   proc_done_fn done, void *ctx, struct proc **out);

#endif
