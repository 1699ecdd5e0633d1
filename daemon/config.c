/* SPDX-License-Identifier: MIT */
/*
 * hak.conf is read in two steps. A lexer and parser that know only the syntax build a tree of
 * blocks and directives, each remembering its line and column. A schema walk that knows what the
 * sections and keys mean then maps the tree into struct hak_config. A new section or key is a row
 * in the tables below (plus, for a new section, an open() and maybe a check() callback); the parser
 * never changes for it. The tree supports nested blocks so that a section may later live inside
 * another one (set cfg_section.parent); today every section is top-level.
 *
 * Input is untrusted (it is fuzzed): every size is bounded, every allocation of the tree comes from
 * one arena freed in one place, and only the first error is reported.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CONFIG_MAX_BYTES   (1u << 20) /* a config larger than this is a mistake, not a config */
#define CONFIG_MAX_LINE    4096u
#define CONFIG_MAX_DEPTH   8u  /* bounds the parser's recursion */
#define CONFIG_MAX_VALUES  16u /* per directive; no key takes more than a few */
#define CONFIG_MAX_VOLUMES 4096u
#define CONFIG_NAME_MAX    64u
#define CONFIG_SOCKET_MAX  107u /* sizeof(sockaddr_un.sun_path) - 1 */
#define CONFIG_MAX_KEYS    32u  /* per section; sizes the "seen" table of apply_directives() */
#define ARENA_CHUNK        (64u * 1024)

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* ---- arena: the whole syntax tree is freed at once, so no error path can leak a node ---- */

struct arena_chunk {
	struct arena_chunk *next;
	size_t used, size;
	max_align_t data[];
};

struct arena {
	struct arena_chunk *head;
};

