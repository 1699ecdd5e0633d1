/* SPDX-License-Identifier: MIT */
/*
 * The table-driven meaning of a conf_parse tree: which sections exist, which keys each takes, of
 * what kind and range, and where in a struct each value is stored. The walk checks every block
 * and directive against the tables and reports the first mistake with its position and a fix
 * (a suggestion for a typo, the list of valid keys, the range). config.c holds hak.conf's
 * tables; a new key is a row there and a new section a row plus an open() callback.
 */
#ifndef HAK_CONF_SCHEMA_H
#define HAK_CONF_SCHEMA_H

#include <stddef.h>
#include <stdint.h>

#include "conf_parse.h"

#define CONF_SCHEMA_MAX_KEYS     64u /* per section */
#define CONF_SCHEMA_MAX_SECTIONS 16u
#define CONF_SCHEMA_NAME_MAX     64u /* of a section name: NAME in "volume NAME {" */

enum conf_kind {
	CONF_STRING,   /* char *: any text */
	CONF_PATH,     /* char *: an absolute path */
	CONF_SIZE,     /* uint32_t or uint64_t: bytes, with K/M/G/T suffixes */
	CONF_BOOL,     /* int */
	CONF_UINT,     /* uint32_t or uint64_t */
	CONF_ENUM,     /* an enum: the index in names, or whatever parse_enum() stores */
	CONF_ADDR,     /* char *: HOST:PORT */
	CONF_DURATION, /* double seconds; min and max in microseconds */
	CONF_CUSTOM,   /* apply() checks and stores it */
};

#define CONF_REQUIRED (1u << 0) /* the section is incomplete without it */
#define CONF_UNIQUE   (1u << 1) /* no two sections of the type may have the same value */
#define CONF_POW2     (1u << 2) /* SIZE, UINT: a power of two */
#define CONF_SOCKET   (1u << 3) /* PATH: a UNIX socket, so it must fit in sun_path */
#define CONF_LIST     (1u << 4) /* CUSTOM: one or more values; apply() walks v->next */

struct conf_key {
	const char *key;
	enum conf_kind kind;
	unsigned flags;
	uint64_t min, max; /* SIZE, UINT; DURATION in microseconds */
	size_t offset;     /* of the field in the section's struct */
	size_t width;      /* sizeof the field: SIZE and UINT store 4 or 8 bytes */
	int (*parse_enum)(const char *s, void *field); /* ENUM without names: 0, or -1 if s is no
	                                                  choice */
	const char *choices; /* ENUM: the choices (default: names); CUSTOM: what the value is; for
	                        messages */
	const char *doc;     /* what it is, for the "missing key" message */
	/* CUSTOM: checks and stores the value; returns 0, or -1 after conf_parse_error() */
	int (*apply)(struct conf_parse *ps, const struct conf_key *k, const struct conf_value *v,
	             void *base);
	/* ENUM: the choices, NULL-terminated; the field (an enum) gets the index of the one given
	 */
	const char *const *names;
};

struct conf_section {
	const char *type;
	const char *parent; /* the enclosing section type; NULL at top level */
	int named;          /* 1: "TYPE NAME {"; 0: "TYPE {" */
	unsigned max_count;
	const struct conf_key *keys;
	size_t n_keys;
	/* Returns where the keys are stored (base for conf_key.offset), NULL after an error. */
	void *(*open)(struct conf_parse *ps, void *ctx, const struct conf_block *blk,
	              void *parent_base);
	/* Checks between keys and against earlier sections, once all keys are set; may be NULL. */
	int (*check)(struct conf_parse *ps, void *ctx, const struct conf_block *blk, void *base);
	const char *why_max; /* a clause explaining max_count, or NULL */
};

struct conf_schema {
	const struct conf_section *sections; /* at most CONF_SCHEMA_MAX_SECTIONS */
	size_t n_sections;
};

/*
 * Walks root's sections in file order: open() each (ctx is passed through), apply its keys,
 * recurse into nested sections, then check(). Section names must be unique per type. Returns 0,
 * or -1 after reporting the first error through ps.
 */
int conf_schema_validate(struct conf_parse *ps, const struct conf_schema *schema,
                         const struct conf_block *root, void *ctx);
/* Whether type is a top-level section type (for conf_parse_text()'s is_section). */
int conf_schema_is_section(const struct conf_schema *schema, const char *type);

/* 1 to CONF_SCHEMA_NAME_MAX of [A-Za-z0-9_.-], not "." or "..": safe in a file name. */
int conf_schema_name_valid(const char *s);
/* Replaces *field with a copy of s; returns 0, or -1 after reporting out of memory. */
int conf_schema_set_string(struct conf_parse *ps, char **field, const char *s);
/*
 * Reports a bad HOST:PORT value v of key k: why is conf_parse_hostport()'s reason (NULL for a
 * bad port) and example how to write it. Returns -1.
 */
int conf_schema_addr_error(struct conf_parse *ps, const struct conf_key *k,
                           const struct conf_value *v, const char *why, const char *example);

#endif
