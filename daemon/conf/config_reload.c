/* SPDX-License-Identifier: MIT */
#include "config_reload.h"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf_schema.h"

#define TEXT_MAX 1024 /* a value as text, for comparing; shown shortened */

/*
 * The keys a reload applies in place. Each is read by its module from the running configuration
 * every time it is used, on the main loop (hak.conf(5), RELOADING, says when each takes effect),
 * or re-armed after the reload (the replication timers); every other key was copied at start
 * into sockets, threads, timers or metadata.
 */
static const struct {
	const char *section, *key;
} live_keys[] = {
    {"global", "log-level"},          {"global", "allow-drills"},
    {"cluster", "fence-hook"}, /* a new path; adding or removing it is refused below */
    {"volume", "ping-timeout"},       {"volume", "fence-timeout"},
    {"volume", "ping-interval"},      {"volume", "connect-interval"}, /* repl_timers_reload */
    {"volume", "split-brain-hook"},   {"volume", "local-io-error-hook"},
    {"volume", "resync-rate-max"},    {"volume", "resync-rate-min"},
    {"volume", "resync-fill-target"},
};

static bool key_is_live(const char *section, const struct conf_key *k, const char *old_text,
                        const char *new_text)
{
	/* Whether a fence hook exists shapes the cluster decision from its start. */
	if (strcmp(k->key, "fence-hook") == 0 &&
	    (strcmp(old_text, "(none)") == 0 || strcmp(new_text, "(none)") == 0))
		return false;
	for (size_t i = 0; i < sizeof(live_keys) / sizeof(live_keys[0]); i++)
		if (strcmp(live_keys[i].section, section) == 0 &&
		    strcmp(live_keys[i].key, k->key) == 0)
			return true;
	return false;
}

static const struct conf_section *section_of(const char *type)
{
	const struct conf_schema *sc = config_schema();

	for (size_t i = 0; i < sc->n_sections; i++)
		if (strcmp(sc->sections[i].type, type) == 0)
			return &sc->sections[i];
	return NULL;
}

static uint64_t field_uint(const void *f, size_t width)
{
	uint32_t v32;
	uint64_t v64;

	if (width == sizeof(v64)) {
		memcpy(&v64, f, sizeof(v64));
		return v64;
	}
	memcpy(&v32, f, sizeof(v32));
	return v32;
}

/* An ENUM's choice by value: the names table, or the choices parse_enum() maps to it. */
static void enum_text(const struct conf_key *k, const void *f, char *out, size_t len)
{
	int v, probe;
	char list[256], *save = NULL;

	memcpy(&v, f, sizeof(v));
	if (k->names) {
		for (int i = 0; k->names[i]; i++)
			if (i == v) {
				snprintf(out, len, "%s", k->names[i]);
				return;
			}
	} else if (k->parse_enum && k->choices) {
		snprintf(list, sizeof(list), "%s", k->choices);
		for (char *t = strtok_r(list, ", ", &save); t; t = strtok_r(NULL, ", ", &save))
			if (k->parse_enum(t, &probe) == 0 && probe == v) {
				snprintf(out, len, "%s", t);
				return;
			}
	}
	snprintf(out, len, "%d", v);
}

/* The CUSTOM keys: each stores its own layout (config.c, conf_group.c). */
static void custom_text(const struct conf_key *k, const void *base, char *out, size_t len)
{
	const char *f = (const char *)base + k->offset;
	size_t used = 0;

	out[0] = '\0';
	if (strcmp(k->key, "heartbeat-address") == 0) {
		const struct hak_node_cfg *n = base;
		for (unsigned i = 0; i < n->n_heartbeat && used < len; i++)
			used += (size_t)snprintf(out + used, len - used, "%s%s:%u", i ? " " : "",
			                         n->heartbeat[i].host, n->heartbeat[i].port);
	} else if (strcmp(k->key, "volume") == 0 && k->flags & CONF_LIST) {
		const struct hak_group_cfg *g = base;
		for (unsigned i = 0; i < g->n_volumes && used < len; i++)
			used += (size_t)snprintf(out + used, len - used, "%s%s", i ? " " : "",
			                         g->volumes[i]);
	} else if (strcmp(k->key, "meta-disk") == 0) {
		const struct hak_volume_cfg *v = base;
		snprintf(out, len, "%s",
		         v->meta_internal ? "internal"
		         : v->meta_path   ? v->meta_path
		                          : "(default)");
	} else {
		/* control-group, node, address, hostname, discard-node: a char * */
		const char *s;
		memcpy(&s, f, sizeof(s));
		snprintf(out, len, "%s", s ? s : "(none)");
	}
}

