/* SPDX-License-Identifier: MIT */
/*
 * Lexer and parser of hak.conf: syntax only, so that a new section or key never changes this
 * file. See conf_parse.h.
 */
#include "conf_parse.h"

#include <arpa/inet.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define ARENA_CHUNK (64u * 1024)

/* ---- arena: the whole syntax tree is freed at once ---- */

struct conf_arena_chunk {
	struct conf_arena_chunk *next;
	size_t used, size;
	max_align_t data[];
};

void *conf_parse_alloc(struct conf_parse *cp, size_t n)
{
	struct conf_arena_chunk *c = cp->arena;
	void *p;

	n = (n + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
	if (!c || c->size - c->used < n) {
		size_t sz = n > ARENA_CHUNK ? n : ARENA_CHUNK;
		c = malloc(sizeof(*c) + sz);
		if (!c)
			return NULL;
		c->size = sz;
		c->used = 0;
		c->next = cp->arena;
		cp->arena = c;
	}
	p = (char *)c->data + c->used;
	c->used += n;
	memset(p, 0, n);
	return p;
}

void conf_parse_free(struct conf_parse *cp)
{
	while (cp->arena) {
		struct conf_arena_chunk *next = cp->arena->next;
		free(cp->arena);
		cp->arena = next;
	}
	cp->uniq = NULL;
	cp->uniq_cap = cp->uniq_used = 0;
}

void conf_parse_init(struct conf_parse *cp, const char *name, char *err, size_t errlen)
{
	memset(cp, 0, sizeof(*cp));
	cp->name = name ? name : "<config>";
	cp->err = err;
	cp->errlen = errlen;
	if (err && errlen)
		err[0] = '\0';
}

void conf_parse_collect(struct conf_parse *cp, conf_parse_report_fn fn, void *arg)
{
	cp->report = fn;
	cp->report_arg = arg;
}

/* ---- errors: the buffer keeps the first one, the collector hears them all ---- */

/* The longest message is the list of a section's valid keys: well under this. */
#define CONF_PARSE_MSG_MAX 2048u

int conf_parse_error(struct conf_parse *cp, unsigned line, unsigned col, const char *fmt, ...)
{
	char msg[CONF_PARSE_MSG_MAX];
	va_list ap;
	int n;

	cp->n_errors++;
	if (cp->failed && !cp->report)
		goto out;
	n = snprintf(msg, sizeof(msg), "%s:%u:%u: ", cp->name, line, col);
	if (n < 0 || (size_t)n >= sizeof(msg))
		goto out;
	va_start(ap, fmt);
	vsnprintf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);
	va_end(ap);
	if (!cp->failed && cp->err && cp->errlen)
		snprintf(cp->err, cp->errlen, "%s", msg);
	if (cp->report)
		cp->report(cp->report_arg, msg);
out:
	cp->failed = 1;
	return -1;
}

int conf_parse_oom(struct conf_parse *cp)
{
	char msg[512];

	snprintf(msg, sizeof(msg), "%s: out of memory while reading the configuration.", cp->name);
	if (!cp->failed && cp->err && cp->errlen)
		snprintf(cp->err, cp->errlen, "%s", msg);
	if (cp->report && !cp->enomem)
		cp->report(cp->report_arg, msg);
	cp->n_errors++;
	cp->failed = 1;
	cp->enomem = 1;
	return -1;
}

/* ---- lexer ---- */

enum tok_type { T_EOF, T_NL, T_SEMI, T_LBRACE, T_RBRACE, T_WORD, T_STRING };

struct token {
	enum tok_type type;
	const char *text; /* T_WORD, T_STRING: NUL-terminated copy in the arena */
	unsigned line, col;
};

struct lexer {
	struct conf_parse *cp;
	int (*is_section)(const char *word);
	const char *p, *end;
	unsigned line, col;
	struct token peek;
	int has_peek;
	int fatal; /* an error that leaves nothing to go on (nesting too deep) */
};

/*
 * Checks that apply to the raw bytes, before any token: a NUL would silently cut strings short and
 * an overlong line is almost certainly not a config. Reported at the exact offending position.
 */
