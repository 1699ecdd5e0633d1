/* SPDX-License-Identifier: MIT */
/*
 * hak-attach: bind a kernel /dev/nbdX to hakd, re-attach it after a daemon restart, or detach it.
 * Exit codes: 0 success, 1 usage error, 2 anything the environment refused (no nbd module, hakd
 * unreachable, handshake or kernel error).
 */
#include "attach.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXIT_OK    0
#define EXIT_USAGE 1
#define EXIT_ENV   2

enum mode { MODE_CONNECT, MODE_RECONFIGURE, MODE_DETACH };

struct opts {
	enum mode mode;
	const char *socket;
	const char *export;
	const char *identifier;
	int index; /* -1 when no device was named */
	unsigned connections;
	uint64_t block_size;
	uint64_t timeout;
	uint64_t dead_conn_timeout;
	bool disconnect_on_close;
	bool connect_only; /* an option that only makes sense with CONNECT was given */
};

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage:\n"
	    "  hak-attach --socket PATH [--export NAME] [--device /dev/nbdN] [--connections N]\n"
	    "             [--block-size N] [--timeout S] [--dead-conn-timeout S]\n"
	    "             [--identifier ID] [--disconnect-on-close]\n"
	    "  hak-attach --reconfigure /dev/nbdN --socket PATH [--export NAME] [--connections N]\n"
	    "             [--identifier ID]\n"
	    "  hak-attach --detach /dev/nbdN\n"
	    "  hak-attach --help\n"
	    "\n"
	    "Connects to hakd's UNIX socket, negotiates the export (NBD_OPT_GO) on each\n"
	    "connection and hands the sockets to the kernel NBD driver over generic netlink.\n"
	    "On success the device path is printed on stdout.\n"
	    "\n"
	    "  -s, --socket PATH          hakd's NBD UNIX socket\n"
	    "  -e, --export NAME          export name (default: the server's default export)\n"
	    "  -d, --device /dev/nbdN     use this device (default: the kernel picks a free one)\n"
	    "  -c, --connections N        sockets per device, 1..%u (more than 1 needs "
	    "multi-conn)\n"
	    "  -b, --block-size N         logical block size, 512..4096, power of two (default "
	    "%u)\n"
	    "  -t, --timeout S            per-request timeout in seconds, 0 = never (default %u)\n"
	    "      --dead-conn-timeout S  seconds to wait for a re-attach after hakd dies (default "
	    "%u)\n"
	    "      --identifier ID        backend identifier (default: hak:EXPORT:random cookie;\n"
	    "                             with --reconfigure: read from /sys/block/nbdN/backend)\n"
	    "      --disconnect-on-close  disconnect when the last opener closes the device\n"
	    "  -r, --reconfigure DEV      give DEV new sockets after hakd restarted\n"
	    "  -D, --detach DEV           disconnect DEV\n"
	    "  -h, --help                 show this help\n"
	    "\n"
	    "Exit status: 0 success, 1 usage error, 2 environment error.\n",
	    ATTACH_MAX_SOCKETS, ATTACH_DEFAULT_BLOCK_SIZE, ATTACH_DEFAULT_TIMEOUT,
	    ATTACH_DEFAULT_DEAD_CONN_TIMEOUT);
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("hak-attach: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry 'hak-attach --help'.\n", stderr);
	return EXIT_USAGE;
}

static int parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!s || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v > max)
		return -1;
	*out = v;
	return 0;
}

static int set_mode(struct opts *o, enum mode m, const char *dev)
{
	if (o->mode != MODE_CONNECT || o->index >= 0)
		return usage_error("Only one of --device, --reconfigure and --detach may be given "
		                   "(again at '%s').",
		                   dev);
	if (attach_parse_device(dev, &o->index) < 0)
		return usage_error("'%s' is not an NBD device name like /dev/nbd0.", dev);
	o->mode = m;
	return EXIT_OK;
}

