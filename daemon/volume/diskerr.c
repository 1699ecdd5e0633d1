/* SPDX-License-Identifier: MIT */
#include "diskerr.h"

#include <errno.h>
#include <ev.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "conf/config.h"
#include "lib/log.h"
#include "lib/proc.h"
#include <hak/wire.h>

#define HOOKS_MAX 4

bool diskerr_is_disk_error(int err)
{
	switch (err) {
	case EIO:
	case ENXIO:
	case ENODEV:
	case ENOMEDIUM:
	case EMEDIUMTYPE:
	case EROFS: /* the kernel remounted or the device turned read-only after errors */
	case EREMOTEIO:
	case EBADF:   /* the descriptor no longer refers to the device */
	case EUCLEAN: /* filesystem corruption under a file-backed store */
	case ENOTCONN:
	case ESHUTDOWN:
		return true;
	default:
		return false;
	}
}

const char *diskerr_errno_name(int err)
{
	const char *n = strerrorname_np(err);
	return n ? n : "EUNKNOWN";
}

/* ---- local-io-error hook ---------------------------------------------------------------- */

struct hook_run {
	ev_child w;
	char volume[WIRE_NAME_MAX + 1];
	char path[256];
};

static unsigned hooks_running;

static void hook_exited(struct ev_loop *loop, ev_child *w, int revents)
{
	struct hook_run *h = (struct hook_run *)w;
	(void)revents;
	ev_child_stop(loop, w);
	hooks_running--;
	if (WIFEXITED(w->rstatus) && WEXITSTATUS(w->rstatus) == 0)
		log_vol(LOG_LVL_INFO, h->volume, NULL, "The local-io-error hook %s finished.",
		        h->path);
	else
		log_vol(LOG_LVL_WARN, h->volume, NULL,
		        "The local-io-error hook %s failed (wait status 0x%x).", h->path,
		        (unsigned)w->rstatus);
	free(h);
}

void diskerr_hook_run(const struct hak_volume_cfg *vc, const char *op, int err, const char *policy)
{
	struct ev_loop *loop = ev_default_loop(0);
	char e_vol[96], e_err[48], e_op[48], e_pol[48];
	char e_path[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
	const char *ename = diskerr_errno_name(err);
	if (!vc->local_io_error_hook)
		return;
	if (hooks_running >= HOOKS_MAX) {
		log_vol(LOG_LVL_WARN, vc->name, NULL,
		        "Not running the local-io-error hook for a %s error: %u instances still "
		        "run.",
		        ename, hooks_running);
		return;
	}
	struct hook_run *h = calloc(1, sizeof(*h));
	if (!h)
		return;
	snprintf(h->volume, sizeof(h->volume), "%s", vc->name);
	snprintf(h->path, sizeof(h->path), "%s", vc->local_io_error_hook);
	snprintf(e_vol, sizeof(e_vol), "HAK_VOLUME=%s", vc->name);
	snprintf(e_err, sizeof(e_err), "HAK_ERROR=%s", ename);
	snprintf(e_op, sizeof(e_op), "HAK_OP=%s", op);
	snprintf(e_pol, sizeof(e_pol), "HAK_POLICY=%s", policy);
	char *argv[] = {vc->local_io_error_hook, vc->name, (char *)ename, (char *)op,
	                (char *)policy,          NULL};
	char *envp[] = {e_vol, e_err, e_op, e_pol, e_path, NULL};
	pid_t pid;
	posix_spawnattr_t at;
	proc_spawnattr_init(&at);
	int rc = posix_spawn(&pid, vc->local_io_error_hook, NULL, &at, argv, envp);
	posix_spawnattr_destroy(&at);
	if (rc != 0) {
		log_vol(LOG_LVL_ERR, vc->name, NULL, "Cannot run the local-io-error hook %s: %s.",
		        vc->local_io_error_hook, strerror(rc));
		free(h);
		return;
	}
	hooks_running++;
	ev_child_init(&h->w, hook_exited, pid, 0);
	ev_child_start(loop, &h->w);
}
