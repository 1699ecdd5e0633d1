/* SPDX-License-Identifier: MIT */
/* The secondary's apply side (apply.c): see there. Private to daemon/repl/. */
#ifndef HAK_APPLY_H
#define HAK_APPLY_H

#include <stdbool.h>
#include <stdint.h>

struct repl;
struct wire_hdr;

/* Register the apply side's hooks (repl_create). */
void apply_init(struct repl *r);
/* DATA, TRIM, ZERO or RS_DATA from the peer (payload owned by the callee from now on). */
void apply_frame(struct repl *r, const struct wire_hdr *h, uint8_t *payload);
void apply_barrier(struct repl *r, uint64_t id);
/* An application write or resync run overlapping [off, off+len) is applied or waits. */
bool apply_overlaps(const struct repl *r, uint64_t off, uint64_t len);

#endif
