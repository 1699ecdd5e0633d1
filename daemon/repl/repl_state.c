/* SPDX-License-Identifier: MIT */
/* Read-only accessors of the replication state for the cluster manager (clusterd.c). */
#include "repl.h"
#include "repl_int.h"

enum repl_disk repl_disk_state(const struct repl *r)
{
	return r->disk;
}

enum repl_link repl_link_state(const struct repl *r)
{
	return r->link;
}

bool repl_peer_serves(const struct repl *r)
{
	return r->connected && r->peer_disk == DISK_UPTODATE && r->link == LINK_CONNECTED;
}
