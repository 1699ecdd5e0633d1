/* SPDX-License-Identifier: MIT */
/*
 * The schema walk with a toy schema, which also uses what hak.conf does not (yet): a section
 * nested in another one, and 64-bit numbers.
 */
#include <check.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf/conf_schema.h"

struct part {
	char *label;
	uint32_t count;
};

struct thing {
	char *name, *path, *text, *addr, *word;
	uint64_t big;
	uint32_t size;
	int flag, color;
	double wait;
	struct part parts[2];
	int n_parts;
};

struct ctx {
	struct thing things[3];
	int n_things, checks;
	char *top_word;
};

static int parse_color(const char *s, void *field)
{
	int c = strcmp(s, "red") == 0 ? 1 : strcmp(s, "blue") == 0 ? 2 : -1;

	if (c < 0)
		return -1;
	memcpy(field, &c, sizeof(c));
	return 0;
}

/* Accepts only words that start with 'w'. */
static int apply_word(struct conf_parse *ps, const struct conf_key *k, const struct conf_value *v,
                      void *base)
{
	if (v->text[0] != 'w')
		return conf_parse_error(ps, v->line, v->col, "%s '%s' must start with 'w'.", k->key,
		                        v->text);
	return conf_schema_set_string(ps, (char **)((char *)base + k->offset), v->text);
}

#define TFIELD(m) offsetof(struct thing, m), sizeof(((struct thing *)0)->m)
#define PFIELD(m) offsetof(struct part, m), sizeof(((struct part *)0)->m)

static const struct conf_key thing_keys[] = {
    {"path", CONF_PATH, CONF_REQUIRED | CONF_UNIQUE, 0, 0, TFIELD(path), .doc = "a path"},
    {"text", CONF_STRING, 0, 0, 0, TFIELD(text), .doc = "a text"},
    {"addr", CONF_ADDR, 0, 0, 0, TFIELD(addr), .doc = "an address"},
    {"big", CONF_UINT, 0, 1, UINT64_MAX, TFIELD(big), .doc = "a big number"},
    {"size", CONF_SIZE, CONF_POW2, 512, 1u << 20, TFIELD(size), .doc = "a size"},
    {"flag", CONF_BOOL, 0, 0, 0, TFIELD(flag), .doc = "a flag"},
    {"color", CONF_ENUM, 0, 0, 0, TFIELD(color), parse_color, "red, blue", .doc = "a color"},
    {"wait", CONF_DURATION, 0, 1000, 2000000, TFIELD(wait), .doc = "a wait"},
    {"word", CONF_CUSTOM, 0, 0, 0, TFIELD(word), NULL, "a word starting with w", "a word",
     .apply = apply_word},
};

static const struct conf_key part_keys[] = {
    {"count", CONF_UINT, CONF_REQUIRED, 0, 9, PFIELD(count), .doc = "how many"},
    {"label", CONF_STRING, 0, 0, 0, PFIELD(label), .doc = "a label"},
};

static const struct conf_key top_keys[] = {
    {"top-word", CONF_CUSTOM, 0, 0, 0, offsetof(struct ctx, top_word), sizeof(char *), NULL,
     "a word starting with w", "a word", .apply = apply_word},
};

static void *thing_open(struct conf_parse *ps, void *ctx, const struct conf_block *blk,
                        void *parent_base)
{
	struct ctx *c = ctx;
	struct thing *t = &c->things[c->n_things++];

	ck_assert_ptr_null(parent_base);
	t->name = strdup(blk->name);
	if (!t->name)
		conf_parse_oom(ps);
	return t->name ? t : NULL;
}

static void *part_open(struct conf_parse *ps, void *ctx, const struct conf_block *blk,
                       void *parent_base)
{
	struct thing *t = parent_base;

	(void)ps;
	(void)ctx;
	ck_assert_ptr_null(blk->name);
	return &t->parts[t->n_parts++];
}

static void *top_open(struct conf_parse *ps, void *ctx, const struct conf_block *blk,
                      void *parent_base)
{
	(void)ps;
	(void)blk;
	(void)parent_base;
	return ctx;
}

static int thing_check(struct conf_parse *ps, void *ctx, const struct conf_block *blk, void *base)
{
	struct thing *t = base;

	((struct ctx *)ctx)->checks++;
	if (t->text && strcmp(t->text, "bad") == 0)
		return conf_parse_error(ps, blk->line, blk->col, "Thing '%s' is bad.", t->name);
	return 0;
}

