/* SPDX-License-Identifier: MIT */
/*
 * The schema walk: see conf_schema.h. A bad directive is skipped and the walk goes on with the
 * next; a bad section header skips the section. A section's check() runs only when its own keys
 * and children were right, since it compares values that may not have been set.
 */
#include "conf_schema.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONF_SOCKET_MAX 107u /* sizeof(sockaddr_un.sun_path) - 1 */

/* One walk: where errors go, the tables, and the caller's context for open() and check(). */
struct walk {
	struct conf_parse *ps;
	const struct conf_schema *sc;
	void *ctx;
};

/* ---- helpers ---- */

/* "a, b, c": the valid choices, for messages. */
static void list_append(char *list, size_t size, const char *item)
{
	size_t used = strlen(list);

	snprintf(list + used, size - used, "%s%s", used ? ", " : "", item);
}

/* The choices of an ENUM key, for messages. */
static const char *enum_choices(const struct conf_key *k, char *list, size_t size)
{
	if (k->choices)
		return k->choices;
	list[0] = '\0';
	for (const char *const *n = k->names; *n; n++)
		list_append(list, size, *n);
	return list;
}

static int enum_store(const struct conf_key *k, const char *s, void *field)
{
	if (!k->names)
		return k->parse_enum(s, field);
	for (int i = 0; k->names[i]; i++) {
		if (strcmp(s, k->names[i]) == 0) {
			memcpy(field, &i, sizeof(i));
			return 0;
		}
	}
	return -1;
}

static const struct conf_key *key_find(const struct conf_section *sec, const char *key)
{
	for (size_t i = 0; i < sec->n_keys; i++)
		if (strcmp(sec->keys[i].key, key) == 0)
			return &sec->keys[i];
	return NULL;
}

