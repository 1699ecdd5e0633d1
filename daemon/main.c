/* SPDX-License-Identifier: MIT */
/*
 * hakd: arguments, configuration, process setup, the main loop and orderly shutdown.
 */
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <libgen.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <hak/version.h>

#include "lib/buf.h"
#include "cluster/clusterd.h"
#include "conf/config.h"
#include "conf/config_reload.h"
#include "ctl/control.h"
#include "cluster/groupctl.h"
#include "ctl/events.h"
#include "ctl/metrics.h"
#include "ctl/sdnotify.h"
#include "ctl/statjson.h"
#include "lib/testhook.h"
#include "io/io.h"
#include "lib/log.h"
#include "nbd/nbd.h"
#include "lib/proc.h"
#include "repl/pull.h"
#include "repl/repl.h"
#include "repl/resync.h"
#include "volume/volume.h"
#include "cluster/witness.h"

#ifndef PR_SET_IO_FLUSHER
#define PR_SET_IO_FLUSHER 57
#endif

#define SHUTDOWN_GRACE 30.0 /* seconds to finish in-flight requests on SIGTERM */

struct hakd;

/* What the replication callbacks need to reach the volume's NBD server. */
struct vol_slot {
	struct hakd *d;
	size_t i;
	char refuse[160];
};

struct hakd {
	struct ev_loop *loop;
	struct hak_config *cfg;
	const struct hak_node_cfg *self, *peer;
	struct io_engine *io;
	struct volume **vols;
	struct nbd_server **srvs;
	struct repl **repls;
	struct vol_slot *slots;
	size_t n;
	struct control *ctl;
	struct groupctl *groups;
	struct clusterd *cluster;
	struct metrics *metrics;
	ev_signal sig_term, sig_int, sig_hup;
	ev_timer shutdown_poll;
	ev_timer buf_aging;
	ev_timer status_tick; /* systemd: READY once joined, then STATUS= as roles change */
	bool ready_sent;
	char reload_note[256]; /* the last reload's outcome, in STATUS= */
	const struct args *args;
	double shutdown_start;
	int exit_code;
	bool sched_batch; /* the policy the I/O threads run with now (sched_update) */
};

struct args {
	const char *config;
	const char *export_path;
	const char *socket;
	const char *tcp;
	const char *name;
	const char *control;
	const char *io_engine;
	const char *log_level;
	const char *pidfile;
	const char *node;
	const char *metrics;
	int foreground;
	int witness;
	int direct;
	int read_only;
};

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: hakd [--config FILE] [options]\n"
	    "       hakd --export PATH --socket SOCK [--tcp ADDR:PORT] [--name NAME] [options]\n"
	    "\n"
	    "  --config FILE        configuration file (default /etc/hak/hak.conf)\n"
	    "  --export PATH        serve PATH (file or block device) without a configuration\n"
	    "  --socket SOCK        UNIX socket for --export\n"
	    "  --tcp ADDR:PORT      also listen on TCP for --export, without TLS (a config\n"
	    "                       file's nbd-tls offers or requires it)\n"
	    "  --name NAME          export name for --export (default: basename of PATH)\n"
	    "  --read-only          --export read-only\n"
	    "  --direct             --export with O_DIRECT\n"
	    "  --control SOCK       control socket (default %s)\n"
	    "  --io-engine ENGINE   auto, uring or pool\n"
	    "  --log-level LEVEL    err, warn, notice, info or debug\n"
	    "  --pidfile FILE       write the pid to FILE\n"
	    "  --node NAME          which node of the configuration this is (default: by "
	    "hostname)\n"
	    "  --metrics ADDR:PORT  serve Prometheus metrics on ADDR:PORT (metrics-listen)\n"
	    "  --witness            run only the witness of the config's cluster section\n"
	    "  --foreground         log to stderr instead of syslog\n"
	    "  --help, --version\n",
	    HAK_DEFAULT_CONTROL_SOCKET);
}