static const struct conf_section toy_sections[] = {
    {"top", NULL, 0, 1, top_keys, 1, top_open, NULL, NULL},
    {"thing", NULL, 1, 3, thing_keys, sizeof(thing_keys) / sizeof(thing_keys[0]), thing_open,
     thing_check, "three is plenty"},
    {"part", "thing", 0, 2, part_keys, 2, part_open, NULL, NULL},
};

static const struct conf_schema toy = {toy_sections, 3};

static int toy_is_section(const char *word)
{
	return conf_schema_is_section(&toy, word);
}

static void ctx_free(struct ctx *c)
{
	for (int i = 0; i < c->n_things; i++) {
		struct thing *t = &c->things[i];
		free(t->name);
		free(t->path);
		free(t->text);
		free(t->addr);
		free(t->word);
		for (int j = 0; j < t->n_parts; j++)
			free(t->parts[j].label);
	}
	free(c->top_word);
	memset(c, 0, sizeof(*c));
}

/* Parses and validates text into c; returns the walk's result, err holds the message. */
static int run(const char *text, struct ctx *c, char *err, size_t errlen)
{
	struct conf_parse cp;
	struct conf_block *root;
	int rc;

	memset(c, 0, sizeof(*c));
	conf_parse_init(&cp, "t", err, errlen);
	rc = conf_parse_text(&cp, text, strlen(text), toy_is_section, &root);
	if (rc == 0)
		rc = conf_schema_validate(&cp, &toy, root, c);
	conf_parse_free(&cp);
	return rc;
}

START_TEST(test_good)
{
	const char *text = "top { top-word wow }\n"
	                   "thing a {\n"
	                   "\tpath /a\n"
	                   "\ttext \"hello world\"\n"
	                   "\taddr [::1]:5\n"
	                   "\tbig 18446744073709551615\n"
	                   "\tsize 64K\n"
	                   "\tflag yes\n"
	                   "\tcolor blue\n"
	                   "\twait 1.5ms\n"
	                   "\tword wide\n"
	                   "\tpart { count 3; label x }\n"
	                   "\tpart { count 0 }\n"
	                   "}\n"
	                   "thing b { path /b }\n";
	struct ctx c;
	char err[256] = "";
	struct thing *a = &c.things[0], *b = &c.things[1];

	ck_assert_msg(run(text, &c, err, sizeof(err)) == 0, "%s", err);
	ck_assert_str_eq(c.top_word, "wow");
	ck_assert_int_eq(c.n_things, 2);
	ck_assert_int_eq(c.checks, 2);
	ck_assert_str_eq(a->name, "a");
	ck_assert_str_eq(a->path, "/a");
	ck_assert_str_eq(a->text, "hello world");
	ck_assert_str_eq(a->addr, "[::1]:5");
	ck_assert_uint_eq(a->big, UINT64_MAX);
	ck_assert_uint_eq(a->size, 65536);
	ck_assert_int_eq(a->flag, 1);
	ck_assert_int_eq(a->color, 2);
	ck_assert_double_eq(a->wait, 0.0015);
	ck_assert_str_eq(a->word, "wide");
	ck_assert_int_eq(a->n_parts, 2);
	ck_assert_uint_eq(a->parts[0].count, 3);
	ck_assert_str_eq(a->parts[0].label, "x");
	ck_assert_uint_eq(a->parts[1].count, 0);
	ck_assert_ptr_null(a->parts[1].label);
	ck_assert_str_eq(b->path, "/b");
	ck_assert_uint_eq(b->big, 0);
	ck_assert_int_eq(b->n_parts, 0);
	ctx_free(&c);
}
END_TEST

struct bad_case {
	const char *text;
	const char *message; /* the whole message */
};

