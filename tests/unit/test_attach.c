/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the kmod-shim library. Netlink messages are built and parsed back with
 * genlmsg_parse(), since CI has no nbd.ko; the handshake runs against a real nbdkit and against a
 * scripted fake server for the paths nbdkit never takes.
 */
#include "attach.h"

#include <check.h>
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FAMILY 0x1234
#define MIB    (UINT64_C(1) << 20)

/* ---- parsing built messages back ------------------------------------------------------- */

struct parsed {
	int type;
	uint8_t cmd;
	uint8_t version;
	struct nlattr *tb[NBD_ATTR_MAX + 1];
	uint32_t fds[ATTACH_MAX_SOCKETS + 1];
	int nfds; /* -1 without NBD_ATTR_SOCKETS */
};

static void parse_sockets(struct nlattr *socks, struct parsed *p)
{
	struct nla_policy pol[NBD_SOCK_MAX + 1];
	struct nlattr *item;
	int rem;

	memset(pol, 0, sizeof(pol));
	pol[NBD_SOCK_FD].type = NLA_U32;
	p->nfds = 0;
	nla_for_each_nested(item, socks, rem)
	{
		struct nlattr *s[NBD_SOCK_MAX + 1];

		ck_assert_int_eq(nla_type(item), NBD_SOCK_ITEM);
		ck_assert_int_eq(nla_parse_nested(s, NBD_SOCK_MAX, item, pol), 0);
		ck_assert_ptr_nonnull(s[NBD_SOCK_FD]);
		ck_assert_int_lt(p->nfds, ATTACH_MAX_SOCKETS + 1);
		p->fds[p->nfds++] = nla_get_u32(s[NBD_SOCK_FD]);
	}
	ck_assert_int_eq(rem, 0);
}

static void parse_msg(struct nl_msg *msg, struct parsed *p)
{
	struct nla_policy pol[NBD_ATTR_MAX + 1];
	struct nlmsghdr *nlh = nlmsg_hdr(msg);
	struct genlmsghdr *g;

	memset(p, 0, sizeof(*p));
	memset(pol, 0, sizeof(pol));
	pol[NBD_ATTR_INDEX].type = NLA_U32;
	pol[NBD_ATTR_SIZE_BYTES].type = NLA_U64;
	pol[NBD_ATTR_BLOCK_SIZE_BYTES].type = NLA_U64;
	pol[NBD_ATTR_TIMEOUT].type = NLA_U64;
	pol[NBD_ATTR_SERVER_FLAGS].type = NLA_U64;
	pol[NBD_ATTR_CLIENT_FLAGS].type = NLA_U64;
	pol[NBD_ATTR_SOCKETS].type = NLA_NESTED;
	pol[NBD_ATTR_DEAD_CONN_TIMEOUT].type = NLA_U64;
	pol[NBD_ATTR_BACKEND_IDENTIFIER].type = NLA_STRING;
	ck_assert(genlmsg_valid_hdr(nlh, 0));
	g = genlmsg_hdr(nlh);
	p->type = nlh->nlmsg_type;
	p->cmd = g->cmd;
	p->version = g->version;
	ck_assert_int_eq(genlmsg_parse(nlh, 0, p->tb, NBD_ATTR_MAX, pol), 0);
	p->nfds = -1;
	if (p->tb[NBD_ATTR_SOCKETS])
		parse_sockets(p->tb[NBD_ATTR_SOCKETS], p);
}

static uint64_t u64_attr(const struct parsed *p, int type)
{
	ck_assert_msg(p->tb[type] != NULL, "attribute %d is missing", type);
	return nla_get_u64(p->tb[type]);
}

static void params_sample(struct attach_params *p, const int *fds, size_t nfds)
{
	attach_params_init(p);
	p->index = 3;
	p->size = 64 * MIB;
	p->server_flags = NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_FUA |
	                  NBD_FLAG_SEND_TRIM | NBD_FLAG_CAN_MULTI_CONN;
	p->identifier = "hak:vol0:0123456789abcdef";
	p->fds = fds;
	p->nfds = nfds;
}

START_TEST(test_params_defaults)
{
	struct attach_params p;

	memset(&p, 0xa5, sizeof(p));
	attach_params_init(&p);
	ck_assert_int_eq(p.index, -1);
	ck_assert_uint_eq(p.block_size, 4096);
	ck_assert_uint_eq(p.timeout, 0);
	ck_assert_uint_eq(p.dead_conn_timeout, 300);
	ck_assert(!p.disconnect_on_close);
	ck_assert_ptr_null(p.identifier);
	ck_assert_ptr_null(p.fds);
	ck_assert_uint_eq(p.nfds, 0);
}
END_TEST