static int args_parse(int argc, char **argv, struct args *a)
{
	static const struct option opts[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"export", required_argument, NULL, 'e'},
	    {"socket", required_argument, NULL, 's'},
	    {"tcp", required_argument, NULL, 't'},
	    {"name", required_argument, NULL, 'n'},
	    {"control", required_argument, NULL, 'C'},
	    {"io-engine", required_argument, NULL, 'I'},
	    {"log-level", required_argument, NULL, 'l'},
	    {"pidfile", required_argument, NULL, 'p'},
	    {"node", required_argument, NULL, 'N'},
	    {"metrics", required_argument, NULL, 'M'},
	    {"foreground", no_argument, NULL, 'f'},
	    {"witness", no_argument, NULL, 'W'},
	    {"direct", no_argument, NULL, 'D'},
	    {"read-only", no_argument, NULL, 'r'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};
	int c;
	while ((c = getopt_long(argc, argv, "c:e:s:t:n:C:I:l:p:N:M:fWDrhV", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			a->config = optarg;
			break;
		case 'e':
			a->export_path = optarg;
			break;
		case 's':
			a->socket = optarg;
			break;
		case 't':
			a->tcp = optarg;
			break;
		case 'n':
			a->name = optarg;
			break;
		case 'C':
			a->control = optarg;
			break;
		case 'I':
			a->io_engine = optarg;
			break;
		case 'l':
			a->log_level = optarg;
			break;
		case 'p':
			a->pidfile = optarg;
			break;
		case 'N':
			a->node = optarg;
			break;
		case 'M':
			a->metrics = optarg;
			break;
		case 'f':
			a->foreground = 1;
			break;
		case 'W':
			a->witness = 1;
			break;
		case 'D':
			a->direct = 1;
			break;
		case 'r':
			a->read_only = 1;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case 'V':
			printf("hakd %s\n", HAK_VERSION);
			exit(0);
		default:
			usage(stderr);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "hakd: unexpected argument '%s'.\n", argv[optind]);
		return -1;
	}
	if (a->export_path && !a->socket) {
		fprintf(stderr,
		        "hakd: --export needs --socket SOCK (the UNIX socket to serve on).\n");
		return -1;
	}
	if (!a->export_path && (a->socket || a->tcp || a->name || a->direct || a->read_only)) {
		fprintf(stderr, "hakd: --socket, --tcp, --name, --direct and --read-only go with "
		                "--export.\n");
		return -1;
	}
	if (a->witness && a->metrics) {
		fprintf(stderr,
		        "hakd: --witness serves no metrics; give --metrics to the nodes.\n");
		return -1;
	}
	if (a->witness && a->export_path) {
		fprintf(stderr, "hakd: --witness runs from a --config file, not with --export.\n");
		return -1;
	}
	if (a->export_path && a->config) {
		fprintf(stderr, "hakd: --export and --config exclude each other.\n");
		return -1;
	}
	return 0;
}

/* Build the configuration from --export or from the file. */
static struct hak_config *config_from_args(const struct args *a)
{
	char err[512];
	struct hak_config *cfg = NULL;
	if (a->export_path) {
		char *copy = strdup(a->export_path);
		cfg = config_new_default();
		if (!copy || !cfg) {
			free(copy);
			config_free(cfg);
			return NULL;
		}
		const char *name = a->name ? a->name : basename(copy);
		struct hak_volume_cfg *v = config_add_volume(cfg, name, a->export_path);
		if (!v)
			fprintf(stderr,
			        "hakd: cannot export %s as '%s': %s. Export names are 1-64 "
			        "characters of A-Z a-z 0-9 _ . - (choose one with --name).\n",
			        a->export_path, name, strerror(errno));
		free(copy);
		if (!v || !(v->nbd_socket = strdup(a->socket)) ||
		    (a->tcp && !(v->nbd_listen = strdup(a->tcp)))) {
			config_free(cfg);
			return NULL;
		}
		v->read_only = a->read_only;
		v->direct_io = a->direct;
	} else {
		const char *path = a->config ? a->config : "/etc/hak/hak.conf";
		if (config_load(path, &cfg, err, sizeof(err)) < 0) {
			fprintf(stderr, "hakd: %s\n", err);
			return NULL;
		}
	}
	if (a->control) {
		free(cfg->control_socket);
		cfg->control_socket = strdup(a->control);
	}
	if (a->metrics) {
		free(cfg->metrics_listen);
		cfg->metrics_listen = strdup(a->metrics);
	}
	if (a->io_engine && io_kind_parse(a->io_engine, &cfg->io_engine) < 0) {
		fprintf(stderr, "hakd: unknown --io-engine '%s'; use auto, uring or pool.\n",
		        a->io_engine);
		config_free(cfg);
		return NULL;
	}
	if (a->log_level && log_level_parse(a->log_level, &cfg->log_level) < 0) {
		fprintf(stderr,
		        "hakd: unknown --log-level '%s'; use err, warn, notice, info or "
		        "debug.\n",
		        a->log_level);
		config_free(cfg);
		return NULL;
	}
	return cfg;
}

static json_t *volume_status_json(struct hakd *d, size_t i)
{
	const struct hak_volume_cfg *vc = volume_cfg(d->vols[i]);
	struct vol_stats vs;
	struct nbd_server_stats ns;
	volume_stats(d->vols[i], &vs);
	nbd_server_stats(d->srvs[i], &ns);
	json_t *req = json_pack(
	    "{s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "read", (json_int_t)vs.ops[VOL_READ], "write",
	    (json_int_t)vs.ops[VOL_WRITE], "flush", (json_int_t)vs.ops[VOL_FLUSH], "trim",
	    (json_int_t)vs.ops[VOL_TRIM], "zero", (json_int_t)vs.ops[VOL_ZERO], "cache",
	    (json_int_t)vs.ops[VOL_CACHE], "block_status", (json_int_t)vs.ops[VOL_BLOCK_STATUS]);
	json_t *bytes = json_pack("{s:I, s:I, s:I}", "read", (json_int_t)vs.bytes_read, "write",
	                          (json_int_t)vs.bytes_written, "write_copied",
	                          (json_int_t)ns.write_bytes_copied);
	json_t *o = json_pack(
	    "{s:s, s:s, s:s, s:I, s:s, s:s?, s:b, s:b, s:i, s:I, s:I, s:o, s:o, s:I, "
	    "s:I, s:I, s:I, s:I}",
	    "name", vc->name, "role",
	    d->repls[i] ? repl_role_name(repl_role(d->repls[i])) : "standalone", "backing",
	    vc->backing, "size", (json_int_t)volume_size(d->vols[i]), "socket", vc->nbd_socket,
	    "tcp", vc->nbd_listen, "read_only", vc->read_only, "direct_io", vc->direct_io,
	    "clients", (int)ns.clients, "connections_total", (json_int_t)ns.connections, "rejected",
	    (json_int_t)ns.rejected, "requests", req, "bytes", bytes, "errors",
	    (json_int_t)(vs.errors + ns.invalid_requests + ns.protocol_errors), "io_errors",
	    (json_int_t)vs.errors, "invalid_requests", (json_int_t)ns.invalid_requests,
	    "protocol_errors", (json_int_t)ns.protocol_errors, "in_flight",
	    (json_int_t)ns.in_flight);
	static const char *const tls_names[] = {"off", "on", "require"}; /* enum hak_nbd_tls */
	json_object_set_new(o, "tcp_tls", json_string(tls_names[vc->nbd_tls]));
	json_object_set_new(o, "tls_sessions", json_integer((json_int_t)ns.tls_sessions));
	json_object_set_new(o, "tls_failures", json_integer((json_int_t)ns.tls_failures));
	json_t *lat = json_object();
	static const char *const lat_names[VOL_LAT__COUNT] = {"write", "flush"};
	for (int k = 0; lat && k < VOL_LAT__COUNT; k++) {
		const struct vol_lat *l = &vs.lat[k];
		json_object_set_new(
		    lat, lat_names[k],
		    json_pack("{s:o?, s:o?, s:o?, s:I}", "total", statjson_lathist(&l->total),
		              "local", statjson_lathist(&l->local), "peer",
		              statjson_lathist(&l->peer), "peer_last", (json_int_t)l->peer_last));
	}
	if (o && lat)
		json_object_set_new(o, "latency", lat);
	else
		json_decref(lat);
	if (o && d->repls[i]) {
		json_t *rj = repl_status_json(d->repls[i]);
		if (rj)
			json_object_set_new(o, "replication", rj);
	}
	return o;
}

static json_t *cmd_status(void *ctx, json_t *req, char *err, size_t errlen)
{
	struct hakd *d = ctx;
	(void)req;
	json_t *vols = json_array();
	for (size_t i = 0; vols && i < d->n; i++) {
		json_t *v = volume_status_json(d, i);
		if (!v || json_array_append_new(vols, v) < 0) {
			json_decref(vols);
			snprintf(err, errlen, "Out of memory while building the status.");
			return NULL;
		}
	}
	json_t *o = json_pack("{s:s, s:i, s:s, s:o, s:o}", "version", HAK_VERSION, "pid",
	                      (int)getpid(), "io_engine", io_engine_name(d->io), "volumes", vols,
	                      "groups", groupctl_status_json(d->groups));
	json_t *cl = clusterd_status_json(d->cluster);
	if (o && cl)
		json_object_set_new(o, "cluster", cl);
	else
		json_decref(cl);
	return o;
}

/* The metrics endpoint's view: the status object itself, so the two never disagree. */
static json_t *metrics_status(void *ctx)
{
	char err[128];
	return cmd_status(ctx, NULL, err, sizeof(err));
}

static json_t *cmd_version(void *ctx, json_t *req, char *err, size_t errlen)
{
	(void)ctx;
	(void)req;
	(void)err;
	(void)errlen;
	return json_pack("{s:s}", "version", HAK_VERSION);
}

/* The volume a command names ("volume" field), which must be replicated. */
static ssize_t cmd_volume(struct hakd *d, json_t *req, char *err, size_t errlen)
{
	const char *name = json_string_value(json_object_get(req, "volume"));
	if (!name) {
		snprintf(err, errlen, "The command needs a \"volume\" name.");
		return -1;
	}
	for (size_t i = 0; i < d->n; i++) {
		if (strcmp(volume_name(d->vols[i]), name) != 0)
			continue;
		if (!d->repls[i]) {
			snprintf(err, errlen,
			         "Volume %s is not replicated (no nodes are configured).", name);
			return -1;
		}
		return (ssize_t)i;
	}
	snprintf(err, errlen, "There is no volume called '%.64s'.", name);
	return -1;
}

static json_t *cmd_role(void *ctx, json_t *req, char *err, size_t errlen)
{
	struct hakd *d = ctx;
	ssize_t i = cmd_volume(d, req, err, errlen);
	const char *cmd = json_string_value(json_object_get(req, "cmd"));
	int rc;
	if (i < 0)
		return NULL;
	struct repl *r = d->repls[i];
	if (strcmp(cmd, "primary") == 0) {
		rc = repl_promote(r, json_is_true(json_object_get(req, "force")), err, errlen);
	} else if (strcmp(cmd, "secondary") == 0) {
		struct nbd_server_stats ns;
		nbd_server_stats(d->srvs[i], &ns);
		rc = repl_demote(r, ns.clients > 0, err, errlen);
	} else if (strcmp(cmd, "connect") == 0) {
		rc = repl_connect(r, err, errlen);
	} else if (strcmp(cmd, "disconnect") == 0) {
		rc = repl_disconnect(r, err, errlen);
	} else if (strcmp(cmd, "verify") == 0) {
		rc = repl_verify(r, err, errlen);
	} else if (strcmp(cmd, "resync") == 0) {
		rc = repl_resync(r, err, errlen);
	} else {
		if (!json_is_true(json_object_get(req, "discard_local"))) {
			snprintf(err, errlen,
			         "resolve needs --discard-local on the node whose changes "
			         "are to be dropped.");
			return NULL;
		}
		rc = repl_resolve_discard_local(r, err, errlen);
	}
	if (rc < 0)
		return NULL;
	return json_pack("{s:s}", "role", repl_role_name(repl_role(r)));
}

/* hakctl detach / attach: the operator's side of on-io-error detach. */
static json_t *cmd_disk(void *ctx, json_t *req, char *err, size_t errlen)
{
	struct hakd *d = ctx;
	ssize_t i = cmd_volume(d, req, err, errlen);
	const char *cmd = json_string_value(json_object_get(req, "cmd"));
	if (i < 0)
		return NULL;
	struct repl *r = d->repls[i];
	struct volume *v = d->vols[i];
	if (repl_role(r) != ROLE_PRIMARY) {
		snprintf(err, errlen,
		         "Volume %s is secondary: this version detaches and attaches the disk of "
		         "a primary only.",
		         volume_name(v));
		return NULL;
	}
	if (strcmp(cmd, "detach") == 0) {
		if (!volume_diskless(v) && !repl_peer_serves(r)) {
			snprintf(err, errlen,
			         "Volume %s keeps its disk: without a connected UpToDate peer, "
			         "detaching it would leave no copy to serve from.",
			         volume_name(v));
			return NULL;
		}
		if (volume_detach(v, 0, "the operator detached it") < 0) {
			snprintf(err, errlen, "Detaching volume %s failed: %s.", volume_name(v),
			         strerror(errno));
			return NULL;
		}
	} else if (pull_attach(r, err, errlen) < 0) {
		return NULL;
	}
	return json_pack("{s:b}", "diskless", volume_diskless(v));
}

/* {"cmd":"resync", "volume":V [, "action":"pause"|"resume"]} */
static json_t *cmd_resync(void *ctx, json_t *req, char *err, size_t errlen)
{
	struct hakd *d = ctx;
	ssize_t i = cmd_volume(d, req, err, errlen);
	const char *action = json_string_value(json_object_get(req, "action"));
	if (i < 0)
		return NULL;
	/* Without an action: resync the blocks a verify marked (cmd_role's path). */
	if (!action)
		return cmd_role(ctx, req, err, errlen);
	if (strcmp(action, "pause") != 0 && strcmp(action, "resume") != 0) {
		snprintf(err, errlen,
		         "Unknown resync action '%.32s'; use pause, resume, or none to resync the "
		         "blocks marked out of sync.",
		         action);
		return NULL;
	}
	bool pause = strcmp(action, "pause") == 0;
	if (resync_pause(d->repls[i], pause, err, errlen) < 0)
		return NULL;
	return json_pack("{s:b}", "resync_paused", pause);
}

/*
 * sched-policy batch serves a local client's requests in batches (hak.conf(5)), but a secondary
 * serves the peer, whose writes arrive from the network: there batch only means waiting for
 * whatever else runs on the CPU, for every hop of every write and barrier (measured: sync-mode
 * commits several times slower with a busy loop on the secondary's CPU). So batch holds while
 * this node is primary for every replicated volume; as soon as one is secondary, the loop
 * thread and the I/O workers run with the normal policy.
 */
static void sched_update(struct hakd *d)
{
	bool batch = d->cfg->sched_batch;
	for (size_t i = 0; i < d->n && batch; i++)
		if (d->repls[i] && repl_role(d->repls[i]) != ROLE_PRIMARY)
			batch = false;
	if (batch == d->sched_batch)
		return;
	if (proc_sched_batch(batch) < 0) {
		log_warn("Cannot set the %s CPU scheduling policy: %s.", batch ? "batch" : "normal",
		         strerror(errno));
		return;
	}
	io_engine_set_batch(d->io, batch);
	d->sched_batch = batch;
	log_info("The I/O threads run with the %s CPU scheduling policy now (%s).",
	         batch ? "batch" : "normal",
	         batch ? "primary for every volume"
	               : "secondary for a volume: the peer's writes "
	                 "are served at once");
}

static void status_update(struct hakd *d);

static void role_changed(void *ctx, enum repl_role role)
{
	struct vol_slot *sl = ctx;
	struct hakd *d = sl->d;
	sched_update(d);
	status_update(d);
	if (!d->srvs[sl->i])
		return;
	nbd_server_set_refuse(d->srvs[sl->i], role == ROLE_PRIMARY ? NULL : sl->refuse);
	clusterd_kick(d->cluster);
}

static void shutdown_poll_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct hakd *d = w->data;
	(void)revents;
	bool idle = true;
	for (size_t i = 0; i < d->n; i++)
		idle = idle && nbd_server_idle(d->srvs[i]);
	if (idle) {
		ev_timer_stop(loop, w);
		ev_break(loop, EVBREAK_ALL);
		return;
	}
	if (ev_now(loop) - d->shutdown_start > SHUTDOWN_GRACE) {
		log_err("Requests were still in flight %.0f s after the shutdown request; exiting "
		        "anyway.",
		        SHUTDOWN_GRACE);
		d->exit_code = 1;
		ev_timer_stop(loop, w);
		ev_break(loop, EVBREAK_ALL);
	}
}

