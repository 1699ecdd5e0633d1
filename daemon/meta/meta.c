/* SPDX-License-Identifier: MIT */
/* On-disk metadata: superblocks, activity-log area, bitmap persistence. Layout in meta.h. */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bitmap.h"
#include "lib/crc32c.h"
#include "lib/endian.h"
#include "lib/errbuf.h"
#include "lib/log.h"
#include "meta.h"

#define META_MAGIC      "HAKMETA"
#define META_CRC_OFFSET 168u
#define ZERO_CHUNK      65536u
/* One slot's diagnosis; two of them fit in META_ERR_LEN with the rest of the message. */
#define META_WHY_LEN 320
/* Bitmap I/O goes through a bounce buffer for the little-endian conversion. */
#define BOUNCE_PAGES 8u

struct meta {
	int fd;
	bool internal;
	bool rdonly;
	int slot; /* 0 = A, 1 = B: holds sb */
	uint64_t base;
	uint64_t nbits;
	struct meta_sb sb;
};

/* One superblock slot as read from disk. */
struct slot_res {
	bool ok;
	bool has_magic;
	struct meta_sb sb;
	char why[META_WHY_LEN];
};

static const uint8_t zeros[ZERO_CHUNK];

static bool block_size_ok(uint32_t bs)
{
	return bs >= BITMAP_BLOCK_MIN && bs <= BITMAP_BLOCK_MAX && !(bs & (bs - 1));
}

static uint64_t nbits_of(uint64_t data_bytes, uint32_t bs)
{
	return data_bytes / bs + (data_bytes % bs != 0);
}

uint64_t meta_md_size(uint64_t data_bytes, uint32_t bitmap_block_size)
{
	if (!block_size_ok(bitmap_block_size) || data_bytes == 0)
		return 0;
	uint64_t nbits = nbits_of(data_bytes, bitmap_block_size);

	if (nbits > BITMAP_MAX_BITS)
		return 0;
	return META_BM_OFFSET +
	       (nbits + BITMAP_PAGE_BITS - 1) / BITMAP_PAGE_BITS * BITMAP_PAGE_BYTES;
}

uint64_t meta_data_size(uint64_t backing_bytes, uint32_t bitmap_block_size, bool internal)
{
	/* The bitmap is sized for the whole backing store: a few bits too many, never too few. */
	uint64_t md = meta_md_size(backing_bytes, bitmap_block_size);

	if (md == 0)
		return 0;
	if (!internal)
		return backing_bytes;
	if (md >= backing_bytes)
		return 0;
	return (backing_bytes - md) & ~(uint64_t)4095;
}

static void sb_encode(const struct meta_sb *sb, uint8_t *b)
{
	memset(b, 0, META_SB_SIZE);
	memcpy(b, META_MAGIC, 8);
	le_put32(b + 8, META_VERSION);
	le_put32(b + 12, META_HEADER_SIZE);
	le_put64(b + 16, sb->seq);
	memcpy(b + 24, sb->volume_uuid, 16);
	le_put64(b + 40, sb->size);
	le_put32(b + 48, sb->bitmap_block_size);
	le_put32(b + 52, sb->flags);
	le_put64(b + 56, sb->gen_current);
	le_put64(b + 64, sb->gen_bitmap);
	le_put64(b + 72, sb->gen_history[0]);
	le_put64(b + 80, sb->gen_history[1]);
	le_put64(b + 88, sb->resync_pos);
	le_put64(b + 96, sb->bits_set);
	memcpy(b + 104, sb->node, META_NODE_MAX);
	le_put32(b + META_CRC_OFFSET, crc32c_update(0, b, META_CRC_OFFSET));
}

static void sb_decode(const uint8_t *b, struct meta_sb *sb)
{
	sb->version = le_get32(b + 8);
	sb->header_size = le_get32(b + 12);
	sb->seq = le_get64(b + 16);
	memcpy(sb->volume_uuid, b + 24, 16);
	sb->size = le_get64(b + 40);
	sb->bitmap_block_size = le_get32(b + 48);
	sb->flags = le_get32(b + 52);
	sb->gen_current = le_get64(b + 56);
	sb->gen_bitmap = le_get64(b + 64);
	sb->gen_history[0] = le_get64(b + 72);
	sb->gen_history[1] = le_get64(b + 80);
	sb->resync_pos = le_get64(b + 88);
	sb->bits_set = le_get64(b + 96);
	memcpy(sb->node, b + 104, META_NODE_MAX);
}