static const struct bad_case bad_cases[] = {
    {"part {\n}\n", "t:1:1: Unknown section 'part'; valid sections are: top, thing."},
    {"thng x {\n}\n",
     "t:1:1: Unknown section 'thng'; did you mean 'thing'? Valid sections are: top, thing."},
    {"thing a {\n\tpath /a\n\tpart {\n\t\tthing b {\n\t\t}\n\t}\n}\n",
     "t:4:3: A 'thing' section cannot be inside part; is the '}' closing part missing?"},
    {"thing a {\n\tpath /a\n\tpart { count 1 }\n\tpart { count 1 }\n\tpart { count 1 }\n}\n",
     "t:5:2: Too many 'part' sections (more than 2)."},
    {"thing a { path /a }\nthing b { path /b }\nthing c { path /c }\nthing d { path /d }\n",
     "t:4:1: Too many 'thing' sections (more than 3); three is plenty."},
    {"top {\n}\ntop {\n}\n", "t:3:1: A second 'top' section; the first is at line 1, merge them."},
    {"thing a {\n\tpath /a\n\tpart { label y }\n}\n",
     "t:3:2: The part section has no 'count' (how many); add a 'count' line to it."},
    {"thing a {\n}\n", "t:1:1: The thing 'a' section has no 'path' (a path); add a 'path' line "
                       "to it."},
    {"thing a { path /a }\nthing b { path /a }\n",
     "t:2:16: Thing 'b' has the same path '/a' as thing 'a' (line 1); each thing needs its own."},
    {"thing a { path /a }\nthing a { path /b }\n",
     "t:2:7: Duplicate thing name 'a'; the first is at line 1."},
    {"thing a { path /a; count 1 }\n",
     "t:1:20: Key 'count' belongs in a 'part' section, not in thing 'a'."},
    {"thing a { path /a; wrd w }\n",
     "t:1:20: Unknown key 'wrd' in thing 'a'; did you mean 'word'?"},
    {"top { zz 1 }\n", "t:1:7: Unknown key 'zz' in top; valid keys are: top-word."},
    {"thing a { path /a; word nope }\n", "t:1:25: word 'nope' must start with 'w'."},
    {"thing a { path /a; word }\n",
     "t:1:20: Key 'word' in thing 'a' needs a value: a word starting with w."},
    {"thing a { path /a; big 0 }\n",
     "t:1:24: big 0 is out of range; use 1 to 18446744073709551615."},
    {"thing a { path /a; big 18446744073709551616 }\n",
     "t:1:24: Bad number '18446744073709551616' for big; expected digits only."},
    {"thing a { path /a; wait 2.5s }\n", "t:1:25: wait 2.5s is out of range; use 1ms to 2s."},
    {"thing a { path /a; color green }\n", "t:1:26: Bad color 'green'; choose one of red, blue."},
    {"thing a { path /a; text bad }\n", "t:1:1: Thing 'a' is bad."},
    {"thing a { path /a; addr x }\n",
     "t:1:25: addr 'x' is not HOST:PORT (no ':PORT'); write it like 0.0.0.0:10809 or "
     "[::1]:10809."},
    {"thing a { path /a; size 1M1 }\n",
     "t:1:25: Bad size '1M1' for size; expected a size like 4096, 64K or 32M."},
};

START_TEST(test_bad)
{
	for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		struct ctx c;
		char err[256];

		ck_assert_msg(run(bad_cases[i].text, &c, err, sizeof(err)) == -1,
		              "case %zu was accepted", i);
		ck_assert_msg(strcmp(err, bad_cases[i].message) == 0,
		              "case %zu: want '%s' got '%s'", i, bad_cases[i].message, err);
		ctx_free(&c);
	}
}
END_TEST

START_TEST(test_helpers)
{
	static const struct conf_section many[CONF_SCHEMA_MAX_SECTIONS + 1] = {{.type = "x"}};
	const struct conf_schema too_big = {many, CONF_SCHEMA_MAX_SECTIONS + 1};
	const struct conf_value v = {.text = "host:99999", .line = 2, .col = 3};
	struct conf_parse cp;
	struct conf_block root = {0};
	char err[256], *field = NULL;

	ck_assert(conf_schema_name_valid("a.b_c-1"));
	ck_assert(!conf_schema_name_valid(""));
	ck_assert(!conf_schema_name_valid(".."));
	ck_assert(!conf_schema_name_valid("a b"));
	ck_assert(conf_schema_is_section(&toy, "thing"));
	ck_assert(!conf_schema_is_section(&toy, "part")); /* only inside a thing */

	conf_parse_init(&cp, "t", err, sizeof(err));
	ck_assert_int_eq(conf_schema_set_string(&cp, &field, "one"), 0);
	ck_assert_int_eq(conf_schema_set_string(&cp, &field, "two"), 0);
	ck_assert_str_eq(field, "two");
	free(field);
	ck_assert_int_eq(conf_schema_addr_error(&cp, &thing_keys[2], &v, NULL, "h:1"), -1);
	ck_assert_str_eq(err,
	                 "t:2:3: addr port '99999' is not valid; use a number from 1 to 65535.");

	conf_parse_init(&cp, "t", err, sizeof(err));
	ck_assert_int_eq(conf_schema_validate(&cp, &too_big, &root, NULL), -1);
	ck_assert_str_eq(err, "t:1:1: The schema has 17 sections, more than the 16 supported.");
}
END_TEST

static Suite *conf_schema_suite(void)
{
	Suite *s = suite_create("conf_schema");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_good);
	tcase_add_test(tc, test_bad);
	tcase_add_test(tc, test_helpers);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(conf_schema_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
