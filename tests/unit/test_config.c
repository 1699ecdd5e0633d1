/* SPDX-License-Identifier: MIT */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"

/* The head of a valid volume: lines 1-3; a test adds from line 4 (key at column 2). */
#define VOL "volume v {\n\tbacking /b\n\tnbd-socket /s\n"

static int parse(const char *text, struct hak_config **cfg, char *err, size_t errlen)
{
	return config_parse(text, strlen(text), "t.conf", cfg, err, errlen);
}

/* Parses text that must be valid; the test fails with the parser's message otherwise. */
static struct hak_config *parse_ok(const char *text)
{
	struct hak_config *cfg = NULL;
	char err[512] = "";

	ck_assert_msg(parse(text, &cfg, err, sizeof(err)) == 0, "unexpected error: %s", err);
	ck_assert_ptr_nonnull(cfg);
	return cfg;
}

START_TEST(test_example_file)
{
	struct hak_config *cfg = NULL;
	char err[512] = "";
	const struct hak_volume_cfg *v;

	ck_assert_msg(config_load("etc/hak.conf", &cfg, err, sizeof(err)) == 0,
	              "etc/hak.conf must parse cleanly: %s", err);
	ck_assert_str_eq(cfg->file, "etc/hak.conf");
	ck_assert_str_eq(cfg->control_socket, "/run/hak/hakd.sock");
	ck_assert_int_eq(cfg->log_level, LOG_LVL_INFO);
	ck_assert_int_eq(cfg->io_engine, IO_KIND_AUTO);
	ck_assert_uint_eq(cfg->io_depth, 256);
	ck_assert_uint_eq(cfg->max_clients, 64);
	ck_assert_uint_eq(cfg->n_volumes, 1);
	v = config_find_volume(cfg, "db");
	ck_assert_ptr_nonnull(v);
	ck_assert_str_eq(v->backing, "/var/lib/hak/db.img");
	ck_assert_str_eq(v->nbd_socket, "/run/hak/db.nbd");
	ck_assert_ptr_null(v->nbd_listen);
	ck_assert_str_eq(v->description, "Database volume");
	ck_assert_int_eq(v->read_only, 0);
	ck_assert_int_eq(v->direct_io, 0);
	ck_assert_uint_eq(v->block_size_min, 0);
	ck_assert_uint_eq(v->max_payload, 32u << 20);
	config_free(cfg);
}
END_TEST

/* Every key set to a value other than its default, so a key stored in the wrong field shows. */
START_TEST(test_all_keys)
{
	const char *text = "# comment line\n"
	                   "global {\n"
	                   "  control-socket /tmp/ctl.sock   # trailing comment\n"
	                   "  log-level debug\n"
	                   "  io-engine pool\n"
	                   "  io-depth 4096\n"
	                   "  max-clients 1\n"
	                   "}\n"
	                   "\n"
	                   "volume web.1_a-b {\n"
	                   "\tbacking \"/srv/disk with space.img\"\n"
	                   "\tnbd-socket /run/w.nbd\n"
	                   "\tnbd-listen [::1]:10809\n"
	                   "\tdescription \"say \\\"hi\\\" \\\\ bye\"\n"
	                   "\tread-only yes\n"
	                   "\tdirect-io on\n"
	                   "\tblock-size-min 4K\n"
	                   "\tmax-payload 64M\n"
	                   "}\n"
	                   "volume v2 {\n"
	                   "\tbacking /dev/sdb\n"
	                   "\tnbd-socket /run/v2.nbd\n"
	                   "\tnbd-listen 192.168.1.10:1\n"
	                   "\tread-only FALSE\n"
	                   "\tdirect-io true\n"
	                   "\tblock-size-min 1\n"
	                   "\tmax-payload 65536\n"
	                   "}\n";
	struct hak_config *cfg = parse_ok(text);
	const struct hak_volume_cfg *a, *b;

	ck_assert_str_eq(cfg->file, "t.conf");
	ck_assert_str_eq(cfg->control_socket, "/tmp/ctl.sock");
	ck_assert_int_eq(cfg->log_level, LOG_LVL_DEBUG);
	ck_assert_int_eq(cfg->io_engine, IO_KIND_POOL);
	ck_assert_uint_eq(cfg->io_depth, 4096);
	ck_assert_uint_eq(cfg->max_clients, 1);
	ck_assert_uint_eq(cfg->n_volumes, 2);
	a = &cfg->volumes[0];
	ck_assert_str_eq(a->name, "web.1_a-b");
	ck_assert_uint_eq(a->line, 10);
	ck_assert_str_eq(a->backing, "/srv/disk with space.img");
	ck_assert_str_eq(a->nbd_socket, "/run/w.nbd");
	ck_assert_str_eq(a->nbd_listen, "[::1]:10809");
	ck_assert_str_eq(a->description, "say \"hi\" \\ bye");
	ck_assert_int_eq(a->read_only, 1);
	ck_assert_int_eq(a->direct_io, 1);
	ck_assert_uint_eq(a->block_size_min, 4096);
	ck_assert_uint_eq(a->max_payload, 64u << 20);
	b = config_find_volume(cfg, "v2");
	ck_assert_ptr_eq(b, &cfg->volumes[1]);
	ck_assert_uint_eq(b->line, 20);
	ck_assert_str_eq(b->nbd_listen, "192.168.1.10:1");
	ck_assert_ptr_null(b->description);
	ck_assert_int_eq(b->read_only, 0);
	ck_assert_int_eq(b->direct_io, 1);
	ck_assert_uint_eq(b->block_size_min, 1);
	ck_assert_uint_eq(b->max_payload, 65536);
	config_free(cfg);
}
END_TEST