START_TEST(test_connect_all_attributes)
{
	static const int fds[] = {7, 9};
	struct nl_msg *msg = nlmsg_alloc();
	struct attach_params p;
	struct parsed m;

	params_sample(&p, fds, 2);
	p.timeout = 45;
	p.dead_conn_timeout = 600;
	p.block_size = 512;
	p.disconnect_on_close = true;
	ck_assert_int_eq(attach_build_connect(msg, FAMILY, &p), 0);
	parse_msg(msg, &m);
	ck_assert_int_eq(m.type, FAMILY);
	ck_assert_uint_eq(m.cmd, NBD_CMD_CONNECT);
	ck_assert_uint_eq(m.version, NBD_GENL_VERSION);
	ck_assert_ptr_nonnull(m.tb[NBD_ATTR_INDEX]);
	ck_assert_uint_eq(nla_get_u32(m.tb[NBD_ATTR_INDEX]), 3);
	ck_assert_uint_eq(u64_attr(&m, NBD_ATTR_SIZE_BYTES), 64 * MIB);
	ck_assert_uint_eq(u64_attr(&m, NBD_ATTR_BLOCK_SIZE_BYTES), 512);
	ck_assert_uint_eq(u64_attr(&m, NBD_ATTR_SERVER_FLAGS),
	                  NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_FUA |
	                      NBD_FLAG_SEND_TRIM | NBD_FLAG_CAN_MULTI_CONN);
	ck_assert_uint_eq(u64_attr(&m, NBD_ATTR_TIMEOUT), 45);
	ck_assert_uint_eq(u64_attr(&m, NBD_ATTR_DEAD_CONN_TIMEOUT), 600);
	ck_assert_uint_eq(u64_attr(&m, NBD_ATTR_CLIENT_FLAGS), NBD_CFLAG_DISCONNECT_ON_CLOSE);
	ck_assert_ptr_nonnull(m.tb[NBD_ATTR_BACKEND_IDENTIFIER]);
	ck_assert_str_eq(nla_get_string(m.tb[NBD_ATTR_BACKEND_IDENTIFIER]),
	                 "hak:vol0:0123456789abcdef");
	ck_assert_ptr_null(m.tb[NBD_ATTR_DEVICE_LIST]);
	ck_assert_int_eq(m.nfds, 2);
	ck_assert_uint_eq(m.fds[0], 7);
	ck_assert_uint_eq(m.fds[1], 9);
	nlmsg_free(msg);
}
END_TEST

START_TEST(test_connect_defaults_omit_optional)
{
	static const int fds[] = {4};
	struct nl_msg *msg = nlmsg_alloc();
	struct attach_params p;
	struct parsed m;

	attach_params_init(&p);
	p.size = 8 * MIB;
	p.server_flags = NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH;
	p.fds = fds;
	p.nfds = 1;
	ck_assert_int_eq(attach_build_connect(msg, FAMILY, &p), 0);
	parse_msg(msg, &m);
	ck_assert_uint_eq(m.cmd, NBD_CMD_CONNECT);
	/* No index: the kernel picks the device. No identifier: none sent. */
	ck_assert_ptr_null(m.tb[NBD_ATTR_INDEX]);
	ck_assert_ptr_null(m.tb[NBD_ATTR_BACKEND_IDENTIFIER]);
	ck_assert_uint_eq(u64_attr(&m, NBD_ATTR_SIZE_BYTES), 8 * MIB);
	ck_assert_uint_eq(u64_attr(&m, NBD_ATTR_BLOCK_SIZE_BYTES), 4096);
	ck_assert_uint_eq(u64_attr(&m, NBD_ATTR_SERVER_FLAGS),
	                  NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH);
	ck_assert_uint_eq(u64_attr(&m, NBD_ATTR_TIMEOUT), 0);
	ck_assert_uint_eq(u64_attr(&m, NBD_ATTR_DEAD_CONN_TIMEOUT), 300);
	ck_assert_uint_eq(u64_attr(&m, NBD_ATTR_CLIENT_FLAGS), 0);
	ck_assert_int_eq(m.nfds, 1);
	ck_assert_uint_eq(m.fds[0], 4);
	nlmsg_free(msg);
}
END_TEST

/* Each case breaks one parameter of an otherwise valid CONNECT. */
static void break_param(struct attach_params *p, int i, int *fds)
{
	static char longid[ATTACH_MAX_IDENTIFIER + 1];

	switch (i) {
	case 0:
		p->block_size = 0;
		break;
	case 1:
		p->block_size = 1000;
		break;
	case 2:
		p->block_size = 8192;
		break;
	case 3:
		p->block_size = 256;
		break;
	case 4:
		p->size = 0;
		break;
	case 5:
		p->size = 64 * MIB + 512;
		break;
	case 6:
		p->size = UINT64_MAX - 4095;
		break;
	case 7:
		p->server_flags = 0x10000 | NBD_FLAG_CAN_MULTI_CONN;
		break;
	case 8:
		p->nfds = 0;
		break;
	case 9:
		p->fds = NULL;
		break;
	case 10:
		fds[1] = -1;
		break;
	case 11:
		p->server_flags &= ~(uint64_t)NBD_FLAG_CAN_MULTI_CONN;
		break;
	case 12:
		p->index = -2;
		break;
	case 13:
		p->identifier = "";
		break;
	case 14:
		p->identifier = "hak:vol 0";
		break;
	case 15:
		memset(longid, 'x', ATTACH_MAX_IDENTIFIER);
		longid[ATTACH_MAX_IDENTIFIER] = '\0';
		p->identifier = longid;
		break;
	case 16:
		p->timeout = ATTACH_MAX_TIMEOUT + 1;
		break;
	case 17:
		p->dead_conn_timeout = ATTACH_MAX_TIMEOUT + 1;
		break;
	case 18:
		p->nfds = ATTACH_MAX_SOCKETS + 1;
		break;
	}
}