static void *arena_alloc(struct arena *a, size_t n)
{
	struct arena_chunk *c = a->head;
	void *p;

	n = (n + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
	if (!c || c->size - c->used < n) {
		size_t sz = n > ARENA_CHUNK ? n : ARENA_CHUNK;
		c = malloc(sizeof(*c) + sz);
		if (!c)
			return NULL;
		c->size = sz;
		c->used = 0;
		c->next = a->head;
		a->head = c;
	}
	p = (char *)c->data + c->used;
	c->used += n;
	memset(p, 0, n);
	return p;
}

static void arena_free(struct arena *a)
{
	while (a->head) {
		struct arena_chunk *next = a->head->next;
		free(a->head);
		a->head = next;
	}
}

/* ---- syntax tree ---- */

struct cfg_value {
	struct cfg_value *next;
	const char *text;
	unsigned line, col;
};

struct cfg_directive {
	struct cfg_directive *next;
	const char *key;
	unsigned line, col;
	struct cfg_value *vals;
	unsigned n_vals;
};

struct cfg_block {
	struct cfg_block *next;
	const char *type; /* NULL for the root (the file itself) */
	const char *name; /* NULL when the header has no name */
	unsigned line, col, name_line, name_col;
	struct cfg_directive *dirs, **dirs_tail;
	struct cfg_block *children, **children_tail;
};

enum tok_type { T_EOF, T_NL, T_SEMI, T_LBRACE, T_RBRACE, T_WORD, T_STRING };

struct token {
	enum tok_type type;
	const char *text; /* T_WORD, T_STRING: NUL-terminated copy in the arena */
	unsigned line, col;
};

/* Values that must be unique (section names, CFG_UNIQUE keys), with the block that set them. */
struct uniq_entry {
	const void *ns; /* what the value is unique among: a cfg_section or a cfg_key */
	const char *value;
	const struct cfg_block *blk;
};

struct uniq_table {
	struct uniq_entry *slots; /* open addressing; in the arena, so never freed one by one */
	size_t cap, used;
};

struct parser {
	const char *name;
	char *err;
	size_t errlen;
	int failed, enomem;
	struct arena arena;
	const char *p, *end;
	unsigned line, col;
	struct token peek;
	int has_peek;
	struct uniq_table uniq;
};

/* The first error wins: later ones are usually consequences of it. */
static int perr(struct parser *ps, unsigned line, unsigned col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int perr(struct parser *ps, unsigned line, unsigned col, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (ps->failed || !ps->err || ps->errlen == 0)
		goto out;
	n = snprintf(ps->err, ps->errlen, "%s:%u:%u: ", ps->name, line, col);
	if (n < 0 || (size_t)n >= ps->errlen)
		goto out;
	va_start(ap, fmt);
	vsnprintf(ps->err + n, ps->errlen - (size_t)n, fmt, ap);
	va_end(ap);
out:
	ps->failed = 1;
	return -1;
}

static int perr_oom(struct parser *ps)
{
	if (!ps->failed && ps->err && ps->errlen)
		snprintf(ps->err, ps->errlen, "%s: out of memory while reading the configuration.",
		         ps->name);
	ps->failed = 1;
	ps->enomem = 1;
	return -1;
}

/* ---- lexer ---- */

/*
 * Checks that apply to the raw bytes, before any token: a NUL would silently cut strings short and
 * an overlong line is almost certainly not a config. Reported at the exact offending position.
 */
static int lex_precheck(struct parser *ps, const char *text, size_t len)
{
	unsigned line = 1, col = 1;

	if (len > CONFIG_MAX_BYTES)
		return perr(ps, 1, 1,
		            "The file is %zu bytes, bigger than the 1 MiB (%u bytes) limit for a "
		            "configuration; is this the right file?",
		            len, CONFIG_MAX_BYTES);
	for (size_t i = 0; i < len; i++) {
		if (text[i] == '\0')
			return perr(ps, line, col,
			            "NUL byte in the file; hak.conf must be plain text.");
		if (text[i] == '\n') {
			line++;
			col = 1;
			continue;
		}
		if (col > CONFIG_MAX_LINE)
			return perr(ps, line, col, "Line %u is longer than %u characters.", line,
			            CONFIG_MAX_LINE);
		col++;
	}
	return 0;
}

static void lex_advance(struct parser *ps)
{
	if (*ps->p == '\n') {
		ps->line++;
		ps->col = 1;
	} else {
		ps->col++;
	}
	ps->p++;
}

static int is_ctl(unsigned char c)
{
	return (c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f;
}

static int lex_ctl_error(struct parser *ps, unsigned line, unsigned col, unsigned char c)
{
	return perr(ps, line, col,
	            "Control character 0x%02x is not allowed; hak.conf must be plain text.", c);
}

static char *arena_strndup(struct parser *ps, const char *s, size_t n)
{
	char *d = arena_alloc(&ps->arena, n + 1);

	if (!d)
		return NULL;
	memcpy(d, s, n);
	d[n] = '\0';
	return d;
}

/* A bare word runs to whitespace, '{', '}' or ';'. A '"' inside it is a mistake, not a string. */
static int lex_word(struct parser *ps, struct token *t)
{
	const char *start = ps->p;

	while (ps->p < ps->end) {
		unsigned char c = (unsigned char)*ps->p;
		if (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '{' || c == '}' ||
		    c == ';' || is_ctl(c))
			break;
		if (c == '"')
			return perr(
			    ps, ps->line, ps->col,
			    "A '\"' in the middle of a value; put the whole value in double "
			    "quotes instead.");
		lex_advance(ps);
	}
	t->type = T_WORD;
	t->text = arena_strndup(ps, start, (size_t)(ps->p - start));
	return t->text ? 0 : perr_oom(ps);
}

/* "..." on one line, with \" and \\ as the only escapes. */
static int lex_string(struct parser *ps, struct token *t)
{
	const char *s = ps->p + 1, *q = s;
	char *out, *o;

	while (q < ps->end && *q != '"' && *q != '\n') {
		if (*q == '\\' && q + 1 < ps->end && q[1] != '\n')
			q++;
		q++;
	}
	if (q >= ps->end || *q != '"')
		return perr(ps, t->line, t->col,
		            "Unterminated string; close it with '\"' on the same line.");
	out = o = arena_alloc(&ps->arena, (size_t)(q - s) + 1);
	if (!out)
		return perr_oom(ps);
	for (const char *r = s; r < q; r++) {
		unsigned col = t->col + 1 + (unsigned)(r - s);
		if (is_ctl((unsigned char)*r))
			return lex_ctl_error(ps, t->line, col, (unsigned char)*r);
		if (*r == '\\') {
			if (is_ctl((unsigned char)r[1]))
				return lex_ctl_error(ps, t->line, col + 1, (unsigned char)r[1]);
			if (r[1] != '"' && r[1] != '\\')
				return perr(ps, t->line, col,
				            "Unknown escape '\\%c' in a string; only \\\" and \\\\ "
				            "are allowed.",
				            r[1]);
			r++;
		}
		*o++ = *r;
	}
	*o = '\0';
	ps->col += (unsigned)(q + 1 - ps->p);
	ps->p = q + 1;
	t->type = T_STRING;
	t->text = out;
	return 0;
}

static int lex_next(struct parser *ps, struct token *t)
{
	unsigned char c;

	if (ps->has_peek) {
		*t = ps->peek;
		ps->has_peek = 0;
		return 0;
	}
	for (;;) {
		if (ps->p >= ps->end)
			break;
		c = (unsigned char)*ps->p;
		if (c == ' ' || c == '\t' || c == '\r') {
			lex_advance(ps);
		} else if (c == '#') {
			while (ps->p < ps->end && *ps->p != '\n')
				lex_advance(ps);
		} else {
			break;
		}
	}
	memset(t, 0, sizeof(*t));
	t->line = ps->line;
	t->col = ps->col;
	if (ps->p >= ps->end) {
		t->type = T_EOF;
		return 0;
	}
	c = (unsigned char)*ps->p;
	switch (c) {
	case '\n':
		t->type = T_NL;
		break;
	case ';':
		t->type = T_SEMI;
		break;
	case '{':
		t->type = T_LBRACE;
		break;
	case '}':
		t->type = T_RBRACE;
		break;
	case '"':
		return lex_string(ps, t);
	default:
		if (is_ctl(c))
			return lex_ctl_error(ps, t->line, t->col, c);
		return lex_word(ps, t);
	}
	lex_advance(ps);
	return 0;
}

static void lex_unget(struct parser *ps, const struct token *t)
{
	ps->peek = *t;
	ps->has_peek = 1;
}

/* ---- parser: syntax only, meaning comes later ---- */

static struct cfg_block *block_new(struct parser *ps, const struct token *type)
{
	struct cfg_block *b = arena_alloc(&ps->arena, sizeof(*b));

	if (!b)
		return NULL;
	b->type = type ? type->text : NULL;
	b->line = type ? type->line : 1;
	b->col = type ? type->col : 1;
	b->dirs_tail = &b->dirs;
	b->children_tail = &b->children;
	return b;
}

static int is_top_section(const char *type);
static int parse_body(struct parser *ps, struct cfg_block *blk, unsigned depth);

static int parse_open_block(struct parser *ps, struct cfg_block *parent, const struct token *first,
                            const struct cfg_value *vals, unsigned n_vals, unsigned depth)
{
	struct cfg_block *b;

	if (n_vals > 1)
		return perr(ps, vals->next->line, vals->next->col,
		            "Too many words in the section header; write '%.80s NAME {'.",
		            first->text);
	if (depth >= CONFIG_MAX_DEPTH)
		return perr(ps, first->line, first->col,
		            "Sections are nested more than %u deep; is a '}' missing?",
		            CONFIG_MAX_DEPTH);
	b = block_new(ps, first);
	if (!b)
		return perr_oom(ps);
	if (n_vals == 1) {
		b->name = vals->text;
		b->name_line = vals->line;
		b->name_col = vals->col;
	}
	*parent->children_tail = b;
	parent->children_tail = &b->next;
	return parse_body(ps, b, depth + 1);
}

/* A statement is KEY VALUE... ending at a newline, ';', '}' or end of file, or a block header. */
static int parse_statement(struct parser *ps, struct cfg_block *blk, const struct token *first,
                           unsigned depth)
{
	struct cfg_value *vals = NULL, **tail = &vals;
	struct cfg_directive *d;
	unsigned n = 0;
	struct token t;

	for (;;) {
		if (lex_next(ps, &t) < 0)
			return -1;
		if (t.type != T_WORD && t.type != T_STRING)
			break;
		if (n >= CONFIG_MAX_VALUES)
			return perr(ps, t.line, t.col,
			            "Too many values for '%.80s' (more than %u).", first->text,
			            CONFIG_MAX_VALUES);
		struct cfg_value *v = arena_alloc(&ps->arena, sizeof(*v));
		if (!v)
			return perr_oom(ps);
		v->text = t.text;
		v->line = t.line;
		v->col = t.col;
		*tail = v;
		tail = &v->next;
		n++;
	}
	if (t.type == T_LBRACE)
		return parse_open_block(ps, blk, first, vals, n, depth);
	if (t.type == T_RBRACE || t.type == T_EOF)
		lex_unget(ps, &t);
	if (!blk->type) {
		if (is_top_section(first->text))
			return perr(ps, first->line, first->col,
			            "The '%s' section header must end with '{' on the same line.",
			            first->text);
		return perr(ps, first->line, first->col,
		            "'%.80s' is outside any section; put keys inside 'global {' or "
		            "'volume NAME {'.",
		            first->text);
	}
	d = arena_alloc(&ps->arena, sizeof(*d));
	if (!d)
		return perr_oom(ps);
	d->key = first->text;
	d->line = first->line;
	d->col = first->col;
	d->vals = vals;
	d->n_vals = n;
	*blk->dirs_tail = d;
	blk->dirs_tail = &d->next;
	return 0;
}

/* Statements until the block's '}' (or end of file for the root). */
static int parse_body(struct parser *ps, struct cfg_block *blk, unsigned depth)
{
	struct token t;

	for (;;) {
		if (lex_next(ps, &t) < 0)
			return -1;
		switch (t.type) {
		case T_NL:
		case T_SEMI:
			break;
		case T_EOF:
			if (!blk->type)
				return 0;
			return perr(
			    ps, blk->line, blk->col,
			    "Unbalanced braces: this '%s' section is never closed; add a '}' "
			    "on its own line at its end.",
			    blk->type);
		case T_RBRACE:
			if (blk->type)
				return 0;
			return perr(ps, t.line, t.col,
			            "Unbalanced braces: '}' without a matching '{'.");
		case T_LBRACE:
			return perr(
			    ps, t.line, t.col,
			    "'{' without a section name before it; write 'volume NAME {' or "
			    "'global {'.");
		case T_STRING:
			return perr(ps, t.line, t.col,
			            "Expected a key or section name here, not a quoted string.");
		case T_WORD:
			if (parse_statement(ps, blk, &t, depth) < 0)
				return -1;
			break;
		}
	}
}

/* ---- schema ---- */

enum cfg_kind { CFG_STRING, CFG_PATH, CFG_SIZE, CFG_BOOL, CFG_UINT, CFG_ENUM, CFG_ADDR };

#define CFG_REQUIRED (1u << 0) /* the section is incomplete without it */
#define CFG_UNIQUE   (1u << 1) /* no two sections of the type may have the same value */
#define CFG_POW2     (1u << 2) /* SIZE, UINT: a power of two */
#define CFG_SOCKET   (1u << 3) /* PATH: a UNIX socket, so it must fit in sun_path */

struct cfg_key {
	const char *key;
	enum cfg_kind kind;
	unsigned flags;
	uint64_t min, max; /* SIZE, UINT */
	size_t offset;     /* of the field in the section's struct */
	size_t width;      /* sizeof the field: SIZE and UINT store 4 or 8 bytes */
	int (*parse_enum)(const char *s, void *field);
	const char *choices; /* ENUM, for messages */
	const char *doc;     /* what it is, for the "missing key" message */
};

struct cfg_section {
	const char *type;
	const char *parent; /* the enclosing section type; NULL at top level */
	int named;          /* 1: "TYPE NAME {"; 0: "TYPE {" */
	unsigned max_count;
	const struct cfg_key *keys;
	size_t n_keys;
	/* Returns where the keys are stored (base for cfg_key.offset), NULL after perr(). */
	void *(*open)(struct parser *ps, struct hak_config *cfg, const struct cfg_block *blk,
	              void *parent_base);
	/* Checks between keys and against earlier sections, once all keys are set. */
	int (*check)(struct parser *ps, struct hak_config *cfg, const struct cfg_block *blk,
	             void *base);
};

static int enum_log_level(const char *s, void *field)
{
	return log_level_parse(s, field);
}

static int enum_io_kind(const char *s, void *field)
{
	return io_kind_parse(s, field);
}

#define GFIELD(m) offsetof(struct hak_config, m), sizeof(((struct hak_config *)0)->m)
#define VFIELD(m) offsetof(struct hak_volume_cfg, m), sizeof(((struct hak_volume_cfg *)0)->m)

static const struct cfg_key global_keys[] = {
    {"control-socket", CFG_PATH, CFG_SOCKET, 0, 0, GFIELD(control_socket), NULL, NULL,
     "the UNIX socket hakctl talks to"},
    {"log-level", CFG_ENUM, 0, 0, 0, GFIELD(log_level), enum_log_level,
     "err, warn, notice, info, debug", "the least important messages logged"},
    {"io-engine", CFG_ENUM, 0, 0, 0, GFIELD(io_engine), enum_io_kind, "auto, uring, pool",
     "how the backing stores are accessed"},
    {"io-depth", CFG_UINT, 0, 8, 4096, GFIELD(io_depth), NULL, NULL,
     "the most disk requests in flight"},
    {"max-clients", CFG_UINT, 0, 1, 1024, GFIELD(max_clients), NULL, NULL,
     "the most NBD clients per volume"},
};

static const struct cfg_key volume_keys[] = {
    {"backing", CFG_PATH, CFG_REQUIRED | CFG_UNIQUE, 0, 0, VFIELD(backing), NULL, NULL,
     "the file or block device to serve"},
    {"nbd-socket", CFG_PATH, CFG_REQUIRED | CFG_UNIQUE | CFG_SOCKET, 0, 0, VFIELD(nbd_socket), NULL,
     NULL, "the UNIX socket NBD clients connect to"},
    {"nbd-listen", CFG_ADDR, CFG_UNIQUE, 0, 0, VFIELD(nbd_listen), NULL, NULL,
     "the TCP address NBD clients connect to"},
    {"description", CFG_STRING, 0, 0, 0, VFIELD(description), NULL, NULL,
     "a text shown to NBD clients"},
    {"read-only", CFG_BOOL, 0, 0, 0, VFIELD(read_only), NULL, NULL,
     "whether clients may only read"},
    {"direct-io", CFG_BOOL, 0, 0, 0, VFIELD(direct_io), NULL, NULL,
     "whether to bypass the page cache"},
    {"block-size-min", CFG_SIZE, CFG_POW2, 1, 65536, VFIELD(block_size_min), NULL, NULL,
     "the smallest I/O size clients may use"},
    {"max-payload", CFG_SIZE, 0, 64u << 10, 64u << 20, VFIELD(max_payload), NULL, NULL,
     "the largest request clients may send"},
};

_Static_assert(ARRAY_SIZE(global_keys) <= CONFIG_MAX_KEYS, "raise CONFIG_MAX_KEYS");
_Static_assert(ARRAY_SIZE(volume_keys) <= CONFIG_MAX_KEYS, "raise CONFIG_MAX_KEYS");

static void *global_open(struct parser *ps, struct hak_config *cfg, const struct cfg_block *blk,
                         void *parent_base);
static void *volume_open(struct parser *ps, struct hak_config *cfg, const struct cfg_block *blk,
                         void *parent_base);
static int volume_check(struct parser *ps, struct hak_config *cfg, const struct cfg_block *blk,
                        void *base);

static const struct cfg_section sections[] = {
    {"global", NULL, 0, 1, global_keys, ARRAY_SIZE(global_keys), global_open, NULL},
    {"volume", NULL, 1, CONFIG_MAX_VOLUMES, volume_keys, ARRAY_SIZE(volume_keys), volume_open,
     volume_check},
};

static int is_top_section(const char *type)
{
	for (size_t i = 0; i < ARRAY_SIZE(sections); i++)
		if (!sections[i].parent && strcmp(sections[i].type, type) == 0)
			return 1;
	return 0;
}

/* ---- helpers for messages ---- */

/* Optimal string alignment distance, so a swapped pair of letters counts as one typo. */
static unsigned edit_distance(const char *a, const char *b)
{
	unsigned d[64][64];
	size_t la = strlen(a), lb = strlen(b);

	if (la >= 64 || lb >= 64)
		return UINT_MAX;
	for (size_t i = 0; i <= la; i++)
		d[i][0] = (unsigned)i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = (unsigned)j;
	for (size_t i = 1; i <= la; i++) {
		for (size_t j = 1; j <= lb; j++) {
			unsigned cost = a[i - 1] != b[j - 1];
			unsigned best = d[i - 1][j - 1] + cost;
			if (d[i - 1][j] + 1 < best)
				best = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < best)
				best = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    d[i - 2][j - 2] + 1 < best)
				best = d[i - 2][j - 2] + 1;
			d[i][j] = best;
		}
	}
	return d[la][lb];
}

/* Closest of names[] within distance 2, or NULL; very short words would match anything. */
static const char *suggest(const char *word, const char *const *names, size_t n)
{
	const char *best = NULL;
	unsigned best_d = 3;

	if (strlen(word) < 3)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		unsigned dist = edit_distance(word, names[i]);
		if (dist < best_d) {
			best_d = dist;
			best = names[i];
		}
	}
	return best;
}

