/* SPDX-License-Identifier: MIT */
/*
 * On-disk metadata of one volume: two alternating superblocks, the activity-log area and the
 * persistent dirty bitmap.
 *
 * Where: external metadata is a file (or device) of its own, starting at offset 0. Internal
 * metadata is the tail of the backing store, starting at meta_data_size(backing, block, true),
 * 4 KiB-aligned; the bytes before it are the data and the only part the volume exports. The
 * internal offset depends on the bitmap block size, which is itself stored in the superblock, so
 * meta_open() probes the offset of every legal block size, the highest offset first: an older
 * superblock at a higher offset would have been zeroed by meta_create_ex(), so the first valid one
 * found is the current one.
 *
 * Layout, offsets relative to the start of the metadata, all integers little-endian:
 *     0      superblock slot A (4096 bytes)
 *     4096   superblock slot B (4096 bytes)
 *     8192   activity log: a ring of 16 transactions of 4096 bytes (format in al.h)
 *     73728  bitmap: ceil(nbits / 8) bytes rounded up to 4096; bit i = byte i / 8, bit i % 8
 *
 * Superblock (the rest of the 4096-byte slot is zero):
 *     0    u8  magic[8]          "HAKMETA\0"
 *     8    u32 version           1
 *     12   u32 header_size       172 (bytes up to and including the crc)
 *     16   u64 seq               the valid slot with the higher seq is current
 *     24   u8  volume_uuid[16]
 *     40   u64 size              data bytes
 *     48   u32 bitmap_block_size power of two, 4096..1 MiB
 *     52   u32 flags             META_F_*
 *     56   u64 gen_current
 *     64   u64 gen_bitmap
 *     72   u64 gen_history[2]
 *     88   u64 resync_pos        bit where an interrupted resync resumes
 *     96   u64 bits_set          informational copy of the bitmap's count
 *     104  char node[64]         node that wrote the slot, NUL-terminated
 *     168  u32 crc32c            of bytes 0..167
 *
 * Writes alternate between the slots (the one not current gets seq + 1), so a torn superblock
 * write always leaves the previous superblock valid.
 *
 * Every call here is synchronous (pread, pwrite, fdatasync) and may block for the duration of a
 * disk flush: they run at startup, at role changes and from the periodic bitmap flush, never on
 * the data path. Memory: one struct meta per open volume; the bitmap is the caller's.
 * Everything read from disk is validated before use; bad metadata gives an error message, never
 * a crash.
 */
#ifndef HAK_META_H
#define HAK_META_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct bitmap;
struct meta;

#define META_VERSION     1u
#define META_HEADER_SIZE 172u
#define META_SB_SIZE     4096u
#define META_AL_OFFSET   8192u
#define META_AL_SIZE     65536u
#define META_BM_OFFSET   73728u
#define META_NODE_MAX    64u
#define META_ERR_LEN     1024u /* err buffer size: whole messages unless paths are huge */

#define META_F_CONSISTENT    (1u << 0) /* the data is a consistent copy */
#define META_F_UPTODATE      (1u << 1) /* ... and the newest one known */
#define META_F_PRIMARY       (1u << 2) /* set while primary; at startup: crashed as primary */
#define META_F_CLEAN         (1u << 3) /* clean shutdown: the bitmap on disk is complete */
#define META_F_RESYNC_TARGET (1u << 4) /* a resync as target was interrupted (see resync_pos) */
#define META_F_PEER_OUTDATED (1u << 5) /* the peer is known to be outdated */
#define META_F_SPLIT_BRAIN   (1u << 6) /* split brain detected and not resolved yet */
/*
 * The current generation began with a forced promotion of a disk that was not UpToDate: writes
 * acknowledged by the other node before it may be missing here. Cleared when the generation is
 * replaced (a later promotion that starts a new one, or adopting the peer's data); metadata
 * written before this flag existed simply lacks it.
 */
#define META_F_FORCED (1u << 7)
#define META_F_ALL    0xffu

/* The superblock in host order. */
struct meta_sb {
	uint32_t version;
	uint32_t header_size;
	uint64_t seq;
	uint8_t volume_uuid[16];
	uint64_t size;
	uint32_t bitmap_block_size;
	uint32_t flags;
	uint64_t gen_current;
	uint64_t gen_bitmap;
	uint64_t gen_history[2];
	uint64_t resync_pos;
	uint64_t bits_set;
	char node[META_NODE_MAX];
};