/* Magic, checksum and version; the first test a slot must pass. */
static bool sb_check_header(const uint8_t *b, const struct meta_sb *sb, char name, char *why,
                            size_t n)
{
	if (memcmp(b, META_MAGIC, 8) != 0) {
		bool blank = b[0] == 0 && memcmp(b, b + 1, META_SB_SIZE - 1) == 0;

		errbuf_set(why, n,
		           blank ? "superblock %c is blank (all zeros)"
		                 : "superblock %c has no hak metadata magic",
		           name);
		return false;
	}
	uint32_t stored = le_get32(b + META_CRC_OFFSET),
	         calc = crc32c_update(0, b, META_CRC_OFFSET);

	if (sb->version > META_VERSION && (stored != calc || sb->header_size != META_HEADER_SIZE)) {
		errbuf_set(why, n,
		           "superblock %c has metadata version %" PRIu32
		           ", newer than version %u that this hakd reads",
		           name, sb->version, META_VERSION);
		return false;
	}
	if (stored != calc) {
		errbuf_set(why, n,
		           "superblock %c has a bad checksum (stored 0x%08" PRIx32
		           ", computed 0x%08" PRIx32 ")",
		           name, stored, calc);
		return false;
	}
	if (sb->version != META_VERSION || sb->header_size != META_HEADER_SIZE) {
		errbuf_set(why, n,
		           "superblock %c has metadata version %" PRIu32 " with a %" PRIu32
		           "-byte header; this hakd reads version %u with a %u-byte header",
		           name, sb->version, sb->header_size, META_VERSION, META_HEADER_SIZE);
		return false;
	}
	return true;
}

/* Everything a superblock must satisfy on its own, wherever it is found. */
static bool sb_check(const uint8_t *b, struct meta_sb *sb, char name, char *why, size_t n)
{
	sb_decode(b, sb);
	if (!sb_check_header(b, sb, name, why, n))
		return false;
	if (!block_size_ok(sb->bitmap_block_size)) {
		errbuf_set(why, n,
		           "superblock %c has an invalid bitmap block size of %" PRIu32
		           " bytes (a power of two from 4096 to 1048576 is required)",
		           name, sb->bitmap_block_size);
		return false;
	}
	uint64_t nbits = nbits_of(sb->size, sb->bitmap_block_size);

	if (sb->size == 0 || nbits > BITMAP_MAX_BITS) {
		errbuf_set(why, n,
		           "superblock %c has a volume size of %" PRIu64
		           " bytes, which is zero or needs more than 2^32 blocks of %" PRIu32
		           " bytes",
		           name, sb->size, sb->bitmap_block_size);
		return false;
	}
	if (sb->flags & ~META_F_ALL) {
		errbuf_set(why, n, "superblock %c has unknown flags 0x%" PRIx32, name,
		           sb->flags & ~META_F_ALL);
		return false;
	}
	if (!memchr(sb->node, '\0', META_NODE_MAX)) {
		errbuf_set(why, n, "superblock %c has a node name that is not NUL-terminated",
		           name);
		return false;
	}
	if (sb->resync_pos > nbits) {
		errbuf_set(why, n,
		           "superblock %c has a resync position of %" PRIu64 ", beyond the %" PRIu64
		           " blocks of the volume",
		           name, sb->resync_pos, nbits);
		return false;
	}
	if (sb->bits_set > nbits) {
		errbuf_set(why, n,
		           "superblock %c counts %" PRIu64
		           " out-of-sync blocks, more than the %" PRIu64 " blocks of the volume",
		           name, sb->bits_set, nbits);
		return false;
	}
	return true;
}

static int file_size(int fd, uint64_t *out)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -1;
	if (S_ISBLK(st.st_mode))
		return ioctl(fd, BLKGETSIZE64, out) < 0 ? -1 : 0;
	if (!S_ISREG(st.st_mode)) {
		errno = EINVAL;
		return -1;
	}
	*out = (uint64_t)st.st_size;
	return 0;
}