static void block_label(const struct cfg_block *blk, char *buf, size_t len)
{
	if (blk->name)
		snprintf(buf, len, "%s '%.80s'", blk->type, blk->name);
	else
		snprintf(buf, len, "%s", blk->type);
}

static void fmt_size(uint64_t v, char *buf, size_t len)
{
	static const char units[] = "TGMK";

	for (int i = 0; i < 4; i++) {
		unsigned shift = (unsigned)(40 - 10 * i);
		if (v && v % (1ull << shift) == 0) {
			snprintf(buf, len, "%llu%c", (unsigned long long)(v >> shift), units[i]);
			return;
		}
	}
	snprintf(buf, len, "%llu", (unsigned long long)v);
}

/* "a, b, c": the valid choices, for messages. */
static void list_append(char *list, size_t size, const char *item)
{
	size_t used = strlen(list);

	snprintf(list + used, size - used, "%s%s", used ? ", " : "", item);
}

static const struct cfg_directive *dir_find(const struct cfg_block *blk, const char *key)
{
	for (const struct cfg_directive *d = blk->dirs; d; d = d->next)
		if (strcmp(d->key, key) == 0)
			return d;
	return NULL;
}

static const struct cfg_key *key_find(const struct cfg_section *sec, const char *key)
{
	for (size_t i = 0; i < sec->n_keys; i++)
		if (strcmp(sec->keys[i].key, key) == 0)
			return &sec->keys[i];
	return NULL;
}

