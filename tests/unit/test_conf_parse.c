/* SPDX-License-Identifier: MIT */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "conf/conf_parse.h"
#include "support/heard.h"

static int is_section(const char *word)
{
	return strcmp(word, "sec") == 0;
}

/* Parses text that must be valid; the caller frees cp. */
static struct conf_block *parse_ok(struct conf_parse *cp, const char *text, char *err,
                                   size_t errlen)
{
	struct conf_block *root = NULL;

	conf_parse_init(cp, "t.conf", err, errlen);
	ck_assert_msg(conf_parse_text(cp, text, strlen(text), is_section, &root) == 0,
	              "unexpected error: %s", err);
	ck_assert_ptr_nonnull(root);
	return root;
}

/* The tree keeps the file order, the nesting, and the position of every word. */
START_TEST(test_tree)
{
	const char *text = "# top\n"
	                   "sec one {\n"
	                   "  key a \"b c\"; other\n"
	                   "  inner {\n"
	                   "\tdeep \"x\\\"y\\\\\"\n"
	                   "  }\n"
	                   "}\n"
	                   "sec two { k v }\n";
	struct conf_parse cp;
	char err[256];
	struct conf_block *root = parse_ok(&cp, text, err, sizeof(err));
	const struct conf_block *one = root->children, *two = one->next, *inner = one->children;
	const struct conf_directive *d;

	ck_assert_ptr_null(root->type);
	ck_assert_ptr_null(root->dirs);
	ck_assert_str_eq(one->type, "sec");
	ck_assert_str_eq(one->name, "one");
	ck_assert_uint_eq(one->line, 2);
	ck_assert_uint_eq(one->col, 1);
	ck_assert_uint_eq(one->name_line, 2);
	ck_assert_uint_eq(one->name_col, 5);
	d = one->dirs;
	ck_assert_str_eq(d->key, "key");
	ck_assert_uint_eq(d->line, 3);
	ck_assert_uint_eq(d->col, 3);
	ck_assert_uint_eq(d->n_vals, 2);
	ck_assert_str_eq(d->vals->text, "a");
	ck_assert_uint_eq(d->vals->col, 7);
	ck_assert_str_eq(d->vals->next->text, "b c");
	ck_assert_uint_eq(d->vals->next->col, 9);
	ck_assert_ptr_null(d->vals->next->next);
	d = d->next;
	ck_assert_str_eq(d->key, "other");
	ck_assert_uint_eq(d->n_vals, 0);
	ck_assert_ptr_null(d->vals);
	ck_assert_ptr_null(d->next);
	ck_assert_ptr_eq(conf_parse_find(one, "other"), d);
	ck_assert_ptr_null(conf_parse_find(one, "missing"));

	ck_assert_str_eq(inner->type, "inner");
	ck_assert_ptr_null(inner->name);
	ck_assert_uint_eq(inner->line, 4);
	ck_assert_str_eq(inner->dirs->vals->text, "x\"y\\");
	ck_assert_ptr_null(inner->next);

	ck_assert_str_eq(two->name, "two");
	ck_assert_uint_eq(two->line, 8);
	ck_assert_str_eq(two->dirs->key, "k");
	ck_assert_str_eq(two->dirs->vals->text, "v");
	ck_assert_ptr_null(two->next);
	conf_parse_free(&cp);
	conf_parse_free(&cp); /* a second free is harmless */
}
END_TEST

struct bad_case {
	const char *text;
	unsigned line, col;
	const char *message; /* the whole message after "t.conf:LINE:COL: " */
};