/*
 * Payload buffers a burst left in the cache (a resync's window, large client writes) go back to
 * the system once they sat unused for a whole interval, so a quiet daemon's resident memory is
 * what it uses, not what it once used (bench/memory.sh).
 */
#define BUF_AGING_INTERVAL 10.0

static void buf_aging_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
	size_t freed = buf_age();
	if (freed) {
		malloc_trim(0);
		log_debug("Gave %zu bytes of idle payload buffers back to the system.", freed);
	}
}

/* STATUS=: every volume's role, disk and link, the cluster and the groups. */
static void status_update(struct hakd *d)
{
	struct sdnotify_vol vols[16];
	char text[1024], cluster[128] = "", groups[256] = "";
	size_t n = d->n < 16 ? d->n : 16, used = 0;

	if (!sdnotify_enabled() || !d->ready_sent)
		return;
	for (size_t i = 0; i < n; i++) {
		struct repl *r = d->repls[i];
		vols[i] = (struct sdnotify_vol){.name = volume_name(d->vols[i])};
		if (r) {
			vols[i].role = repl_role_name(repl_role(r));
			vols[i].disk = repl_disk_name(repl_disk_state(r));
			vols[i].link = repl_link_name(repl_link_state(r));
		}
	}
	if (d->cluster)
		clusterd_summary(d->cluster, cluster, sizeof(cluster));
	json_t *ga = groupctl_status_json(d->groups), *g;
	size_t k;
	json_array_foreach(ga, k, g) used += (size_t)snprintf(
	    groups + used, used < sizeof(groups) ? sizeof(groups) - used : 0, "%sgroup %s: %s",
	    used ? "; " : "", json_string_value(json_object_get(g, "name")),
	    json_string_value(json_object_get(g, "state")));
	json_decref(ga);
	sdnotify_status_build(text, sizeof(text), vols, n, cluster, groups, d->reload_note);
	sdnotify_status(text);
}