static int lex_precheck(struct conf_parse *cp, const char *text, size_t len)
{
	unsigned line = 1, col = 1;

	if (len > CONF_PARSE_MAX_BYTES)
		return conf_parse_error(
		    cp, 1, 1,
		    "The file is %zu bytes, bigger than the 1 MiB (%u bytes) limit for a "
		    "configuration; is this the right file?",
		    len, CONF_PARSE_MAX_BYTES);
	for (size_t i = 0; i < len; i++) {
		if (text[i] == '\0')
			return conf_parse_error(
			    cp, line, col, "NUL byte in the file; hak.conf must be plain text.");
		if (text[i] == '\n') {
			line++;
			col = 1;
			continue;
		}
		if (col > CONF_PARSE_MAX_LINE)
			return conf_parse_error(cp, line, col,
			                        "Line %u is longer than %u characters.", line,
			                        CONF_PARSE_MAX_LINE);
		col++;
	}
	return 0;
}

static void lex_advance(struct lexer *lx)
{
	if (*lx->p == '\n') {
		lx->line++;
		lx->col = 1;
	} else {
		lx->col++;
	}
	lx->p++;
}

static int is_ctl(unsigned char c)
{
	return (c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f;
}

static int lex_ctl_error(struct lexer *lx, unsigned line, unsigned col, unsigned char c)
{
	return conf_parse_error(
	    lx->cp, line, col,
	    "Control character 0x%02x is not allowed; hak.conf must be plain text.", c);
}

static char *arena_strndup(struct conf_parse *cp, const char *s, size_t n)
{
	char *d = conf_parse_alloc(cp, n + 1);

	if (!d)
		return NULL;
	memcpy(d, s, n);
	d[n] = '\0';
	return d;
}

/* A bare word runs to whitespace, '{', '}' or ';'. A '"' inside it is a mistake, not a string. */
static int lex_word(struct lexer *lx, struct token *t)
{
	const char *start = lx->p;

	while (lx->p < lx->end) {
		unsigned char c = (unsigned char)*lx->p;
		if (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '{' || c == '}' ||
		    c == ';' || is_ctl(c))
			break;
		if (c == '"')
			return conf_parse_error(
			    lx->cp, lx->line, lx->col,
			    "A '\"' in the middle of a value; put the whole value in double "
			    "quotes instead.");
		lex_advance(lx);
	}
	t->type = T_WORD;
	t->text = arena_strndup(lx->cp, start, (size_t)(lx->p - start));
	return t->text ? 0 : conf_parse_oom(lx->cp);
}

/* "..." on one line, with \" and \\ as the only escapes. */
static int lex_string(struct lexer *lx, struct token *t)
{
	const char *s = lx->p + 1, *q = s;
	char *out, *o;

	while (q < lx->end && *q != '"' && *q != '\n') {
		if (*q == '\\' && q + 1 < lx->end && q[1] != '\n')
			q++;
		q++;
	}
	if (q >= lx->end || *q != '"')
		return conf_parse_error(
		    lx->cp, t->line, t->col,
		    "Unterminated string; close it with '\"' on the same line.");
	out = o = conf_parse_alloc(lx->cp, (size_t)(q - s) + 1);
	if (!out)
		return conf_parse_oom(lx->cp);
	for (const char *r = s; r < q; r++) {
		unsigned col = t->col + 1 + (unsigned)(r - s);
		if (is_ctl((unsigned char)*r))
			return lex_ctl_error(lx, t->line, col, (unsigned char)*r);
		if (*r == '\\') {
			if (is_ctl((unsigned char)r[1]))
				return lex_ctl_error(lx, t->line, col + 1, (unsigned char)r[1]);
			if (r[1] != '"' && r[1] != '\\')
				return conf_parse_error(lx->cp, t->line, col,
				                        "Unknown escape '\\%c' in a string; only "
				                        "\\\" and \\\\ are allowed.",
				                        r[1]);
			r++;
		}
		*o++ = *r;
	}
	*o = '\0';
	lx->col += (unsigned)(q + 1 - lx->p);
	lx->p = q + 1;
	t->type = T_STRING;
	t->text = out;
	return 0;
}

static void lex_skip_blanks(struct lexer *lx)
{
	while (lx->p < lx->end) {
		unsigned char c = (unsigned char)*lx->p;
		if (c == ' ' || c == '\t' || c == '\r') {
			lex_advance(lx);
		} else if (c == '#') {
			while (lx->p < lx->end && *lx->p != '\n')
				lex_advance(lx);
		} else {
			break;
		}
	}
}

static int lex_next(struct lexer *lx, struct token *t)
{
	unsigned char c;

	if (lx->has_peek) {
		*t = lx->peek;
		lx->has_peek = 0;
		return 0;
	}
	lex_skip_blanks(lx);
	memset(t, 0, sizeof(*t));
	t->line = lx->line;
	t->col = lx->col;
	if (lx->p >= lx->end) {
		t->type = T_EOF;
		return 0;
	}
	c = (unsigned char)*lx->p;
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
		return lex_string(lx, t);
	default:
		if (is_ctl(c))
			return lex_ctl_error(lx, t->line, t->col, c);
		return lex_word(lx, t);
	}
	lex_advance(lx);
	return 0;
}