/* Handle one option; returns EXIT_OK or EXIT_USAGE. */
static int parse_opt(struct opts *o, int c, const char *arg)
{
	uint64_t v;

	switch (c) {
	case 's':
		o->socket = arg;
		return EXIT_OK;
	case 'e':
		o->export = arg;
		return EXIT_OK;
	case 'I':
		o->identifier = arg;
		return EXIT_OK;
	case 'd':
		o->connect_only = true;
		return set_mode(o, MODE_CONNECT, arg);
	case 'r':
		return set_mode(o, MODE_RECONFIGURE, arg);
	case 'D':
		return set_mode(o, MODE_DETACH, arg);
	case 'c':
		if (parse_u64(arg, ATTACH_MAX_SOCKETS, &v) < 0 || v == 0)
			return usage_error("--connections needs a number from 1 to %u, not '%s'.",
			                   ATTACH_MAX_SOCKETS, arg);
		o->connections = (unsigned)v;
		return EXIT_OK;
	case 'b':
		if (parse_u64(arg, ATTACH_MAX_BLOCK_SIZE, &v) < 0 || v < ATTACH_MIN_BLOCK_SIZE ||
		    (v & (v - 1)))
			return usage_error(
			    "--block-size must be 512, 1024, 2048 or 4096, not '%s'.", arg);
		o->block_size = v;
		o->connect_only = true;
		return EXIT_OK;
	case 't':
	case 'T':
		if (parse_u64(arg, ATTACH_MAX_TIMEOUT, &v) < 0)
			return usage_error("A timeout must be a number of seconds up to %" PRIu64
			                   ", not '%s'.",
			                   ATTACH_MAX_TIMEOUT, arg);
		*(c == 't' ? &o->timeout : &o->dead_conn_timeout) = v;
		o->connect_only = true;
		return EXIT_OK;
	case 'C':
		o->disconnect_on_close = true;
		o->connect_only = true;
		return EXIT_OK;
	default:
		return usage_error("Unknown option or missing argument at '%s'.", arg);
	}
}

static int check_opts(const struct opts *o)
{
	if (o->mode == MODE_DETACH &&
	    (o->socket || o->export || o->identifier || o->connections || o->connect_only))
		return usage_error("--detach takes no other option.");
	if (o->mode == MODE_RECONFIGURE && o->connect_only)
		return usage_error("--reconfigure only takes --socket, --export, "
		                   "--connections and --identifier: the kernel keeps the "
		                   "other settings of the device.");
	if (o->mode != MODE_DETACH && !o->socket)
		return usage_error("--socket PATH is required.");
	return EXIT_OK;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
	    {"socket", required_argument, NULL, 's'},
	    {"export", required_argument, NULL, 'e'},
	    {"device", required_argument, NULL, 'd'},
	    {"connections", required_argument, NULL, 'c'},
	    {"block-size", required_argument, NULL, 'b'},
	    {"timeout", required_argument, NULL, 't'},
	    {"dead-conn-timeout", required_argument, NULL, 'T'},
	    {"identifier", required_argument, NULL, 'I'},
	    {"disconnect-on-close", no_argument, NULL, 'C'},
	    {"reconfigure", required_argument, NULL, 'r'},
	    {"detach", required_argument, NULL, 'D'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int c, rc;

	memset(o, 0, sizeof(*o));
	o->index = -1;
	o->block_size = ATTACH_DEFAULT_BLOCK_SIZE;
	o->timeout = ATTACH_DEFAULT_TIMEOUT;
	o->dead_conn_timeout = ATTACH_DEFAULT_DEAD_CONN_TIMEOUT;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":s:e:d:c:b:t:r:D:h", longopts, NULL)) != -1) {
		if (c == 'h') {
			usage(stdout);
			return -1;
		}
		/* getopt leaves optarg alone on errors; name the word it stopped at instead. */
		rc = parse_opt(o, c, (c == '?' || c == ':') ? argv[optind - 1] : optarg);
		if (rc != EXIT_OK)
			return rc;
	}
	if (optind < argc)
		return usage_error("Unexpected argument '%s'.", argv[optind]);
	return check_opts(o);
}

static int fail(const char *msg)
{
	fprintf(stderr, "hak-attach: %s\n", msg);
	return EXIT_ENV;
}

