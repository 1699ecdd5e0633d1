/* SPDX-License-Identifier: MIT */
#include "ctlperm.h"

#include <errno.h>
#include <grp.h>
#include <libgen.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* Past this a group or passwd entry is taken as broken rather than large. */
#define CTLPERM_MAX_ENTRY  (1u << 20)
#define CTLPERM_MAX_GROUPS 65536

/* The first size to try for a getgrnam_r/getpwuid_r buffer. */
static size_t entry_hint(int name)
{
	long n = sysconf(name);
	return n > 0 && n < (long)CTLPERM_MAX_ENTRY ? (size_t)n : 1024;
}

int ctlperm_group_gid(const char *name, gid_t *gid)
{
	size_t len = entry_hint(_SC_GETGR_R_SIZE_MAX);
	struct group gr, *res = NULL;
	char *buf = NULL;
	int rc;

	for (;;) {
		char *nb = realloc(buf, len);
		if (!nb) {
			rc = ENOMEM;
			break;
		}
		buf = nb;
		rc = getgrnam_r(name, &gr, buf, len, &res);
		if (rc != ERANGE || len >= CTLPERM_MAX_ENTRY)
			break;
		len *= 2;
	}
	/* getgrnam_r(3): these mean "no such group" as well as 0 with no result does. */
	if (!res && (rc == 0 || rc == ENOENT || rc == ESRCH || rc == EBADF || rc == EPERM))
		rc = ENOENT;
	if (res)
		*gid = gr.gr_gid;
	free(buf);
	errno = rc;
	return res ? 0 : -1;
}

int ctlperm_share_socket(const char *path, gid_t gid, char *err, size_t errlen)
{
	/* lchown: the path was bound a moment ago and must be the socket, not what a link names.
	 * The mode comes second, so the socket is never open to the group it still had. */
	if (lchown(path, (uid_t)-1, gid) < 0 || chmod(path, 0660) < 0) {
		int e = errno;
		snprintf(err, errlen, "Cannot give control socket %s to gid %u with mode 0660: %s.",
		         path, (unsigned)gid, strerror(e));
		(void)chmod(path, 0600);
		errno = e;
		return -1;
	}
	return 0;
}

/* Whether members of gid may traverse a directory of this stat. */
static int dir_traversable(const struct stat *st, gid_t gid)
{
	return (st->st_mode & S_IXOTH) || (st->st_gid == gid && (st->st_mode & S_IXGRP));
}

int ctlperm_share_dir(const char *path, gid_t gid, const char *group, char *err, size_t errlen)
{
	char *copy = strdup(path);
	struct stat st;
	int rc = -1, e = 0;

	if (!copy) {
		e = errno;
		snprintf(err, errlen, "Out of memory checking the directory of %s.", path);
		goto out;
	}
	const char *dir = dirname(copy);
	if (stat(dir, &st) < 0) {
		e = errno;
		snprintf(err, errlen, "Cannot check directory %s of the control socket: %s.", dir,
		         strerror(e));
		goto out;
	}
	if (dir_traversable(&st, gid)) {
		rc = 0;
		goto out;
	}
	if (st.st_uid != geteuid() || (st.st_gid != 0 && st.st_gid != gid)) {
		e = EPERM;
		snprintf(
		    err, errlen,
		    "Directory %s of the control socket belongs to another user or group, so "
		    "hakd leaves it as it is and group '%s' cannot reach the socket; fix it with "
		    "'chgrp %s %s && chmod g+x %s' or move control-socket.",
		    dir, group, group, dir, dir);
		goto out;
	}
	if (chown(dir, (uid_t)-1, gid) < 0 || chmod(dir, (st.st_mode & 07777) | S_IXGRP) < 0) {
		e = errno;
		snprintf(err, errlen,
		         "Cannot let group '%s' traverse directory %s of the control socket: %s.",
		         group, dir, strerror(e));
		goto out;
	}
	rc = 0;
out:
	free(copy);
	errno = e;
	return rc;
}

int ctlperm_peer_get(int fd, struct ctlperm_peer *peer)
{
	struct ucred uc;
	socklen_t len = sizeof(uc);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0)
		return -1;
	peer->uid = uc.uid;
	peer->gid = uc.gid;
	peer->pid = uc.pid;
	return 0;
}

/* The name of user uid in *name (malloc'ed): 0, 0 with *name NULL when there is no such user,
 * or -1 with errno. */
static int user_name(uid_t uid, char **name)
{
	size_t len = entry_hint(_SC_GETPW_R_SIZE_MAX);
	struct passwd pw, *res = NULL;
	char *buf = NULL;
	int rc;

	*name = NULL;
	for (;;) {
		char *nb = realloc(buf, len);
		if (!nb) {
			rc = ENOMEM;
			break;
		}
		buf = nb;
		rc = getpwuid_r(uid, &pw, buf, len, &res);
		if (rc != ERANGE || len >= CTLPERM_MAX_ENTRY)
			break;
		len *= 2;
	}
	if (res && !(*name = strdup(pw.pw_name)))
		rc = ENOMEM;
	else if (res || rc == ENOENT || rc == ESRCH || rc == EBADF || rc == EPERM)
		rc = 0;
	free(buf);
	errno = rc;
	return rc ? -1 : 0;
}

int ctlperm_member(uid_t uid, gid_t gid, gid_t group)
{
	char *name = NULL;
	gid_t *groups = NULL;
	int n = 64, rc = -1, e = 0;

	if (gid == group)
		return 1;
	/* The user and group databases may be remote (LDAP, sssd): this blocks the loop for as
	 * long as they take, once per connecting client that is not root. */
	if (user_name(uid, &name) < 0) {
		e = errno;
		goto out;
	}
	rc = 0;
	while (name && n <= CTLPERM_MAX_GROUPS) {
		gid_t *ng = realloc(groups, (size_t)n * sizeof(*groups));
		int got = n;
		if (!ng) {
			e = ENOMEM;
			rc = -1;
			break;
		}
		groups = ng;
		if (getgrouplist(name, gid, groups, &got) < 0) {
			n = got > n ? got : n * 2;
			continue;
		}
		for (int i = 0; i < got && !rc; i++)
			rc = groups[i] == group;
		break;
	}
out:
	free(groups);
	free(name);
	errno = e;
	return rc;
}