struct meta_create_args {
	bool internal;
	/* External: the data size. Internal: the backing size (0: the size of path). */
	uint64_t backing_bytes;
	uint32_t bitmap_block_size; /* 0: 4096 */
	uint8_t uuid[16];
	/*
	 * blank: the data is the same on both nodes already (empty disks, bulk load), so skip the
	 * initial sync: gen_current = blank_gen (0: a fresh random one, to pass to the other node)
	 * and flags CONSISTENT | UPTODATE. Otherwise gen_current = 0, a disk to be fully synced.
	 * Either way the flags include CLEAN: the (empty) bitmap on disk is complete.
	 */
	bool blank;
	uint64_t blank_gen;
	bool force; /* overwrite valid hak metadata instead of failing with EEXIST */
	const char *node;
};

/*
 * Write fresh metadata: both superblocks, a zeroed activity log and a zeroed bitmap (for internal
 * metadata, everything from the metadata offset to the end of the device is zeroed; the data area
 * is never touched). External metadata files are created (mode 0600) and sized. 0 on success
 * (*out, when non-NULL, is the superblock written), or -1 with errno and a sentence in err:
 * EEXIST valid metadata is already there (and !force), EINVAL bad argument, ENOSPC backing too
 * small, EFBIG more than 2^32 blocks, or the errno of a failed system call.
 */
int meta_create_ex(const char *path, const struct meta_create_args *args, struct meta_sb *out,
                   char *err, size_t errlen);

/*
 * Open and validate metadata. backing_bytes: for external metadata the size of the data (0 skips
 * the check, e.g. for dump-md); for internal the size of the backing store (0: the size of path).
 * Picks the newest valid superblock. On success returns 0 and err holds a warning sentence when
 * one slot was unusable ("superblock A has a bad checksum (stored 0x..., computed 0x...); using B
 * (seq 17)"), or is empty; the caller logs it. On failure -1 with errno (EINVAL for bad metadata,
 * or the errno of the failed system call) and err saying what is wrong with each slot.
 * The file is opened read-write, or read-only when that is all that is allowed (meta_write_sb
 * and meta_flush_bitmap then fail with EROFS).
 */
int meta_open(const char *path, bool internal, uint64_t backing_bytes, struct meta **out, char *err,
              size_t errlen);
int meta_close(struct meta *m);

const struct meta_sb *meta_sb(const struct meta *m);
/* Which slot holds the current superblock: 0 = A, 1 = B. */
int meta_slot(const struct meta *m);
/* Start of the metadata in its file: 0 for external, the size of the data for internal. */
uint64_t meta_offset(const struct meta *m);

/* The file descriptor of the metadata, for the activity log's asynchronous writes. */
int meta_fd(const struct meta *m);
/* Offset of the activity-log ring (META_AL_SIZE bytes) in meta_fd. */
uint64_t meta_al_offset(const struct meta *m);
/* Read the whole activity-log ring (startup and dump-md). 0, or -1 with errno. */
int meta_read_al(struct meta *m, uint8_t *buf);
/* Write ring slot `slot` (META_AL_SIZE / 16 bytes) and fdatasync; startup only. */
int meta_write_al_slot(struct meta *m, unsigned slot, const uint8_t *buf);
/* Zero the ring and fdatasync (the activity log is off: nothing on disk may vouch for it). */
int meta_zero_al(struct meta *m);

/*
 * Write new_sb as the next superblock: seq = current + 1, into the other slot, then fdatasync.
 * version, header_size and seq of new_sb are ignored; size, bitmap_block_size and volume_uuid
 * must not change (EINVAL), and the result must pass the checks meta_open applies (EINVAL).
 * On failure the current superblock stays what it was.
 */
int meta_write_sb(struct meta *m, const struct meta_sb *new_sb);

/*
 * Replace the contents of bm (created with bitmap_create(sb->size, sb->bitmap_block_size)) by
 * the on-disk bitmap; afterwards no page is dirty. -1 with errno EINVAL when bm has another
 * geometry, EIO when the file is shorter than its bitmap.
 */
int meta_load_bitmap(struct meta *m, struct bitmap *bm);
/*
 * Write the dirty pages of bm (runs of up to 8 consecutive pages per pwrite), fdatasync, then mark
 * them clean. On failure the pages stay dirty.
 */
int meta_flush_bitmap(struct meta *m, struct bitmap *bm);

/*
 * Bytes the volume may export from a backing store of backing_bytes: all of it with external
 * metadata, the part before the metadata with internal. 0 when the block size is invalid, the
 * backing store is too small, or it would need more than 2^32 bitmap blocks.
 */
uint64_t meta_data_size(uint64_t backing_bytes, uint32_t bitmap_block_size, bool internal);
/* Bytes of metadata for data_bytes of data (an external metadata file's size); 0 if invalid. */
uint64_t meta_md_size(uint64_t data_bytes, uint32_t bitmap_block_size);

/* Human-readable dump of every field (hakctl dump-md). 0, or -1 with errno on a write error. */
int meta_dump(const struct meta_sb *sb, FILE *out);

#endif