static const struct bad_case bad_cases[] = {
    {"sec a\n{\n}\n", 1, 1, "The 'sec' section header must end with '{' on the same line."},
    {"key v\n", 1, 1,
     "'key' is outside any section; put keys inside 'global {' or 'volume NAME {'."},
    {"sec a b {\n}\n", 1, 7, "Too many words in the section header; write 'sec NAME {'."},
    {"sec {\n", 1, 1,
     "Unbalanced braces: this 'sec' section is never closed; add a '}' on its own line at its "
     "end."},
    {"}\n", 1, 1, "Unbalanced braces: '}' without a matching '{'."},
    {"\n {\n", 2, 2, "'{' without a section name before it; write 'volume NAME {' or 'global {'."},
    {"sec {\n\"k\" v\n}\n", 2, 1, "Expected a key or section name here, not a quoted string."},
    {"sec {\nk a\"b\n}\n", 2, 4,
     "A '\"' in the middle of a value; put the whole value in double quotes instead."},
    {"sec {\nk \"ab\n}\n", 2, 3, "Unterminated string; close it with '\"' on the same line."},
    {"sec {\nk \"a\\tb\"\n}\n", 2, 5,
     "Unknown escape '\\t' in a string; only \\\" and \\\\ are allowed."},
    {"sec {\nk a\x01\n}\n", 2, 4,
     "Control character 0x01 is not allowed; hak.conf must be plain text."},
    {"sec {\nk 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17\n}\n", 2, 42,
     "Too many values for 'k' (more than 16)."},
    {"a {\na {\na {\na {\na {\na {\na {\na {\na {\n", 9, 1,
     "Sections are nested more than 8 deep; is a '}' missing?"},
};

START_TEST(test_bad_syntax)
{
	for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		const struct bad_case *bc = &bad_cases[i];
		struct conf_block *root = (struct conf_block *)&root;
		struct conf_parse cp;
		char err[256], want[256];

		conf_parse_init(&cp, "t.conf", err, sizeof(err));
		ck_assert_int_eq(
		    conf_parse_text(&cp, bc->text, strlen(bc->text), is_section, &root), -1);
		/* only a nesting too deep leaves no tree to go on with */
		if (strstr(bc->message, "nested"))
			ck_assert_ptr_null(root);
		else
			ck_assert_ptr_nonnull(root);
		ck_assert_int_eq(cp.failed, 1);
		ck_assert_int_eq(cp.enomem, 0);
		snprintf(want, sizeof(want), "t.conf:%u:%u: %s", bc->line, bc->col, bc->message);
		ck_assert_msg(strcmp(err, want) == 0, "case %zu: want '%s' got '%s'", i, want, err);
		conf_parse_free(&cp);
	}
}
END_TEST

/* Only the first error is kept, later ones are usually consequences of it. */
START_TEST(test_errors)
{
	struct conf_parse cp;
	struct conf_block blk = {.type = "volume", .name = "db"};
	char err[128], label[64];

	conf_parse_init(&cp, NULL, err, sizeof(err));
	ck_assert_str_eq(cp.name, "<config>");
	ck_assert_int_eq(conf_parse_error(&cp, 3, 4, "First %s.", "one"), -1);
	ck_assert_int_eq(conf_parse_error(&cp, 5, 6, "Second."), -1);
	ck_assert_int_eq(conf_parse_oom(&cp), -1);
	ck_assert_str_eq(err, "<config>:3:4: First one.");
	ck_assert_int_eq(cp.enomem, 1);

	conf_parse_init(&cp, "f", err, sizeof(err));
	ck_assert_str_eq(err, "");
	conf_parse_oom(&cp);
	ck_assert_str_eq(err, "f: out of memory while reading the configuration.");

	conf_parse_label(&blk, label, sizeof(label));
	ck_assert_str_eq(label, "volume 'db'");
	blk.name = NULL;
	conf_parse_label(&blk, label, sizeof(label));
	ck_assert_str_eq(label, "volume");
}
END_TEST

START_TEST(test_unique)
{
	struct conf_parse cp;
	struct conf_block a = {.type = "a"}, b = {.type = "b"};
	const struct conf_block *first = &a;
	static const char ns1 = 0, ns2 = 0;
	char names[300][16];

	conf_parse_init(&cp, "t", NULL, 0);
	ck_assert_ptr_null(conf_parse_unique_find(&cp, &ns1, "x"));
	ck_assert_int_eq(conf_parse_unique(&cp, &ns1, "x", &a, &first), 0);
	ck_assert_ptr_null(first);
	ck_assert_int_eq(conf_parse_unique(&cp, &ns1, "x", &b, &first), 0);
	ck_assert_ptr_eq(first, &a);
	/* Another namespace is another table. */
	ck_assert_int_eq(conf_parse_unique(&cp, &ns2, "x", &b, &first), 0);
	ck_assert_ptr_null(first);
	ck_assert_ptr_eq(conf_parse_unique_find(&cp, &ns2, "x"), &b);
	ck_assert_ptr_null(conf_parse_unique_find(&cp, &ns2, "y"));
	/* Growing the table keeps every entry. */
	for (int i = 0; i < 300; i++) {
		snprintf(names[i], sizeof(names[i]), "n%d", i);
		ck_assert_int_eq(conf_parse_unique(&cp, &ns1, names[i], i % 2 ? &a : &b, &first),
		                 0);
		ck_assert_ptr_null(first);
	}
	for (int i = 0; i < 300; i++)
		ck_assert_ptr_eq(conf_parse_unique_find(&cp, &ns1, names[i]), i % 2 ? &a : &b);
	ck_assert_ptr_eq(conf_parse_unique_find(&cp, &ns1, "x"), &a);
	conf_parse_free(&cp);
	ck_assert_ptr_null(conf_parse_unique_find(&cp, &ns1, "x"));
}
END_TEST