START_TEST(test_defaults)
{
	struct hak_config *cfg = parse_ok(VOL "}\n");
	const struct hak_volume_cfg *v = &cfg->volumes[0];

	ck_assert_str_eq(cfg->control_socket, HAK_DEFAULT_CONTROL_SOCKET);
	ck_assert_int_eq(cfg->log_level, LOG_LVL_INFO);
	ck_assert_int_eq(cfg->io_engine, IO_KIND_AUTO);
	ck_assert_uint_eq(cfg->io_depth, HAK_DEFAULT_IO_DEPTH);
	ck_assert_uint_eq(cfg->max_clients, HAK_DEFAULT_MAX_CLIENTS);
	ck_assert_uint_eq(cfg->n_volumes, 1);
	ck_assert_str_eq(v->name, "v");
	ck_assert_uint_eq(v->line, 1);
	ck_assert_str_eq(v->backing, "/b");
	ck_assert_str_eq(v->nbd_socket, "/s");
	ck_assert_ptr_null(v->nbd_listen);
	ck_assert_ptr_null(v->description);
	ck_assert_int_eq(v->read_only, 0);
	ck_assert_int_eq(v->direct_io, 0);
	ck_assert_uint_eq(v->block_size_min, 0);
	ck_assert_uint_eq(v->max_payload, HAK_DEFAULT_MAX_PAYLOAD);
	config_free(cfg);

	/* An empty file (or only comments) is all defaults and no volume. */
	cfg = parse_ok("# nothing\n\n   \n");
	ck_assert_uint_eq(cfg->n_volumes, 0);
	ck_assert_ptr_null(cfg->volumes);
	ck_assert_uint_eq(cfg->io_depth, HAK_DEFAULT_IO_DEPTH);
	config_free(cfg);
}
END_TEST