/* pread/pwrite all of len, or -1 with errno (ENODATA: the file ended before len bytes). */
static int pio_full(int fd, void *buf, size_t len, uint64_t off, bool write)
{
	char *p = buf;

	while (len) {
		ssize_t r = write ? pwrite(fd, p, len, (off_t)off) : pread(fd, p, len, (off_t)off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0) {
			errno = ENODATA;
			return -1;
		}
		p += r;
		len -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

static int zero_range(int fd, uint64_t off, uint64_t len)
{
	while (len) {
		size_t n = len < ZERO_CHUNK ? (size_t)len : ZERO_CHUNK;

		if (pio_full(fd, (void *)zeros, n, off, true) < 0)
			return -1;
		off += n;
		len -= n;
	}
	return 0;
}

/*
 * Whether sb, valid on its own, also fits where it was found: external metadata at base 0 of a
 * file of fsize bytes for data of backing bytes (0: unknown), internal at base of a backing store
 * of backing bytes.
 */
static bool sb_check_place(const struct meta_sb *sb, bool internal, uint64_t backing, uint64_t base,
                           uint64_t fsize, char name, char *why, size_t n)
{
	uint64_t md = meta_md_size(sb->size, sb->bitmap_block_size);

	if (internal) {
		uint64_t want = meta_data_size(backing, sb->bitmap_block_size, true);

		if (want != base || sb->size != base) {
			errbuf_set(why, n,
			           "superblock %c, found at offset %" PRIu64 ", describes %" PRIu64
			           " data bytes with %" PRIu32
			           "-byte blocks, but a backing store of %" PRIu64
			           " bytes has %" PRIu64
			           " data bytes with those blocks (was it resized?)",
			           name, base, sb->size, sb->bitmap_block_size, backing, want);
			return false;
		}
		return true;
	}
	if (backing && sb->size != backing) {
		errbuf_set(why, n,
		           "superblock %c describes a volume of %" PRIu64
		           " bytes, but the backing store has %" PRIu64 " bytes",
		           name, sb->size, backing);
		return false;
	}
	if (fsize < md) {
		errbuf_set(why, n,
		           "superblock %c needs %" PRIu64
		           " bytes of metadata, but the file has only %" PRIu64 " bytes",
		           name, md, fsize);
		return false;
	}
	return true;
}

static void slots_read(int fd, uint64_t base, uint64_t fsize, struct slot_res r[2])
{
	uint8_t buf[META_SB_SIZE];

	for (int i = 0; i < 2; i++) {
		char name = (char)('A' + i);
		uint64_t off = base + (uint64_t)i * META_SB_SIZE;

		memset(&r[i], 0, sizeof(r[i]));
		if (fsize < META_SB_SIZE || off > fsize - META_SB_SIZE) {
			errbuf_set(r[i].why, sizeof(r[i].why),
			           "superblock %c at offset %" PRIu64
			           " lies beyond the end (%" PRIu64 " bytes)",
			           name, off, fsize);
			continue;
		}
		if (pio_full(fd, buf, sizeof(buf), off, false) < 0) {
			errbuf_set(r[i].why, sizeof(r[i].why),
			           "superblock %c at offset %" PRIu64 " could not be read: %s",
			           name, off, strerror(errno));
			continue;
		}
		r[i].has_magic = memcmp(buf, META_MAGIC, 8) == 0;
		r[i].ok = sb_check(buf, &r[i].sb, name, r[i].why, sizeof(r[i].why));
	}
}

/* The current slot (newest valid one), or -1. */
static int slots_pick(const struct slot_res r[2])
{
	if (r[0].ok && r[1].ok)
		return r[1].sb.seq > r[0].sb.seq ? 1 : 0;
	if (r[0].ok)
		return 0;
	return r[1].ok ? 1 : -1;
}

struct probe {
	struct slot_res r[2];
	uint64_t base;
	int slot;
};

/* Re-check the slots that passed sb_check() against where they were found. */
static void slots_place(struct slot_res r[2], bool internal, uint64_t backing, uint64_t base,
                        uint64_t fsize)
{
	for (int i = 0; i < 2; i++)
		if (r[i].ok)
			r[i].ok = sb_check_place(&r[i].sb, internal, backing, base, fsize,
			                         (char)('A' + i), r[i].why, sizeof(r[i].why));
}

/*
 * Find the metadata: the slots at base 0 for external; for internal the highest candidate offset
 * with a valid slot. When nothing is valid, p->r reports the first offset where a magic was seen,
 * or else the offset for the default block size (probed last).
 */
static void meta_probe(int fd, bool internal, uint64_t backing, uint64_t fsize, struct probe *p)
{
	struct slot_res r[2];
	uint64_t prev = UINT64_MAX;
	bool have_magic = false;

	memset(p, 0, sizeof(*p));
	p->slot = -1;
	if (!internal) {
		slots_read(fd, 0, fsize, p->r);
		slots_place(p->r, false, backing, 0, fsize);
		p->slot = slots_pick(p->r);
		return;
	}
	for (int i = 0; i < 2; i++)
		errbuf_set(p->r[i].why, sizeof(p->r[i].why),
		           "superblock %c cannot exist: a backing store of %" PRIu64
		           " bytes is too small for internal metadata",
		           'A' + i, backing);
	/* Larger blocks, smaller bitmap, higher offset: probe from the largest block size down. */
	for (uint32_t bs = BITMAP_BLOCK_MAX; bs >= BITMAP_BLOCK_MIN; bs /= 2) {
		uint64_t base = meta_data_size(backing, bs, true);

		if (base == 0 || base == prev)
			continue;
		prev = base;
		slots_read(fd, base, fsize, r);
		slots_place(r, true, backing, base, fsize);
		int slot = slots_pick(r);
		if (slot >= 0 || !have_magic) {
			memcpy(p->r, r, sizeof(r));
			p->base = base;
			p->slot = slot;
			have_magic = r[0].has_magic || r[1].has_magic;
		}
		if (slot >= 0)
			return;
	}
}

static int meta_open_fd(const char *path, bool *rdonly)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);

	*rdonly = false;
	if (fd < 0 && (errno == EACCES || errno == EROFS || errno == EPERM)) {
		fd = open(path, O_RDONLY | O_CLOEXEC);
		*rdonly = fd >= 0;
	}
	return fd;
}