static void lex_unget(struct lexer *lx, const struct token *t)
{
	lx->peek = *t;
	lx->has_peek = 1;
}

/* ---- parser ---- */

static struct conf_block *block_new(struct conf_parse *cp, const struct token *type)
{
	struct conf_block *b = conf_parse_alloc(cp, sizeof(*b));

	if (!b)
		return NULL;
	b->type = type ? type->text : NULL;
	b->line = type ? type->line : 1;
	b->col = type ? type->col : 1;
	b->dirs_tail = &b->dirs;
	b->children_tail = &b->children;
	return b;
}

static int parse_body(struct lexer *lx, struct conf_block *blk, unsigned depth);

/* A block that is parsed but not linked into the tree, so its '}' still balances its '{'. */
static int parse_detached(struct lexer *lx, const char *type, unsigned line, unsigned col,
                          unsigned depth)
{
	struct conf_block *b;

	if (depth >= CONF_PARSE_MAX_DEPTH) {
		lx->fatal = 1;
		return conf_parse_error(lx->cp, line, col,
		                        "Sections are nested more than %u deep; is a '}' missing?",
		                        CONF_PARSE_MAX_DEPTH);
	}
	b = block_new(lx->cp, NULL);
	if (!b)
		return conf_parse_oom(lx->cp);
	b->type = type;
	b->line = line;
	b->col = col;
	return parse_body(lx, b, depth + 1);
}

/*
 * After a mistake inside a statement (first: its first word, if known), the rest of its line is
 * dropped and blk marked damaged. A '{' or '}' ending the dropped text still opens (a detached
 * block) or closes a block, so that one bad line does not unbalance the rest of the file.
 * Returns 0 to go on, 1 when blk was closed, -1 when nothing can go on.
 */
static int parse_recover(struct lexer *lx, struct conf_block *blk, const struct token *first,
                         unsigned depth)
{
	unsigned line = first ? first->line : lx->line, col = first ? first->col : lx->col;
	char last = 0;

	if (lx->fatal || lx->cp->enomem)
		return -1;
	blk->damaged = 1;
	lx->has_peek = 0;
	while (lx->p < lx->end && *lx->p != '\n' && *lx->p != '#') {
		if (*lx->p != ' ' && *lx->p != '\t' && *lx->p != '\r')
			last = *lx->p;
		lex_advance(lx);
	}
	if (last == '}')
		return blk->type ? 1 : 0;
	if (last == '{')
		return parse_detached(lx, first ? first->text : "unnamed", line, col, depth);
	return 0;
}

static int parse_open_block(struct lexer *lx, struct conf_block *parent, const struct token *first,
                            const struct conf_value *vals, unsigned n_vals, unsigned depth)
{
	struct conf_block *b;

	if (n_vals > 1) /* goes on with the first word as the name */
		conf_parse_error(lx->cp, vals->next->line, vals->next->col,
		                 "Too many words in the section header; write '%.80s NAME {'.",
		                 first->text);
	if (depth >= CONF_PARSE_MAX_DEPTH) {
		lx->fatal = 1;
		return conf_parse_error(lx->cp, first->line, first->col,
		                        "Sections are nested more than %u deep; is a '}' missing?",
		                        CONF_PARSE_MAX_DEPTH);
	}
	b = block_new(lx->cp, first);
	if (!b)
		return conf_parse_oom(lx->cp);
	if (n_vals >= 1) {
		b->name = vals->text;
		b->name_line = vals->line;
		b->name_col = vals->col;
	}
	*parent->children_tail = b;
	parent->children_tail = &b->next;
	return parse_body(lx, b, depth + 1);
}

