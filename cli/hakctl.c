/* SPDX-License-Identifier: MIT */
/*
 * hakctl: the operator's view of hakd. Talks JSON lines over hakd's control socket.
 * Exit codes: 0 ok, 1 usage, 2 cannot reach hakd, 3 hakd answered with an error.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <hak/version.h>

#include "config.h"

enum { EXIT_USAGE = 1, EXIT_UNREACHABLE = 2, EXIT_DAEMON = 3 };

struct cli {
	const char *control;
	int json;
};

static void usage(FILE *f)
{
	fprintf(f, "Usage: hakctl [--control SOCK] COMMAND [ARGS]\n"
		   "\n"
		   "Commands:\n"
		   "  status [--json]   volumes, clients, request counters, bytes and errors\n"
		   "  version           versions of hakctl and of the running hakd\n"
		   "\n"
		   "  --control SOCK    hakd's control socket (default %s)\n",
		HAK_DEFAULT_CONTROL_SOCKET);
}

/* Send one request and read one reply line. Returns the parsed reply or NULL (message printed). */
static json_t *call(const struct cli *c, json_t *req, int *exit_code)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char *line = NULL, *buf = NULL;
	size_t len = 0, cap = 0;
	json_t *resp = NULL;
	int fd = -1;

	*exit_code = EXIT_UNREACHABLE;
	if (strlen(c->control) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "hakctl: control socket path %s is too long.\n", c->control);
		goto out;
	}
	strcpy(sa.sun_path, c->control);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		fprintf(stderr, "hakctl: cannot reach hakd at %s: %s. Is hakd running?\n",
			c->control, strerror(errno));
		goto out;
	}
	line = json_dumps(req, JSON_COMPACT);
	if (!line)
		goto out;
	size_t n = strlen(line);
	line[n] = '\n'; /* json_dumps leaves room only for the NUL; reuse it for the newline */
	if (send(fd, line, n + 1, MSG_NOSIGNAL) != (ssize_t)(n + 1)) {
		fprintf(stderr, "hakctl: sending to hakd failed: %s.\n", strerror(errno));
		goto out;
	}
	for (;;) {
		if (len + 4096 > cap) {
			cap = cap ? cap * 2 : 65536;
			char *nb = realloc(buf, cap);
			if (!nb)
				goto out;
			buf = nb;
		}
		ssize_t r = read(fd, buf + len, cap - len);
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

static void human_bytes(uint64_t b, char *out, size_t len)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	double v = (double)b;
	unsigned u = 0;
	while (v >= 1024 && u < 5) {
		v /= 1024;
		u++;
	}
	snprintf(out, len, u ? "%.2f %s" : "%.0f %s", v, units[u]);
}

static json_int_t geti(json_t *o, const char *k)
{
	return json_integer_value(json_object_get(o, k));
}

static void print_volume(json_t *v)
{
	char sz[32];
	json_t *rq = json_object_get(v, "requests"), *by = json_object_get(v, "bytes");
	human_bytes((uint64_t)geti(v, "size"), sz, sizeof(sz));
	printf("volume %s: %s, %s (%lld bytes)%s, backing %s\n",
	       json_string_value(json_object_get(v, "name")),
	       json_string_value(json_object_get(v, "role")), sz, (long long)geti(v, "size"),
	       json_is_true(json_object_get(v, "read_only")) ? ", read-only" : "",
	       json_string_value(json_object_get(v, "backing")));
	const char *tcp = json_string_value(json_object_get(v, "tcp"));
	printf("  nbd: %s%s%s, %lld client(s) connected, %lld since start\n",
	       json_string_value(json_object_get(v, "socket")), tcp ? " and tcp " : "",
	       tcp ? tcp : "", (long long)geti(v, "clients"),
	       (long long)geti(v, "connections_total"));
	printf("  requests: read %lld, write %lld, flush %lld, trim %lld, zero %lld, cache %lld, "
	       "block-status %lld; in flight %lld\n",
	       (long long)geti(rq, "read"), (long long)geti(rq, "write"),
	       (long long)geti(rq, "flush"), (long long)geti(rq, "trim"),
	       (long long)geti(rq, "zero"), (long long)geti(rq, "cache"),
	       (long long)geti(rq, "block_status"), (long long)geti(v, "in_flight"));
	printf("  bytes: read %lld, written %lld\n", (long long)geti(by, "read"),
	       (long long)geti(by, "write"));
	printf("  errors: %lld (I/O %lld, invalid requests %lld, protocol violations %lld)\n",
	       (long long)geti(v, "errors"), (long long)geti(v, "io_errors"),
	       (long long)geti(v, "invalid_requests"), (long long)geti(v, "protocol_errors"));
}

static int cmd_status(const struct cli *c, int argc, char **argv)
{
	int json = c->json, rc;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0) {
			json = 1;
		} else {
			fprintf(stderr, "hakctl status: unknown argument '%s'.\n", argv[i]);
			return EXIT_USAGE;
		}
	}
	json_t *req = json_pack("{s:s}", "cmd", "status");
	json_t *resp = call(c, req, &rc);
	json_decref(req);
	if (!resp)
		return rc;
	json_object_del(resp, "ok");
	if (json) {
		json_dumpf(resp, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
		putchar('\n');
	} else {
		json_t *vols = json_object_get(resp, "volumes");
		size_t i;
		json_t *v;
		printf("hakd %s (pid %lld, I/O engine %s), %zu volume(s)\n",
		       json_string_value(json_object_get(resp, "version")),
		       (long long)geti(resp, "pid"),
		       json_string_value(json_object_get(resp, "io_engine")), json_array_size(vols));
		json_array_foreach(vols, i, v) print_volume(v);
	}
	json_decref(resp);
	return 0;
}

static int cmd_version(const struct cli *c, int argc, char **argv)
{
	int rc;
	(void)argc;
	(void)argv;
	printf("hakctl %s\n", HAK_VERSION);
	json_t *req = json_pack("{s:s}", "cmd", "version");
	json_t *resp = call(c, req, &rc);
	json_decref(req);
	if (!resp)
		return rc;
	printf("hakd %s\n", json_string_value(json_object_get(resp, "version")));
	json_decref(resp);
	return 0;
}

static const struct {
	const char *name;
	int (*fn)(const struct cli *c, int argc, char **argv);
} commands[] = {
	{ "status", cmd_status },
	{ "version", cmd_version },
};

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "control", required_argument, NULL, 'C' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct cli c = { .control = HAK_DEFAULT_CONTROL_SOCKET };
	int o;
	while ((o = getopt_long(argc, argv, "+C:jh", opts, NULL)) != -1) {
		switch (o) {
		case 'C': c.control = optarg; break;
		case 'j': c.json = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return EXIT_USAGE;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(argv[optind], commands[i].name) == 0)
			return commands[i].fn(&c, argc - optind, argv + optind);
	fprintf(stderr, "hakctl: unknown command '%s'; see hakctl --help.\n", argv[optind]);
	return EXIT_USAGE;
}