/* The backing size for internal metadata (0: all of the file), checked against the file. */
static int internal_backing(uint64_t backing, uint64_t fsize, uint64_t *out, const char *path,
                            char *err, size_t errlen)
{
	*out = backing ? backing : fsize;
	if (*out > fsize) {
		errbuf_set(err, errlen,
		           "The backing store %s has %" PRIu64 " bytes, fewer than the %" PRIu64
		           " expected.",
		           path, fsize, backing);
		errno = EINVAL;
		return -1;
	}
	return 0;
}

static void open_report(const char *path, bool internal, const struct probe *p, char *err,
                        size_t errlen)
{
	if (p->slot >= 0) {
		const struct slot_res *bad = &p->r[1 - p->slot];

		if (bad->ok)
			errbuf_set(err, errlen, "%s", "");
		else
			errbuf_set(err, errlen, "In %s, %s; using %c (seq %" PRIu64 ").", path,
			           bad->why, 'A' + p->slot, p->r[p->slot].sb.seq);
		return;
	}
	const char *hint = p->r[0].has_magic || p->r[1].has_magic
	                       ? "The metadata is damaged, or not for this backing store."
	                       : "It is not hak metadata, or it was created by a newer version.";

	errbuf_set(
	    err, errlen, "There is no valid superblock in %s%s (at offset %" PRIu64 "): %s; %s. %s",
	    path, internal ? " as internal metadata" : "", p->base, p->r[0].why, p->r[1].why, hint);
}

/* The end of a call that opened fd: close it unless it was handed out (fd -1), keeping errno. */
static int close_unless_kept(int fd, int rc)
{
	int e = errno;

	if (fd >= 0)
		close(fd);
	errno = e;
	return rc;
}

int meta_open(const char *path, bool internal, uint64_t backing_bytes, struct meta **out, char *err,
              size_t errlen)
{
	struct meta *m = NULL;
	struct probe p;
	uint64_t fsize, backing = backing_bytes;
	bool rdonly;
	int fd = -1, rc = -1;

	errbuf_set(err, errlen, "%s", "");
	*out = NULL;
	fd = meta_open_fd(path, &rdonly);
	if (fd < 0) {
		errbuf_set(err, errlen, "Cannot open the metadata %s: %s.", path, strerror(errno));
		goto out;
	}
	if (file_size(fd, &fsize) < 0) {
		errbuf_set(
		    err, errlen,
		    "Cannot get the size of %s (%s); metadata must be a regular file or a block "
		    "device.",
		    path, strerror(errno));
		goto out;
	}
	if (internal && internal_backing(backing_bytes, fsize, &backing, path, err, errlen) < 0)
		goto out;
	meta_probe(fd, internal, backing, fsize, &p);
	open_report(path, internal, &p, err, errlen);
	if (p.slot < 0) {
		errno = EINVAL;
		goto out;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		errbuf_set(err, errlen, "Out of memory opening the metadata %s.", path);
		goto out;
	}
	m->fd = fd;
	m->internal = internal;
	m->rdonly = rdonly;
	m->slot = p.slot;
	m->base = p.base;
	m->sb = p.r[p.slot].sb;
	m->nbits = nbits_of(m->sb.size, m->sb.bitmap_block_size);
	*out = m;
	fd = -1;
	rc = 0;
out:
	return close_unless_kept(fd, rc);
}