/* The values after a key, up to the token that ends them (left in *end). */
static int parse_values(struct lexer *lx, const struct token *first, struct conf_value **vals,
                        unsigned *n, struct token *end)
{
	struct conf_value **tail = vals;

	*vals = NULL;
	*n = 0;
	for (;;) {
		if (lex_next(lx, end) < 0)
			return -1;
		if (end->type != T_WORD && end->type != T_STRING)
			return 0;
		if (*n >= CONF_PARSE_MAX_VALUES)
			return conf_parse_error(lx->cp, end->line, end->col,
			                        "Too many values for '%.80s' (more than %u).",
			                        first->text, CONF_PARSE_MAX_VALUES);
		struct conf_value *v = conf_parse_alloc(lx->cp, sizeof(*v));
		if (!v)
			return conf_parse_oom(lx->cp);
		v->text = end->text;
		v->line = end->line;
		v->col = end->col;
		*tail = v;
		tail = &v->next;
		(*n)++;
	}
}

/*
 * A statement is KEY VALUE... ending at a newline, ';', '}' or end of file, or a block header.
 * Returns like parse_recover().
 */
static int parse_statement(struct lexer *lx, struct conf_block *blk, const struct token *first,
                           unsigned depth)
{
	struct conf_value *vals;
	struct conf_directive *d;
	unsigned n;
	struct token t;

	if (parse_values(lx, first, &vals, &n, &t) < 0)
		return parse_recover(lx, blk, first, depth);
	if (t.type == T_LBRACE)
		return parse_open_block(lx, blk, first, vals, n, depth);
	if (t.type == T_RBRACE || t.type == T_EOF)
		lex_unget(lx, &t);
	if (!blk->type) {
		if (lx->is_section && lx->is_section(first->text))
			conf_parse_error(
			    lx->cp, first->line, first->col,
			    "The '%s' section header must end with '{' on the same line.",
			    first->text);
		else
			conf_parse_error(
			    lx->cp, first->line, first->col,
			    "'%.80s' is outside any section; put keys inside 'global {' "
			    "or 'volume NAME {'.",
			    first->text);
		return 0;
	}
	d = conf_parse_alloc(lx->cp, sizeof(*d));
	if (!d)
		return conf_parse_oom(lx->cp);
	d->key = first->text;
	d->line = first->line;
	d->col = first->col;
	d->vals = vals;
	d->n_vals = n;
	*blk->dirs_tail = d;
	blk->dirs_tail = &d->next;
	return 0;
}

/*
 * Statements until the block's '}' (or end of file for the root). Returns 0, or -1 when nothing
 * can go on; every other mistake is reported and parsing goes on after it.
 */
static int parse_body(struct lexer *lx, struct conf_block *blk, unsigned depth)
{
	struct token t;
	int rc = 0;

	while (rc == 0) {
		if (lex_next(lx, &t) < 0) {
			rc = parse_recover(lx, blk, NULL, depth);
			continue;
		}
		switch (t.type) {
		case T_NL:
		case T_SEMI:
			break;
		case T_EOF:
			if (blk->type) /* the enclosing bodies see the end too, and say so */
				conf_parse_error(
				    lx->cp, blk->line, blk->col,
				    "Unbalanced braces: this '%s' section is never closed; "
				    "add a '}' on its own line at its end.",
				    blk->type);
			return 0;
		case T_RBRACE:
			if (blk->type)
				return 0;
			conf_parse_error(lx->cp, t.line, t.col,
			                 "Unbalanced braces: '}' without a matching '{'.");
			break;
		case T_LBRACE:
			conf_parse_error(
			    lx->cp, t.line, t.col,
			    "'{' without a section name before it; write 'volume NAME {' "
			    "or 'global {'.");
			rc = parse_detached(lx, "unnamed", t.line, t.col, depth);
			break;
		case T_STRING:
			conf_parse_error(
			    lx->cp, t.line, t.col,
			    "Expected a key or section name here, not a quoted string.");
			rc = parse_recover(lx, blk, NULL, depth);
			break;
		case T_WORD:
			rc = parse_statement(lx, blk, &t, depth);
			break;
		}
	}
	return rc < 0 ? -1 : 0;
}