START_TEST(test_durations)
{
	static const struct {
		const char *text;
		unsigned long long usec;
	} good[] = {
	    {"0s", 0},         {"1s", 1000000},          {"1.5s", 1500000},
	    {"200ms", 200000}, {"1.5ms", 1500},          {"0.000001s", 1},
	    {"0.001ms", 1},    {"2.000125S", 2000125},   {"10MS", 10000},
	    {"007s", 7000000}, {"60.000000s", 60000000}, {"999999999999s", 999999999999000000ull},
	};
	static const char *const bad[] = {
	    "",
	    "s",
	    "5",
	    "1.5",
	    ".5s",
	    "1.s",
	    "1e3ms",
	    "-1s",
	    "+1s",
	    "1m",
	    "1 s",
	    "1sec",
	    "inf",
	    "0x10s",
	    "1.0000001s",
	    "0.0001ms",
	    "1000000000000s",
	    "1,5s",
	    "1..5s",
	    "1.5.s",
	    "1ms5",
	};
	uint64_t us;
	char buf[32];

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		us = 12345;
		ck_assert_msg(conf_parse_duration(good[i].text, &us) == 0, "'%s'", good[i].text);
		ck_assert_msg(us == good[i].usec, "'%s' gave %llu", good[i].text,
		              (unsigned long long)us);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		us = 12345;
		ck_assert_msg(conf_parse_duration(bad[i], &us) == -1, "'%s' was accepted", bad[i]);
		ck_assert_uint_eq(us, 12345);
	}
	conf_parse_fmt_duration(50000, buf, sizeof(buf));
	ck_assert_str_eq(buf, "50ms");
	conf_parse_fmt_duration(60000000, buf, sizeof(buf));
	ck_assert_str_eq(buf, "60s");
	conf_parse_fmt_duration(1500000, buf, sizeof(buf));
	ck_assert_str_eq(buf, "1.5s");
	conf_parse_fmt_duration(1500, buf, sizeof(buf));
	ck_assert_str_eq(buf, "0.0015s");
	conf_parse_fmt_duration(2000125, buf, sizeof(buf));
	ck_assert_str_eq(buf, "2.000125s");
	conf_parse_fmt_duration(0, buf, sizeof(buf));
	ck_assert_str_eq(buf, "0ms");
}
END_TEST

