/* SPDX-License-Identifier: MIT */
/*
 * hak-attach library: the userspace half of binding a kernel /dev/nbdX to hakd.
 *
 * The kernel NBD client only runs the transmission phase and only understands simple replies, so
 * the handshake happens here, on a socket connected to hakd; the negotiated socket is then handed
 * to the kernel with the NBD generic-netlink API (NBD_CMD_CONNECT / RECONFIGURE / DISCONNECT).
 * Message building and reply parsing are pure functions so they can be tested without nbd.ko.
 *
 * Include this header before <hak/nbd.h> (it includes it itself): see the note below.
 */
#ifndef HAK_ATTACH_H
#define HAK_ATTACH_H

#ifdef HAK_NBD_H
#error "attach.h must be included before <hak/nbd.h>: <linux/nbd.h> has to be parsed first"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <netlink/genl/genl.h>
#include <netlink/msg.h>

/*
 * <linux/nbd.h> and <hak/nbd.h> both define the transmission flags (same values) and the command
 * names (the kernel as an enum, hak as macros), and the kernel's NBD_CMD_FLAG_FUA is the old ioctl
 * encoding in the upper 16 bits of the request type, not the wire flag. The kernel header is
 * parsed first so its enum is already compiled when hak's macros arrive; the flag values it
 * defines are captured, the clashing macros are dropped, and attach.c checks at compile time that
 * both headers agree on every flag the kernel will see.
 */
#include <linux/nbd-netlink.h>
#include <linux/nbd.h>

enum {
	ATTACH_KFLAG_HAS_FLAGS = NBD_FLAG_HAS_FLAGS,
	ATTACH_KFLAG_READ_ONLY = NBD_FLAG_READ_ONLY,
	ATTACH_KFLAG_SEND_FLUSH = NBD_FLAG_SEND_FLUSH,
	ATTACH_KFLAG_SEND_FUA = NBD_FLAG_SEND_FUA,
	ATTACH_KFLAG_SEND_TRIM = NBD_FLAG_SEND_TRIM,
	ATTACH_KFLAG_CAN_MULTI_CONN = NBD_FLAG_CAN_MULTI_CONN,
};

#undef NBD_FLAG_HAS_FLAGS
#undef NBD_FLAG_READ_ONLY
#undef NBD_FLAG_SEND_FLUSH
#undef NBD_FLAG_SEND_FUA
#undef NBD_FLAG_SEND_TRIM
#undef NBD_FLAG_CAN_MULTI_CONN
#undef NBD_CMD_FLAG_FUA

#include <hak/nbd.h>

/* Kernel limits the shim has to respect (drivers/block/nbd.c, blk_validate_block_size()). */
#define ATTACH_MIN_BLOCK_SIZE     512u
#define ATTACH_MAX_BLOCK_SIZE     4096u
#define ATTACH_DEFAULT_BLOCK_SIZE 4096u
/* The kernel sets max_hw_sectors to 65536, so one request may carry up to 32 MiB. */
#define ATTACH_KERNEL_MAX_REQUEST (UINT32_C(65536) * 512u)
/* Each socket becomes one blk-mq hardware queue; more than this buys nothing on real hosts. */
#define ATTACH_MAX_SOCKETS               64u
#define ATTACH_MAX_IDENTIFIER            256u
#define ATTACH_DEFAULT_TIMEOUT           0u
#define ATTACH_DEFAULT_DEAD_CONN_TIMEOUT 300u
/* The kernel multiplies the timeouts by HZ into an unsigned int; keep the product in range. */
#define ATTACH_MAX_TIMEOUT UINT64_C(2147483)
/* Bound on every blocking step of the handshake, so a hung hakd cannot hang hak-attach. */
#define ATTACH_HANDSHAKE_TIMEOUT_MS 30000

#define ATTACH_NAME_MAX 256

/* What the server told us about the export during the handshake. */
struct attach_export {
	uint64_t size;
	uint16_t flags;      /* transmission flags, handed to the kernel unchanged */
	bool has_block_size; /* the server answered our NBD_INFO_BLOCK_SIZE request */
	uint32_t min_block;
	uint32_t pref_block;
	uint32_t max_block;
	char name[ATTACH_NAME_MAX]; /* NBD_INFO_NAME, printable, truncated; "" if not sent */
};

