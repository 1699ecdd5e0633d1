/* SPDX-License-Identifier: MIT */
#include "ctl.h"

#include <errno.h>
#include <grp.h>
#include <libgen.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conf/config.h"
#include "lib/clock.h"
#include "lib/usock.h"

/* The group of path when bits open it to a group other than root's: 0, or -1. */
static int ctl_path_group(const char *path, mode_t bits, char *name, size_t len)
{
	struct group gr, *res = NULL;
	struct stat st;
	char buf[4096];

	if (stat(path, &st) < 0 || st.st_gid == 0 || (st.st_mode & bits) != bits ||
	    getgrgid_r(st.st_gid, &gr, buf, sizeof(buf), &res) != 0 || !res)
		return -1;
	snprintf(name, len, "%s", res->gr_name);
	return 0;
}

/* The group whose members may connect to sock: the socket file's when we can see it, else its
 * directory's (hakd gives a closed directory to the control group), else the default
 * control-group (the socket may be root-only because hakd found no such group). */
static void ctl_group(const char *sock, char *name, size_t len)
{
	char *copy = strdup(sock);

	if (ctl_path_group(sock, S_IWGRP, name, len) < 0 &&
	    (!copy || ctl_path_group(dirname(copy), S_IXGRP, name, len) < 0))
		snprintf(name, len, "%s", HAK_DEFAULT_CONTROL_GROUP);
	free(copy);
}

int ctl_connect(const char *sock)
{
	int fd = usock_connect(sock);
	char group[64];

	if (fd < 0 && errno == EACCES) {
		ctl_group(sock, group, sizeof(group));
		fprintf(stderr,
		        "hakctl: permission denied on hakd's control socket %s for uid %u: run "
		        "hakctl as root, or as a member of group %s for the read-only commands "
		        "(status, events, version).\n",
		        sock, (unsigned)getuid(), group);
	} else if (fd < 0 && errno == ENAMETOOLONG)
		fprintf(stderr, "hakctl: control socket path %s is too long.\n", sock);
	else if (fd < 0)
		fprintf(stderr, "hakctl: cannot reach hakd at %s: %s. Is hakd running?\n", sock,
		        strerror(errno));
	return fd;
}

json_t *ctl_call(const char *sock, json_t *req, int *exit_code)
{
	return ctl_call_timeout(sock, req, -1, exit_code);
}

json_t *ctl_call_timeout(const char *sock, json_t *req, int timeout_ms, int *exit_code)
{
	double deadline = clock_mono() + timeout_ms / 1000.0;
	char *line = NULL, *buf = NULL;
	size_t len = 0, cap = 0;
	json_t *resp = NULL;
	int fd = -1, send_err = 0;

	*exit_code = EXIT_UNREACHABLE;
	fd = ctl_connect(sock);
	if (fd < 0)
		goto out;
	line = json_dumps(req, JSON_COMPACT);
	if (!line)
		goto out;
	size_t n = strlen(line);
	line[n] = '\n'; /* json_dumps leaves room only for the NUL; reuse it for the newline */
	/* A client hakd does not let in gets one error line and is closed, maybe before the
	 * request went out: the line is still there to read, so a failed send is reported only
	 * when no answer follows. */
	if (send(fd, line, n + 1, MSG_NOSIGNAL) != (ssize_t)(n + 1))
		send_err = errno ? errno : EIO;
	for (;;) {
		if (len + 4096 > cap) {
			cap = cap ? cap * 2 : 65536;
			char *nb = realloc(buf, cap);
			if (!nb)
				goto out;
			buf = nb;
		}
		if (timeout_ms >= 0) {
			struct pollfd pfd = {.fd = fd, .events = POLLIN};
			int left = (int)((deadline - clock_mono()) * 1000.0);
			int pr = left > 0 ? poll(&pfd, 1, left) : 0;
			if (pr < 0 && errno == EINTR)
				continue;
			if (pr <= 0) {
				fprintf(stderr, "hakctl: hakd at %s did not answer within %d ms.\n",
				        sock, timeout_ms);
				goto out;
			}
		}
		ssize_t r = read(fd, buf + len, cap - len);
		if (r <= 0 && send_err) {
			fprintf(stderr, "hakctl: sending to hakd failed: %s.\n",
			        strerror(send_err));
			goto out;
		}
		if (r <= 0) {
			fprintf(stderr, "hakctl: hakd closed the connection without an answer.\n");
			goto out;
		}
		len += (size_t)r;
		if (memchr(buf, '\n', len))
			break;
	}
	json_error_t jerr;
	resp = json_loadb(buf, (size_t)((char *)memchr(buf, '\n', len) - buf), 0, &jerr);
	if (!resp) {
		fprintf(stderr, "hakctl: hakd sent an answer that is not JSON: %s.\n", jerr.text);
		goto out;
	}
	if (!json_is_true(json_object_get(resp, "ok"))) {
		const char *e = json_string_value(json_object_get(resp, "error"));
		fprintf(stderr, "hakctl: hakd refused: %s\n", e ? e : "(no reason given)");
		*exit_code = EXIT_DAEMON;
		json_decref(resp);
		resp = NULL;
		goto out;
	}
	*exit_code = 0;
out:
	if (fd >= 0)
		close(fd);
	free(line);
	free(buf);
	return resp;
}

void ctl_bytes_text(uint64_t b, int decimals, char *out, size_t len)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	double v = (double)b;
	unsigned u = 0;

	while (v >= 1024 && u < 5) {
		v /= 1024;
		u++;
	}
	snprintf(out, len, "%.*f %s", u ? decimals : 0, v, units[u]);
}
