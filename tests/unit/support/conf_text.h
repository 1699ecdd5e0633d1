/* SPDX-License-Identifier: MIT */
/*
 * Configuration text for the config unit tests (test_config, test_config_errors): the pieces
 * of valid files a case builds on, and the parse calls with the file name "t.conf" the
 * expected positions name.
 */
#ifndef HAK_TEST_CONF_TEXT_H
#define HAK_TEST_CONF_TEXT_H

#include <check.h>
#include <string.h>

#include "conf/config.h"

/* A second valid volume after VOL's "}": lines 5-8. */
#define VOLW "volume w {\n\tbacking /c\n\tnbd-socket /t\n}\n"
/* A valid systemd resource of a group: lines +0 to +3. */
#define RES_SD "\tresource r {\n\t\ttype systemd\n\t\tunit u\n\t}\n"
/* The head of a valid volume: lines 1-3; a test adds from line 4 (key at column 2). */
#define VOL "volume v {\n\tbacking /b\n\tnbd-socket /s\n"
/* A valid pair of nodes: lines 1-6. */
#define NODES "node a {\n\taddress 10.0.0.1:7789\n}\nnode b {\n\taddress 10.0.0.2:7789\n}\n"
/* Node 'a' up to its address key (line 2, value at column 10). */
#define NODE_A "node a {\n\taddress "
/* The rest of node 'a' after its address, and a valid node 'b' (lines 2-6). */
#define NODE_B "\n}\nnode b {\n\taddress 10.0.0.2:7789\n}\n"

/* A file that must be refused, with the position and a phrase of its message. */
struct bad_case {
	const char *text;
	unsigned line, col;
	const char *phrase;
};

static inline int parse(const char *text, struct hak_config **cfg, char *err, size_t errlen)
{
	return config_parse(text, strlen(text), "t.conf", cfg, err, errlen);
}

/* Parses text that must be valid; the test fails with the parser's message otherwise. */
static inline struct hak_config *parse_ok(const char *text)
{
	struct hak_config *cfg = NULL;
	char err[512] = "";

	ck_assert_msg(parse(text, &cfg, err, sizeof(err)) == 0, "unexpected error: %s", err);
	ck_assert_ptr_nonnull(cfg);
	return cfg;
}

#endif
