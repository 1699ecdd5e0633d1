/* SPDX-License-Identifier: MIT */
/*
 * NBD wire constants (fixed newstyle handshake, transmission phase, structured replies).
 * Values are those of the NBD protocol specification; everything on the wire is big-endian.
 */
#ifndef HAK_NBD_H
#define HAK_NBD_H

#include <stdint.h>

#define NBD_MAGIC_INIT         UINT64_C(0x4e42444d41474943) /* "NBDMAGIC" */
#define NBD_MAGIC_OPTS         UINT64_C(0x49484156454F5054) /* "IHAVEOPT" */
#define NBD_MAGIC_OPT_REPLY    UINT64_C(0x0003e889045565a9)
#define NBD_MAGIC_REQUEST      UINT32_C(0x25609513)
#define NBD_MAGIC_SIMPLE_REPLY UINT32_C(0x67446698)
#define NBD_MAGIC_STRUCT_REPLY UINT32_C(0x668e33ef)

/* Handshake flags (server) and client flags. */
#define NBD_FLAG_FIXED_NEWSTYLE   (1u << 0)
#define NBD_FLAG_NO_ZEROES        (1u << 1)
#define NBD_FLAG_C_FIXED_NEWSTYLE (1u << 0)
#define NBD_FLAG_C_NO_ZEROES      (1u << 1)

/* Options. */
#define NBD_OPT_EXPORT_NAME       1u
#define NBD_OPT_ABORT             2u
#define NBD_OPT_LIST              3u
#define NBD_OPT_STARTTLS          5u
#define NBD_OPT_INFO              6u
#define NBD_OPT_GO                7u
#define NBD_OPT_STRUCTURED_REPLY  8u
#define NBD_OPT_LIST_META_CONTEXT 9u
#define NBD_OPT_SET_META_CONTEXT  10u

/* Option replies. */
#define NBD_REP_ACK                 1u
#define NBD_REP_SERVER              2u
#define NBD_REP_INFO                3u
#define NBD_REP_META_CONTEXT        4u
#define NBD_REP_ERR_BIT             (1u << 31)
#define NBD_REP_ERR_UNSUP           (NBD_REP_ERR_BIT + 1)
#define NBD_REP_ERR_POLICY          (NBD_REP_ERR_BIT + 2)
#define NBD_REP_ERR_INVALID         (NBD_REP_ERR_BIT + 3)
#define NBD_REP_ERR_PLATFORM        (NBD_REP_ERR_BIT + 4)
#define NBD_REP_ERR_TLS_REQD        (NBD_REP_ERR_BIT + 5)
#define NBD_REP_ERR_UNKNOWN         (NBD_REP_ERR_BIT + 6)
#define NBD_REP_ERR_SHUTDOWN        (NBD_REP_ERR_BIT + 7)
#define NBD_REP_ERR_BLOCK_SIZE_REQD (NBD_REP_ERR_BIT + 8)
#define NBD_REP_ERR_TOO_BIG         (NBD_REP_ERR_BIT + 9)

/* Information types in NBD_REP_INFO. */
#define NBD_INFO_EXPORT      0u
#define NBD_INFO_NAME        1u
#define NBD_INFO_DESCRIPTION 2u
#define NBD_INFO_BLOCK_SIZE  3u

/* Transmission flags. */
#define NBD_FLAG_HAS_FLAGS         (1u << 0)
#define NBD_FLAG_READ_ONLY         (1u << 1)
#define NBD_FLAG_SEND_FLUSH        (1u << 2)
#define NBD_FLAG_SEND_FUA          (1u << 3)
#define NBD_FLAG_ROTATIONAL        (1u << 4)
#define NBD_FLAG_SEND_TRIM         (1u << 5)
#define NBD_FLAG_SEND_WRITE_ZEROES (1u << 6)
#define NBD_FLAG_SEND_DF           (1u << 7)
#define NBD_FLAG_CAN_MULTI_CONN    (1u << 8)
#define NBD_FLAG_SEND_CACHE        (1u << 10)
#define NBD_FLAG_SEND_FAST_ZERO    (1u << 11)

/* Commands. */
#define NBD_CMD_READ         0u
#define NBD_CMD_WRITE        1u
#define NBD_CMD_DISC         2u
#define NBD_CMD_FLUSH        3u
#define NBD_CMD_TRIM         4u
#define NBD_CMD_CACHE        5u
#define NBD_CMD_WRITE_ZEROES 6u
#define NBD_CMD_BLOCK_STATUS 7u

/* Command flags. */
#define NBD_CMD_FLAG_FUA       (1u << 0)
#define NBD_CMD_FLAG_NO_HOLE   (1u << 1)
#define NBD_CMD_FLAG_DF        (1u << 2)
#define NBD_CMD_FLAG_REQ_ONE   (1u << 3)
#define NBD_CMD_FLAG_FAST_ZERO (1u << 4)

/* Structured reply chunk types and flags. */
#define NBD_REPLY_FLAG_DONE         (1u << 0)
#define NBD_REPLY_TYPE_NONE         0u
#define NBD_REPLY_TYPE_OFFSET_DATA  1u
#define NBD_REPLY_TYPE_OFFSET_HOLE  2u
#define NBD_REPLY_TYPE_BLOCK_STATUS 5u
#define NBD_REPLY_TYPE_ERROR        ((1u << 15) + 1)
#define NBD_REPLY_TYPE_ERROR_OFFSET ((1u << 15) + 2)

/* base:allocation flags. */
#define NBD_STATE_HOLE (1u << 0)
#define NBD_STATE_ZERO (1u << 1)

/* Errors. */
#define NBD_EPERM     1u
#define NBD_EIO       5u
#define NBD_ENOMEM    12u
#define NBD_EINVAL    22u
#define NBD_ENOSPC    28u
#define NBD_EOVERFLOW 75u
#define NBD_ENOTSUP   95u
#define NBD_ESHUTDOWN 108u

/* Sizes of fixed wire structures. */
#define NBD_REQUEST_SIZE       28u
#define NBD_SIMPLE_REPLY_SIZE  16u
#define NBD_STRUCT_REPLY_SIZE  20u
#define NBD_OPT_HEADER_SIZE    16u
#define NBD_OPT_REPLY_HDR_SIZE 20u
#define NBD_MAX_STRING         4096u

#endif