START_TEST(test_hostport)
{
	static const struct {
		const char *text, *host;
		unsigned port;
		int family;
	} good[] = {
	    {"192.0.2.1:7789", "192.0.2.1", 7789, AF_INET},
	    {"[2001:DB8:0::1]:1", "2001:db8::1", 1, AF_INET6},
	    {"[::ffff:10.0.0.1]:65535", "::ffff:10.0.0.1", 65535, AF_INET6},
	    {"host-1.example_x:80", "host-1.example_x", 80, AF_UNSPEC},
	    {"999.1.1.1:80", "999.1.1.1", 80, AF_UNSPEC}, /* not an IPv4 address, so a name */
	};
	static const struct {
		const char *text, *why;
	} bad[] = {
	    {"host", "no ':PORT'"},
	    {"::1:80", "an IPv6 address must be in brackets"},
	    {":80", "the host is empty"},
	    {"a+b:80", "the host has a character not allowed"},
	    {"[::1:80", "no ']' after the IPv6 address"},
	    {"[::1]80", "no ':PORT' after ']'"},
	    {"[zz]:80", "the part in brackets is not an IPv6 address"},
	    {"[1111:2222:3333:4444:5555:6666:7777:8888:9999:aaaa]:80",
	     "the IPv6 address is too long"},
	    {"h:0", NULL},
	    {"h:65536", NULL},
	    {"h:", NULL},
	    {"h:http", NULL},
	    {"[::1]:-1", NULL},
	};
	struct conf_hostport hp;
	char longname[300];
	const char *why;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		ck_assert_msg(conf_parse_hostport(good[i].text, &hp, &why) == 0, "'%s': %s",
		              good[i].text, why);
		ck_assert_str_eq(hp.host, good[i].host);
		ck_assert_uint_eq(hp.port, good[i].port);
		ck_assert_int_eq(hp.family, good[i].family);
		ck_assert_ptr_null(why);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why = "unset";
		ck_assert_msg(conf_parse_hostport(bad[i].text, &hp, &why) == -1,
		              "'%s' was accepted", bad[i].text);
		if (bad[i].why)
			ck_assert_str_eq(why, bad[i].why);
		else
			ck_assert_ptr_null(why);
	}
	memset(longname, 'h', 256);
	strcpy(longname + 256, ":80");
	ck_assert_int_eq(conf_parse_hostport(longname, &hp, &why), -1);
	ck_assert_str_eq(why, "the host name is too long");
	strcpy(longname + 255, ":80");
	ck_assert_int_eq(conf_parse_hostport(longname, &hp, &why), 0);
	ck_assert_uint_eq(strlen(hp.host), 255);
}
END_TEST

START_TEST(test_numbers)
{
	uint64_t n;
	int b = 7;
	char buf[32];
	static const char *const names[] = {"backing", "nbd-socket", "max-payload"};

	ck_assert_int_eq(conf_parse_number("4096", 0, &n), 0);
	ck_assert_uint_eq(n, 4096);
	ck_assert_int_eq(conf_parse_number("64k", 1, &n), 0);
	ck_assert_uint_eq(n, 65536);
	ck_assert_int_eq(conf_parse_number("4G", 1, &n), 0);
	ck_assert_uint_eq(n, 4ull << 30);
	ck_assert_int_eq(conf_parse_number("16777215T", 1, &n), 0);
	ck_assert_int_eq(conf_parse_number("16777216T", 1, &n), -1);
	ck_assert_int_eq(conf_parse_number("18446744073709551615", 0, &n), 0);
	ck_assert_uint_eq(n, UINT64_MAX);
	ck_assert_int_eq(conf_parse_number("18446744073709551616", 0, &n), -1);
	ck_assert_int_eq(conf_parse_number("1K", 0, &n), -1);
	ck_assert_int_eq(conf_parse_number("1KB", 1, &n), -1);
	ck_assert_int_eq(conf_parse_number("", 1, &n), -1);

	ck_assert_int_eq(conf_parse_bool("ON", &b), 0);
	ck_assert_int_eq(b, 1);
	ck_assert_int_eq(conf_parse_bool("False", &b), 0);
	ck_assert_int_eq(b, 0);
	ck_assert_int_eq(conf_parse_bool("1", &b), -1);

	conf_parse_fmt_size(65536, buf, sizeof(buf));
	ck_assert_str_eq(buf, "64K");
	conf_parse_fmt_size(4ull << 30, buf, sizeof(buf));
	ck_assert_str_eq(buf, "4G");
	conf_parse_fmt_size(3000, buf, sizeof(buf));
	ck_assert_str_eq(buf, "3000");

	ck_assert_str_eq(conf_parse_suggest("bakcing", names, 3), "backing");
	ck_assert_str_eq(conf_parse_suggest("nbd-sockt", names, 3), "nbd-socket");
	ck_assert_ptr_null(conf_parse_suggest("zzzzzz", names, 3));
	ck_assert_ptr_null(conf_parse_suggest("ba", names, 3)); /* too short to guess */
}
END_TEST