/* ---- values ---- */

static int parse_number(const char *s, int allow_suffix, uint64_t *out)
{
	uint64_t v = 0;
	unsigned shift = 0;

	if (*s < '0' || *s > '9')
		return -1;
	for (; *s >= '0' && *s <= '9'; s++) {
		unsigned digit = (unsigned)(*s - '0');
		if (v > (UINT64_MAX - digit) / 10)
			return -1;
		v = v * 10 + digit;
	}
	if (allow_suffix && *s) {
		const char *u = strchr("KMGT", *s & ~0x20);
		if (!u || !(*s & ~0x20))
			return -1;
		shift = 10 * (unsigned)(u - "KMGT" + 1);
		s++;
	}
	if (*s || (shift && v > (UINT64_MAX >> shift)))
		return -1;
	*out = v << shift;
	return 0;
}

static int set_string(struct parser *ps, void *field, const char *s)
{
	char **dst = field;
	char *copy = strdup(s);

	if (!copy)
		return perr_oom(ps);
	free(*dst);
	*dst = copy;
	return 0;
}

static void store_uint(void *field, size_t width, uint64_t v)
{
	if (width == sizeof(uint64_t)) {
		memcpy(field, &v, sizeof(v));
	} else {
		uint32_t v32 = (uint32_t)v;
		memcpy(field, &v32, sizeof(v32));
	}
}