/* READY=1 once every volume is served (hakd_start) and the cluster manager has joined. */
static void status_tick_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct hakd *d = w->data;

	(void)revents;
	if (!d->ready_sent) {
		if (!clusterd_joined(d->cluster))
			return;
		d->ready_sent = true;
		sdnotify_ready();
		log_info("Every volume is served%s; told systemd hakd is ready.",
		         d->cluster ? " and the cluster manager has joined" : "");
		w->repeat = SDNOTIFY_STATUS_INTERVAL;
		ev_timer_again(loop, w);
	}
	status_update(d);
}

static json_t *reload_result(const struct reload_plan *plan, const char *file)
{
	json_t *applied = json_array(), *refused = json_array();
	char line[512];

	for (unsigned i = 0; i < plan->n; i++) {
		const struct reload_change *c = &plan->c[i];
		config_reload_describe(c, line, sizeof(line));
		json_array_append_new(c->live ? applied : refused, json_string(line));
	}
	if (plan->overflow)
		json_array_append_new(
		    refused, json_string("more changes than one reload compares; restart"));
	return json_pack("{s:s, s:o, s:o}", "file", file, "applied", applied, "refused", refused);
}

/* Logs each change of plan: applied, or refused with both values and the restart it needs. */
static void reload_log(struct hakd *d, const struct reload_plan *plan)
{
	const struct reload_change *first = NULL;

	for (unsigned i = 0; i < plan->n; i++) {
		const struct reload_change *c = &plan->c[i];
		if (c->live) {
			log_notice("Reload: %s: %s is now %s (was %s).", c->where, c->key,
			           c->new_val, c->old_val);
			continue;
		}
		log_warn("Reload: %s: %s cannot change while hakd runs (running: %s, file: %s); "
		         "it keeps its running value until hakd is restarted.",
		         c->where, c->key, c->old_val, c->new_val);
		if (!first)
			first = c;
	}
	if (first)
		snprintf(d->reload_note, sizeof(d->reload_note),
		         "reload: %u applied, %u refused (%s: %s needs a restart)", plan->n_live,
		         plan->n_refused, first->where, first->key);
	else
		snprintf(d->reload_note, sizeof(d->reload_note), "reload: %u applied",
		         plan->n_live);
}