START_TEST(test_connect_rejects_bad_params)
{
	int fds[ATTACH_MAX_SOCKETS + 1];
	struct nl_msg *msg = nlmsg_alloc();
	struct attach_params p;

	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		fds[i] = 10 + (int)i;
	params_sample(&p, fds, 2);
	break_param(&p, _i, fds);
	errno = 0;
	ck_assert_int_eq(attach_build_connect(msg, FAMILY, &p), -1);
	ck_assert_int_eq(errno, EINVAL);
	/* Rejected before anything was written into the message. */
	ck_assert_uint_eq(nlmsg_hdr(msg)->nlmsg_len, NLMSG_HDRLEN);
	nlmsg_free(msg);
}
END_TEST

START_TEST(test_connect_rejects_bad_family)
{
	static const int fds[] = {5};
	struct nl_msg *msg = nlmsg_alloc();
	struct attach_params p;

	params_sample(&p, fds, 1);
	ck_assert_int_eq(attach_build_connect(msg, 0, &p), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(attach_build_connect(msg, 0x10000, &p), -1);
	ck_assert_int_eq(errno, EINVAL);
	/* The same parameters are fine with a real family id, so only the family was wrong. */
	ck_assert_int_eq(attach_build_connect(msg, FAMILY, &p), 0);
	nlmsg_free(msg);
}
END_TEST

START_TEST(test_connect_message_too_small)
{
	static const int fds[] = {5};
	struct nl_msg *msg = nlmsg_alloc_size(64);
	struct attach_params p;

	params_sample(&p, fds, 1);
	errno = 0;
	ck_assert_int_eq(attach_build_connect(msg, FAMILY, &p), -1);
	ck_assert_int_eq(errno, EMSGSIZE);
	nlmsg_free(msg);
}
END_TEST

START_TEST(test_reconfigure_message)
{
	static const int fds[] = {11, 12, 13};
	struct nl_msg *msg = nlmsg_alloc();
	struct parsed m;

	ck_assert_int_eq(
	    attach_build_reconfigure(msg, FAMILY, 5, fds, 3, "hak:db:00ff00ff00ff00ff"), 0);
	parse_msg(msg, &m);
	ck_assert_int_eq(m.type, FAMILY);
	ck_assert_uint_eq(m.cmd, NBD_CMD_RECONFIGURE);
	ck_assert_uint_eq(m.version, NBD_GENL_VERSION);
	ck_assert_ptr_nonnull(m.tb[NBD_ATTR_INDEX]);
	ck_assert_uint_eq(nla_get_u32(m.tb[NBD_ATTR_INDEX]), 5);
	ck_assert_ptr_nonnull(m.tb[NBD_ATTR_BACKEND_IDENTIFIER]);
	ck_assert_str_eq(nla_get_string(m.tb[NBD_ATTR_BACKEND_IDENTIFIER]),
	                 "hak:db:00ff00ff00ff00ff");
	ck_assert_int_eq(m.nfds, 3);
	ck_assert_uint_eq(m.fds[0], 11);
	ck_assert_uint_eq(m.fds[1], 12);
	ck_assert_uint_eq(m.fds[2], 13);
	/* The kernel would change these on RECONFIGURE: they must not be sent by accident. */
	ck_assert_ptr_null(m.tb[NBD_ATTR_SIZE_BYTES]);
	ck_assert_ptr_null(m.tb[NBD_ATTR_BLOCK_SIZE_BYTES]);
	ck_assert_ptr_null(m.tb[NBD_ATTR_TIMEOUT]);
	ck_assert_ptr_null(m.tb[NBD_ATTR_CLIENT_FLAGS]);
	nlmsg_free(msg);
}
END_TEST

START_TEST(test_reconfigure_without_identifier)
{
	static const int fds[] = {8};
	struct nl_msg *msg = nlmsg_alloc();
	struct parsed m;

	ck_assert_int_eq(attach_build_reconfigure(msg, FAMILY, 0, fds, 1, NULL), 0);
	parse_msg(msg, &m);
	ck_assert_uint_eq(m.cmd, NBD_CMD_RECONFIGURE);
	ck_assert_uint_eq(nla_get_u32(m.tb[NBD_ATTR_INDEX]), 0);
	ck_assert_ptr_null(m.tb[NBD_ATTR_BACKEND_IDENTIFIER]);
	ck_assert_int_eq(m.nfds, 1);
	ck_assert_uint_eq(m.fds[0], 8);
	nlmsg_free(msg);
}
END_TEST

START_TEST(test_reconfigure_rejects_bad_params)
{
	static const int fds[] = {8, -1};
	struct nl_msg *msg = nlmsg_alloc();

	ck_assert_int_eq(attach_build_reconfigure(msg, FAMILY, -1, fds, 1, NULL), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(attach_build_reconfigure(msg, FAMILY, 0, fds, 0, NULL), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(attach_build_reconfigure(msg, FAMILY, 0, fds, 2, NULL), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(attach_build_reconfigure(msg, FAMILY, 0, fds, 1, "a b"), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(attach_build_reconfigure(msg, 0, 0, fds, 1, NULL), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_uint_eq(nlmsg_hdr(msg)->nlmsg_len, NLMSG_HDRLEN);
	nlmsg_free(msg);
}
END_TEST

START_TEST(test_disconnect_message)
{
	struct nl_msg *msg = nlmsg_alloc();
	struct parsed m;
	int n = 0;

	ck_assert_int_eq(attach_build_disconnect(msg, FAMILY, 2), 0);
	parse_msg(msg, &m);
	ck_assert_int_eq(m.type, FAMILY);
	ck_assert_uint_eq(m.cmd, NBD_CMD_DISCONNECT);
	ck_assert_uint_eq(nla_get_u32(m.tb[NBD_ATTR_INDEX]), 2);
	for (int i = 0; i <= NBD_ATTR_MAX; i++)
		n += m.tb[i] != NULL;
	ck_assert_int_eq(n, 1);
	nlmsg_free(msg);

	msg = nlmsg_alloc();
	ck_assert_int_eq(attach_build_disconnect(msg, FAMILY, -1), -1);
	ck_assert_int_eq(errno, EINVAL);
	nlmsg_free(msg);
}
END_TEST

START_TEST(test_parse_reply)
{
	struct nl_msg *msg = nlmsg_alloc();
	int index = -1;

	ck_assert_ptr_nonnull(genlmsg_put(msg, NL_AUTO_PORT, NL_AUTO_SEQ, FAMILY, 0, 0,
	                                  NBD_CMD_CONNECT, NBD_GENL_VERSION));
	ck_assert_int_eq(nla_put_u32(msg, NBD_ATTR_INDEX, 7), 0);
	ck_assert_int_eq(attach_parse_reply(msg, &index), 0);
	ck_assert_int_eq(index, 7);
	nlmsg_free(msg);

	msg = nlmsg_alloc();
	ck_assert_ptr_nonnull(genlmsg_put(msg, NL_AUTO_PORT, NL_AUTO_SEQ, FAMILY, 0, 0,
	                                  NBD_CMD_CONNECT, NBD_GENL_VERSION));
	ck_assert_int_eq(nla_put_u64(msg, NBD_ATTR_SIZE_BYTES, 4096), 0);
	index = 99;
	ck_assert_int_eq(attach_parse_reply(msg, &index), -1);
	ck_assert_int_eq(errno, EPROTO);
	ck_assert_int_eq(index, 99);
	nlmsg_free(msg);
}
END_TEST

START_TEST(test_parse_device)
{
	static const char *const bad[] = {"/dev/sda",   "/dev/nbd",
	                                  "nbd",        "/dev/nbd1p1",
	                                  "/dev/nbd-1", "/dev/nbd 1",
	                                  "3",          "/dev/nbd99999999999",
	                                  "/sys/nbd0",  ""};
	int index = -1;

	ck_assert_int_eq(attach_parse_device("/dev/nbd0", &index), 0);
	ck_assert_int_eq(index, 0);
	ck_assert_int_eq(attach_parse_device("/dev/nbd15", &index), 0);
	ck_assert_int_eq(index, 15);
	ck_assert_int_eq(attach_parse_device("nbd3", &index), 0);
	ck_assert_int_eq(index, 3);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		index = -7;
		errno = 0;
		ck_assert_msg(attach_parse_device(bad[i], &index) == -1, "'%s' was accepted",
		              bad[i]);
		ck_assert_int_eq(errno, EINVAL);
		ck_assert_int_eq(index, -7);
	}
}
END_TEST

static void assert_identifier(const char *id, const char *prefix)
{
	size_t n = strlen(prefix);

	ck_assert_msg(strncmp(id, prefix, n) == 0, "'%s' does not start with '%s'", id, prefix);
	ck_assert_uint_eq(strlen(id), n + 16);
	for (size_t i = n; i < n + 16; i++)
		ck_assert_msg(strchr("0123456789abcdef", id[i]) != NULL, "'%s' has no hex cookie",
		              id);
}

START_TEST(test_make_identifier)
{
	char a[ATTACH_MAX_IDENTIFIER], b[ATTACH_MAX_IDENTIFIER], small[12];

	ck_assert_int_eq(attach_make_identifier("vol0", a, sizeof(a)), 0);
	ck_assert_int_eq(attach_make_identifier("vol0", b, sizeof(b)), 0);
	assert_identifier(a, "hak:vol0:");
	assert_identifier(b, "hak:vol0:");
	ck_assert_str_ne(a, b);
	ck_assert_int_eq(attach_make_identifier("pg/data:1 x", a, sizeof(a)), 0);
	assert_identifier(a, "hak:pg_data_1_x:");
	ck_assert_int_eq(attach_make_identifier("", a, sizeof(a)), 0);
	assert_identifier(a, "hak:default:");
	ck_assert_int_eq(attach_make_identifier(NULL, a, sizeof(a)), 0);
	assert_identifier(a, "hak:default:");
	errno = 0;
	ck_assert_int_eq(attach_make_identifier("vol0", small, sizeof(small)), -1);
	ck_assert_int_eq(errno, ERANGE);
}
END_TEST

START_TEST(test_check_export)
{
	struct attach_export e = {.size = 64 * MIB, .flags = NBD_FLAG_HAS_FLAGS};
	char err[256] = "";

	ck_assert_int_eq(attach_check_export(&e, 4096, err, sizeof(err)), 0);
	ck_assert_int_eq(attach_check_export(&e, 3000, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "3000"));
	e.size = 64 * MIB + 512;
	ck_assert_int_eq(attach_check_export(&e, 4096, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "67109376"));
	ck_assert_int_eq(attach_check_export(&e, 512, err, sizeof(err)), 0);
	e.size = 0;
	ck_assert_int_eq(attach_check_export(&e, 512, err, sizeof(err)), -1);
	e.size = 64 * MIB;
	e.has_block_size = true;
	e.min_block = 512;
	e.pref_block = 4096;
	e.max_block = 32 * MIB;
	ck_assert_int_eq(attach_check_export(&e, 4096, err, sizeof(err)), 0);
	e.min_block = 8192;
	ck_assert_int_eq(attach_check_export(&e, 4096, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "8192"));
	e.min_block = 512;
	e.max_block = 1 * MIB;
	ck_assert_int_eq(attach_check_export(&e, 4096, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "1048576"));
}
END_TEST

/* ---- handshake against nbdkit ---------------------------------------------------------- */

/* nbdkit -s serves its stdin/stdout, so one end of a socketpair becomes both. */
static pid_t nbdkit_stdio(int *fd)
{
	int sv[2];
	pid_t pid;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (dup2(sv[1], 0) < 0 || dup2(sv[1], 1) < 0)
			_exit(126);
		execlp("nbdkit", "nbdkit", "-s", "--exit-with-parent", "memory", "64M",
		       (char *)NULL);
		_exit(127);
	}
	close(sv[1]);
	*fd = sv[0];
	return pid;
}

static void reap(pid_t pid)
{
	int status;

	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
}

START_TEST(test_handshake_nbdkit)
{
	struct attach_export e;
	char err[512] = "";
	int fd;
	pid_t pid = nbdkit_stdio(&fd);

	ck_assert_msg(attach_handshake(fd, "", &e, err, sizeof(err)) == 0, "handshake: %s", err);
	ck_assert_uint_eq(e.size, 64 * MIB);
	ck_assert_uint_eq(e.flags & (NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH),
	                  NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH);
	ck_assert_uint_eq(e.flags & NBD_FLAG_READ_ONLY, 0);
	ck_assert_int_eq(attach_check_export(&e, 4096, err, sizeof(err)), 0);
	close(fd);
	reap(pid);
}
END_TEST

START_TEST(test_handshake_nbdkit_named_export)
{
	struct attach_export e;
	char err[512] = "";
	int fd;
	pid_t pid = nbdkit_stdio(&fd);

	ck_assert_msg(attach_handshake(fd, "volume-a", &e, err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_eq(e.size, 64 * MIB);
	/* nbdkit answers NBD_INFO_NAME with the name the client asked for. */
	ck_assert_str_eq(e.name, "volume-a");
	close(fd);
	reap(pid);
}
END_TEST

/* nbdkit on a UNIX socket path, the way hakd is reached in production. */
START_TEST(test_handshake_nbdkit_unix_multi)
{
	char dir[] = "/tmp/hak-attach-test.XXXXXX", path[128], err[512] = "";
	struct attach_export e1, e2;
	int fd1 = -1, fd2;
	pid_t pid;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/nbd.sock", dir);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		execlp("nbdkit", "nbdkit", "-f", "--exit-with-parent", "-U", path, "memory", "64M",
		       (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 1000 && fd1 < 0; i++) {
		fd1 = attach_connect_unix(path, err, sizeof(err));
		if (fd1 < 0)
			usleep(10000);
	}
	ck_assert_msg(fd1 >= 0, "nbdkit did not come up: %s", err);
	fd2 = attach_connect_unix(path, err, sizeof(err));
	ck_assert_msg(fd2 >= 0, "%s", err);
	ck_assert_msg(attach_handshake(fd1, "", &e1, err, sizeof(err)) == 0, "%s", err);
	ck_assert_msg(attach_handshake(fd2, "", &e2, err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_eq(e1.size, 64 * MIB);
	ck_assert_uint_eq(e2.size, e1.size);
	ck_assert_uint_eq(e2.flags, e1.flags);
	/* The memory plugin is safe for several connections, so two sockets may be bound. */
	ck_assert_uint_ne(e1.flags & NBD_FLAG_CAN_MULTI_CONN, 0);
	close(fd1);
	close(fd2);
	kill(pid, SIGTERM);
	reap(pid);
	unlink(path);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

START_TEST(test_connect_unix_errors)
{
	char err[256] = "", longpath[200];

	errno = 0;
	ck_assert_int_eq(attach_connect_unix("/nonexistent/hakd.sock", err, sizeof(err)), -1);
	ck_assert_int_eq(errno, ENOENT);
	ck_assert_ptr_nonnull(strstr(err, "/nonexistent/hakd.sock"));
	memset(longpath, 'a', sizeof(longpath) - 1);
	longpath[sizeof(longpath) - 1] = '\0';
	ck_assert_int_eq(attach_connect_unix(longpath, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, ENAMETOOLONG);
}
END_TEST

/* ---- handshake against a scripted fake server ------------------------------------------ */

enum fake_mode {
	FAKE_ERR_UNKNOWN,   /* GO -> NBD_REP_ERR_UNKNOWN with a message */
	FAKE_OK,            /* GO -> INFO NAME, INFO EXPORT, INFO BLOCK_SIZE, ACK */
	FAKE_UNSUP_GO,      /* GO -> ERR_UNSUP, then EXPORT_NAME succeeds */
	FAKE_ACK_NO_EXPORT, /* GO -> ACK without INFO_EXPORT */
	FAKE_NOT_NBD,       /* a greeting that is not NBD */
	FAKE_NO_FIXED,      /* newstyle without the FIXED_NEWSTYLE flag */
	FAKE_BAD_BLOCK,     /* INFO BLOCK_SIZE with a minimum that is not a power of two */
};

#define FAKE_ERR_TEXT "export 'nope' is not configured on this server"

struct fake {
	int fd;
	enum fake_mode mode;
	uint32_t cflags;
	uint32_t opts[8];
	int nopts;
	char name[256];
	uint16_t infos[8];
	int ninfos;
};

static int rd(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len > 0) {
		ssize_t r = read(fd, p, len);

		if (r <= 0)
			return -1;
		p += r;
		len -= (size_t)r;
	}
	return 0;
}

/* Failures are ignored: the client under test hangs up early on purpose in some cases. */
static void wr(int fd, const void *buf, size_t len)
{
	(void)!send(fd, buf, len, MSG_NOSIGNAL);
}

static void wr64(int fd, uint64_t v)
{
	v = htobe64(v);
	wr(fd, &v, 8);
}

static void wr32(int fd, uint32_t v)
{
	v = htobe32(v);
	wr(fd, &v, 4);
}

static void wr16(int fd, uint16_t v)
{
	v = htobe16(v);
	wr(fd, &v, 2);
}

static void fake_reply(int fd, uint32_t opt, uint32_t type, uint32_t len)
{
	wr64(fd, NBD_MAGIC_OPT_REPLY);
	wr32(fd, opt);
	wr32(fd, type);
	wr32(fd, len);
}

static void fake_go_data(struct fake *f, const uint8_t *d, uint32_t len)
{
	uint32_t namelen, n;

	ck_assert_uint_ge(len, 6);
	memcpy(&namelen, d, 4);
	namelen = be32toh(namelen);
	ck_assert_uint_le(namelen + 6, len);
	ck_assert_uint_lt(namelen, sizeof(f->name));
	memcpy(f->name, d + 4, namelen);
	f->name[namelen] = '\0';
	n = (uint32_t)(d[4 + namelen] << 8 | d[5 + namelen]);
	ck_assert_uint_eq(len, namelen + 6 + 2 * n);
	for (uint32_t i = 0; i < n && i < 8; i++)
		f->infos[f->ninfos++] =
		    (uint16_t)(d[6 + namelen + 2 * i] << 8 | d[7 + namelen + 2 * i]);
}

/* Answer NBD_OPT_GO the way the mode says; returns true when the handshake is over. */
static bool fake_answer_go(struct fake *f)
{
	int fd = f->fd;

	switch (f->mode) {
	case FAKE_ERR_UNKNOWN:
		/* Servers often end their text with a full stop and a newline. */
		fake_reply(fd, NBD_OPT_GO, NBD_REP_ERR_UNKNOWN, sizeof(FAKE_ERR_TEXT ".\n") - 1);
		wr(fd, FAKE_ERR_TEXT ".\n", sizeof(FAKE_ERR_TEXT ".\n") - 1);
		return false;
	case FAKE_UNSUP_GO:
		fake_reply(fd, NBD_OPT_GO, NBD_REP_ERR_UNSUP, 0);
		return false;
	case FAKE_ACK_NO_EXPORT:
		fake_reply(fd, NBD_OPT_GO, NBD_REP_ACK, 0);
		return true;
	default:
		break;
	}
	fake_reply(fd, NBD_OPT_GO, NBD_REP_INFO, 2 + 10);
	wr16(fd, NBD_INFO_NAME);
	wr(fd, "volume-b!\a", 10);
	fake_reply(fd, NBD_OPT_GO, NBD_REP_INFO, 12);
	wr16(fd, NBD_INFO_EXPORT);
	wr64(fd, 3 * MIB);
	wr16(fd, NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_FUA);
	fake_reply(fd, NBD_OPT_GO, NBD_REP_INFO, 14);
	wr16(fd, NBD_INFO_BLOCK_SIZE);
	wr32(fd, f->mode == FAKE_BAD_BLOCK ? 3 : 512);
	wr32(fd, 4096);
	wr32(fd, 32 * MIB);
	fake_reply(fd, NBD_OPT_GO, NBD_REP_ACK, 0);
	return true;
}

static void *fake_run(void *arg)
{
	struct fake *f = arg;
	uint8_t hdr[16], data[1024];
	uint32_t cflags, opt, len;

	wr64(f->fd, f->mode == FAKE_NOT_NBD ? UINT64_C(0x485454502f312e31) : NBD_MAGIC_INIT);
	wr64(f->fd, NBD_MAGIC_OPTS);
	wr16(f->fd, f->mode == FAKE_NO_FIXED ? 0 : NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES);
	if (rd(f->fd, &cflags, 4) < 0)
		goto out;
	f->cflags = be32toh(cflags);
	while (f->nopts < 8 && rd(f->fd, hdr, 16) == 0) {
		memcpy(&opt, hdr + 8, 4);
		memcpy(&len, hdr + 12, 4);
		opt = be32toh(opt);
		len = be32toh(len);
		f->opts[f->nopts++] = opt;
		ck_assert_uint_le(len, sizeof(data));
		if (rd(f->fd, data, len) < 0 || opt == NBD_OPT_ABORT)
			break;
		if (opt == NBD_OPT_EXPORT_NAME) {
			memcpy(f->name, data, len);
			f->name[len] = '\0';
			wr64(f->fd, 2 * MIB);
			wr16(f->fd, NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH);
			break;
		}
		ck_assert_uint_eq(opt, NBD_OPT_GO);
		fake_go_data(f, data, len);
		if (fake_answer_go(f))
			break;
	}
out:
	/* Wait for the client to hang up so every byte it sent is recorded. */
	while (rd(f->fd, data, 1) == 0)
		;
	close(f->fd);
	return NULL;
}

static int fake_handshake(struct fake *f, enum fake_mode mode, const char *export,
                          struct attach_export *e, char *err, size_t errlen)
{
	pthread_t th;
	int sv[2], r;

	memset(f, 0, sizeof(*f));
	f->mode = mode;
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	f->fd = sv[1];
	ck_assert_int_eq(pthread_create(&th, NULL, fake_run, f), 0);
	r = attach_handshake(sv[0], export, e, err, errlen);
	close(sv[0]);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	return r;
}

START_TEST(test_handshake_unknown_export)
{
	struct attach_export e;
	struct fake f;
	char err[512] = "";

	errno = 0;
	ck_assert_int_eq(fake_handshake(&f, FAKE_ERR_UNKNOWN, "nope", &e, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, ENOENT);
	ck_assert_msg(strlen(err) > sizeof(FAKE_ERR_TEXT) &&
	                  strcmp(err + strlen(err) - sizeof(FAKE_ERR_TEXT), FAKE_ERR_TEXT ".") == 0,
	              "server text missing or badly ended: %s", err);
	ck_assert_msg(strstr(err, "NBD_REP_ERR_UNKNOWN") != NULL, "reply name missing: %s", err);
	ck_assert_msg(strstr(err, "'nope'") != NULL, "export name missing: %s", err);
	ck_assert_str_eq(f.name, "nope");
	/* GO, then a polite NBD_OPT_ABORT; never NBD_OPT_STRUCTURED_REPLY. */
	ck_assert_int_eq(f.nopts, 2);
	ck_assert_uint_eq(f.opts[0], NBD_OPT_GO);
	ck_assert_uint_eq(f.opts[1], NBD_OPT_ABORT);
}
END_TEST

START_TEST(test_handshake_fake_ok)
{
	struct attach_export e;
	struct fake f;
	char err[512] = "";

	ck_assert_msg(fake_handshake(&f, FAKE_OK, "volume-b", &e, err, sizeof(err)) == 0, "%s",
	              err);
	ck_assert_uint_eq(f.cflags, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);
	ck_assert_int_eq(f.nopts, 1);
	ck_assert_uint_eq(f.opts[0], NBD_OPT_GO);
	ck_assert_str_eq(f.name, "volume-b");
	ck_assert_int_eq(f.ninfos, 2);
	ck_assert_uint_eq(f.infos[0], NBD_INFO_BLOCK_SIZE);
	ck_assert_uint_eq(f.infos[1], NBD_INFO_NAME);
	/* The fake's name ends in '!' and a control byte, which must not reach a terminal. */
	ck_assert_str_eq(e.name, "volume-b!?");
	ck_assert_uint_eq(e.size, 3 * MIB);
	ck_assert_uint_eq(e.flags, NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_FUA);
	ck_assert(e.has_block_size);
	ck_assert_uint_eq(e.min_block, 512);
	ck_assert_uint_eq(e.pref_block, 4096);
	ck_assert_uint_eq(e.max_block, 32 * MIB);
}
END_TEST

START_TEST(test_handshake_export_name_fallback)
{
	struct attach_export e;
	struct fake f;
	char err[512] = "";

	ck_assert_msg(fake_handshake(&f, FAKE_UNSUP_GO, "old", &e, err, sizeof(err)) == 0, "%s",
	              err);
	ck_assert_int_eq(f.nopts, 2);
	ck_assert_uint_eq(f.opts[0], NBD_OPT_GO);
	ck_assert_uint_eq(f.opts[1], NBD_OPT_EXPORT_NAME);
	ck_assert_str_eq(f.name, "old");
	ck_assert_uint_eq(e.size, 2 * MIB);
	ck_assert_uint_eq(e.flags, NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH);
	ck_assert(!e.has_block_size);
}
END_TEST

START_TEST(test_handshake_protocol_errors)
{
	static const struct {
		enum fake_mode mode;
		const char *needle;
	} cases[] = {
	    {FAKE_ACK_NO_EXPORT, "NBD_INFO_EXPORT"},
	    {FAKE_NOT_NBD, "not an NBD server"},
	    {FAKE_NO_FIXED, "fixed newstyle"},
	    {FAKE_BAD_BLOCK, "block sizes"},
	};
	struct attach_export e;
	struct fake f;
	char err[512];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		err[0] = '\0';
		errno = 0;
		ck_assert_int_eq(fake_handshake(&f, cases[i].mode, "x", &e, err, sizeof(err)), -1);
		ck_assert_int_eq(errno, EPROTO);
		ck_assert_msg(strstr(err, cases[i].needle) != NULL, "case %zu: '%s'", i, err);
	}
}
END_TEST

START_TEST(test_handshake_server_hangs_up)
{
	struct attach_export e;
	char err[256] = "";
	int sv[2];

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	wr64(sv[1], NBD_MAGIC_INIT);
	close(sv[1]);
	ck_assert_int_eq(attach_handshake(sv[0], "", &e, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, ECONNRESET);
	ck_assert_ptr_nonnull(strstr(err, "closed the connection"));
	close(sv[0]);
}
END_TEST

/* ---- the kernel side, as far as this host allows ---------------------------------------- */

START_TEST(test_nl_open)
{
	struct attach_nl nl;
	char err[512] = "";

	if (attach_nl_open(&nl, err, sizeof(err)) == 0) {
		ck_assert_int_gt(nl.family, 0);
		ck_assert_ptr_nonnull(nl.sk);
		attach_nl_close(&nl);
		ck_assert_ptr_null(nl.sk);
		return;
	}
	/* CI: no nbd.ko. The failure must be explained and leave nothing open. */
	ck_assert_ptr_null(nl.sk);
	ck_assert_int_eq(nl.family, -1);
	if (errno == ENOENT)
		ck_assert_msg(strstr(err, "modprobe nbd") != NULL && strstr(err, "nbdfuse"),
		              "unhelpful error: %s", err);
	else
		ck_assert_msg(err[0] != '\0', "no message for errno %d", errno);
}
END_TEST

static Suite *attach_suite(void)
{
	Suite *s = suite_create("attach");
	TCase *msg = tcase_create("messages");
	TCase *hs = tcase_create("handshake");
	TCase *nl = tcase_create("netlink");

	tcase_add_test(msg, test_params_defaults);
	tcase_add_test(msg, test_connect_all_attributes);
	tcase_add_test(msg, test_connect_defaults_omit_optional);
	tcase_add_loop_test(msg, test_connect_rejects_bad_params, 0, 19);
	tcase_add_test(msg, test_connect_rejects_bad_family);
	tcase_add_test(msg, test_connect_message_too_small);
	tcase_add_test(msg, test_reconfigure_message);
	tcase_add_test(msg, test_reconfigure_without_identifier);
	tcase_add_test(msg, test_reconfigure_rejects_bad_params);
	tcase_add_test(msg, test_disconnect_message);
	tcase_add_test(msg, test_parse_reply);
	tcase_add_test(msg, test_parse_device);
	tcase_add_test(msg, test_make_identifier);
	tcase_add_test(msg, test_check_export);
	suite_add_tcase(s, msg);

	tcase_set_timeout(hs, 30);
	tcase_add_test(hs, test_handshake_nbdkit);
	tcase_add_test(hs, test_handshake_nbdkit_named_export);
	tcase_add_test(hs, test_handshake_nbdkit_unix_multi);
	tcase_add_test(hs, test_connect_unix_errors);
	tcase_add_test(hs, test_handshake_unknown_export);
	tcase_add_test(hs, test_handshake_fake_ok);
	tcase_add_test(hs, test_handshake_export_name_fallback);
	tcase_add_test(hs, test_handshake_protocol_errors);
	tcase_add_test(hs, test_handshake_server_hangs_up);
	suite_add_tcase(s, hs);

	tcase_add_test(nl, test_nl_open);
	suite_add_tcase(s, nl);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(attach_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed != 0;
}
