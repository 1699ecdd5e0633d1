/* SPDX-License-Identifier: MIT */
/*
 * Replication of one volume to its peer, as the rest of hakd sees it: create and destroy, the
 * operator's commands, the states the cluster manager reads. What happens inside (the
 * connection, the send and apply sides, the resync) is in this folder's README and in
 * repl_int.h. The volume reaches replication only through the door replication fills in at
 * repl_create (struct vol_repl_ops, volume/volume.h). Other public headers of the folder:
 * pull.h (hakctl attach), resync.h (pause and resume), verify.h (online verify).
 */
#ifndef HAK_REPL_H
#define HAK_REPL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

struct ev_loop;
struct volume;
struct io_engine;
struct hak_config;
struct hak_volume_cfg;
struct hak_node_cfg;
struct repl;
struct transport_ops;

enum repl_role { ROLE_SECONDARY = 0, ROLE_PRIMARY = 1 };
enum repl_disk { DISK_UPTODATE = 0, DISK_OUTDATED, DISK_INCONSISTENT, DISK_DISKLESS, DISK_FAILED };
enum repl_link {
	LINK_STANDALONE = 0, /* not trying to connect (disconnect, split brain) */
	LINK_CONNECTING,
	LINK_CONNECTED,
	LINK_SYNC_SOURCE,
	LINK_SYNC_TARGET,
};
enum repl_mode { MODE_SYNC = 0, MODE_MEMSYNC = 1, MODE_ASYNC = 2 };

struct repl_params {
	struct ev_loop *loop;
	struct io_engine *io;
	const struct hak_volume_cfg *vcfg;
	const struct hak_node_cfg *self;
	const struct hak_node_cfg *peer;
	struct volume *vol; /* the data path; its size shrinks with internal metadata */
	/* Role changes: the volume's NBD server refuses clients unless primary. */
	void (*role_changed)(void *ctx, enum repl_role role);
	void *ctx;
	/* The transport to the peer and its options (topts); NULL: the volume's "transport", with
	 * options made from its tls-* keys. Unit tests can pass the in-memory one. */
	const struct transport_ops *transport;
	void *topts;
};

/* Open metadata (hakctl create-md must have run), load the bitmap, start connecting. */
int repl_create(const struct repl_params *p, struct repl **out, char *err, size_t errlen);
/* Stop connecting and drop the peer (before the final drain of the I/O engine). */
void repl_shutdown(struct repl *r);
/* Persist the bitmap and a clean-shutdown flag and free; after the I/O engine drained. */
void repl_destroy(struct repl *r);

enum repl_role repl_role(const struct repl *r);

/* The peer is connected with an UpToDate disk: it can serve for a detached one. */
bool repl_peer_serves(const struct repl *r);

/* Operator commands. 0, or -1 with a sentence in err. */
int repl_promote(struct repl *r, bool force, char *err, size_t errlen);
/* The cluster manager found the peer silent on every heartbeat path (the replication link's
 * included): drop a replication connection still waiting for its ping timeout, so a promotion
 * need not wait for it. Reconnecting goes on as after any lost connection. */
void repl_peer_dead(struct repl *r, const char *why);
int repl_demote(struct repl *r, bool clients_connected, char *err, size_t errlen);
int repl_connect(struct repl *r, char *err, size_t errlen);
int repl_disconnect(struct repl *r, char *err, size_t errlen);
int repl_resolve_discard_local(struct repl *r, char *err, size_t errlen);
/* Online verify driven by this node (verify.h). */
int repl_verify(struct repl *r, char *err, size_t errlen);
/* Resync the blocks marked out of sync on either node (after a verify), while connected. */
int repl_resync(struct repl *r, char *err, size_t errlen);

/*
 * Fencing (fence.c). A primary that lost an UpToDate peer under fencing resource-only or
 * resource-and-stonith freezes its writes (repl_fencing) until the cluster manager confirms
 * that the peer can no longer be promoted with the data it has: it marked itself Outdated,
 * the witness recorded it Outdated, or the fence hook powered it off (how: a sentence
 * fragment for the log). repl_outdate marks this node's own disk Outdated, persistently, until
 * a resync makes it UpToDate again; a primary or a disk that is not UpToDate is left alone
 * (returns -1 with errno EBUSY or EALREADY).
 */
bool repl_fencing(const struct repl *r);
void repl_fence_confirm(struct repl *r, const char *how);
int repl_outdate(struct repl *r, const char *why);

/* The local disk and the link state (for the cluster manager). */
enum repl_disk repl_disk_state(const struct repl *r);
enum repl_link repl_link_state(const struct repl *r);
/* Status object for hakctl. */
json_t *repl_status_json(const struct repl *r);
/* A reload changed the running configuration: re-arm the timers whose period was copied from it
 * (ping-interval, connect-interval), from now. */
void repl_timers_reload(struct repl *r);

const char *repl_role_name(enum repl_role r);
const char *repl_disk_name(enum repl_disk d);
const char *repl_link_name(enum repl_link l);

#endif