/*
 * SIGHUP and hakctl reload: re-read the file; a file that does not load is refused whole and
 * the running configuration stays. Returns the outcome, or NULL with err.
 */
static json_t *hakd_reload(struct hakd *d, char *err, size_t errlen)
{
	const char *path = d->args->config ? d->args->config : "/etc/hak/hak.conf";
	struct hak_config *next = NULL;
	struct reload_plan *plan = NULL;
	const struct hak_node_cfg *self = NULL, *peer = NULL;
	json_t *res = NULL;

	if (d->args->export_path) {
		snprintf(err, errlen,
		         "hakd runs with --export, without a configuration file to "
		         "reload.");
		return NULL;
	}
	sdnotify_reloading();
	if (config_load(path, &next, err, errlen) < 0 ||
	    (next->n_nodes == 2 &&
	     config_find_self(next, d->args->node, &self, &peer, err, errlen) < 0))
		goto out;
	/* What the command line set wins over the file, as at start. */
	if (d->args->control) {
		free(next->control_socket);
		next->control_socket = strdup(d->args->control);
	}
	if (d->args->io_engine)
		(void)io_kind_parse(d->args->io_engine, &next->io_engine);
	if (d->args->log_level)
		(void)log_level_parse(d->args->log_level, &next->log_level);
	if (self && d->self && strcmp(self->name, d->self->name) != 0) {
		snprintf(err, errlen,
		         "%s makes this machine node %s, but hakd runs as node %s; restart hakd to "
		         "change which node it is.",
		         path, self->name, d->self->name);
		goto out;
	}
	plan = malloc(sizeof(*plan));
	if (!plan) {
		snprintf(err, errlen, "Out of memory comparing %s with the running configuration.",
		         path);
		goto out;
	}
	config_reload_diff(d->cfg, next, plan);
	if (config_reload_apply(plan) < 0) {
		snprintf(err, errlen, "Out of memory applying %s; some changes may be applied.",
		         path);
		goto out;
	}
	log_set_level(d->cfg->log_level);
	for (size_t i = 0; i < d->n; i++)
		if (d->repls[i])
			repl_timers_reload(d->repls[i]);
	reload_log(d, plan);
	log_notice("Reloaded %s: %u change(s) applied, %u refused.", path, plan->n_live,
	           plan->n_refused);
	res = reload_result(plan, path);
out:
	if (!res) {
		log_err("Reload refused, the running configuration stays: %s", err);
		snprintf(d->reload_note, sizeof(d->reload_note), "reload refused: %s", err);
	}
	sdnotify_ready();
	status_update(d);
	free(plan);
	config_free(next);
	return res;
}

