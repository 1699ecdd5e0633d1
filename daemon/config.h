/* SPDX-License-Identifier: MIT */
/*
 * hak.conf: parse and validate. Every error names file, line and column and says how to fix it.
 *
 * Syntax (documented in docs/hak.conf.5 and etc/hak.conf):
 *   # comment to end of line
 *   global { key value ... }
 *   volume NAME { key value ... }
 * One directive per line: a key followed by one or more values. Values are bare words or
 * "double-quoted strings" (with \" and \\ escapes). Sizes take K/M/G/T suffixes (powers of 1024),
 * booleans are yes/no/true/false/on/off.
 */
#ifndef HAK_CONFIG_H
#define HAK_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "io.h"
#include "log.h"

#define HAK_DEFAULT_CONTROL_SOCKET "/run/hak/hakd.sock"
#define HAK_DEFAULT_MAX_PAYLOAD    (32u << 20)
#define HAK_DEFAULT_IO_DEPTH       256u
#define HAK_DEFAULT_MAX_CLIENTS    64u

struct hak_volume_cfg {
	char *name;	   /* the block's NAME; also the NBD export name */
	char *backing;	   /* "backing": file or block device (required) */
	char *nbd_socket;  /* "nbd-socket": UNIX socket path serving this volume (required) */
	char *nbd_listen;  /* "nbd-listen": optional TCP "ADDR:PORT" ("[v6]:PORT" for IPv6) */
	char *description; /* "description": optional, sent in NBD_INFO_DESCRIPTION */
	int read_only;	   /* "read-only" (default no) */
	int direct_io;	   /* "direct-io": O_DIRECT on the backing store (default no) */
	uint32_t block_size_min; /* "block-size-min": 0 = automatic (512, or 4096 with direct-io) */
	uint32_t max_payload;	 /* "max-payload": default 32 MiB, range 64K..64M */
	unsigned line;		 /* line of the "volume" keyword, for later diagnostics */
};

struct hak_config {
	char *file;		/* the path it was loaded from (or the name given to config_parse);
				 * NULL for config_new_default() */
	char *control_socket;	/* global "control-socket" */
	enum log_level log_level; /* global "log-level" (default info) */
	enum io_kind io_engine;	  /* global "io-engine" auto|uring|pool (default auto) */
	unsigned io_depth;	  /* global "io-depth" 8..4096 (default 256) */
	unsigned max_clients;	  /* global "max-clients" per volume 1..1024 (default 64) */
	struct hak_volume_cfg *volumes;
	size_t n_volumes;
	size_t volumes_alloc; /* entries allocated in volumes; config.c's bookkeeping */
};

/*
 * Parse text (not NUL-terminated necessarily: len bytes) named name (used in messages).
 * On failure returns -1, errno=EINVAL (ENOMEM if memory ran out), and err holds one line
 * "NAME:LINE:COL: message".
 */
int config_parse(const char *text, size_t len, const char *name, struct hak_config **out, char *err,
		 size_t errlen);
/* Read and parse a file. Errors as config_parse (errno from open/read for I/O failures). */
int config_load(const char *path, struct hak_config **out, char *err, size_t errlen);
/* A config with defaults and no volumes (used by hakd --export). */
struct hak_config *config_new_default(void);
/*
 * Append a volume with defaults; name and backing are copied. Returns the new entry, or NULL with
 * errno: EINVAL (NULL backing, or a name not matching [A-Za-z0-9_.-]{1,64} or "." or ".."),
 * EEXIST (the name is taken), ENOSPC (4096 volumes already), ENOMEM. The entry stays valid until
 * the next add: the array may move. Strings set in it later must be malloc'ed; config_free()
 * frees them.
 */
struct hak_volume_cfg *config_add_volume(struct hak_config *cfg, const char *name, const char *backing);
const struct hak_volume_cfg *config_find_volume(const struct hak_config *cfg, const char *name);
void config_free(struct hak_config *cfg);

#endif