int meta_close(struct meta *m)
{
	int rc;

	if (!m)
		return 0;
	rc = close(m->fd);
	free(m);
	return rc;
}

const struct meta_sb *meta_sb(const struct meta *m)
{
	return &m->sb;
}

int meta_slot(const struct meta *m)
{
	return m->slot;
}

uint64_t meta_offset(const struct meta *m)
{
	return m->base;
}

int meta_fd(const struct meta *m)
{
	return m->fd;
}

uint64_t meta_al_offset(const struct meta *m)
{
	return m->base + META_AL_OFFSET;
}

int meta_read_al(struct meta *m, uint8_t *buf)
{
	return pio_full(m->fd, buf, META_AL_SIZE, m->base + META_AL_OFFSET, false);
}

int meta_write_al_slot(struct meta *m, unsigned slot, const uint8_t *buf)
{
	const uint32_t tr = META_AL_SIZE / 16u;

	if (m->rdonly || slot >= 16) {
		errno = m->rdonly ? EROFS : EINVAL;
		return -1;
	}
	if (pio_full(m->fd, (void *)buf, tr, m->base + META_AL_OFFSET + (uint64_t)slot * tr, true) <
	    0)
		return -1;
	return fdatasync(m->fd);
}

int meta_zero_al(struct meta *m)
{
	if (m->rdonly) {
		errno = EROFS;
		return -1;
	}
	if (zero_range(m->fd, m->base + META_AL_OFFSET, META_AL_SIZE) < 0)
		return -1;
	return fdatasync(m->fd);
}

int meta_write_sb(struct meta *m, const struct meta_sb *new_sb)
{
	uint8_t buf[META_SB_SIZE];
	struct meta_sb sb = *new_sb, check;
	char why[META_WHY_LEN];
	int slot = 1 - m->slot;

	if (m->rdonly) {
		errno = EROFS;
		return -1;
	}
	if (sb.size != m->sb.size || sb.bitmap_block_size != m->sb.bitmap_block_size ||
	    memcmp(sb.volume_uuid, m->sb.volume_uuid, 16) != 0) {
		errno = EINVAL;
		return -1;
	}
	sb.version = META_VERSION;
	sb.header_size = META_HEADER_SIZE;
	sb.seq = m->sb.seq + 1;
	sb_encode(&sb, buf);
	/* Never write what meta_open would refuse to read back. */
	if (!sb_check(buf, &check, (char)('A' + slot), why, sizeof(why))) {
		log_err("Refusing to write metadata superblock: %s.", why);
		errno = EINVAL;
		return -1;
	}
	if (pio_full(m->fd, buf, sizeof(buf), m->base + (uint64_t)slot * META_SB_SIZE, true) < 0 ||
	    fdatasync(m->fd) < 0)
		return -1;
	m->sb = check;
	m->slot = slot;
	return 0;
}

static int bitmap_geometry_ok(const struct meta *m, const struct bitmap *bm)
{
	if (bitmap_nbits(bm) != m->nbits || bitmap_block_size(bm) != m->sb.bitmap_block_size) {
		log_err("The bitmap has %" PRIu64 " blocks of %" PRIu32
		        " bytes, but the metadata describes %" PRIu64 " blocks of %" PRIu32
		        " bytes.",
		        bitmap_nbits(bm), bitmap_block_size(bm), m->nbits, m->sb.bitmap_block_size);
		errno = EINVAL;
		return -1;
	}
	return 0;
}