static json_t *cmd_reload(void *ctx, json_t *req, char *err, size_t errlen)
{
	(void)req;
	return hakd_reload(ctx, err, errlen);
}

static void signal_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct hakd *d = w->data;
	(void)revents;
	if (w->signum == SIGHUP) {
		char err[512];
		log_notice("SIGHUP received; reloading the configuration.");
		json_decref(hakd_reload(d, err, sizeof(err)));
		return;
	}
	if (ev_is_active(&d->shutdown_poll))
		return;
	sdnotify_stopping();
	log_notice("Signal %d received; finishing in-flight requests, then exiting.", w->signum);
	d->shutdown_start = ev_now(loop);
	for (size_t i = 0; i < d->n; i++)
		nbd_server_shutdown(d->srvs[i]);
	ev_timer_init(&d->shutdown_poll, shutdown_poll_cb, 0.0, 0.02);
	d->shutdown_poll.data = d;
	ev_timer_start(loop, &d->shutdown_poll);
}

/* Best effort: a daemon serving its own host's block device must not deadlock in reclaim. */
static void process_setup(void)
{
	if (prctl(PR_SET_IO_FLUSHER, 1, 0, 0, 0) < 0)
		log_debug("PR_SET_IO_FLUSHER is not available (%s); continuing without it.",
		          strerror(errno));
	signal(SIGPIPE, SIG_IGN);
}

/* The cluster manager, with a cluster section: it drives every volume, as one. */
static int cluster_start(struct hakd *d)
{
	char err[512];

	if (!d->cfg->cluster.present || !d->self || d->n == 0 || !d->repls[0])
		return 0;
	struct clusterd_params p = {.loop = d->loop,
	                            .cfg = d->cfg,
	                            .self = d->self,
	                            .peer = d->peer,
	                            .repls = d->repls,
	                            .vols = d->vols,
	                            .srvs = d->srvs,
	                            .n = d->n,
	                            .groups = d->groups,
	                            .ctl = d->ctl};
	if (clusterd_start(&p, &d->cluster, err, sizeof(err)) < 0) {
		log_err("%s", err);
		return -1;
	}
	return 0;
}