static int check_path(struct parser *ps, const struct cfg_key *k, const struct cfg_value *v)
{
	size_t len = strlen(v->text);

	if (v->text[0] != '/')
		return perr(ps, v->line, v->col,
		            "%s '%.80s' must be an absolute path (starting with '/').", k->key,
		            v->text);
	if ((k->flags & CFG_SOCKET) && len > CONFIG_SOCKET_MAX)
		return perr(ps, v->line, v->col,
		            "%s is %zu bytes long; a UNIX socket path may be at most %u bytes.",
		            k->key, len, CONFIG_SOCKET_MAX);
	return 0;
}

static int addr_error(struct parser *ps, const struct cfg_key *k, const struct cfg_value *v,
                      const char *why)
{
	return perr(ps, v->line, v->col,
	            "%s '%.80s' is not HOST:PORT (%s); write it like 0.0.0.0:10809 or "
	            "[::1]:10809.",
	            k->key, v->text, why);
}

/* HOST:PORT with a numeric port; an IPv6 host must be bracketed, or its colons are ambiguous. */
static int check_addr(struct parser *ps, const struct cfg_key *k, const struct cfg_value *v)
{
	const char *s = v->text, *port;
	uint64_t n;

	if (s[0] == '[') {
		const char *close = strchr(s, ']');
		char host[INET6_ADDRSTRLEN];
		struct in6_addr a6;
		if (!close)
			return addr_error(ps, k, v, "no ']' after the IPv6 address");
		if (close[1] != ':')
			return addr_error(ps, k, v, "no ':PORT' after ']'");
		if ((size_t)(close - s - 1) >= sizeof(host))
			return addr_error(ps, k, v, "the IPv6 address is too long");
		memcpy(host, s + 1, (size_t)(close - s - 1));
		host[close - s - 1] = '\0';
		if (inet_pton(AF_INET6, host, &a6) != 1)
			return addr_error(ps, k, v, "the part in brackets is not an IPv6 address");
		port = close + 2;
	} else {
		const char *colon = strrchr(s, ':');
		if (!colon)
			return addr_error(ps, k, v, "no ':PORT'");
		if (memchr(s, ':', (size_t)(colon - s)))
			return addr_error(ps, k, v, "an IPv6 address must be in brackets");
		if (colon == s)
			return addr_error(ps, k, v, "the host is empty");
		for (const char *h = s; h < colon; h++)
			if (!strchr(
			        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_",
			        *h))
				return addr_error(ps, k, v, "the host has a character not allowed");
		port = colon + 1;
	}
	if (parse_number(port, 0, &n) < 0 || n < 1 || n > 65535)
		return perr(ps, v->line, v->col,
		            "%s port '%.80s' is not valid; use a number from 1 to 65535.", k->key,
		            port);
	return 0;
}

static int parse_bool(const char *s, int *out)
{
	static const char *const yes[] = {"yes", "true", "on"}, *const no[] = {"no", "false",
	                                                                       "off"};

	for (size_t i = 0; i < ARRAY_SIZE(yes); i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = 1;
			return 0;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = 0;
			return 0;
		}
	}
	return -1;
}

static int apply_number(struct parser *ps, const struct cfg_key *k, const struct cfg_value *v,
                        void *field)
{
	char lo[32], hi[32];
	uint64_t n;

	if (parse_number(v->text, k->kind == CFG_SIZE, &n) < 0) {
		if (k->kind == CFG_SIZE)
			return perr(ps, v->line, v->col,
			            "Bad size '%.80s' for %s; expected a size like 4096, 64K or "
			            "32M.",
			            v->text, k->key);
		return perr(ps, v->line, v->col, "Bad number '%.80s' for %s; expected digits only.",
		            v->text, k->key);
	}
	if (n < k->min || n > k->max) {
		if (k->kind == CFG_SIZE) {
			fmt_size(k->min, lo, sizeof(lo));
			fmt_size(k->max, hi, sizeof(hi));
		} else {
			snprintf(lo, sizeof(lo), "%llu", (unsigned long long)k->min);
			snprintf(hi, sizeof(hi), "%llu", (unsigned long long)k->max);
		}
		return perr(ps, v->line, v->col, "%s %.80s is out of range; use %s to %s.", k->key,
		            v->text, lo, hi);
	}
	if ((k->flags & CFG_POW2) && (n & (n - 1)))
		return perr(ps, v->line, v->col,
		            "%s %.80s is not a power of two; use for example 512, 4K or 64K.",
		            k->key, v->text);
	store_uint(field, k->width, n);
	return 0;
}

static void kind_hint(const struct cfg_key *k, char *buf, size_t len)
{
	char lo[32], hi[32];

	switch (k->kind) {
	case CFG_STRING:
		snprintf(buf, len, "a text, in double quotes if it has spaces");
		break;
	case CFG_PATH:
		snprintf(buf, len, "an absolute path");
		break;
	case CFG_SIZE:
		fmt_size(k->min, lo, sizeof(lo));
		fmt_size(k->max, hi, sizeof(hi));
		snprintf(buf, len, "a size from %s to %s", lo, hi);
		break;
	case CFG_BOOL:
		snprintf(buf, len, "yes or no");
		break;
	case CFG_UINT:
		snprintf(buf, len, "a number from %llu to %llu", (unsigned long long)k->min,
		         (unsigned long long)k->max);
		break;
	case CFG_ENUM:
		snprintf(buf, len, "one of %s", k->choices);
		break;
	case CFG_ADDR:
		snprintf(buf, len, "HOST:PORT, like 0.0.0.0:10809 or [::1]:10809");
		break;
	}
}