int meta_load_bitmap(struct meta *m, struct bitmap *bm)
{
	uint64_t buf[BOUNCE_PAGES * BITMAP_PAGE_WORDS];
	uint64_t npages, off = m->base + META_BM_OFFSET;
	size_t nwords;
	int rc = -1;

	if (bitmap_geometry_ok(m, bm) < 0)
		goto out;
	npages = bitmap_npages(bm);
	bitmap_words(bm, &nwords);
	for (uint64_t p = 0; p < npages; p += BOUNCE_PAGES) {
		uint64_t n = npages - p < BOUNCE_PAGES ? npages - p : BOUNCE_PAGES;
		uint64_t at = off + p * BITMAP_PAGE_BYTES;

		uint64_t first = p * BITMAP_PAGE_WORDS, take = n * BITMAP_PAGE_WORDS;

		if (pio_full(m->fd, buf, n * BITMAP_PAGE_BYTES, at, false) < 0) {
			if (errno == ENODATA) {
				log_err("The metadata file ends inside its bitmap (reading %" PRIu64
				        " bytes at offset %" PRIu64 "); was it truncated?",
				        n * BITMAP_PAGE_BYTES, at);
				errno = EIO;
			} else {
				log_err("Reading the bitmap at offset %" PRIu64
				        " of the metadata failed: %s.",
				        at, strerror(errno));
			}
			goto out;
		}
		/* The last page ends in padding words; what is on disk there is ignored. */
		if (take > nwords - first)
			take = nwords - first;
		bitmap_load_words(bm, first, buf, (size_t)take);
	}
	bitmap_mark_all_clean(bm);
	rc = 0;
out:
	return rc;
}

/* Write pages [first, first + n) of bm, n <= BOUNCE_PAGES, converted to little-endian. */
static int bitmap_write_pages(struct meta *m, const struct bitmap *bm, uint64_t first, uint64_t n)
{
	uint64_t buf[BOUNCE_PAGES * BITMAP_PAGE_WORDS];
	const uint64_t *w = bitmap_words(bm, NULL) + first * BITMAP_PAGE_WORDS;
	uint64_t at = m->base + META_BM_OFFSET + first * BITMAP_PAGE_BYTES;

	for (uint64_t i = 0; i < n * BITMAP_PAGE_WORDS; i++)
		buf[i] = htole64(w[i]);
	if (pio_full(m->fd, buf, n * BITMAP_PAGE_BYTES, at, true) < 0) {
		log_err("Writing %" PRIu64 " bitmap pages at offset %" PRIu64
		        " of the metadata failed: %s.",
		        n, at, strerror(errno));
		return -1;
	}
	return 0;
}

int meta_flush_bitmap(struct meta *m, struct bitmap *bm)
{
	uint64_t npages, p;
	int rc = -1;

	if (m->rdonly) {
		errno = EROFS;
		goto out;
	}
	if (bitmap_geometry_ok(m, bm) < 0)
		goto out;
	npages = bitmap_npages(bm);
	p = bitmap_next_dirty_page(bm, 0);
	while (p < npages) {
		uint64_t n = 1;

		while (n < BOUNCE_PAGES && p + n < npages &&
		       bitmap_next_dirty_page(bm, p + n) == p + n)
			n++;
		if (bitmap_write_pages(m, bm, p, n) < 0)
			goto out;
		p = bitmap_next_dirty_page(bm, p + n);
	}
	if (fdatasync(m->fd) < 0) {
		log_err("Flushing the bitmap to the metadata failed: %s.", strerror(errno));
		goto out;
	}
	/* Loop-thread only: nothing can have dirtied a page between the writes and here. */
	bitmap_mark_all_clean(bm);
	rc = 0;
out:
	return rc;
}

/* EEXIST unless force when any candidate location already holds a valid superblock. */
static int create_check_existing(int fd, const struct meta_create_args *a, uint64_t backing,
                                 uint64_t fsize, const char *path, char *err, size_t errlen)
{
	struct slot_res r[2];

	for (uint32_t bs = BITMAP_BLOCK_MAX; bs >= BITMAP_BLOCK_MIN; bs /= 2) {
		uint64_t base = a->internal ? meta_data_size(backing, bs, true) : 0;

		if (a->internal && base == 0)
			continue;
		slots_read(fd, base, fsize, r);
		int slot = slots_pick(r);
		if (slot >= 0) {
			errbuf_set(err, errlen,
			           "%s already holds hak metadata (superblock %c at offset %" PRIu64
			           ", seq %" PRIu64 ", node '%s'); use --force to overwrite it.",
			           path, 'A' + slot, base + (uint64_t)slot * META_SB_SIZE,
			           r[slot].sb.seq, r[slot].sb.node);
			errno = EEXIST;
			return -1;
		}
		if (!a->internal)
			break;
	}
	return 0;
}