/* Trailing ';', one-line blocks, CRLF line ends and sizes written in several ways. */
START_TEST(test_lenient_syntax)
{
	struct hak_config *cfg = parse_ok("global { log-level warn; io-depth 8; }\r\n"
	                                  "volume a { backing /a; nbd-socket /sa }\r\n"
	                                  "volume b {\r\n"
	                                  "\tbacking /b;\r\n"
	                                  "\tnbd-socket /sb ;\r\n"
	                                  "\tmax-payload 1m\r\n"
	                                  "\tblock-size-min 512;\r\n"
	                                  "\tread-only Off\r\n"
	                                  "};\r\n");

	ck_assert_int_eq(cfg->log_level, LOG_LVL_WARN);
	ck_assert_uint_eq(cfg->io_depth, 8);
	ck_assert_uint_eq(cfg->n_volumes, 2);
	ck_assert_str_eq(cfg->volumes[0].backing, "/a");
	ck_assert_str_eq(cfg->volumes[0].nbd_socket, "/sa");
	ck_assert_str_eq(cfg->volumes[1].nbd_socket, "/sb");
	ck_assert_uint_eq(cfg->volumes[1].max_payload, 1u << 20);
	ck_assert_uint_eq(cfg->volumes[1].block_size_min, 512);
	ck_assert_int_eq(cfg->volumes[1].read_only, 0);
	config_free(cfg);

	/* The text need not be NUL-terminated: the bytes after len are never read. */
	const char text[] = VOL "}\nXXXX";
	struct hak_config *c2 = NULL;
	char err[256];
	ck_assert_int_eq(config_parse(text, sizeof(text) - 1 - 4, "x", &c2, err, sizeof(err)), 0);
	ck_assert_uint_eq(c2->n_volumes, 1);
	config_free(c2);
}
END_TEST

struct bad_case {
	const char *text;
	unsigned line, col;
	const char *phrase;
};

