/* SPDX-License-Identifier: MIT */
/* Split brain at the handshake (splitbrain.c): see there. Private to daemon/repl/. */
#ifndef HAK_SPLITBRAIN_H
#define HAK_SPLITBRAIN_H

#include <stdbool.h>

struct repl;

/* Split brain detected at the handshake; applies the policy (refuses, or discards one side and
 * reconnects). rule: how it was detected, lg/pg: the generation IDs for messages. */
void splitbrain_handle(struct repl *r, bool both_primary, const char *rule, const char *lg,
                       const char *pg);
void splitbrain_shutdown(struct repl *r);

#endif