static int create_validate(const struct meta_create_args *a, uint32_t *bs, char *err, size_t errlen)
{
	*bs = a->bitmap_block_size ? a->bitmap_block_size : BITMAP_BLOCK_DEFAULT;
	errno = EINVAL;
	if (!block_size_ok(*bs)) {
		errbuf_set(err, errlen,
		           "The bitmap block size %" PRIu32
		           " is invalid; use a power of two from 4096 to 1048576.",
		           *bs);
		return -1;
	}
	if (!a->node || strlen(a->node) >= META_NODE_MAX) {
		errbuf_set(err, errlen, "The node name must be given and shorter than %u bytes.",
		           META_NODE_MAX);
		return -1;
	}
	if (!a->internal && a->backing_bytes == 0) {
		errbuf_set(err, errlen, "%s", "External metadata needs the size of the data.");
		return -1;
	}
	if (!a->internal && meta_md_size(a->backing_bytes, *bs) == 0) {
		errbuf_set(err, errlen,
		           "A volume of %" PRIu64 " bytes needs more than 2^32 blocks of %" PRIu32
		           " bytes; use a larger bitmap block size.",
		           a->backing_bytes, *bs);
		errno = EFBIG;
		return -1;
	}
	return 0;
}

/* Zero [base, end) where the new metadata goes; an old superblock there must not survive. */
static int create_zero(int fd, const struct meta_create_args *a, uint64_t base, uint64_t end,
                       const char *path, char *err, size_t errlen)
{
	struct stat st;
	int rc;

	if (fstat(fd, &st) < 0)
		goto fail;
	if (!a->internal && S_ISREG(st.st_mode))
		/* The whole file is ours: truncating is the fast way to zero it. */
		rc = ftruncate(fd, 0) < 0 || ftruncate(fd, (off_t)end) < 0 ? -1 : 0;
	else
		rc = zero_range(fd, base, end - base);
	if (rc == 0 && fdatasync(fd) == 0)
		return 0;
fail:
	rc = errno;
	errbuf_set(err, errlen, "Zeroing the metadata area of %s failed: %s.", path, strerror(rc));
	errno = rc;
	return -1;
}

static int create_gen(const struct meta_create_args *a, uint64_t *gen, char *err, size_t errlen)
{
	*gen = 0;
	if (!a->blank)
		return 0;
	*gen = a->blank_gen;
	while (*gen == 0) {
		if (getrandom(gen, sizeof(*gen), 0) != sizeof(*gen)) {
			errbuf_set(err, errlen, "Cannot get a random generation id: %s.",
			           strerror(errno));
			return -1;
		}
	}
	return 0;
}

static int create_write_sbs(int fd, uint64_t base, struct meta_sb *sb)
{
	uint8_t buf[META_SB_SIZE];

	for (int i = 0; i < 2; i++) {
		sb->seq = (uint64_t)i + 1;
		sb_encode(sb, buf);
		if (pio_full(fd, buf, sizeof(buf), base + (uint64_t)i * META_SB_SIZE, true) < 0)
			return -1;
	}
	return fdatasync(fd);
}

/* Where the metadata goes: base and end offsets, and the data size. */
static int create_place(int fd, const struct meta_create_args *a, uint32_t bs, const char *path,
                        uint64_t *fsize, uint64_t *backing, uint64_t *base, uint64_t *end,
                        char *err, size_t errlen)
{
	if (file_size(fd, fsize) < 0) {
		errbuf_set(err, errlen, "Cannot get the size of %s: %s.", path, strerror(errno));
		return -1;
	}
	if (!a->internal) {
		struct stat st;

		*backing = a->backing_bytes;
		*base = 0;
		*end = meta_md_size(*backing, bs);
		if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
			return 0;
		if (*fsize >= *end)
			return 0;
		errbuf_set(err, errlen,
		           "%s has %" PRIu64 " bytes, but the metadata needs %" PRIu64 " bytes.",
		           path, *fsize, *end);
		errno = ENOSPC;
		return -1;
	}
	if (internal_backing(a->backing_bytes, *fsize, backing, path, err, errlen) < 0)
		return -1;
	*base = meta_data_size(*backing, bs, true);
	*end = *backing;
	if (*base)
		return 0;
	errbuf_set(err, errlen,
	           "The backing store %s of %" PRIu64
	           " bytes is too small for internal metadata with %" PRIu32 "-byte blocks.",
	           path, *backing, bs);
	errno = ENOSPC;
	return -1;
}