int conf_parse_text(struct conf_parse *cp, const char *text, size_t len,
                    int (*is_section)(const char *word), struct conf_block **root)
{
	struct lexer lx = {.cp = cp, .is_section = is_section, .line = 1, .col = 1};
	unsigned errors = cp->n_errors;
	struct conf_block *r;

	*root = NULL;
	if (!text) /* pointer arithmetic on NULL is undefined, even with len 0 */
		text = "";
	if (lex_precheck(cp, text, len) < 0)
		return -1;
	lx.p = text;
	lx.end = text + len;
	r = block_new(cp, NULL);
	if (!r)
		return conf_parse_oom(cp);
	if (parse_body(&lx, r, 0) < 0)
		return -1;
	*root = r;
	return cp->n_errors == errors ? 0 : -1;
}

/* ---- tree helpers ---- */

const struct conf_directive *conf_parse_find(const struct conf_block *blk, const char *key)
{
	for (const struct conf_directive *d = blk->dirs; d; d = d->next)
		if (strcmp(d->key, key) == 0)
			return d;
	return NULL;
}

void conf_parse_label(const struct conf_block *blk, char *buf, size_t len)
{
	if (blk->name)
		snprintf(buf, len, "%s '%.80s'", blk->type, blk->name);
	else
		snprintf(buf, len, "%s", blk->type ? blk->type : "the file");
}

/* ---- uniqueness ---- */

struct conf_uniq_entry {
	const void *ns;
	const char *value;
	const struct conf_block *blk;
};

static size_t uniq_hash(const void *ns, const char *s)
{
	uint64_t h = 14695981039346656037ull ^ (uint64_t)(uintptr_t)ns;

	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ull;
	}
	return (size_t)(h ^ (h >> 32));
}

static struct conf_uniq_entry *uniq_slot(struct conf_uniq_entry *slots, size_t cap, const void *ns,
                                         const char *value)
{
	size_t i = uniq_hash(ns, value) & (cap - 1);

	while (slots[i].ns && (slots[i].ns != ns || strcmp(slots[i].value, value) != 0))
		i = (i + 1) & (cap - 1);
	return &slots[i];
}

/* The old slots stay in the arena until the end of the parse; they are small next to the tree. */
static int uniq_grow(struct conf_parse *cp)
{
	size_t cap = cp->uniq_cap ? cp->uniq_cap * 2 : 64;
	struct conf_uniq_entry *slots = conf_parse_alloc(cp, cap * sizeof(*slots));

	if (!slots)
		return conf_parse_oom(cp);
	for (size_t i = 0; i < cp->uniq_cap; i++)
		if (cp->uniq[i].ns)
			*uniq_slot(slots, cap, cp->uniq[i].ns, cp->uniq[i].value) = cp->uniq[i];
	cp->uniq = slots;
	cp->uniq_cap = cap;
	return 0;
}

int conf_parse_unique(struct conf_parse *cp, const void *ns, const char *value,
                      const struct conf_block *blk, const struct conf_block **first)
{
	struct conf_uniq_entry *e;

	*first = NULL;
	if (cp->uniq_used * 2 >= cp->uniq_cap && uniq_grow(cp) < 0)
		return -1;
	e = uniq_slot(cp->uniq, cp->uniq_cap, ns, value);
	if (e->ns) {
		*first = e->blk;
		return 0;
	}
	e->ns = ns;
	e->value = value;
	e->blk = blk;
	cp->uniq_used++;
	return 0;
}

const struct conf_block *conf_parse_unique_find(const struct conf_parse *cp, const void *ns,
                                                const char *value)
{
	if (!cp->uniq_cap)
		return NULL;
	return uniq_slot(cp->uniq, cp->uniq_cap, ns, value)->blk;
}

/* ---- value forms ---- */

int conf_parse_number(const char *s, int allow_suffix, uint64_t *out)
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

