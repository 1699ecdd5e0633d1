/* SPDX-License-Identifier: MIT */
/* The primary's send side (ship.c): see there. Private to daemon/repl/. */
#ifndef HAK_SHIP_H
#define HAK_SHIP_H

#include <ev.h>
#include <stdbool.h>
#include <stdint.h>

struct repl;
struct vol_io;
struct range;

/* Register the send side's hooks and timers (repl_create). */
void ship_init(struct repl *r);

/* The volume's door (struct vol_repl_ops, ctx is the repl). */
int ship_submit(void *ctx, struct vol_io *vio);
void ship_local_done(void *ctx, struct vol_io *vio);
void ship_adopt(void *ctx, struct vol_io *vio);

/* A RECV_ACK, WRITE_ACK or BARRIER_ACK for slot id arrived. */
void ship_ack(struct repl *r, uint16_t type, uint64_t id, uint32_t status);
/* Requests held back behind a resync or attach read, or an overlapping write, may go now. */
void ship_held_pump(struct repl *r);
/* The activity log let a held write go (err 0) or failed it (the activity log's resume). */
void ship_al_resume(void *ctx, struct range *w, int err);
/* The activity log is short of slots: end the open epoch now, so its barrier ack frees them. */
void ship_al_want_stable(void *ctx);
/* Ack latency in seconds, mean or maximum: of the last complete window, or until there is one,
 * of the window being filled (0: no ack yet). */
double ship_ack_latency(const struct repl *r, bool max);

#endif
