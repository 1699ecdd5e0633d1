/* SPDX-License-Identifier: MIT */
#include "proc.h"

#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"

extern char **environ;

#define PROC_KILL_GRACE 3.0
#define PROC_ENV_MAX    256

struct proc {
	struct ev_loop *loop;
	pid_t pid;
	int out_fd;
	ev_child child_w;
	ev_io out_w;
	ev_timer timer_w;
	bool term_sent;
	double timeout;
	proc_done_fn done;
	void *ctx;
	struct proc_result res;
	size_t out_len;
};

/* Keeps the last PROC_OUTPUT_MAX-1 bytes, non-printable bytes as '.'. */
static void proc_keep_output(struct proc *p, const char *buf, size_t n)
{
	char *o = p->res.output;
	size_t cap = PROC_OUTPUT_MAX - 1;

	if (n >= cap) {
		buf += n - cap;
		n = cap;
	}
	if (p->out_len + n > cap) {
		size_t drop = p->out_len + n - cap;
		memmove(o, o + drop, p->out_len - drop);
		p->out_len -= drop;
	}
	/* One line for the log: newlines become spaces, other control bytes dots. */
	for (size_t i = 0; i < n; i++)
		o[p->out_len++] = buf[i] == '\n'                      ? ' '
		                  : (buf[i] >= 0x20 && buf[i] < 0x7f) ? buf[i]
		                                                      : '.';
	o[p->out_len] = '\0';
}

static void proc_drain(struct proc *p)
{
	char buf[4096];
	ssize_t n;

	while (p->out_fd >= 0 && (n = read(p->out_fd, buf, sizeof(buf))) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		proc_keep_output(p, buf, (size_t)n);
	}
}

static void proc_release(struct proc *p)
{
	ev_child_stop(p->loop, &p->child_w);
	ev_io_stop(p->loop, &p->out_w);
	ev_timer_stop(p->loop, &p->timer_w);
	if (p->out_fd >= 0)
		close(p->out_fd);
	free(p);
}

static void proc_out_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct proc *p = w->data;
	char buf[4096];
	ssize_t n = read(p->out_fd, buf, sizeof(buf));

	(void)revents;
	if (n > 0) {
		proc_keep_output(p, buf, (size_t)n);
		return;
	}
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	/* EOF: a daemon the command left behind may still hold the pipe; nothing more to read. */
	ev_io_stop(loop, w);
}

static void proc_child_cb(struct ev_loop *loop, ev_child *w, int revents)
{
	struct proc *p = w->data;
	struct proc_result res;

	(void)loop;
	(void)revents;
	proc_drain(p);
	while (p->out_len && p->res.output[p->out_len - 1] == ' ')
		p->res.output[--p->out_len] = '\0';
	p->res.exited = WIFEXITED(w->rstatus);
	p->res.code = p->res.exited ? WEXITSTATUS(w->rstatus) : 0;
	p->res.signo = WIFSIGNALED(w->rstatus) ? WTERMSIG(w->rstatus) : 0;
	/* After a timeout kill or a cancel, whatever the command started goes too. */
	if (p->res.timed_out || !p->done)
		kill(-p->pid, SIGKILL);
	res = p->res;
	proc_done_fn done = p->done;
	void *ctx = p->ctx;
	proc_release(p);
	if (done)
		done(ctx, &res);
}

static void proc_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct proc *p = w->data;

	(void)revents;
	if (!p->term_sent) {
		log_warn(
		    "Command (pid %d) still runs after its %.1f s limit; sending SIGTERM to its "
		    "process group.",
		    (int)p->pid, p->timeout);
		p->res.timed_out = true;
		p->term_sent = true;
		kill(-p->pid, SIGTERM);
		ev_timer_set(w, PROC_KILL_GRACE, 0.);
		ev_timer_start(loop, w);
		return;
	}
	log_warn("Command (pid %d) ignored SIGTERM for %.0f s; sending SIGKILL.", (int)p->pid,
	         PROC_KILL_GRACE);
	kill(-p->pid, SIGKILL);
}

static int proc_env(char *const extra[], char **envp, size_t max)
{
	size_t n = 0;

	for (char **e = environ; e && *e && n < max - 1; e++)
		envp[n++] = *e;
	for (size_t i = 0; extra && extra[i] && n < max - 1; i++)
		envp[n++] = extra[i];
	envp[n] = NULL;
	return 0;
}