static int apply_value(struct parser *ps, const struct cfg_block *blk, const struct cfg_key *k,
                       const struct cfg_directive *d, void *base)
{
	void *field = (char *)base + k->offset;
	const struct cfg_value *v = d->vals;
	char label[128], hint[96];
	int b;

	block_label(blk, label, sizeof(label));
	if (d->n_vals == 0) {
		kind_hint(k, hint, sizeof(hint));
		return perr(ps, d->line, d->col, "Key '%s' in %s needs a value: %s.", k->key, label,
		            hint);
	}
	if (d->n_vals > 1)
		return perr(
		    ps, v->next->line, v->next->col,
		    "Key '%s' takes one value but has %u; put a value with spaces in double "
		    "quotes.",
		    k->key, d->n_vals);
	switch (k->kind) {
	case CFG_PATH:
		if (check_path(ps, k, v) < 0)
			return -1;
		return set_string(ps, field, v->text);
	case CFG_ADDR:
		if (check_addr(ps, k, v) < 0)
			return -1;
		return set_string(ps, field, v->text);
	case CFG_STRING:
		return set_string(ps, field, v->text);
	case CFG_BOOL:
		if (parse_bool(v->text, &b) < 0)
			return perr(ps, v->line, v->col,
			            "Bad boolean '%.80s' for %s; use yes or no (or true/false, "
			            "on/off).",
			            v->text, k->key);
		memcpy(field, &b, sizeof(b));
		return 0;
	case CFG_SIZE:
	case CFG_UINT:
		return apply_number(ps, k, v, field);
	case CFG_ENUM:
		if (k->parse_enum(v->text, field) < 0)
			return perr(ps, v->line, v->col, "Bad %s '%.80s'; choose one of %s.",
			            k->key, v->text, k->choices);
		return 0;
	}
	return 0;
}

/* ---- uniqueness: a hash table, so thousands of volumes do not cost a pairwise comparison ---- */

static size_t uniq_hash(const void *ns, const char *s)
{
	uint64_t h = 14695981039346656037ull ^ (uint64_t)(uintptr_t)ns;

	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ull;
	}
	return (size_t)(h ^ (h >> 32));
}

static struct uniq_entry *uniq_slot(struct uniq_entry *slots, size_t cap, const void *ns,
                                    const char *value)
{
	size_t i = uniq_hash(ns, value) & (cap - 1);

	while (slots[i].ns && (slots[i].ns != ns || strcmp(slots[i].value, value) != 0))
		i = (i + 1) & (cap - 1);
	return &slots[i];
}

static int uniq_grow(struct parser *ps)
{
	struct uniq_table *t = &ps->uniq;
	size_t cap = t->cap ? t->cap * 2 : 64;
	struct uniq_entry *slots = arena_alloc(&ps->arena, cap * sizeof(*slots));

	if (!slots)
		return perr_oom(ps);
	for (size_t i = 0; i < t->cap; i++)
		if (t->slots[i].ns)
			*uniq_slot(slots, cap, t->slots[i].ns, t->slots[i].value) = t->slots[i];
	t->slots = slots;
	t->cap = cap;
	return 0;
}

/*
 * Records that blk uses value among ns. Returns 0 and sets *first to the block that used it
 * before (NULL if none), or -1 after perr().
 */
static int uniq_add(struct parser *ps, const void *ns, const char *value,
                    const struct cfg_block *blk, const struct cfg_block **first)
{
	struct uniq_entry *e;

	*first = NULL;
	if (ps->uniq.used * 2 >= ps->uniq.cap && uniq_grow(ps) < 0)
		return -1;
	e = uniq_slot(ps->uniq.slots, ps->uniq.cap, ns, value);
	if (e->ns) {
		*first = e->blk;
		return 0;
	}
	e->ns = ns;
	e->value = value;
	e->blk = blk;
	ps->uniq.used++;
	return 0;
}

/* ---- schema walk ---- */

static int unknown_key(struct parser *ps, const struct cfg_block *blk,
                       const struct cfg_section *sec, const struct cfg_directive *d)
{
	const char *names[CONFIG_MAX_KEYS], *hint;
	char label[128], list[512] = "";

	block_label(blk, label, sizeof(label));
	for (size_t i = 0; i < ARRAY_SIZE(sections); i++)
		if (&sections[i] != sec && key_find(&sections[i], d->key))
			return perr(ps, d->line, d->col,
			            "Key '%s' belongs in a '%s' section, not in %s.", d->key,
			            sections[i].type, label);
	for (size_t i = 0; i < sec->n_keys; i++) {
		names[i] = sec->keys[i].key;
		list_append(list, sizeof(list), names[i]);
	}
	hint = suggest(d->key, names, sec->n_keys);
	if (hint)
		return perr(ps, d->line, d->col, "Unknown key '%.80s' in %s; did you mean '%s'?",
		            d->key, label, hint);
	return perr(ps, d->line, d->col, "Unknown key '%.80s' in %s; valid keys are: %s.", d->key,
	            label, list);
}

/* Two volumes on one backing store or one socket would corrupt data or fail to start. */
static int check_unique(struct parser *ps, const struct cfg_block *blk, const struct cfg_key *k,
                        const struct cfg_value *v)
{
	const struct cfg_block *first;
	char label[128], other[128];

	if (uniq_add(ps, k, v->text, blk, &first) < 0)
		return -1;
	if (!first)
		return 0;
	block_label(blk, label, sizeof(label));
	block_label(first, other, sizeof(other));
	label[0] = (char)(label[0] & ~0x20); /* it starts the sentence */
	return perr(ps, v->line, v->col,
	            "%s has the same %s '%.80s' as %s (line %u); each %s needs its own.", label,
	            k->key, v->text, other, first->line, blk->type);
}

static int apply_directives(struct parser *ps, const struct cfg_block *blk,
                            const struct cfg_section *sec, void *base)
{
	const struct cfg_directive *seen[CONFIG_MAX_KEYS] = {0};
	char label[128];

	block_label(blk, label, sizeof(label));
	for (const struct cfg_directive *d = blk->dirs; d; d = d->next) {
		const struct cfg_key *k = key_find(sec, d->key);
		if (!k)
			return unknown_key(ps, blk, sec, d);
		size_t i = (size_t)(k - sec->keys);
		if (seen[i])
			return perr(ps, d->line, d->col,
			            "Duplicate key '%s' in %s; it is already set at line %u.",
			            k->key, label, seen[i]->line);
		seen[i] = d;
		if (apply_value(ps, blk, k, d, base) < 0)
			return -1;
		if ((k->flags & CFG_UNIQUE) && check_unique(ps, blk, k, d->vals) < 0)
			return -1;
	}
	for (size_t i = 0; i < sec->n_keys; i++)
		if ((sec->keys[i].flags & CFG_REQUIRED) && !seen[i])
			return perr(ps, blk->line, blk->col,
			            "The %s section has no '%s' (%s); add a '%s' line to it.",
			            label, sec->keys[i].key, sec->keys[i].doc, sec->keys[i].key);
	return 0;
}