static const struct bad_case bad_cases[] = {
    /* sections */
    {"volum x {\n}\n", 1, 1, "Unknown section 'volum'; did you mean 'volume'?"},
    {"\n  frobnicate {\n}\n", 2, 3, "valid sections are: global, volume"},
    {"volume {\n}\n", 1, 1, "needs a name; write 'volume NAME {'"},
    {"global g {\n}\n", 1, 8, "takes no name"},
    {"global {\n}\nglobal {\n}\n", 3, 1, "second 'global' section; the first is at line 1"},
    {"volume a/b {\n}\n", 1, 8, "Bad volume name 'a/b'"},
    {"volume \"\" {\n}\n", 1, 8, "Bad volume name"},
    {"volume .. {\n}\n", 1, 8, "Bad volume name"},
    {"volume "
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa {\n}\n",
     1, 8, "use 1 to 64 letters"},
    {VOL "}\nvolume v {\n\tbacking /c\n\tnbd-socket /t\n}\n", 5, 8,
     "Duplicate volume name 'v'; the first is at line 1"},
    {VOL "\tvolume x {\n\t}\n}\n", 4, 2, "cannot be inside volume 'v'"},
    {"volume a b {\n}\n", 1, 10, "Too many words in the section header"},
    {"volume v\n{\n}\n", 1, 1, "header must end with '{'"},
    {"backing /x\n", 1, 1, "'backing' is outside any section"},
    {"a {\na {\na {\na {\na {\na {\na {\na {\na {\n", 9, 1, "nested more than 8 deep"},
    /* keys */
    {VOL "\tbakcing /c\n}\n", 4, 2, "Unknown key 'bakcing' in volume 'v'; did you mean 'backing'?"},
    {VOL "\tnbd-sockt /c\n}\n", 4, 2, "did you mean 'nbd-socket'?"},
    {VOL "\tzzzzzz 1\n}\n", 4, 2, "Unknown key 'zzzzzz' in volume 'v'; valid keys are: backing, "},
    {"global {\n\tlog-levl info\n}\n", 2, 2, "in global; did you mean 'log-level'?"},
    {"global {\n\tbacking /x\n}\n", 2, 2, "'backing' belongs in a 'volume' section, not in global"},
    {VOL "\tbacking /c\n}\n", 4, 2,
     "Duplicate key 'backing' in volume 'v'; it is already set at line 2"},
    {"volume v {\n\tbacking /b\n}\n", 1, 1, "has no 'nbd-socket'"},
    {"\n volume v {\n\tnbd-socket /s\n}\n", 2, 2, "volume 'v' section has no 'backing'"},
    {VOL "\tread-only\n}\n", 4, 2, "'read-only' in volume 'v' needs a value: yes or no"},
    {"volume v {\n\tbacking\n\tnbd-socket /s\n}\n", 2, 2, "needs a value: an absolute path"},
    {"global {\n\tio-depth ;\n}\n", 2, 2, "needs a value: a number from 8 to 4096"},
    {VOL "\tmax-payload\n}\n", 4, 2, "needs a value: a size from 64K to 64M"},
    {"global {\n\tlog-level\n}\n", 2, 2, "needs a value: one of err, warn, notice, info, debug"},
    {VOL "\tnbd-listen\n}\n", 4, 2, "needs a value: HOST:PORT, like 0.0.0.0:10809"},
    {VOL "\tdescription\n}\n", 4, 2, "needs a value: a text, in double quotes if it has spaces"},
    {VOL "\tkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk 1\n}\n", 4, 2,
     "valid keys are: backing, nbd-socket, nbd-listen, description, read-only, direct-io, "
     "block-size-min, max-payload."},
    {VOL "\tdescription a b\n}\n", 4, 16, "takes one value but has 2"},
    {VOL "\tdescription 1 2 3 4 5 6 7 8 9 a b c d e f g h\n}\n", 4, 46, "Too many values"},
    {"global {\n\t\"log-level\" info\n}\n", 2, 2, "not a quoted string"},
    /* sizes */
    {VOL "\tmax-payload 12X\n}\n", 4, 14, "expected a size like 4096, 64K or 32M"},
    {VOL "\tmax-payload K\n}\n", 4, 14, "Bad size 'K'"},
    {VOL "\tmax-payload 1KB\n}\n", 4, 14, "Bad size '1KB'"},
    {VOL "\tmax-payload -1\n}\n", 4, 14, "Bad size"},
    {VOL "\tmax-payload 99999999999999999999\n}\n", 4, 14, "Bad size"},
    {VOL "\tmax-payload 99999999999T\n}\n", 4, 14, "Bad size"},
    {VOL "\tmax-payload 32K\n}\n", 4, 14, "max-payload 32K is out of range; use 64K to 64M"},
    {VOL "\tmax-payload 65M\n}\n", 4, 14, "out of range; use 64K to 64M"},
    {VOL "\tblock-size-min 3000\n}\n", 4, 17, "block-size-min 3000 is not a power of two"},
    {VOL "\tblock-size-min 128K\n}\n", 4, 17, "out of range; use 1 to 64K"},
    {VOL "\tblock-size-min 0\n}\n", 4, 17, "out of range"},
    {VOL "\tblock-size-min 64K\n\tmax-payload 96K\n}\n", 5, 2,
     "max-payload 96K of volume 'v' is not a multiple of its minimum block size 64K"},
    /* booleans, enums, numbers */
    {VOL "\tread-only maybe\n}\n", 4, 12, "Bad boolean 'maybe' for read-only; use yes or no"},
    {VOL "\tdirect-io 1\n}\n", 4, 12, "Bad boolean"},
    {"global {\n\tlog-level loud\n}\n", 2, 12,
     "Bad log-level 'loud'; choose one of err, warn, notice, info, debug"},
    {"global {\n\tio-engine epoll\n}\n", 2, 12, "choose one of auto, uring, pool"},
    {"global {\n\tio-depth 7\n}\n", 2, 11, "io-depth 7 is out of range; use 8 to 4096"},
    {"global {\n\tio-depth 4097\n}\n", 2, 11, "out of range; use 8 to 4096"},
    {"global {\n\tio-depth 1K\n}\n", 2, 11, "Bad number '1K' for io-depth"},
    {"global {\n\tio-depth -8\n}\n", 2, 11, "Bad number"},
    {"global {\n\tmax-clients 0\n}\n", 2, 14, "use 1 to 1024"},
    {"global {\n\tmax-clients 1025\n}\n", 2, 14, "use 1 to 1024"},
    /* addresses and paths */
    {VOL "\tnbd-listen localhost\n}\n", 4, 13, "is not HOST:PORT (no ':PORT')"},
    {VOL "\tnbd-listen ::1:10809\n}\n", 4, 13, "IPv6 address must be in brackets"},
    {VOL "\tnbd-listen [::1]10809\n}\n", 4, 13, "no ':PORT' after ']'"},
    {VOL "\tnbd-listen [::1:80\n}\n", 4, 13, "no ']' after the IPv6 address"},
    {VOL "\tnbd-listen [zz]:80\n}\n", 4, 13, "not an IPv6 address"},
    {VOL "\tnbd-listen :80\n}\n", 4, 13, "the host is empty"},
    {VOL "\tnbd-listen [1111:2222:3333:4444:5555:6666:7777:8888:9999:aaaa]:80\n}\n", 4, 13,
     "the IPv6 address is too long"},
    {VOL "\tnbd-listen a+b:80\n}\n", 4, 13, "character not allowed"},
    {VOL "\tnbd-listen host:0\n}\n", 4, 13, "port '0' is not valid; use a number from 1 to 65535"},
    {VOL "\tnbd-listen host:65536\n}\n", 4, 13, "from 1 to 65535"},
    {VOL "\tnbd-listen host:http\n}\n", 4, 13, "port 'http' is not valid"},
    {VOL "\tnbd-listen [::1]:\n}\n", 4, 13, "port '' is not valid"},
    {"volume v {\n\tbacking b.img\n\tnbd-socket /s\n}\n", 2, 10,
     "backing 'b.img' must be an absolute path"},
    {"volume v {\n\tbacking /b\n\tnbd-socket "
     "/xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
     "xxxxxxxxxxxxxxxxxxxx\n}\n",
     3, 13, "a UNIX socket path may be at most 107 bytes"},
    {"global {\n\tcontrol-socket run/x\n}\n", 2, 17, "must be an absolute path"},
    /* cross-volume and cross-section */
    {VOL "}\nvolume w {\n\tbacking /b\n\tnbd-socket /t\n}\n", 6, 10,
     "Volume 'w' has the same backing '/b' as volume 'v' (line 1)"},
    {VOL "}\nvolume w {\n\tbacking /c\n\tnbd-socket /s\n}\n", 7, 13, "same nbd-socket '/s'"},
    {VOL "\tnbd-listen h:1\n}\nvolume w {\n\tbacking /c\n\tnbd-socket /t\n\tnbd-listen h:1\n}\n", 9,
     13, "same nbd-listen 'h:1'"},
    {VOL "}\nglobal {\n\tcontrol-socket /s\n}\n", 3, 13, "is the control socket '/s'"},
    /* lexical */
    {VOL "\tdescription \"abc\n}\n", 4, 14, "Unterminated string"},
    {VOL "\tdescription \"abc\\\"\n}\n", 4, 14, "Unterminated string"},
    {VOL "\tdescription \"abc\\", 4, 14, "Unterminated string"},
    {VOL "\tdescription \"a\\nb\"\n}\n", 4, 16, "Unknown escape '\\n'"},
    {VOL "\tdescription ab\"c\"\n}\n", 4, 16, "in the middle of a value"},
    {VOL "\tdescription \"a\tb\x01\"\n}\n", 4, 18, "Control character 0x01"},
    {"global {\n\tlog-level \x7finfo\n}\n", 2, 12, "Control character 0x7f"},
    {VOL "\tdescription \"a\\\x02\"\n}\n", 4, 17, "Control character 0x02"},
    {VOL, 1, 1, "Unbalanced braces: this 'volume' section is never closed"},
    {VOL "}\n}\n", 5, 1, "Unbalanced braces: '}' without a matching '{'"},
    {"{\n}\n", 1, 1, "'{' without a section name"},
    {VOL "\t{\n}\n", 4, 2, "'{' without a section name"},
};