/* The raw-byte limits apply before any token. */
START_TEST(test_limits)
{
	static const char nul[] = "sec {\n\tk\0v\n}\n";
	struct conf_parse cp;
	struct conf_block *root;
	char err[256];

	conf_parse_init(&cp, "n", err, sizeof(err));
	ck_assert_int_eq(conf_parse_text(&cp, nul, sizeof(nul) - 1, is_section, &root), -1);
	ck_assert_str_eq(err, "n:2:3: NUL byte in the file; hak.conf must be plain text.");
	conf_parse_free(&cp);

	conf_parse_init(&cp, "n", err, sizeof(err));
	ck_assert_int_eq(conf_parse_text(&cp, NULL, 0, NULL, &root), 0);
	ck_assert_ptr_null(root->children);
	conf_parse_free(&cp);

	/* Without is_section, a header on two lines is explained as a key outside a section. */
	conf_parse_init(&cp, "n", err, sizeof(err));
	ck_assert_int_eq(conf_parse_text(&cp, "sec a\n{\n}\n", 10, NULL, &root), -1);
	ck_assert_ptr_nonnull(strstr(err, "n:1:1: 'sec' is outside any section"));
	conf_parse_free(&cp);
}
END_TEST

/*
 * Every syntax error is heard, in file order: the rest of a bad line is dropped (its block marked
 * damaged), and a '{' or '}' ending it still opens or closes a block, so the lines after it
 * parse as they should. The buffer keeps the first error, as before.
 */
START_TEST(test_collect)
{
	const char *text = "sec a {\n"        /* 1 */
	                   "  k \"x\\q\"\n"   /* 2: unknown escape */
	                   "  good 1\n"       /* 3 */
	                   "}\n"              /* 4 */
	                   "sec b\"c {\n"     /* 5: a quote in a word, then '{' */
	                   "  k v\n"          /* 6: dropped with its block */
	                   "}\n"              /* 7 */
	                   "}\n"              /* 8: unbalanced */
	                   "sec c {\n"        /* 9 */
	                   "  k \"open }\n"   /* 10: unterminated, the '}' closes c */
	                   "sec d { k 1 }\n"; /* 11 */
	struct heard h = {0};
	struct conf_parse cp;
	struct conf_block *root;
	char err[256];

	conf_parse_init(&cp, "t.conf", err, sizeof(err));
	conf_parse_collect(&cp, hear, &h);
	ck_assert_int_eq(conf_parse_text(&cp, text, strlen(text), is_section, &root), -1);
	ck_assert_uint_eq(h.n, 4);
	ck_assert_uint_eq(cp.n_errors, 4);
	ck_assert_str_eq(h.lines[0], "t.conf:2:7: Unknown escape '\\q' in a string; only \\\" and "
	                             "\\\\ are allowed.");
	ck_assert_str_eq(h.lines[1], "t.conf:5:6: A '\"' in the middle of a value; put the whole "
	                             "value in double quotes instead.");
	ck_assert_str_eq(h.lines[2], "t.conf:8:1: Unbalanced braces: '}' without a matching '{'.");
	ck_assert_str_eq(h.lines[3],
	                 "t.conf:10:5: Unterminated string; close it with '\"' on the same line.");
	ck_assert_str_eq(err, h.lines[0]);
	ck_assert_ptr_nonnull(root);
	const struct conf_block *a = root->children, *c = a->next, *d = c->next;
	ck_assert_str_eq(a->name, "a");
	ck_assert_int_eq(a->damaged, 1);
	ck_assert_str_eq(a->dirs->key, "good");
	ck_assert_str_eq(c->name, "c");
	ck_assert_int_eq(c->damaged, 1);
	ck_assert_ptr_null(c->dirs);
	ck_assert_str_eq(d->name, "d");
	ck_assert_int_eq(d->damaged, 0);
	ck_assert_str_eq(d->dirs->vals->text, "1");
	ck_assert_ptr_null(d->next);
	conf_parse_free(&cp);
}
END_TEST

static Suite *conf_parse_suite(void)
{
	Suite *s = suite_create("conf_parse");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_tree);
	tcase_add_test(tc, test_bad_syntax);
	tcase_add_test(tc, test_errors);
	tcase_add_test(tc, test_collect);
	tcase_add_test(tc, test_unique);
	tcase_add_test(tc, test_durations);
	tcase_add_test(tc, test_hostport);
	tcase_add_test(tc, test_numbers);
	tcase_add_test(tc, test_limits);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(conf_parse_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