/* A key's value as hak.conf would write it ("(none)" when unset). */
static void value_text(const struct conf_key *k, const void *base, char *out, size_t len)
{
	const void *f = (const char *)base + k->offset;
	const char *s;
	double d;
	int b;

	switch (k->kind) {
	case CONF_STRING:
	case CONF_PATH:
	case CONF_ADDR:
		memcpy(&s, f, sizeof(s));
		snprintf(out, len, "%s", s ? s : "(none)");
		break;
	case CONF_SIZE:
	case CONF_UINT:
		snprintf(out, len, "%" PRIu64, field_uint(f, k->width));
		break;
	case CONF_BOOL:
		memcpy(&b, f, sizeof(b));
		snprintf(out, len, "%s", b ? "yes" : "no");
		break;
	case CONF_ENUM:
		enum_text(k, f, out, len);
		break;
	case CONF_DURATION:
		memcpy(&d, f, sizeof(d));
		snprintf(out, len, "%gs", d);
		break;
	case CONF_CUSTOM:
	default:
		custom_text(k, base, out, len);
		break;
	}
}

static struct reload_change *plan_add(struct reload_plan *plan, const char *where, const char *key,
                                      const char *old_text, const char *new_text, bool live)
{
	struct reload_change *c;

	if (plan->n == RELOAD_MAX_CHANGES) {
		plan->overflow = true;
		plan->n_refused++;
		return NULL;
	}
	c = &plan->c[plan->n++];
	memset(c, 0, sizeof(*c));
	snprintf(c->where, sizeof(c->where), "%s", where);
	snprintf(c->key, sizeof(c->key), "%s", key);
	snprintf(c->old_val, sizeof(c->old_val), "%s", old_text);
	snprintf(c->new_val, sizeof(c->new_val), "%s", new_text);
	c->live = live;
	if (live)
		plan->n_live++;
	else
		plan->n_refused++;
	return c;
}

/* Every key of one section present in both configurations. */
static void diff_section(struct reload_plan *plan, const char *type, const char *where,
                         void *run_base, const void *new_base)
{
	const struct conf_section *sec = section_of(type);
	char *a = malloc(TEXT_MAX), *b = malloc(TEXT_MAX);

	for (size_t i = 0; sec && a && b && i < sec->n_keys; i++) {
		const struct conf_key *k = &sec->keys[i];
		value_text(k, run_base, a, TEXT_MAX);
		value_text(k, new_base, b, TEXT_MAX);
		if (strcmp(a, b) == 0)
			continue;
		struct reload_change *c =
		    plan_add(plan, where, k->key, a, b, key_is_live(type, k, a, b));
		if (c && c->live) {
			c->k = k;
			c->run_base = run_base;
			c->new_base = new_base;
		}
	}
	free(a);
	free(b);
}

/* Named sections are matched by name: "a b" of each side, compared as a set in order. */
static void names_text(const char *const *names, size_t n, char *out, size_t len)
{
	size_t used = 0;

	out[0] = '\0';
	for (size_t i = 0; i < n && used < len; i++)
		used += (size_t)snprintf(out + used, len - used, "%s%s", i ? " " : "", names[i]);
	if (!n)
		snprintf(out, len, "(none)");
}

static bool names_differ(struct reload_plan *plan, const char *type, const char *const *a,
                         size_t na, const char *const *b, size_t nb)
{
	char ta[RELOAD_VALUE_MAX], tb[RELOAD_VALUE_MAX], where[64];

	names_text(a, na, ta, sizeof(ta));
	names_text(b, nb, tb, sizeof(tb));
	if (strcmp(ta, tb) == 0)
		return false;
	snprintf(where, sizeof(where), "%s sections", type);
	plan_add(plan, where, "(names)", ta, tb, false);
	return true;
}

#define NAMES_MAX 16u