static int hakd_start(struct hakd *d)
{
	struct hak_config *cfg = d->cfg;
	size_t nv = cfg->n_volumes ? cfg->n_volumes : 1;
	d->vols = calloc(nv, sizeof(*d->vols));
	d->srvs = calloc(nv, sizeof(*d->srvs));
	d->repls = calloc(nv, sizeof(*d->repls));
	d->slots = calloc(nv, sizeof(*d->slots));
	if (!d->vols || !d->srvs || !d->repls || !d->slots)
		return -1;
	if (io_engine_create(d->loop, cfg->io_engine, cfg->io_depth, &d->io) < 0) {
		log_err("Cannot start the I/O engine: %s.", strerror(errno));
		return -1;
	}
	for (size_t i = 0; i < cfg->n_volumes; i++) {
		const struct hak_volume_cfg *vc = &cfg->volumes[i];
		struct nbd_server_opts o = {.unix_path = vc->nbd_socket,
		                            .tcp_listen = vc->nbd_listen,
		                            .max_clients = cfg->max_clients,
		                            .handshake_timeout = vc->nbd_handshake_timeout,
		                            .tcp_tls = (int)vc->nbd_tls,
		                            .tls_cert_file = vc->nbd_tls_cert_file,
		                            .tls_key_file = vc->nbd_tls_key_file,
		                            .tls_ca_file = vc->nbd_tls_ca_file,
		                            .tls_psk_file = vc->nbd_tls_psk_file};
		struct vol_slot *sl = &d->slots[d->n];
		if (volume_open(vc, d->io, &d->vols[d->n]) < 0)
			return -1;
		sl->d = d;
		sl->i = d->n;
		snprintf(sl->refuse, sizeof(sl->refuse),
		         "node %s is secondary for volume %s; use the primary",
		         d->self ? d->self->name : "?", vc->name);
		if (d->self) {
			char err[512];
			struct repl_params rp = {.loop = d->loop,
			                         .io = d->io,
			                         .vcfg = vc,
			                         .self = d->self,
			                         .peer = d->peer,
			                         .vol = d->vols[d->n],
			                         .role_changed = role_changed,
			                         .ctx = sl};
			if (repl_create(&rp, &d->repls[d->n], err, sizeof(err)) < 0) {
				log_err("%s", err);
				volume_close(d->vols[d->n]);
				return -1;
			}
		}
		if (nbd_server_create(d->loop, d->vols[d->n], &o, &d->srvs[d->n]) < 0) {
			repl_destroy(d->repls[d->n]);
			volume_close(d->vols[d->n]);
			return -1;
		}
		if (d->repls[d->n])
			nbd_server_set_refuse(d->srvs[d->n], sl->refuse);
		d->n++;
	}
	/* Only status and version just look; every other command changes something (resync
	 * pause/resume and verify too: they start or hold I/O), so it needs an admin. */
	if (control_create(d->loop, cfg->control_socket, &d->ctl) < 0 ||
	    control_set_group(d->ctl, cfg->control_group, cfg->control_group_set) < 0 ||
	    control_register(d->ctl, "status", CONTROL_READ, cmd_status, d) < 0 ||
	    control_register(d->ctl, "version", CONTROL_READ, cmd_version, d) < 0 ||
	    groupctl_create(d->loop, d->ctl, cfg, &d->groups) < 0 ||
	    control_register(d->ctl, "resync", CONTROL_ADMIN, cmd_resync, d) < 0)
		return -1;
	events_init(d->ctl);
	static const char *const role_cmds[] = {"primary",    "secondary", "connect",
	                                        "disconnect", "resolve",   "verify"};
	for (size_t k = 0; k < sizeof(role_cmds) / sizeof(role_cmds[0]); k++)
		if (control_register(d->ctl, role_cmds[k], CONTROL_ADMIN, cmd_role, d) < 0)
			return -1;
	if (control_register(d->ctl, "detach", CONTROL_ADMIN, cmd_disk, d) < 0 ||
	    control_register(d->ctl, "attach", CONTROL_ADMIN, cmd_disk, d) < 0 ||
	    control_register(d->ctl, "reload", CONTROL_ADMIN, cmd_reload, d) < 0)
		return -1;
	if (cfg->metrics_listen) {
		char err[256];
		if (metrics_start(d->loop, cfg->metrics_listen, metrics_status, d, &d->metrics, err,
		                  sizeof(err)) < 0) {
			log_err("%s", err);
			return -1;
		}
	}
	return cluster_start(d);
}