int conf_parse_bool(const char *s, int *out)
{
	static const char *const yes[] = {"yes", "true", "on"}, *const no[] = {"no", "false",
	                                                                       "off"};

	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
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

/*
 * Parsed by hand rather than with strtod(), which would accept "inf", "0x1p3" and exponents, and
 * round: a duration finer than a microsecond is refused, not silently changed.
 */
int conf_parse_duration(const char *s, uint64_t *usec)
{
	uint64_t whole, frac = 0, pow10 = 1, unit, part;
	const char *p = s;

	while (*p >= '0' && *p <= '9')
		p++;
	if (p == s || p - s > 12) /* 12 digits of seconds is 30000 years: plenty */
		return -1;
	whole = strtoull(s, NULL, 10);
	if (*p == '.') {
		p++;
		if (*p < '0' || *p > '9')
			return -1;
		for (; *p >= '0' && *p <= '9'; p++) {
			if (pow10 >= 1000000)
				return -1;
			frac = frac * 10 + (uint64_t)(*p - '0');
			pow10 *= 10;
		}
	}
	if (strcasecmp(p, "ms") == 0)
		unit = 1000;
	else if (strcasecmp(p, "s") == 0)
		unit = 1000000;
	else
		return -1;
	if (frac * unit % pow10)
		return -1;
	part = frac * unit / pow10;
	*usec = whole * unit + part;
	return 0;
}

static int hostport_v6(const char *s, struct conf_hostport *hp, const char **port, const char **why)
{
	const char *close = strchr(s, ']');
	char host[INET6_ADDRSTRLEN];
	struct in6_addr a6;

	if (!close)
		*why = "no ']' after the IPv6 address";
	else if (close[1] != ':')
		*why = "no ':PORT' after ']'";
	else if ((size_t)(close - s - 1) >= sizeof(host))
		*why = "the IPv6 address is too long";
	if (*why)
		return -1;
	memcpy(host, s + 1, (size_t)(close - s - 1));
	host[close - s - 1] = '\0';
	if (inet_pton(AF_INET6, host, &a6) != 1) {
		*why = "the part in brackets is not an IPv6 address";
		return -1;
	}
	inet_ntop(AF_INET6, &a6, hp->host, sizeof(hp->host));
	hp->family = AF_INET6;
	*port = close + 2;
	return 0;
}

static int hostport_v4_or_name(const char *s, struct conf_hostport *hp, const char **port,
                               const char **why)
{
	const char *colon = strrchr(s, ':');
	struct in_addr a4;

	if (!colon)
		*why = "no ':PORT'";
	else if (memchr(s, ':', (size_t)(colon - s)))
		*why = "an IPv6 address must be in brackets";
	else if (colon == s)
		*why = "the host is empty";
	else if ((size_t)(colon - s) >= sizeof(hp->host))
		*why = "the host name is too long";
	else if (strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") <
	         (size_t)(colon - s))
		*why = "the host has a character not allowed";
	if (*why)
		return -1;
	memcpy(hp->host, s, (size_t)(colon - s));
	hp->host[colon - s] = '\0';
	hp->family = AF_UNSPEC;
	if (inet_pton(AF_INET, hp->host, &a4) == 1) {
		inet_ntop(AF_INET, &a4, hp->host, sizeof(hp->host));
		hp->family = AF_INET;
	}
	*port = colon + 1;
	return 0;
}

/* A numeric port is required: a service name would depend on /etc/services of each node. */
int conf_parse_hostport(const char *s, struct conf_hostport *hp, const char **why)
{
	const char *port = NULL;
	uint64_t n;
	int rc;

	*why = NULL;
	memset(hp, 0, sizeof(*hp));
	rc = s[0] == '[' ? hostport_v6(s, hp, &port, why) : hostport_v4_or_name(s, hp, &port, why);
	if (rc < 0)
		return -1;
	if (conf_parse_number(port, 0, &n) < 0 || n < 1 || n > 65535)
		return -1;
	hp->port = (uint16_t)n;
	return 0;
}

void conf_parse_fmt_size(uint64_t v, char *buf, size_t len)
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

void conf_parse_fmt_duration(uint64_t usec, char *buf, size_t len)
{
	char frac[8];
	size_t n;

	if (usec < 1000000 && usec % 1000 == 0) {
		snprintf(buf, len, "%llums", (unsigned long long)(usec / 1000));
		return;
	}
	snprintf(frac, sizeof(frac), ".%06llu", (unsigned long long)(usec % 1000000));
	for (n = strlen(frac); frac[n - 1] == '0'; n--)
		frac[n - 1] = '\0';
	if (n == 1)
		frac[0] = '\0';
	snprintf(buf, len, "%llu%ss", (unsigned long long)(usec / 1000000), frac);
}

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

/* Within distance 2 only, and never for very short words, which would match anything. */
const char *conf_parse_suggest(const char *word, const char *const *names, size_t n)
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
