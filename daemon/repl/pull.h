/* SPDX-License-Identifier: MIT */
/* hakctl attach: a re-attached disk filled from the peer (pull.c): see there. pull_attach() is
 * the operator's command; the rest is private to daemon/repl/. */
#ifndef HAK_PULL_H
#define HAK_PULL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct repl;
struct wire_hdr;

/* hakctl attach: reopen the backing store of a Diskless primary and pull all of it from the
 * peer. While that runs, reads of blocks not pulled yet go to the peer. 0, or -1 with a
 * sentence in err. */
int pull_attach(struct repl *r, char *err, size_t errlen);

/* Register the pull's hooks (repl_create). */
void pull_init(struct repl *r);
/* The volume's door (ctx is the repl): an attach runs; the disk lacks [off, off+len) yet. */
bool pull_attaching(void *ctx);
bool pull_local_stale(void *ctx, uint64_t off, uint64_t len);
/* A READ_REPLY to one of our runs (its id has ATTACH_ID_BIT). */
void pull_read_reply(struct repl *r, const struct wire_hdr *h, uint8_t *payload);
/* The disk failed again: stop pulling (the disk is detached again). */
void pull_abort(struct repl *r);

#endif
