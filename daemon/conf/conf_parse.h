/* SPDX-License-Identifier: MIT */
/*
 * The syntax of hak.conf, without its meaning: text becomes a tree of blocks and directives that
 * remember their line and column. Also here, because every schema check needs them: the value
 * forms shared by many keys (sizes, durations, booleans, HOST:PORT), the error reporting that
 * gives every message the form "NAME:LINE:COL: sentence.", and a table of values that must be
 * unique. config.c gives the tree its meaning.
 *
 * Errors: the error buffer keeps the first one (hakd refuses to start on it). The parser and the
 * schema walk go on after an error where they can tell what comes next (the parser drops the
 * rest of a bad line, the walk the bad directive or section), so that a collector set with
 * conf_parse_collect() hears every error of the file, in the order found (hakctl check-config).
 *
 * Syntax:
 *   # comment to end of line
 *   TYPE [NAME] { ... }        a block (blocks may nest, up to CONF_PARSE_MAX_DEPTH)
 *   KEY VALUE...               a directive, ending at a newline, ';' or '}'
 * Values are bare words or "double-quoted strings" (with \" and \\ as the only escapes).
 *
 * Input is untrusted (it is fuzzed): every size is bounded, and the whole tree comes from one
 * arena that conf_parse_free() releases at once, so no error path can leak a node.
 */
#ifndef HAK_CONF_PARSE_H
#define HAK_CONF_PARSE_H

#include <stddef.h>
#include <stdint.h>

#define CONF_PARSE_MAX_BYTES  (1u << 20) /* a config larger than this is a mistake */
#define CONF_PARSE_MAX_LINE   4096u
#define CONF_PARSE_MAX_DEPTH  8u   /* bounds the parser's recursion */
#define CONF_PARSE_MAX_VALUES 16u  /* per directive; no key takes more than a few */
#define CONF_PARSE_HOST_MAX   256u /* bytes of conf_hostport.host, with the NUL */

struct conf_value {
	struct conf_value *next;
	const char *text; /* NUL-terminated, escapes resolved */
	unsigned line, col;
};

struct conf_directive {
	struct conf_directive *next;
	const char *key;
	unsigned line, col;
	struct conf_value *vals;
	unsigned n_vals;
};

struct conf_block {
	struct conf_block *next;
	const char *type; /* NULL for the root (the file itself) */
	const char *name; /* NULL when the header has no name */
	unsigned line, col, name_line, name_col;
	int damaged; /* a statement of it was dropped after a syntax error: a key that seems
	              * missing may be on that line, so its absence is not reported */
	struct conf_directive *dirs, **dirs_tail;
	struct conf_block *children, **children_tail;
};

struct conf_arena_chunk;
struct conf_uniq_entry;

/* Hears one error, "NAME:LINE:COL: sentence." */
typedef void (*conf_parse_report_fn)(void *arg, const char *message);

/* One parse: the error buffer, the arena holding the tree, the uniqueness table. */
struct conf_parse {
	const char *name; /* the file name used in messages */
	char *err;
	size_t errlen;
	int failed;                  /* an error was reported; the buffer keeps the first one */
	int enomem;                  /* memory ran out: nothing goes on after that */
	unsigned n_errors;           /* errors reported so far */
	conf_parse_report_fn report; /* NULL, or hears every error */
	void *report_arg;
	/* private to conf_parse.c */
	struct conf_arena_chunk *arena;
	struct conf_uniq_entry *uniq;
	size_t uniq_cap, uniq_used;
};

void conf_parse_init(struct conf_parse *cp, const char *name, char *err, size_t errlen);
/* After conf_parse_init(): fn(arg, message) hears every error, not only the first. */
void conf_parse_collect(struct conf_parse *cp, conf_parse_report_fn fn, void *arg);
/*
 * Parses len bytes of text (no NUL terminator needed; text may be NULL when len is 0) into
 * *root. is_section(word) tells whether a word that starts a line without a '{' after it is a
 * section type, only to explain that mistake better. Returns 0, or -1 after an error; then
 * *root is still the tree without the bad statements, unless the error left nothing to go on
 * (out of memory, NUL bytes, an overlong line or file, nesting too deep): then NULL.
 */
int conf_parse_text(struct conf_parse *cp, const char *text, size_t len,
                    int (*is_section)(const char *word), struct conf_block **root);
/* Frees the tree and everything conf_parse_alloc() returned. */
void conf_parse_free(struct conf_parse *cp);

/* Reports "NAME:LINE:COL: message": to the collector, and into the buffer unless an error was
 * reported before. Always returns -1. */
int conf_parse_error(struct conf_parse *cp, unsigned line, unsigned col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Reports running out of memory; returns -1. */
int conf_parse_oom(struct conf_parse *cp);
/* Zeroed memory that lives until conf_parse_free(); NULL when out of memory (nothing reported). */
void *conf_parse_alloc(struct conf_parse *cp, size_t n);

/* The first directive of blk with this key, or NULL. */
const struct conf_directive *conf_parse_find(const struct conf_block *blk, const char *key);
/* "volume 'db'" or "global": how messages name a block. */
void conf_parse_label(const struct conf_block *blk, char *buf, size_t len);
/*
 * Records that blk uses value among ns (any pointer standing for what the value must be unique
 * among; value must live as long as the parse). Sets *first to the block that used it before,
 * or NULL. Returns 0, or -1 after reporting out of memory. Hashed, so thousands of volumes do
 * not cost a pairwise comparison.
 */
int conf_parse_unique(struct conf_parse *cp, const void *ns, const char *value,
                      const struct conf_block *blk, const struct conf_block **first);
/* The block that recorded value among ns, or NULL. */
const struct conf_block *conf_parse_unique_find(const struct conf_parse *cp, const void *ns,
                                                const char *value);

/* ---- value forms: 0 on success, -1 if s does not have the form (nothing reported) ---- */

/* Decimal digits; with allow_suffix, then an optional K, M, G or T (powers of 1024). */
int conf_parse_number(const char *s, int allow_suffix, uint64_t *out);
/* yes/true/on or no/false/off, in any case. */
int conf_parse_bool(const char *s, int *out);
/* A decimal number with a unit, "ms" or "s": "200ms", "1s", "1.5s"; to whole microseconds. */
int conf_parse_duration(const char *s, uint64_t *usec);

struct conf_hostport {
	char host[CONF_PARSE_HOST_MAX]; /* without brackets; an address in canonical form */
	uint16_t port;
	int family; /* AF_INET, AF_INET6, or AF_UNSPEC for a host name */
};
/*
 * HOST:PORT, where HOST is a name, an IPv4 address or an IPv6 address in brackets. On failure
 * *why says what is wrong, as a phrase ("no ':PORT'"); *why is NULL when only the port is bad.
 */
int conf_parse_hostport(const char *s, struct conf_hostport *hp, const char **why);

/* "64K", "32M", "4096": the shortest exact form of a size. */
void conf_parse_fmt_size(uint64_t v, char *buf, size_t len);
/* "200ms", "1s", "1.5s". */
void conf_parse_fmt_duration(uint64_t usec, char *buf, size_t len);
/* The one of names[] closest to word, if within a typo or two; NULL otherwise. */
const char *conf_parse_suggest(const char *word, const char *const *names, size_t n);

#endif