int proc_sched_batch(bool batch)
{
	struct sched_param sp = {.sched_priority = 0};
	/* pid 0 is the calling thread on Linux, not the whole process. */
	return sched_setscheduler(0, batch ? SCHED_BATCH : SCHED_OTHER, &sp) < 0 ? -1 : 0;
}

void proc_spawnattr_init(posix_spawnattr_t *at)
{
	struct sched_param sp = {.sched_priority = 0};
	posix_spawnattr_init(at);
	/* A database started from a SCHED_BATCH thread would inherit the policy. */
	posix_spawnattr_setschedpolicy(at, SCHED_OTHER);
	posix_spawnattr_setschedparam(at, &sp);
	posix_spawnattr_setflags(at, POSIX_SPAWN_SETSCHEDULER);
}

/* Add flags to those proc_spawnattr_init() set. */
static void proc_spawnattr_flags(posix_spawnattr_t *at, short flags)
{
	short old = 0;
	posix_spawnattr_getflags(at, &old);
	posix_spawnattr_setflags(at, (short)(old | flags));
}

static int proc_spawn(char *const argv[], char *const env[], int out_w, pid_t *pid)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, all;
	char *envp[PROC_ENV_MAX];
	int r;

	posix_spawn_file_actions_init(&fa);
	proc_spawnattr_init(&at);
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, out_w, 1);
	posix_spawn_file_actions_adddup2(&fa, out_w, 2);
	/* Its own process group, so a timeout kills everything it started; default signal
	 * dispositions and an empty mask, whatever hakd's threads had. */
	posix_spawnattr_setpgroup(&at, 0);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &all);
	proc_spawnattr_flags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
	                              POSIX_SPAWN_SETSIGDEF);
	proc_env(env, envp, PROC_ENV_MAX);
	r = posix_spawnp(pid, argv[0], &fa, &at, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	return r;
}

int proc_run(struct ev_loop *loop, char *const argv[], char *const env[], double timeout,
             proc_done_fn done, void *ctx, struct proc **out)
{
	struct proc *p = calloc(1, sizeof(*p));
	int pipefd[2] = {-1, -1}, r, ret = -1;

	if (!p || pipe2(pipefd, O_CLOEXEC) < 0)
		goto out;
	r = proc_spawn(argv, env, pipefd[1], &p->pid);
	if (r) {
		errno = r;
		goto out;
	}
	close(pipefd[1]);
	pipefd[1] = -1;
	fcntl(pipefd[0], F_SETFL, O_NONBLOCK);
	p->out_fd = pipefd[0];
	pipefd[0] = -1;
	p->loop = loop;
	p->timeout = timeout;
	p->done = done;
	p->ctx = ctx;
	ev_child_init(&p->child_w, proc_child_cb, p->pid, 0);
	ev_io_init(&p->out_w, proc_out_cb, p->out_fd, EV_READ);
	ev_timer_init(&p->timer_w, proc_timer_cb, timeout, 0.);
	p->child_w.data = p->out_w.data = p->timer_w.data = p;
	ev_child_start(loop, &p->child_w);
	ev_io_start(loop, &p->out_w);
	ev_timer_start(loop, &p->timer_w);
	if (out)
		*out = p;
	p = NULL;
	ret = 0;
out:
	if (pipefd[0] >= 0)
		close(pipefd[0]);
	if (pipefd[1] >= 0)
		close(pipefd[1]);
	free(p);
	return ret;
}

int proc_run_shell(struct ev_loop *loop, const char *cmd, char *const env[], double timeout,
                   proc_done_fn done, void *ctx, struct proc **out)
{
	char sh[] = "/bin/sh", dash_c[] = "-c";
	char *argv[] = {sh, dash_c, (char *)cmd, NULL};

	return proc_run(loop, argv, env, timeout, done, ctx, out);
}

void proc_cancel(struct proc *p)
{
	if (!p)
		return;
	kill(-p->pid, SIGKILL);
	/* Not reaped here: a process stuck in the kernel (umount of a dead device) may take long to
	 * die, and the loop must not wait. The child watcher reaps it later and frees p. */
	p->done = NULL;
	ev_timer_stop(p->loop, &p->timer_w);
}

void proc_describe(const struct proc_result *res, double timeout, char *buf, unsigned len)
{
	if (res->timed_out)
		snprintf(buf, len, "timed out after %.1f s", timeout);
	else if (res->exited)
		snprintf(buf, len, "exit status %d", res->code);
	else
		snprintf(buf, len, "killed by signal %d (%s)", res->signo, strsignal(res->signo));
}