/* Connect and negotiate every socket; all of them must describe the same export. */
static int open_sockets(const struct opts *o, int *fds, size_t *nfds, struct attach_export *exp)
{
	unsigned n = o->connections ? o->connections : 1;
	struct attach_export e;
	char err[512];

	for (unsigned i = 0; i < n; i++) {
		int fd = attach_connect_unix(o->socket, err, sizeof(err));

		if (fd < 0)
			return fail(err);
		fds[(*nfds)++] = fd;
		if (attach_handshake(fd, o->export, i ? &e : exp, err, sizeof(err)) < 0)
			return fail(err);
		if (i > 0 && (e.size != exp->size || e.flags != exp->flags)) {
			fprintf(stderr,
			        "hak-attach: Connection %u negotiated size %" PRIu64
			        " and flags 0x%04x, but the first one negotiated size %" PRIu64
			        " and flags 0x%04x.\n",
			        i + 1, e.size, e.flags, exp->size, exp->flags);
			return EXIT_ENV;
		}
	}
	if (n > 1 && !(exp->flags & NBD_FLAG_CAN_MULTI_CONN)) {
		fprintf(
		    stderr,
		    "hak-attach: The export does not advertise multi-conn (flags 0x%04x), so it "
		    "can only be used with --connections 1.\n",
		    exp->flags);
		return EXIT_ENV;
	}
	return EXIT_OK;
}