/*
 * One test for the whole table: a forked Check test costs a leak check at exit under ASan, which
 * is slow; the case number in each message still names the failing entry.
 */
START_TEST(test_bad_inputs)
{
	for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		const struct bad_case *bc = &bad_cases[i];
		struct hak_config *cfg = (struct hak_config *)&cfg; /* must be reset to NULL */
		char err[512], want[64];
		int rc = parse(bc->text, &cfg, err, sizeof(err)), e = errno;

		ck_assert_msg(rc == -1 && e == EINVAL && cfg == NULL,
		              "case %zu: want failure with EINVAL, got rc %d errno %d", i, rc, e);
		snprintf(want, sizeof(want), "t.conf:%u:%u: ", bc->line, bc->col);
		ck_assert_msg(strncmp(err, want, strlen(want)) == 0,
		              "case %zu: want position %s got: %s", i, want, err);
		ck_assert_msg(strstr(err, bc->phrase), "case %zu: want '%s' in: %s", i, bc->phrase,
		              err);
		ck_assert_msg(!strchr(err, '\n'), "case %zu: the message has a newline: %s", i,
		              err);
	}
}
END_TEST

/* Errors found before tokens exist: NUL bytes, long lines, a file too big. */
START_TEST(test_raw_limits)
{
	static const char nul[] = "global {\n\tlog-le\0vel info\n}\n";
	struct hak_config *cfg = NULL;
	char err[512];
	size_t big = (1u << 20) + 1;
	char *text = malloc(big + 8);

	ck_assert_int_eq(config_parse(nul, sizeof(nul) - 1, "n", &cfg, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "n:2:8: NUL byte in the file; hak.conf must be plain text.");

	/* 4096 characters on a line are fine, 4097 are not. */
	ck_assert_ptr_nonnull(text);
	memcpy(text, "global {\n#", 10);
	memset(text + 10, 'x', 4095);
	memcpy(text + 10 + 4095, "\n}\n", 4);
	ck_assert_int_eq(parse(text, &cfg, err, sizeof(err)), 0);
	config_free(cfg);
	memcpy(text + 10 + 4095, "x\n}\n", 5);
	ck_assert_int_eq(parse(text, &cfg, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "t.conf:2:4097: Line 2 is longer than 4096 characters.");

	/* Exactly 1 MiB of comments and newlines is accepted, one byte more is not. */
	memset(text, '\n', big);
	text[0] = '#';
	ck_assert_int_eq(config_parse(text, big - 1, "big", &cfg, err, sizeof(err)), 0);
	config_free(cfg);
	ck_assert_int_eq(config_parse(text, big, "big", &cfg, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "big:1:1: The file is 1048577 bytes, bigger than"));
	free(text);
}
END_TEST

/* The volume limit keeps the pairwise uniqueness checks cheap on hostile input. */
START_TEST(test_too_many_volumes)
{
	const unsigned max = 4096, per = 64;
	char *text = malloc((size_t)(max + 1) * per), *p = text, err[256];
	struct hak_config *cfg = NULL;

	ck_assert_ptr_nonnull(text);
	for (unsigned i = 0; i < max; i++)
		p += sprintf(p, "volume v%u {\nbacking /b%u\nnbd-socket /s%u\n}\n", i, i, i);
	ck_assert_int_eq(parse(text, &cfg, err, sizeof(err)), 0);
	ck_assert_uint_eq(cfg->n_volumes, max);
	ck_assert_str_eq(cfg->volumes[max - 1].backing, "/b4095");
	config_free(cfg);
	sprintf(p, "volume x {\nbacking /x\nnbd-socket /x\n}\n");
	ck_assert_int_eq(parse(text, &cfg, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "t.conf:16385:1: Too many 'volume' sections (more than 4096).");
	free(text);
}
END_TEST

/* The error buffer may be missing or small; the message is cut, never overflowed. */
START_TEST(test_error_buffer)
{
	struct hak_config *cfg = NULL;
	char small[12];

	int rc = parse("bogus\n", &cfg, NULL, 0), e = errno;

	ck_assert_int_eq(rc, -1);
	ck_assert_int_eq(e, EINVAL);
	memset(small, 'Z', sizeof(small));
	ck_assert_int_eq(parse("bogus\n", &cfg, small, sizeof(small)), -1);
	ck_assert_str_eq(small, "t.conf:1:1:");
	ck_assert_int_eq(config_parse(NULL, 0, NULL, &cfg, NULL, 0), 0);
	ck_assert_str_eq(cfg->file, "<config>");
	config_free(cfg);
	config_free(NULL);
}
END_TEST

START_TEST(test_load)
{
	char path[] = "/tmp/test_config_XXXXXX", err[512];
	struct hak_config *cfg = NULL;
	int fd = mkstemp(path);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, VOL "}\n", strlen(VOL "}\n")), (int)strlen(VOL "}\n"));
	close(fd);
	ck_assert_int_eq(config_load(path, &cfg, err, sizeof(err)), 0);
	ck_assert_str_eq(cfg->file, path);
	ck_assert_str_eq(cfg->volumes[0].backing, "/b");
	config_free(cfg);
	unlink(path);

	int rc = config_load(path, &cfg, err, sizeof(err)), e = errno;
	ck_assert_int_eq(rc, -1);
	ck_assert_int_eq(e, ENOENT);
	ck_assert_ptr_null(cfg);
	ck_assert_ptr_nonnull(strstr(err, path));
	ck_assert_ptr_nonnull(strstr(err, strerror(ENOENT)));

	rc = config_load("/", &cfg, err, sizeof(err));
	e = errno;
	ck_assert_int_eq(rc, -1);
	ck_assert_int_eq(e, EISDIR);
}
END_TEST

/* errno of a config_add_volume() that must fail, or 0 if it did not fail. */
static int add_errno(struct hak_config *cfg, const char *name, const char *backing)
{
	struct hak_volume_cfg *v;

	errno = 0;
	v = config_add_volume(cfg, name, backing);
	return v ? 0 : errno;
}

START_TEST(test_api)
{
	struct hak_config *cfg = config_new_default();
	struct hak_volume_cfg *v;
	char name[16], backing[] = "/dev/x";

	ck_assert_ptr_nonnull(cfg);
	ck_assert_ptr_null(cfg->file);
	ck_assert_str_eq(cfg->control_socket, HAK_DEFAULT_CONTROL_SOCKET);
	ck_assert_int_eq(cfg->log_level, LOG_LVL_INFO);
	ck_assert_int_eq(cfg->io_engine, IO_KIND_AUTO);
	ck_assert_uint_eq(cfg->io_depth, 256);
	ck_assert_uint_eq(cfg->max_clients, 64);
	ck_assert_uint_eq(cfg->n_volumes, 0);
	ck_assert_ptr_null(config_find_volume(cfg, "a"));

	v = config_add_volume(cfg, "a", backing);
	ck_assert_ptr_nonnull(v);
	ck_assert_str_eq(v->name, "a");
	ck_assert_str_eq(v->backing, "/dev/x");
	ck_assert_ptr_ne(v->backing, backing);
	ck_assert_ptr_null(v->nbd_socket);
	ck_assert_uint_eq(v->max_payload, HAK_DEFAULT_MAX_PAYLOAD);
	ck_assert_uint_eq(v->block_size_min, 0);
	ck_assert_int_eq(v->read_only, 0);

	ck_assert_int_eq(add_errno(cfg, "a", "/other"), EEXIST);
	ck_assert_int_eq(add_errno(cfg, "a b", "/other"), EINVAL);
	ck_assert_int_eq(add_errno(cfg, "..", "/other"), EINVAL);
	ck_assert_int_eq(add_errno(cfg, "c", NULL), EINVAL);
	ck_assert_uint_eq(cfg->n_volumes, 1);

	/* Growing the array moves it; lookups must still find every volume. */
	for (int i = 0; i < 100; i++) {
		snprintf(name, sizeof(name), "vol%d", i);
		ck_assert_ptr_nonnull(config_add_volume(cfg, name, name));
	}
	ck_assert_uint_eq(cfg->n_volumes, 101);
	ck_assert_str_eq(config_find_volume(cfg, "a")->backing, "/dev/x");
	ck_assert_str_eq(config_find_volume(cfg, "vol57")->backing, "vol57");
	ck_assert_ptr_eq(config_find_volume(cfg, "vol99"), &cfg->volumes[100]);
	ck_assert_ptr_null(config_find_volume(cfg, "vol100"));
	ck_assert_ptr_null(config_find_volume(cfg, NULL));
	ck_assert_ptr_null(config_find_volume(NULL, "a"));
	config_free(cfg);
}
END_TEST

static Suite *config_suite(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_example_file);
	tcase_add_test(tc, test_all_keys);
	tcase_add_test(tc, test_defaults);
	tcase_add_test(tc, test_lenient_syntax);
	tcase_add_test(tc, test_bad_inputs);
	tcase_add_test(tc, test_raw_limits);
	tcase_add_test(tc, test_too_many_volumes);
	tcase_add_test(tc, test_error_buffer);
	tcase_add_test(tc, test_load);
	tcase_add_test(tc, test_api);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(config_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