int meta_create_ex(const char *path, const struct meta_create_args *a, struct meta_sb *out,
                   char *err, size_t errlen)
{
	struct meta_sb sb;
	uint64_t fsize, backing, base, end, gen;
	uint32_t bs;
	int fd = -1, rc = -1;

	errbuf_set(err, errlen, "%s", "");
	if (create_validate(a, &bs, err, errlen) < 0 || create_gen(a, &gen, err, errlen) < 0)
		goto out;
	fd = open(path, O_RDWR | O_CLOEXEC | (a->internal ? 0 : O_CREAT), 0600);
	if (fd < 0) {
		errbuf_set(err, errlen, "Cannot open %s: %s.", path, strerror(errno));
		goto out;
	}
	if (create_place(fd, a, bs, path, &fsize, &backing, &base, &end, err, errlen) < 0)
		goto out;
	if (!a->force && create_check_existing(fd, a, backing, fsize, path, err, errlen) < 0)
		goto out;
	if (create_zero(fd, a, base, end, path, err, errlen) < 0)
		goto out;
	memset(&sb, 0, sizeof(sb));
	sb.version = META_VERSION;
	sb.header_size = META_HEADER_SIZE;
	memcpy(sb.volume_uuid, a->uuid, 16);
	sb.size = a->internal ? base : backing;
	sb.bitmap_block_size = bs;
	sb.flags = META_F_CLEAN | (a->blank ? META_F_CONSISTENT | META_F_UPTODATE : 0);
	sb.gen_current = gen;
	snprintf(sb.node, sizeof(sb.node), "%s", a->node);
	if (create_write_sbs(fd, base, &sb) < 0) {
		errbuf_set(err, errlen, "Writing the superblocks of %s failed: %s.", path,
		           strerror(errno));
		goto out;
	}
	if (out)
		*out = sb;
	rc = 0;
out:
	return close_unless_kept(fd, rc);
}

static const char *const flag_names[] = {
    "CONSISTENT",    "UPTODATE",      "PRIMARY",     "CLEAN",
    "RESYNC_TARGET", "PEER_OUTDATED", "SPLIT_BRAIN", "FORCED",
};
/* A new META_F_* needs its name here, or meta_dump would print it as an unknown number. */
_Static_assert((1u << (sizeof(flag_names) / sizeof(flag_names[0]))) - 1 == META_F_ALL,
               "flag_names must name every bit of META_F_ALL");

int meta_dump(const struct meta_sb *sb, FILE *out)
{
	const uint8_t *u = sb->volume_uuid;
	uint64_t bs = sb->bitmap_block_size ? sb->bitmap_block_size : 1;
	uint64_t nbits = nbits_of(sb->size, (uint32_t)bs);
	/* The last block may be short: never report more than the volume as out of sync. */
	uint64_t oos = sb->bits_set > sb->size / bs ? sb->size : sb->bits_set * bs;

	fprintf(out, "version            %" PRIu32 " (header %" PRIu32 " bytes)\n", sb->version,
	        sb->header_size);
	fprintf(out, "seq                %" PRIu64 "\n", sb->seq);
	fprintf(out,
	        "volume uuid        %02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
	        "%02x%02x%02x%02x%02x%02x\n",
	        u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
	        u[13], u[14], u[15]);
	fprintf(out, "size               %" PRIu64 " bytes\n", sb->size);
	fprintf(out, "bitmap block size  %" PRIu32 " bytes (%" PRIu64 " blocks)\n",
	        sb->bitmap_block_size, nbits);
	fprintf(out, "flags             ");
	for (unsigned i = 0; i < sizeof(flag_names) / sizeof(flag_names[0]); i++)
		if (sb->flags & (1u << i))
			fprintf(out, " %s", flag_names[i]);
	if (sb->flags & ~META_F_ALL)
		fprintf(out, " 0x%" PRIx32, sb->flags & ~META_F_ALL);
	fprintf(out, "%s\n", sb->flags ? "" : " (none)");
	fprintf(out, "gen current        %016" PRIX64 "\n", sb->gen_current);
	fprintf(out, "gen bitmap         %016" PRIX64 "\n", sb->gen_bitmap);
	fprintf(out, "gen history        %016" PRIX64 " %016" PRIX64 "\n", sb->gen_history[0],
	        sb->gen_history[1]);
	fprintf(out, "resync position    %" PRIu64 "\n", sb->resync_pos);
	fprintf(out, "bits set           %" PRIu64 " (%" PRIu64 " bytes out of sync)\n",
	        sb->bits_set, oos);
	fprintf(out, "written by node    %.*s\n", (int)META_NODE_MAX, sb->node);
	if (ferror(out)) {
		errno = EIO;
		return -1;
	}
	return 0;
}