static void diff_groups(struct reload_plan *plan, const struct hak_group_list *run,
                        const struct hak_group_list *next)
{
	const char *a[NAMES_MAX], *b[NAMES_MAX];
	char where[80];

	for (unsigned i = 0; i < run->n && i < NAMES_MAX; i++)
		a[i] = run->g[i]->name;
	for (unsigned i = 0; i < next->n && i < NAMES_MAX; i++)
		b[i] = next->g[i]->name;
	if (names_differ(plan, "group", a, run->n, b, next->n))
		return;
	for (unsigned i = 0; i < run->n; i++) {
		struct hak_group_cfg *g = run->g[i];
		const struct hak_group_cfg *h = next->g[i];
		snprintf(where, sizeof(where), "group %s", g->name);
		diff_section(plan, "group", where, g, h);
		for (unsigned j = 0; j < g->n_res && j < NAMES_MAX; j++)
			a[j] = g->res[j]->name;
		for (unsigned j = 0; j < h->n_res && j < NAMES_MAX; j++)
			b[j] = h->res[j]->name;
		if (names_differ(plan, "resource", a, g->n_res, b, h->n_res))
			continue;
		for (unsigned j = 0; j < g->n_res; j++) {
			snprintf(where, sizeof(where), "group %s resource %s", g->name,
			         g->res[j]->name);
			diff_section(plan, "resource", where, g->res[j], h->res[j]);
		}
	}
}

void config_reload_diff(struct hak_config *run, const struct hak_config *next,
                        struct reload_plan *plan)
{
	const char *a[NAMES_MAX], *b[NAMES_MAX];
	char where[80];

	memset(plan, 0, sizeof(*plan));
	diff_section(plan, "global", "global", run, next);
	if (run->cluster.present != next->cluster.present)
		plan_add(plan, "cluster", "(section)", run->cluster.present ? "present" : "(none)",
		         next->cluster.present ? "present" : "(none)", false);
	else if (run->cluster.present)
		diff_section(plan, "cluster", "cluster", &run->cluster, &next->cluster);
	for (size_t i = 0; i < run->n_nodes && i < NAMES_MAX; i++)
		a[i] = run->nodes[i].name;
	for (size_t i = 0; i < next->n_nodes && i < NAMES_MAX; i++)
		b[i] = next->nodes[i].name;
	if (!names_differ(plan, "node", a, run->n_nodes, b, next->n_nodes)) {
		for (size_t i = 0; i < run->n_nodes; i++) {
			snprintf(where, sizeof(where), "node %s", run->nodes[i].name);
			diff_section(plan, "node", where, &run->nodes[i], &next->nodes[i]);
		}
	}
	for (size_t i = 0; i < run->n_volumes && i < NAMES_MAX; i++)
		a[i] = run->volumes[i].name;
	for (size_t i = 0; i < next->n_volumes && i < NAMES_MAX; i++)
		b[i] = next->volumes[i].name;
	if (!names_differ(plan, "volume", a, run->n_volumes, b, next->n_volumes)) {
		for (size_t i = 0; i < run->n_volumes; i++) {
			snprintf(where, sizeof(where), "volume %s", run->volumes[i].name);
			diff_section(plan, "volume", where, &run->volumes[i], &next->volumes[i]);
		}
	}
	diff_groups(plan, &run->groups, &next->groups);
}

int config_reload_apply(struct reload_plan *plan)
{
	for (unsigned i = 0; i < plan->n; i++) {
		struct reload_change *c = &plan->c[i];
		if (!c->live || !c->k)
			continue;
		void *to = (char *)c->run_base + c->k->offset;
		const void *from = (const char *)c->new_base + c->k->offset;
		if (c->k->kind == CONF_STRING || c->k->kind == CONF_PATH ||
		    c->k->kind == CONF_ADDR) {
			char *old, *copy = NULL;
			const char *s;
			memcpy(&s, from, sizeof(s));
			if (s && !(copy = strdup(s)))
				return -1;
			memcpy(&old, to, sizeof(old));
			memcpy(to, &copy, sizeof(copy));
			free(old);
		} else {
			memcpy(to, from, c->k->width);
		}
	}
	return 0;
}

void config_reload_describe(const struct reload_change *c, char *out, size_t len)
{
	snprintf(out, len, "%s: %s %s -> %s", c->where, c->key, c->old_val, c->new_val);
}