static int name_valid(const char *s)
{
	size_t n = strlen(s);

	if (n < 1 || n > CONFIG_NAME_MAX || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
		return 0;
	return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == n;
}

static int check_header(struct parser *ps, const struct cfg_block *blk,
                        const struct cfg_section *sec)
{
	if (sec->named && !blk->name)
		return perr(ps, blk->line, blk->col,
		            "A '%s' section needs a name; write '%s NAME {'.", sec->type,
		            sec->type);
	if (!sec->named && blk->name)
		return perr(ps, blk->name_line, blk->name_col,
		            "A '%s' section takes no name; write '%s {'.", sec->type, sec->type);
	if (blk->name && !name_valid(blk->name))
		return perr(ps, blk->name_line, blk->name_col,
		            "Bad %s name '%.80s'; use 1 to %u letters, digits, '_', '.' or '-'.",
		            sec->type, blk->name, CONFIG_NAME_MAX);
	return 0;
}

static const struct cfg_section *section_find(const char *type, const struct cfg_section *parent)
{
	const char *ptype = parent ? parent->type : NULL;

	for (size_t i = 0; i < ARRAY_SIZE(sections); i++) {
		const struct cfg_section *s = &sections[i];
		if (strcmp(s->type, type) == 0 &&
		    (s->parent == ptype || (s->parent && ptype && strcmp(s->parent, ptype) == 0)))
			return s;
	}
	return NULL;
}

static int unknown_section(struct parser *ps, const struct cfg_block *parent,
                           const struct cfg_block *blk)
{
	const char *names[ARRAY_SIZE(sections)], *hint;
	char label[128], list[256] = "";
	size_t n = 0;

	if (parent->type) {
		block_label(parent, label, sizeof(label));
		return perr(ps, blk->line, blk->col,
		            "A '%.80s' section cannot be inside %s; is the '}' closing %s missing?",
		            blk->type, label, label);
	}
	for (size_t i = 0; i < ARRAY_SIZE(sections); i++) {
		if (sections[i].parent)
			continue;
		names[n++] = sections[i].type;
		list_append(list, sizeof(list), sections[i].type);
	}
	hint = suggest(blk->type, names, n);
	if (hint)
		return perr(ps, blk->line, blk->col,
		            "Unknown section '%.80s'; did you mean '%s'? Valid sections are: %s.",
		            blk->type, hint, list);
	return perr(ps, blk->line, blk->col, "Unknown section '%.80s'; valid sections are: %s.",
	            blk->type, list);
}

static int validate_children(struct parser *ps, struct hak_config *cfg,
                             const struct cfg_block *parent, const struct cfg_section *psec,
                             void *pbase);

static int validate_section(struct parser *ps, struct hak_config *cfg, const struct cfg_block *blk,
                            const struct cfg_section *sec, void *pbase)
{
	void *base;

	if (check_header(ps, blk, sec) < 0)
		return -1;
	base = sec->open(ps, cfg, blk, pbase);
	if (!base)
		return -1;
	if (apply_directives(ps, blk, sec, base) < 0)
		return -1;
	if (validate_children(ps, cfg, blk, sec, base) < 0)
		return -1;
	return sec->check ? sec->check(ps, cfg, blk, base) : 0;
}

/* Sections of one parent, in file order: known type, count limits, and names unique per type. */
static int validate_children(struct parser *ps, struct hak_config *cfg,
                             const struct cfg_block *parent, const struct cfg_section *psec,
                             void *pbase)
{
	unsigned counts[ARRAY_SIZE(sections)] = {0};
	const struct cfg_block *first[ARRAY_SIZE(sections)] = {0};

	for (const struct cfg_block *c = parent->children; c; c = c->next) {
		const struct cfg_section *sec = section_find(c->type, psec);
		if (!sec)
			return unknown_section(ps, parent, c);
		size_t i = (size_t)(sec - sections);
		if (counts[i] >= sec->max_count && sec->max_count == 1)
			return perr(ps, c->line, c->col,
			            "A second '%s' section; the first is at line %u, merge them.",
			            sec->type, first[i]->line);
		if (counts[i] >= sec->max_count)
			return perr(ps, c->line, c->col, "Too many '%s' sections (more than %u).",
			            sec->type, sec->max_count);
		if (!first[i])
			first[i] = c;
		counts[i]++;
		const struct cfg_block *o = NULL;
		if (c->name && uniq_add(ps, sec, c->name, c, &o) < 0)
			return -1;
		if (o)
			return perr(ps, c->name_line, c->name_col,
			            "Duplicate %s name '%s'; the first is at line %u.", c->type,
			            c->name, o->line);
		if (validate_section(ps, cfg, c, sec, pbase) < 0)
			return -1;
	}
	return 0;
}

static void *global_open(struct parser *ps, struct hak_config *cfg, const struct cfg_block *blk,
                         void *parent_base)
{
	(void)ps;
	(void)blk;
	(void)parent_base;
	return cfg;
}

static struct hak_volume_cfg *volume_append(struct hak_config *cfg, const char *name)
{
	struct hak_volume_cfg *vols, *v;

	if (cfg->n_volumes >= CONFIG_MAX_VOLUMES) {
		errno = ENOSPC;
		return NULL;
	}
	if (cfg->n_volumes == cfg->volumes_alloc) {
		size_t n = cfg->volumes_alloc ? cfg->volumes_alloc * 2 : 4;
		vols = realloc(cfg->volumes, n * sizeof(*vols));
		if (!vols)
			return NULL;
		cfg->volumes = vols;
		cfg->volumes_alloc = n;
	}
	v = &cfg->volumes[cfg->n_volumes];
	memset(v, 0, sizeof(*v));
	v->name = strdup(name);
	if (!v->name)
		return NULL;
	v->max_payload = HAK_DEFAULT_MAX_PAYLOAD;
	cfg->n_volumes++;
	return v;
}

static void *volume_open(struct parser *ps, struct hak_config *cfg, const struct cfg_block *blk,
                         void *parent_base)
{
	struct hak_volume_cfg *v = volume_append(cfg, blk->name);

	(void)parent_base;
	if (!v) {
		perr_oom(ps);
		return NULL;
	}
	v->line = blk->line;
	return v;
}

/* NBD requires the maximum payload to be a multiple of the minimum block size. */
static int volume_check_sizes(struct parser *ps, const struct cfg_block *blk,
                              const struct hak_volume_cfg *v)
{
	uint32_t min = v->block_size_min ? v->block_size_min : v->direct_io ? 4096 : 512;
	const struct cfg_directive *d = dir_find(blk, "max-payload");
	char a[32], b[32];

	if (v->max_payload % min == 0)
		return 0;
	if (!d)
		d = dir_find(blk, "block-size-min");
	fmt_size(v->max_payload, a, sizeof(a));
	fmt_size(min, b, sizeof(b));
	return perr(ps, d ? d->line : blk->line, d ? d->col : blk->col,
	            "max-payload %s of volume '%s' is not a multiple of its minimum block size %s.",
	            a, v->name, b);
}

static int volume_check(struct parser *ps, struct hak_config *cfg, const struct cfg_block *blk,
                        void *base)
{
	(void)cfg;
	return volume_check_sizes(ps, blk, base);
}

/* Checks that need the whole file, since 'global' may come after the volumes. */
static int validate_file(struct parser *ps, struct hak_config *cfg, const struct cfg_block *root)
{
	size_t i = 0;

	for (const struct cfg_block *c = root->children; c; c = c->next) {
		if (strcmp(c->type, "volume") != 0)
			continue;
		const struct hak_volume_cfg *v = &cfg->volumes[i++];
		if (strcmp(v->nbd_socket, cfg->control_socket) == 0) {
			const struct cfg_value *val = dir_find(c, "nbd-socket")->vals;
			return perr(ps, val->line, val->col,
			            "nbd-socket of volume '%s' is the control socket '%.80s'; use "
			            "another path.",
			            v->name, v->nbd_socket);
		}
	}
	return 0;
}

/* ---- public API ---- */

struct hak_config *config_new_default(void)
{
	struct hak_config *cfg = calloc(1, sizeof(*cfg));

	if (!cfg)
		return NULL;
	cfg->control_socket = strdup(HAK_DEFAULT_CONTROL_SOCKET);
	if (!cfg->control_socket) {
		free(cfg);
		return NULL;
	}
	cfg->log_level = LOG_LVL_INFO;
	cfg->io_engine = IO_KIND_AUTO;
	cfg->io_depth = HAK_DEFAULT_IO_DEPTH;
	cfg->max_clients = HAK_DEFAULT_MAX_CLIENTS;
	return cfg;
}

int config_parse(const char *text, size_t len, const char *name, struct hak_config **out, char *err,
                 size_t errlen)
{
	struct parser ps = {.name = name ? name : "<config>", .err = err, .errlen = errlen};
	struct hak_config *cfg = NULL;
	struct cfg_block *root;
	int ret = -1;

	*out = NULL;
	if (err && errlen)
		err[0] = '\0';
	if (!text) /* pointer arithmetic on NULL is undefined, even with len 0 */
		text = "";
	if (lex_precheck(&ps, text, len) < 0)
		goto out;
	ps.p = text;
	ps.end = text + len;
	ps.line = ps.col = 1;
	root = block_new(&ps, NULL);
	cfg = config_new_default();
	if (!root || !cfg || !(cfg->file = strdup(ps.name))) {
		perr_oom(&ps);
		goto out;
	}
	if (parse_body(&ps, root, 0) < 0 || validate_children(&ps, cfg, root, NULL, NULL) < 0 ||
	    validate_file(&ps, cfg, root) < 0)
		goto out;
	*out = cfg;
	cfg = NULL;
	ret = 0;
out:
	arena_free(&ps.arena);
	config_free(cfg);
	if (ret < 0)
		errno = ps.enomem ? ENOMEM : EINVAL;
	return ret;
}

int config_load(const char *path, struct hak_config **out, char *err, size_t errlen)
{
	size_t cap = CONFIG_MAX_BYTES + 1, len = 0; /* one more, so that too big is detected */
	char *buf = NULL;
	int fd = -1, ret = -1, saved;

	*out = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		goto io_error;
	buf = malloc(cap);
	if (!buf)
		goto io_error;
	while (len < cap) {
		ssize_t n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			goto io_error;
		if (n == 0)
			break;
		len += (size_t)n;
	}
	ret = config_parse(buf, len, path, out, err, errlen);
	goto out;
io_error:
	saved = errno;
	if (err && errlen)
		snprintf(err, errlen, "%s: cannot read the configuration file: %s.", path,
		         strerror(saved));
	errno = saved;
out:
	saved = errno;
	free(buf);
	if (fd >= 0)
		close(fd);
	errno = saved;
	return ret;
}

struct hak_volume_cfg *config_add_volume(struct hak_config *cfg, const char *name,
                                         const char *backing)
{
	struct hak_volume_cfg *v = NULL;
	char *copy;

	if (!cfg || !name || !backing || !name_valid(name)) {
		errno = EINVAL;
		goto out;
	}
	if (config_find_volume(cfg, name)) {
		errno = EEXIST;
		goto out;
	}
	copy = strdup(backing);
	if (!copy)
		goto out;
	v = volume_append(cfg, name);
	if (!v) {
		free(copy);
		goto out;
	}
	v->backing = copy;
out:
	return v;
}

const struct hak_volume_cfg *config_find_volume(const struct hak_config *cfg, const char *name)
{
	for (size_t i = 0; cfg && name && i < cfg->n_volumes; i++)
		if (strcmp(cfg->volumes[i].name, name) == 0)
			return &cfg->volumes[i];
	return NULL;
}

void config_free(struct hak_config *cfg)
{
	if (!cfg)
		return;
	for (size_t i = 0; i < cfg->n_volumes; i++) {
		struct hak_volume_cfg *v = &cfg->volumes[i];
		free(v->name);
		free(v->backing);
		free(v->nbd_socket);
		free(v->nbd_listen);
		free(v->description);
	}
	free(cfg->volumes);
	free(cfg->file);
	free(cfg->control_socket);
	free(cfg);
}