/* Parameters of NBD_CMD_CONNECT; attach_params_init() fills the defaults. */
struct attach_params {
	int index;                  /* -1: let the kernel pick or create a free device */
	uint64_t size;              /* bytes, from the handshake */
	uint64_t block_size;        /* power of two, 512..4096 */
	uint64_t server_flags;      /* transmission flags from the handshake */
	uint64_t timeout;           /* per-request timeout in seconds, 0 = never abort */
	uint64_t dead_conn_timeout; /* seconds the kernel waits for a RECONFIGURE */
	bool disconnect_on_close;   /* NBD_CFLAG_DISCONNECT_ON_CLOSE */
	const char *identifier;     /* NBD_ATTR_BACKEND_IDENTIFIER, NULL for none */
	const int *fds;             /* connected, negotiated sockets */
	size_t nfds;
};

void attach_params_init(struct attach_params *p);

/*
 * Run the fixed-newstyle handshake as the kernel's stand-in: NBD_OPT_GO for `export` ("" is the
 * default export) asking for NBD_INFO_BLOCK_SIZE and NBD_INFO_NAME (the canonical name, used
 * in the backend identifier), never structured replies. Falls back to
 * NBD_OPT_EXPORT_NAME when the server does not know NBD_OPT_GO. On success the socket is in the
 * transmission phase. On failure returns -1 with errno set and a full sentence in err, including
 * the server's own error text when it sent one.
 */
int attach_handshake(int fd, const char *export, struct attach_export *out, char *err,
                     size_t errlen);

/*
 * Check that the kernel can honour what the server announced with `block_size` as its logical
 * block size: the size must be a whole number of blocks, and the server's block constraints must
 * admit the kernel's requests. Returns 0, or -1 with errno=EINVAL and a sentence in err.
 */
int attach_check_export(const struct attach_export *e, uint64_t block_size, char *err,
                        size_t errlen);

/*
 * Fill an empty nl_msg with a generic-netlink NBD command for `family`. Returns 0, or -1 with
 * errno=EINVAL for bad parameters (nothing useful is left in msg) or EMSGSIZE when msg is too
 * small.
 */
int attach_build_connect(struct nl_msg *msg, int family, const struct attach_params *p);
int attach_build_reconfigure(struct nl_msg *msg, int family, int index, const int *fds, size_t nfds,
                             const char *identifier);
int attach_build_disconnect(struct nl_msg *msg, int family, int index);

/* Extract NBD_ATTR_INDEX from the kernel's reply to NBD_CMD_CONNECT; -1 with errno=EPROTO if
 * absent. */
int attach_parse_reply(struct nl_msg *msg, int *index);

/* "/dev/nbd3" or "nbd3" -> 3; -1 with errno=EINVAL for anything else. */
int attach_parse_device(const char *dev, int *index);

/*
 * A backend identifier naming the export plus a random cookie, so a RECONFIGURE can prove it
 * reattaches the same volume: "hak:<export>:<16 hex digits>". Returns 0 or -1 with errno.
 */
int attach_make_identifier(const char *export, char *out, size_t outlen);

/* Connect a stream socket to hakd's UNIX socket. Returns the fd, or -1 with errno and err. */
int attach_connect_unix(const char *path, char *err, size_t errlen);

/* A generic-netlink socket bound to the kernel's "nbd" family. */
struct attach_nl {
	struct nl_sock *sk;
	int family;
};

/*
 * Open the socket and resolve the family. Returns 0, or -1 with errno=ENOENT (no nbd family:
 * module not loaded and not loadable) or another errno, and a sentence in err.
 */
int attach_nl_open(struct attach_nl *nl, char *err, size_t errlen);
/*
 * Send a message built above and wait for the kernel's acknowledgement; consumes msg. When index
 * is not NULL it receives NBD_ATTR_INDEX from the reply (CONNECT), or -1 if none came.
 */
int attach_nl_send(struct attach_nl *nl, struct nl_msg *msg, int *index, char *err, size_t errlen);
void attach_nl_close(struct attach_nl *nl);

#endif