int conf_schema_name_valid(const char *s)
{
	size_t n = strlen(s);

	if (n < 1 || n > CONF_SCHEMA_NAME_MAX || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
		return 0;
	return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == n;
}

/* ---- values ---- */

int conf_schema_set_string(struct conf_parse *ps, char **field, const char *s)
{
	char *copy = strdup(s);

	if (!copy)
		return conf_parse_oom(ps);
	free(*field);
	*field = copy;
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

static int check_path(struct conf_parse *ps, const struct conf_key *k, const struct conf_value *v)
{
	size_t len = strlen(v->text);

	if (v->text[0] != '/')
		return conf_parse_error(ps, v->line, v->col,
		                        "%s '%.80s' must be an absolute path (starting with '/').",
		                        k->key, v->text);
	if ((k->flags & CONF_SOCKET) && len > CONF_SOCKET_MAX)
		return conf_parse_error(
		    ps, v->line, v->col,
		    "%s is %zu bytes long; a UNIX socket path may be at most %u bytes.", k->key,
		    len, CONF_SOCKET_MAX);
	return 0;
}

/* why is NULL when only the port is wrong; the port is then what follows the last ':'. */
int conf_schema_addr_error(struct conf_parse *ps, const struct conf_key *k,
                           const struct conf_value *v, const char *why, const char *example)
{
	if (!why)
		return conf_parse_error(
		    ps, v->line, v->col,
		    "%s port '%.80s' is not valid; use a number from 1 to 65535.", k->key,
		    strrchr(v->text, ':') + 1);
	return conf_parse_error(ps, v->line, v->col,
	                        "%s '%.80s' is not HOST:PORT (%s); write it like %s.", k->key,
	                        v->text, why, example);
}

static int check_addr(struct conf_parse *ps, const struct conf_key *k, const struct conf_value *v)
{
	struct conf_hostport hp;
	const char *why;

	if (conf_parse_hostport(v->text, &hp, &why) < 0)
		return conf_schema_addr_error(ps, k, v, why, "0.0.0.0:10809 or [::1]:10809");
	return 0;
}

static int apply_number(struct conf_parse *ps, const struct conf_key *k, const struct conf_value *v,
                        void *field)
{
	char lo[32], hi[32];
	uint64_t n;

	if (conf_parse_number(v->text, k->kind == CONF_SIZE, &n) < 0) {
		if (k->kind == CONF_SIZE)
			return conf_parse_error(
			    ps, v->line, v->col,
			    "Bad size '%.80s' for %s; expected a size like 4096, 64K or "
			    "32M.",
			    v->text, k->key);
		return conf_parse_error(ps, v->line, v->col,
		                        "Bad number '%.80s' for %s; expected digits only.", v->text,
		                        k->key);
	}
	if (n < k->min || n > k->max) {
		if (k->kind == CONF_SIZE) {
			conf_parse_fmt_size(k->min, lo, sizeof(lo));
			conf_parse_fmt_size(k->max, hi, sizeof(hi));
		} else {
			snprintf(lo, sizeof(lo), "%llu", (unsigned long long)k->min);
			snprintf(hi, sizeof(hi), "%llu", (unsigned long long)k->max);
		}
		return conf_parse_error(ps, v->line, v->col,
		                        "%s %.80s is out of range; use %s to %s.", k->key, v->text,
		                        lo, hi);
	}
	if ((k->flags & CONF_POW2) && (n & (n - 1)))
		return conf_parse_error(
		    ps, v->line, v->col,
		    "%s %.80s is not a power of two; use for example 512, 4K or 64K.", k->key,
		    v->text);
	store_uint(field, k->width, n);
	return 0;
}

static int apply_duration(struct conf_parse *ps, const struct conf_key *k,
                          const struct conf_value *v, void *field)
{
	char lo[32], hi[32];
	uint64_t us;
	double seconds;

	if (conf_parse_duration(v->text, &us) < 0)
		return conf_parse_error(
		    ps, v->line, v->col,
		    "Bad duration '%.80s' for %s; write a number and a unit, ms or s, like "
		    "200ms or 1.5s (to the microsecond at most).",
		    v->text, k->key);
	if (us < k->min || us > k->max) {
		conf_parse_fmt_duration(k->min, lo, sizeof(lo));
		conf_parse_fmt_duration(k->max, hi, sizeof(hi));
		return conf_parse_error(ps, v->line, v->col,
		                        "%s %.80s is out of range; use %s to %s.", k->key, v->text,
		                        lo, hi);
	}
	seconds = (double)us / 1e6;
	memcpy(field, &seconds, sizeof(seconds));
	return 0;
}

static void kind_hint(const struct conf_key *k, char *buf, size_t len)
{
	char lo[32], hi[32], list[256];

	switch (k->kind) {
	case CONF_STRING:
		snprintf(buf, len, "a text, in double quotes if it has spaces");
		break;
	case CONF_PATH:
		snprintf(buf, len, "an absolute path");
		break;
	case CONF_SIZE:
		conf_parse_fmt_size(k->min, lo, sizeof(lo));
		conf_parse_fmt_size(k->max, hi, sizeof(hi));
		snprintf(buf, len, "a size from %s to %s", lo, hi);
		break;
	case CONF_BOOL:
		snprintf(buf, len, "yes or no");
		break;
	case CONF_UINT:
		snprintf(buf, len, "a number from %llu to %llu", (unsigned long long)k->min,
		         (unsigned long long)k->max);
		break;
	case CONF_ENUM:
		snprintf(buf, len, "one of %s", enum_choices(k, list, sizeof(list)));
		break;
	case CONF_ADDR:
		snprintf(buf, len, "HOST:PORT, like 0.0.0.0:10809 or [::1]:10809");
		break;
	case CONF_DURATION:
		conf_parse_fmt_duration(k->min, lo, sizeof(lo));
		conf_parse_fmt_duration(k->max, hi, sizeof(hi));
		snprintf(buf, len, "a duration from %s to %s, like 200ms or 1.5s", lo, hi);
		break;
	case CONF_CUSTOM:
		snprintf(buf, len, "%s", k->choices);
		break;
	}
}

static int apply_value(struct conf_parse *ps, const struct conf_block *blk,
                       const struct conf_key *k, const struct conf_directive *d, void *base)
{
	void *field = (char *)base + k->offset;
	const struct conf_value *v = d->vals;
	char label[128], hint[320], list[256];
	int b;

	conf_parse_label(blk, label, sizeof(label));
	if (d->n_vals == 0) {
		kind_hint(k, hint, sizeof(hint));
		return conf_parse_error(ps, d->line, d->col, "Key '%s' in %s needs a value: %s.",
		                        k->key, label, hint);
	}
	if (d->n_vals > 1 && !(k->flags & CONF_LIST))
		return conf_parse_error(
		    ps, v->next->line, v->next->col,
		    "Key '%s' takes one value but has %u; put a value with spaces in double "
		    "quotes.",
		    k->key, d->n_vals);
	switch (k->kind) {
	case CONF_PATH:
		if (check_path(ps, k, v) < 0)
			return -1;
		return conf_schema_set_string(ps, field, v->text);
	case CONF_ADDR:
		if (check_addr(ps, k, v) < 0)
			return -1;
		return conf_schema_set_string(ps, field, v->text);
	case CONF_STRING:
		return conf_schema_set_string(ps, field, v->text);
	case CONF_BOOL:
		if (conf_parse_bool(v->text, &b) < 0)
			return conf_parse_error(
			    ps, v->line, v->col,
			    "Bad boolean '%.80s' for %s; use yes or no (or true/false, "
			    "on/off).",
			    v->text, k->key);
		memcpy(field, &b, sizeof(b));
		return 0;
	case CONF_SIZE:
	case CONF_UINT:
		return apply_number(ps, k, v, field);
	case CONF_DURATION:
		return apply_duration(ps, k, v, field);
	case CONF_ENUM:
		if (enum_store(k, v->text, field) < 0)
			return conf_parse_error(ps, v->line, v->col,
			                        "Bad %s '%.80s'; choose one of %s.", k->key,
			                        v->text, enum_choices(k, list, sizeof(list)));
		return 0;
	case CONF_CUSTOM:
		return k->apply(ps, k, v, base);
	}
	return 0;
}

/* ---- schema walk ---- */

static int unknown_key(const struct walk *w, const struct conf_block *blk,
                       const struct conf_section *sec, const struct conf_directive *d)
{
	const struct conf_section *secs = w->sc->sections;
	const char *names[CONF_SCHEMA_MAX_KEYS], *hint;
	char label[128], list[1024] = "";

	conf_parse_label(blk, label, sizeof(label));
	for (size_t i = 0; i < w->sc->n_sections; i++)
		if (&secs[i] != sec && key_find(&secs[i], d->key))
			return conf_parse_error(w->ps, d->line, d->col,
			                        "Key '%s' belongs in a '%s' section, not in %s.",
			                        d->key, secs[i].type, label);
	for (size_t i = 0; i < sec->n_keys; i++) {
		names[i] = sec->keys[i].key;
		list_append(list, sizeof(list), names[i]);
	}
	hint = conf_parse_suggest(d->key, names, sec->n_keys);
	if (hint)
		return conf_parse_error(w->ps, d->line, d->col,
		                        "Unknown key '%.80s' in %s; did you mean '%s'?", d->key,
		                        label, hint);
	return conf_parse_error(w->ps, d->line, d->col,
	                        "Unknown key '%.80s' in %s; valid keys are: %s.", d->key, label,
	                        list);
}

/* Two volumes on one backing store or one socket would corrupt data or fail to start. */
static int check_unique(struct conf_parse *ps, const struct conf_block *blk,
                        const struct conf_key *k, const struct conf_value *v)
{
	const struct conf_block *first;
	char label[128], other[128];

	if (conf_parse_unique(ps, k, v->text, blk, &first) < 0)
		return -1;
	if (!first)
		return 0;
	conf_parse_label(blk, label, sizeof(label));
	conf_parse_label(first, other, sizeof(other));
	label[0] = (char)(label[0] & ~0x20); /* it starts the sentence */
	return conf_parse_error(
	    ps, v->line, v->col,
	    "%s has the same %s '%.80s' as %s (line %u); each %s needs its own.", label, k->key,
	    v->text, other, first->line, blk->type);
}

static int missing_key(struct conf_parse *ps, const struct conf_block *blk,
                       const struct conf_key *k)
{
	char label[128];

	conf_parse_label(blk, label, sizeof(label));
	return conf_parse_error(ps, blk->line, blk->col,
	                        "The %s section has no '%s' (%s); add %s '%s' line to it.", label,
	                        k->key, k->doc, strchr("aeiou", k->key[0]) ? "an" : "a", k->key);
}

static int apply_directives(const struct walk *w, const struct conf_block *blk,
                            const struct conf_section *sec, void *base)
{
	const struct conf_directive *seen[CONF_SCHEMA_MAX_KEYS] = {0};
	unsigned errors = w->ps->n_errors;
	char label[128];

	conf_parse_label(blk, label, sizeof(label));
	for (const struct conf_directive *d = blk->dirs; d && !w->ps->enomem; d = d->next) {
		const struct conf_key *k = key_find(sec, d->key);
		if (!k) {
			unknown_key(w, blk, sec, d);
			continue;
		}
		size_t i = (size_t)(k - sec->keys);
		if (seen[i]) {
			conf_parse_error(w->ps, d->line, d->col,
			                 "Duplicate key '%s' in %s; it is already set at line %u.",
			                 k->key, label, seen[i]->line);
			continue;
		}
		seen[i] = d;
		if (apply_value(w->ps, blk, k, d, base) < 0)
			continue;
		if (k->flags & CONF_UNIQUE)
			check_unique(w->ps, blk, k, d->vals);
	}
	return w->ps->n_errors == errors ? 0 : -1;
}

/* Every missing key, unless a line of the block was dropped: the key may be on it. */
static int check_required(struct conf_parse *ps, const struct conf_block *blk,
                          const struct conf_section *sec)
{
	int rc = 0;

	for (size_t i = 0; i < sec->n_keys && !blk->damaged; i++)
		if ((sec->keys[i].flags & CONF_REQUIRED) && !conf_parse_find(blk, sec->keys[i].key))
			rc = missing_key(ps, blk, &sec->keys[i]);
	return rc;
}

static int check_header(struct conf_parse *ps, const struct conf_block *blk,
                        const struct conf_section *sec)
{
	if (sec->named && !blk->name)
		return conf_parse_error(ps, blk->line, blk->col,
		                        "A '%s' section needs a name; write '%s NAME {'.",
		                        sec->type, sec->type);
	if (!sec->named && blk->name)
		return conf_parse_error(ps, blk->name_line, blk->name_col,
		                        "A '%s' section takes no name; write '%s {'.", sec->type,
		                        sec->type);
	if (blk->name && !conf_schema_name_valid(blk->name))
		return conf_parse_error(
		    ps, blk->name_line, blk->name_col,
		    "Bad %s name '%.80s'; use 1 to %u letters, digits, '_', '.' or '-'.", sec->type,
		    blk->name, CONF_SCHEMA_NAME_MAX);
	return 0;
}

static const struct conf_section *section_find(const struct conf_schema *sc, const char *type,
                                               const struct conf_section *parent)
{
	const char *ptype = parent ? parent->type : NULL;

	for (size_t i = 0; i < sc->n_sections; i++) {
		const struct conf_section *s = &sc->sections[i];
		if (strcmp(s->type, type) == 0 &&
		    (s->parent == ptype || (s->parent && ptype && strcmp(s->parent, ptype) == 0)))
			return s;
	}
	return NULL;
}

int conf_schema_is_section(const struct conf_schema *schema, const char *type)
{
	return section_find(schema, type, NULL) != NULL;
}

static int unknown_section(const struct walk *w, const struct conf_block *parent,
                           const struct conf_block *blk)
{
	const char *names[CONF_SCHEMA_MAX_SECTIONS], *hint;
	char label[128], list[256] = "";
	size_t n = 0;

	if (parent->type) {
		conf_parse_label(parent, label, sizeof(label));
		return conf_parse_error(
		    w->ps, blk->line, blk->col,
		    "A '%.80s' section cannot be inside %s; is the '}' closing %s missing?",
		    blk->type, label, label);
	}
	for (size_t i = 0; i < w->sc->n_sections; i++) {
		if (w->sc->sections[i].parent)
			continue;
		names[n++] = w->sc->sections[i].type;
		list_append(list, sizeof(list), w->sc->sections[i].type);
	}
	hint = conf_parse_suggest(blk->type, names, n);
	if (hint)
		return conf_parse_error(
		    w->ps, blk->line, blk->col,
		    "Unknown section '%.80s'; did you mean '%s'? Valid sections are: %s.",
		    blk->type, hint, list);
	return conf_parse_error(w->ps, blk->line, blk->col,
	                        "Unknown section '%.80s'; valid sections are: %s.", blk->type,
	                        list);
}

static int validate_children(const struct walk *w, const struct conf_block *parent,
                             const struct conf_section *psec, void *pbase);

static int validate_section(const struct walk *w, const struct conf_block *blk,
                            const struct conf_section *sec, void *pbase)
{
	unsigned errors = w->ps->n_errors;
	void *base;

	if (check_header(w->ps, blk, sec) < 0)
		return -1;
	base = sec->open(w->ps, w->ctx, blk, pbase);
	if (!base)
		return -1;
	apply_directives(w, blk, sec, base);
	/* A misplaced section often means a missing '}': more useful to hear than a missing key. */
	if (validate_children(w, blk, sec, base) < 0 && w->ps->enomem)
		return -1;
	check_required(w->ps, blk, sec);
	if (w->ps->n_errors != errors)
		return -1;
	return sec->check ? sec->check(w->ps, w->ctx, blk, base) : 0;
}

static int too_many(struct conf_parse *ps, const struct conf_block *c,
                    const struct conf_section *sec, const struct conf_block *first)
{
	if (sec->max_count == 1)
		return conf_parse_error(
		    ps, c->line, c->col,
		    "A second '%s' section; the first is at line %u, merge them.", sec->type,
		    first->line);
	if (sec->why_max)
		return conf_parse_error(ps, c->line, c->col,
		                        "Too many '%s' sections (more than %u); %s.", sec->type,
		                        sec->max_count, sec->why_max);
	return conf_parse_error(ps, c->line, c->col, "Too many '%s' sections (more than %u).",
	                        sec->type, sec->max_count);
}

/*
 * Sections of one parent, in file order: known type, count limits, and names unique per type. A
 * section that fails one of these is skipped; the walk goes on with the next.
 */
static int validate_children(const struct walk *w, const struct conf_block *parent,
                             const struct conf_section *psec, void *pbase)
{
	unsigned counts[CONF_SCHEMA_MAX_SECTIONS] = {0};
	const struct conf_block *first[CONF_SCHEMA_MAX_SECTIONS] = {0};
	unsigned errors = w->ps->n_errors;

	for (const struct conf_block *c = parent->children; c && !w->ps->enomem; c = c->next) {
		const struct conf_section *sec = section_find(w->sc, c->type, psec);
		if (!sec) {
			unknown_section(w, parent, c);
			continue;
		}
		size_t i = (size_t)(sec - w->sc->sections);
		if (counts[i] >= sec->max_count) {
			too_many(w->ps, c, sec, first[i]);
			continue;
		}
		const struct conf_block *o = NULL;
		if (c->name && conf_parse_unique(w->ps, sec, c->name, c, &o) < 0)
			break;
		if (o) {
			conf_parse_error(w->ps, c->name_line, c->name_col,
			                 "Duplicate %s name '%s'; the first is at line %u.",
			                 c->type, c->name, o->line);
			continue;
		}
		if (!first[i])
			first[i] = c;
		counts[i]++;
		validate_section(w, c, sec, pbase);
	}
	return w->ps->n_errors == errors ? 0 : -1;
}

int conf_schema_validate(struct conf_parse *ps, const struct conf_schema *schema,
                         const struct conf_block *root, void *ctx)
{
	struct walk w = {.ps = ps, .sc = schema, .ctx = ctx};

	if (schema->n_sections > CONF_SCHEMA_MAX_SECTIONS)
		return conf_parse_error(ps, 1, 1,
		                        "The schema has %zu sections, more than the %u supported.",
		                        schema->n_sections, CONF_SCHEMA_MAX_SECTIONS);
	for (size_t i = 0; i < schema->n_sections; i++)
		if (schema->sections[i].n_keys > CONF_SCHEMA_MAX_KEYS)
			return conf_parse_error(
			    ps, 1, 1,
			    "Section '%s' of the schema has %zu keys, more than the %u "
			    "supported.",
			    schema->sections[i].type, schema->sections[i].n_keys,
			    CONF_SCHEMA_MAX_KEYS);
	return validate_children(&w, root, NULL, NULL);
}