/* Read /sys/block/nbdN/ATTR into buf without the trailing newline. */
static int sysfs_read(int index, const char *attr, char *buf, size_t len)
{
	char path[128];
	FILE *f;
	int ret = -1;

	snprintf(path, sizeof(path), "/sys/block/nbd%d/%s", index, attr);
	f = fopen(path, "re");
	if (!f)
		goto out;
	if (!fgets(buf, (int)len, f))
		buf[0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	fclose(f);
	ret = 0;
out:
	return ret;
}

/* Send a built message, or report why it could not be built; consumes msg. */
static int send_msg(struct attach_nl *nl, struct nl_msg *msg, int built, int *index)
{
	char err[512];

	if (built < 0) {
		snprintf(err, sizeof(err), "Cannot build the netlink message: %s.",
		         strerror(errno));
		nlmsg_free(msg);
		return fail(err);
	}
	if (attach_nl_send(nl, msg, index, err, sizeof(err)) < 0)
		return fail(err);
	return EXIT_OK;
}

static int run_connect(const struct opts *o, struct attach_nl *nl, int *fds, size_t *nfds)
{
	struct attach_export exp;
	struct attach_params p;
	struct nl_msg *msg;
	char id[ATTACH_MAX_IDENTIFIER], err[512];
	const char *name;
	int rc, index = -1;

	rc = open_sockets(o, fds, nfds, &exp);
	if (rc != EXIT_OK)
		return rc;
	if (attach_check_export(&exp, o->block_size, err, sizeof(err)) < 0)
		return fail(err);
	/* The server's canonical name beats "" (the default export) in the identifier. */
	name = o->export && o->export[0] ? o->export : exp.name;
	if (!o->identifier && attach_make_identifier(name, id, sizeof(id)) < 0) {
		snprintf(err, sizeof(err), "Cannot make a backend identifier: %s.",
		         strerror(errno));
		return fail(err);
	}
	attach_params_init(&p);
	p.index = o->index;
	p.size = exp.size;
	p.block_size = o->block_size;
	p.server_flags = exp.flags;
	p.timeout = o->timeout;
	p.dead_conn_timeout = o->dead_conn_timeout;
	p.disconnect_on_close = o->disconnect_on_close;
	p.identifier = o->identifier ? o->identifier : id;
	p.fds = fds;
	p.nfds = *nfds;
	msg = nlmsg_alloc();
	if (!msg)
		return fail("Cannot allocate a netlink message: out of memory.");
	rc = send_msg(nl, msg, attach_build_connect(msg, nl->family, &p), &index);
	if (rc != EXIT_OK)
		return rc;
	if (index < 0)
		index = o->index;
	if (index < 0)
		return fail("The kernel accepted NBD_CMD_CONNECT but did not say which device it "
		            "used; see the kernel log.");
	printf("/dev/nbd%d\n", index);
	fprintf(stderr,
	        "hak-attach: /dev/nbd%d serves export '%s' (%" PRIu64 " bytes, %zu connection(s), "
	        "identifier %s).\n",
	        index, name, exp.size, *nfds, p.identifier);
	return EXIT_OK;
}

static int run_reconfigure(const struct opts *o, struct attach_nl *nl, int *fds, size_t *nfds)
{
	struct attach_export exp;
	struct nl_msg *msg;
	char id[ATTACH_MAX_IDENTIFIER] = "", sectors[32] = "", lbs[32] = "", err[512];
	uint64_t bs = ATTACH_DEFAULT_BLOCK_SIZE, dev_sectors;
	int rc;

	if (sysfs_read(o->index, "size", sectors, sizeof(sectors)) < 0) {
		snprintf(err, sizeof(err), "/dev/nbd%d does not exist (%s).", o->index,
		         strerror(errno));
		return fail(err);
	}
	/* Kernels without backend identifiers have no such file; the kernel then needs none. */
	if (!o->identifier)
		sysfs_read(o->index, "backend", id, sizeof(id));
	if (sysfs_read(o->index, "queue/logical_block_size", lbs, sizeof(lbs)) == 0)
		parse_u64(lbs, ATTACH_MAX_BLOCK_SIZE, &bs);
	rc = open_sockets(o, fds, nfds, &exp);
	if (rc != EXIT_OK)
		return rc;
	if (attach_check_export(&exp, bs, err, sizeof(err)) < 0)
		return fail(err);
	/* SERVER_FLAGS and the size are not renegotiated: a different volume must not slip in. */
	if (parse_u64(sectors, UINT64_MAX, &dev_sectors) == 0 && dev_sectors != exp.size / 512) {
		fprintf(stderr,
		        "hak-attach: /dev/nbd%d has %" PRIu64 " sectors but the export has %" PRIu64
		        " bytes; refusing to attach a different volume.\n",
		        o->index, dev_sectors, exp.size);
		return EXIT_ENV;
	}
	msg = nlmsg_alloc();
	if (!msg)
		return fail("Cannot allocate a netlink message: out of memory.");
	rc = send_msg(nl, msg,
	              attach_build_reconfigure(msg, nl->family, o->index, fds, *nfds,
	                                       o->identifier ? o->identifier : (id[0] ? id : NULL)),
	              NULL);
	if (rc != EXIT_OK)
		return rc;
	printf("/dev/nbd%d\n", o->index);
	fprintf(stderr,
	        "hak-attach: /dev/nbd%d was given %zu new socket(s); the kernel only uses them in "
	        "place of connections it has already marked dead.\n",
	        o->index, *nfds);
	return EXIT_OK;
}

static int run_detach(const struct opts *o, struct attach_nl *nl)
{
	struct nl_msg *msg = nlmsg_alloc();
	int rc;

	if (!msg)
		return fail("Cannot allocate a netlink message: out of memory.");
	rc = send_msg(nl, msg, attach_build_disconnect(msg, nl->family, o->index), NULL);
	if (rc == EXIT_OK)
		fprintf(stderr, "hak-attach: /dev/nbd%d is disconnected.\n", o->index);
	return rc;
}

int main(int argc, char **argv)
{
	struct attach_nl nl = {.sk = NULL, .family = -1};
	int fds[ATTACH_MAX_SOCKETS];
	size_t nfds = 0;
	struct opts o;
	char err[512];
	int rc;

	rc = parse_args(argc, argv, &o);
	if (rc != EXIT_OK) {
		rc = rc < 0 ? EXIT_OK : rc;
		goto out;
	}
	/* Before touching hakd: without the nbd family there is nothing to hand sockets to. */
	if (attach_nl_open(&nl, err, sizeof(err)) < 0) {
		rc = fail(err);
		goto out;
	}
	if (o.mode == MODE_CONNECT)
		rc = run_connect(&o, &nl, fds, &nfds);
	else if (o.mode == MODE_RECONFIGURE)
		rc = run_reconfigure(&o, &nl, fds, &nfds);
	else
		rc = run_detach(&o, &nl);
out:
	/* The kernel took its own references to the sockets during the command. */
	for (size_t i = 0; i < nfds; i++)
		close(fds[i]);
	attach_nl_close(&nl);
	return rc;
}