static void hakd_stop(struct hakd *d)
{
	metrics_stop(d->metrics);
	d->metrics = NULL;
	clusterd_stop(d->cluster);
	d->cluster = NULL;
	groupctl_destroy(d->groups);
	events_shutdown();
	control_destroy(d->ctl);
	for (size_t i = 0; i < d->n; i++)
		repl_shutdown(d->repls[i]);
	if (d->io && io_drain(d->io, SHUTDOWN_GRACE) < 0) {
		log_err("The backing store did not complete its requests in %.0f s.",
		        SHUTDOWN_GRACE);
		d->exit_code = 1;
	}
	for (size_t i = 0; i < d->n; i++) {
		nbd_server_destroy(d->srvs[i]);
		repl_destroy(d->repls[i]);
		if (volume_close(d->vols[i]) < 0)
			d->exit_code = 1;
	}
	if (d->io)
		io_engine_destroy(d->io);
	free(d->vols);
	free(d->srvs);
	free(d->repls);
	free(d->slots);
	buf_trim();
}

static int write_pidfile(const char *path)
{
	FILE *f = fopen(path, "we");
	if (!f)
		return -1;
	fprintf(f, "%d\n", (int)getpid());
	return fclose(f);
}

/* hakd --witness: the third host's vote, nothing else (no volumes, no control socket). */
static int witness_main(const struct args *a, struct hak_config *cfg)
{
	int rc;

	if (!a->foreground)
		log_open_syslog("hakd-witness");
	log_set_level(cfg->log_level);
	signal(SIGPIPE, SIG_IGN);
	if (a->pidfile && write_pidfile(a->pidfile) < 0) {
		log_err("Cannot write pid file %s: %s.", a->pidfile, strerror(errno));
		config_free(cfg);
		return 1;
	}
	rc = wit_serve(cfg);
	if (a->pidfile)
		unlink(a->pidfile);
	config_free(cfg);
	return rc;
}

int main(int argc, char **argv)
{
	struct args a = {0};
	struct hakd d = {0};

	if (args_parse(argc, argv, &a) < 0)
		return 1;
	d.args = &a;
	d.cfg = config_from_args(&a);
	if (!d.cfg)
		return 1;
	if (a.witness)
		return witness_main(&a, d.cfg);
	if (d.cfg->n_nodes == 2) {
		char err[512];
		if (config_find_self(d.cfg, a.node, &d.self, &d.peer, err, sizeof(err)) < 0) {
			fprintf(stderr, "hakd: %s\n", err);
			config_free(d.cfg);
			return 1;
		}
	}
	if (!a.foreground)
		log_open_syslog("hakd");
	log_set_level(d.cfg->log_level);
	process_setup();
	/* Before any thread starts: the I/O threads inherit it (see sched-policy in hak.conf(5)).
	 */
	if (proc_sched_batch(d.cfg->sched_batch) < 0)
		log_warn(
		    "Cannot set the %s CPU scheduling policy: %s; continuing with the current one.",
		    d.cfg->sched_batch ? "batch" : "normal", strerror(errno));
	d.sched_batch = d.cfg->sched_batch;
	testhook_init();
	if (a.pidfile && write_pidfile(a.pidfile) < 0) {
		log_err("Cannot write pid file %s: %s.", a.pidfile, strerror(errno));
		config_free(d.cfg);
		return 1;
	}
	d.loop = ev_default_loop(EVFLAG_AUTO);
	ev_signal_init(&d.sig_term, signal_cb, SIGTERM);
	ev_signal_init(&d.sig_int, signal_cb, SIGINT);
	ev_signal_init(&d.sig_hup, signal_cb, SIGHUP);
	d.sig_term.data = d.sig_int.data = d.sig_hup.data = &d;
	ev_signal_start(d.loop, &d.sig_term);
	ev_signal_start(d.loop, &d.sig_int);
	ev_signal_start(d.loop, &d.sig_hup);
	ev_timer_init(&d.buf_aging, buf_aging_cb, BUF_AGING_INTERVAL, BUF_AGING_INTERVAL);
	ev_timer_start(d.loop, &d.buf_aging);
	if (hakd_start(&d) < 0) {
		d.exit_code = 1;
	} else {
		sched_update(&d); /* every replicated volume starts as secondary */
		log_notice("hakd %s started with %zu volume(s), I/O engine %s, control socket %s.",
		           HAK_VERSION, d.n, io_engine_name(d.io), d.cfg->control_socket);
		sdnotify_init(d.loop);
		if (sdnotify_enabled()) {
			ev_timer_init(&d.status_tick, status_tick_cb, 0.0, 0.05);
			d.status_tick.data = &d;
			ev_timer_start(d.loop, &d.status_tick);
		}
		ev_run(d.loop, 0);
		ev_timer_stop(d.loop, &d.status_tick);
		sdnotify_shutdown();
	}
	hakd_stop(&d);
	if (d.exit_code == 0)
		log_notice(
		    "hakd stopped cleanly: every request was answered and the data flushed.");
	if (a.pidfile)
		unlink(a.pidfile);
	config_free(d.cfg);
	ev_loop_destroy(d.loop);
	return d.exit_code;
}
