/* SPDX-License-Identifier: MIT */
/* Unit tests for the on-disk metadata (and the crc32c it relies on). */
#include <check.h>
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "meta/bitmap.h"
#include "lib/crc32c.h"
#include "meta/meta.h"

#define MiB (1024ull * 1024)
#define GiB (1024ull * MiB)

static const uint8_t uuid1[16] = {0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0,
                                  0x0f, 0xed, 0xcb, 0xa9, 0x87, 0x65, 0x43, 0x21};

/* Metadata of node "alpha" with uuid1 and a random generation, never forced; 0 or -1 with errno
 * (the sentence goes to stderr). */
static int md_create(const char *path, bool internal, uint64_t backing_bytes, uint32_t block_size,
                     struct meta_sb *out)
{
	struct meta_create_args a = {.internal = internal,
	                             .backing_bytes = backing_bytes,
	                             .bitmap_block_size = block_size,
	                             .node = "alpha"};
	char err[META_ERR_LEN];

	memcpy(a.uuid, uuid1, sizeof(a.uuid));
	if (meta_create_ex(path, &a, out, err, sizeof(err)) == 0)
		return 0;
	int e = errno;
	fprintf(stderr, "%s\n", err);
	errno = e;
	return -1;
}

/*
 * One scratch directory for the suite, made and removed by an unchecked fixture (in the parent
 * process, so it goes away even when a test fails); one file name per test and process.
 */
static char tmpdir[64];
static char tmpfile_[128];
static unsigned tmp_seq;

static void tmp_setup(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/hak-test-meta.XXXXXX");
	if (!mkdtemp(tmpdir))
		abort();
}

static void tmp_teardown(void)
{
	DIR *d = opendir(tmpdir);
	struct dirent *e;
	char p[400];

	while (d && (e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", tmpdir, e->d_name);
		unlink(p);
	}
	if (d)
		closedir(d);
	rmdir(tmpdir);
}

static const char *tmp_path(void)
{
	snprintf(tmpfile_, sizeof(tmpfile_), "%s/md-%d-%u", tmpdir, (int)getpid(), tmp_seq++);
	return tmpfile_;
}

static void tmp_done(void)
{
	unlink(tmpfile_);
}

static void file_rw(const char *path, void *buf, size_t len, uint64_t off, bool write)
{
	int fd = open(path, O_RDWR);

	ck_assert_int_ge(fd, 0);
	ssize_t r = write ? pwrite(fd, buf, len, (off_t)off) : pread(fd, buf, len, (off_t)off);
	ck_assert_int_eq(r, (ssize_t)len);
	close(fd);
}

static uint64_t file_bytes(const char *path)
{
	struct stat st;

	ck_assert_int_eq(stat(path, &st), 0);
	return (uint64_t)st.st_size;
}

/* Read a raw slot and say whether its checksum is right; *seq gets its sequence number. */
static bool raw_slot(const char *path, uint64_t base, int slot, uint64_t *seq)
{
	uint8_t b[META_SB_SIZE];
	uint32_t crc;

	file_rw(path, b, sizeof(b), base + (uint64_t)slot * META_SB_SIZE, false);
	memcpy(seq, b + 16, 8);
	*seq = le64toh(*seq);
	memcpy(&crc, b + 168, 4);
	return memcmp(b, "HAKMETA", 8) == 0 && le32toh(crc) == crc32c_update(0, b, 168);
}

static struct meta *open_ok(const char *path, bool internal, uint64_t backing, char *err,
                            size_t len)
{
	struct meta *m = NULL;
	int rc = meta_open(path, internal, backing, &m, err, len);

	ck_assert_msg(rc == 0, "meta_open failed: %s", err);
	ck_assert_ptr_nonnull(m);
	return m;
}

START_TEST(crc32c_vectors)
{
	uint8_t buf[32];
	const char *s = "123456789";

	ck_assert_uint_eq(crc32c_update(0, s, 9), 0xE3069283);
	ck_assert_uint_eq(crc32c_update_sw(0, s, 9), 0xE3069283);
	ck_assert_uint_eq(crc32c_update(0, s, 0), 0);
	/* RFC 3720 (iSCSI) B.4 test vectors. */
	memset(buf, 0, sizeof(buf));
	ck_assert_uint_eq(crc32c_update(0, buf, 32), 0x8A9136AA);
	memset(buf, 0xff, sizeof(buf));
	ck_assert_uint_eq(crc32c_update(0, buf, 32), 0x62A8AB43);
	for (int i = 0; i < 32; i++)
		buf[i] = (uint8_t)i;
	ck_assert_uint_eq(crc32c_update(0, buf, 32), 0x46DD794E);
	for (int i = 0; i < 32; i++)
		buf[i] = (uint8_t)(31 - i);
	ck_assert_uint_eq(crc32c_update_sw(0, buf, 32), 0x113FDB5C);
	/* Chaining over pieces equals one pass. */
	ck_assert_uint_eq(crc32c_update(crc32c_update(0, s, 4), s + 4, 5), 0xE3069283);
	ck_assert_uint_eq(crc32c_update_sw(crc32c_update_sw(0, s, 7), s + 7, 2), 0xE3069283);

	/* Hardware and table versions agree at every alignment and length. */
	uint8_t big[1100];
	unsigned bad = 0;
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 2654435761u >> 13);
	for (size_t off = 0; off < 9; off++)
		for (size_t len = 0; len + off <= sizeof(big); len += 13)
			bad +=
			    crc32c_update(7, big + off, len) != crc32c_update_sw(7, big + off, len);
	ck_assert_uint_eq(bad, 0);
}
END_TEST

START_TEST(create_open_roundtrip)
{
	const char *path = tmp_path();
	struct meta_sb sb;
	struct meta *m;
	char err[META_ERR_LEN];

	/* 1 GiB at 4 KiB: 262144 bits = 32 KiB of bitmap. */
	ck_assert_int_eq(md_create(path, false, GiB, 0, &sb), 0);
	ck_assert_uint_eq(file_bytes(path), META_BM_OFFSET + 32768);
	ck_assert_uint_eq(meta_md_size(GiB, 4096), META_BM_OFFSET + 32768);
	ck_assert_uint_eq(sb.size, GiB);
	ck_assert_uint_eq(sb.bitmap_block_size, 4096);
	ck_assert_uint_eq(sb.gen_current, 0);
	ck_assert_uint_eq(sb.flags, META_F_CLEAN);
	m = open_ok(path, false, GiB, err, sizeof(err));
	ck_assert_str_eq(err, "");
	const struct meta_sb *r = meta_sb(m);
	ck_assert_mem_eq(r->volume_uuid, uuid1, 16);
	ck_assert_uint_eq(r->size, GiB);
	ck_assert_uint_eq(r->seq, sb.seq);
	ck_assert_uint_eq(r->version, META_VERSION);
	ck_assert_uint_eq(r->header_size, META_HEADER_SIZE);
	ck_assert_str_eq(r->node, "alpha");
	ck_assert_uint_eq(meta_offset(m), 0);

	/* dump-md shows every field, gen ids as 16 hex digits, flags as words. */
	struct meta_sb d = *r;
	char *text = NULL;
	size_t tlen = 0;
	FILE *f = open_memstream(&text, &tlen);
	ck_assert_ptr_nonnull(f);
	d.gen_current = 0xABCDEF0123456789ull;
	d.gen_history[1] = 0x42;
	d.flags = META_F_CONSISTENT | META_F_PRIMARY | META_F_SPLIT_BRAIN;
	d.bits_set = 3;
	ck_assert_int_eq(meta_dump(&d, f), 0);
	fclose(f);
	ck_assert_ptr_nonnull(strstr(text, "gen current        ABCDEF0123456789\n"));
	ck_assert_ptr_nonnull(strstr(text, "0000000000000000 0000000000000042\n"));
	ck_assert_ptr_nonnull(strstr(text, "flags              CONSISTENT PRIMARY SPLIT_BRAIN\n"));
	ck_assert_ptr_nonnull(strstr(text, "12345678-9abc-def0-0fed-cba987654321"));
	ck_assert_ptr_nonnull(strstr(text, "bits set           3 (12288 bytes out of sync)"));
	ck_assert_ptr_nonnull(strstr(text, "size               1073741824 bytes"));
	ck_assert_ptr_nonnull(strstr(text, "(262144 blocks)"));
	ck_assert_ptr_nonnull(strstr(text, "written by node    alpha"));
	free(text);
	ck_assert_int_eq(meta_close(m), 0);
	tmp_done();
}
END_TEST

START_TEST(create_blank)
{
	const char *path = tmp_path();
	struct meta_create_args a = {.backing_bytes = 10 * MiB, .blank = true, .node = "beta"};
	struct meta_sb sb, sb2;
	struct meta *m;
	char err[META_ERR_LEN];

	memcpy(a.uuid, uuid1, 16);
	/* The bulk-load case: both nodes get the same generation. */
	a.blank_gen = 0x1122334455667788ull;
	ck_assert_int_eq(meta_create_ex(path, &a, &sb, err, sizeof(err)), 0);
	ck_assert_uint_eq(sb.gen_current, 0x1122334455667788ull);
	ck_assert_uint_eq(sb.flags, META_F_CONSISTENT | META_F_UPTODATE | META_F_CLEAN);
	m = open_ok(path, false, 10 * MiB, err, sizeof(err));
	ck_assert_uint_eq(meta_sb(m)->gen_current, 0x1122334455667788ull);
	meta_close(m);
	/* blank_gen 0: a fresh random one each time. */
	a.blank_gen = 0;
	a.force = true;
	ck_assert_int_eq(meta_create_ex(path, &a, &sb, err, sizeof(err)), 0);
	ck_assert_int_eq(meta_create_ex(path, &a, &sb2, err, sizeof(err)), 0);
	ck_assert_uint_ne(sb.gen_current, 0);
	ck_assert_uint_ne(sb2.gen_current, 0);
	ck_assert_uint_ne(sb.gen_current, sb2.gen_current);
	/* Bad arguments. */
	a.bitmap_block_size = 6000;
	ck_assert_int_eq(meta_create_ex(path, &a, NULL, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "6000"));
	a.bitmap_block_size = 0;
	a.backing_bytes = 16ull << 40 | 1;
	ck_assert_int_eq(meta_create_ex(path, &a, NULL, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EFBIG);
	a.backing_bytes = MiB;
	a.node = "a-node-name-that-is-much-longer-than-sixty-three-bytes-and-so-cannot-fit";
	ck_assert_int_eq(meta_create_ex(path, &a, NULL, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EINVAL);
	tmp_done();
}
END_TEST

START_TEST(slot_alternation)
{
	const char *path = tmp_path();
	struct meta_sb sb;
	struct meta *m;
	char err[META_ERR_LEN];
	uint64_t sa, sbq;

	ck_assert_int_eq(md_create(path, false, 64 * MiB, 0, &sb), 0);
	m = open_ok(path, false, 64 * MiB, err, sizeof(err));
	uint64_t seq0 = meta_sb(m)->seq;
	int slot0 = meta_slot(m);
	for (int i = 1; i <= 7; i++) {
		struct meta_sb n = *meta_sb(m);

		n.gen_current = 1000 + (uint64_t)i;
		n.flags |= META_F_PRIMARY;
		n.resync_pos = (uint64_t)i;
		ck_assert_int_eq(meta_write_sb(m, &n), 0);
		ck_assert_uint_eq(meta_sb(m)->seq, seq0 + (uint64_t)i);
		ck_assert_int_eq(meta_slot(m), (slot0 + i) % 2);
		/* Both slots stay valid on disk, one seq apart. */
		ck_assert(raw_slot(path, 0, 0, &sa));
		ck_assert(raw_slot(path, 0, 1, &sbq));
		ck_assert_uint_eq(sa > sbq ? sa - sbq : sbq - sa, 1);
		ck_assert_uint_eq(sa > sbq ? sa : sbq, seq0 + (uint64_t)i);
		/* A fresh open picks the newest. */
		struct meta *o = open_ok(path, false, 64 * MiB, err, sizeof(err));
		ck_assert_str_eq(err, "");
		ck_assert_uint_eq(meta_sb(o)->gen_current, 1000 + (uint64_t)i);
		ck_assert_uint_eq(meta_sb(o)->resync_pos, (uint64_t)i);
		ck_assert_uint_eq(meta_sb(o)->seq, seq0 + (uint64_t)i);
		ck_assert_int_eq(meta_slot(o), meta_slot(m));
		meta_close(o);
	}
	/* What meta_open would refuse is never written. */
	struct meta_sb n = *meta_sb(m);
	n.size += 4096;
	ck_assert_int_eq(meta_write_sb(m, &n), -1);
	ck_assert_int_eq(errno, EINVAL);
	n = *meta_sb(m);
	n.flags |= 1u << 20;
	ck_assert_int_eq(meta_write_sb(m, &n), -1);
	n = *meta_sb(m);
	n.resync_pos = 64 * MiB / 4096 + 1;
	ck_assert_int_eq(meta_write_sb(m, &n), -1);
	n = *meta_sb(m);
	memset(n.node, 'x', sizeof(n.node));
	ck_assert_int_eq(meta_write_sb(m, &n), -1);
	n = *meta_sb(m);
	n.volume_uuid[3] ^= 1;
	ck_assert_int_eq(meta_write_sb(m, &n), -1);
	ck_assert_uint_eq(meta_sb(m)->seq, seq0 + 7);
	meta_close(m);
	tmp_done();
}
END_TEST

/* META_F_FORCED (bit 7) is a known flag: written at offset 52 and read back, named by
 * meta_dump; the next bit up is still refused, and metadata without the flag stays valid. */
START_TEST(forced_flag)
{
	const char *path = tmp_path();
	struct meta *m;
	char err[META_ERR_LEN];
	uint8_t raw[4];
	uint32_t flags;

	ck_assert_int_eq(md_create(path, false, 64 * MiB, 0, NULL), 0);
	m = open_ok(path, false, 64 * MiB, err, sizeof(err));
	ck_assert_uint_eq(meta_sb(m)->flags & META_F_FORCED, 0);
	struct meta_sb n = *meta_sb(m);
	n.gen_current = 0x5151;
	n.flags = META_F_CONSISTENT | META_F_UPTODATE | META_F_PRIMARY | META_F_FORCED;
	ck_assert_int_eq(meta_write_sb(m, &n), 0);
	uint64_t slot = (uint64_t)meta_slot(m) * META_SB_SIZE;
	ck_assert_int_eq(meta_close(m), 0);
	file_rw(path, raw, sizeof(raw), slot + 52, false);
	memcpy(&flags, raw, sizeof(flags));
	ck_assert_uint_eq(le32toh(flags), n.flags);

	m = open_ok(path, false, 64 * MiB, err, sizeof(err));
	ck_assert_str_eq(err, "");
	ck_assert_uint_eq(meta_sb(m)->flags, n.flags);
	ck_assert_uint_eq(meta_sb(m)->gen_current, 0x5151);

	char *text = NULL;
	size_t tlen = 0;
	FILE *f = open_memstream(&text, &tlen);
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(meta_dump(meta_sb(m), f), 0);
	fclose(f);
	ck_assert_ptr_nonnull(
	    strstr(text, "flags              CONSISTENT UPTODATE PRIMARY FORCED\n"));
	free(text);

	n = *meta_sb(m);
	n.flags |= 1u << 8;
	ck_assert_int_eq(meta_write_sb(m, &n), -1);
	ck_assert_int_eq(errno, EINVAL);
	/* Clearing it again is an ordinary write. */
	n = *meta_sb(m);
	n.flags &= ~META_F_FORCED;
	ck_assert_int_eq(meta_write_sb(m, &n), 0);
	ck_assert_int_eq(meta_close(m), 0);
	m = open_ok(path, false, 64 * MiB, err, sizeof(err));
	ck_assert_uint_eq(meta_sb(m)->flags, META_F_CONSISTENT | META_F_UPTODATE | META_F_PRIMARY);
	meta_close(m);
	tmp_done();
}
END_TEST

START_TEST(torn_write)
{
	const char *path = tmp_path();
	struct meta *m;
	char err[META_ERR_LEN];
	uint64_t seq_old, seq_new;
	uint8_t b;

	ck_assert_int_eq(md_create(path, false, 64 * MiB, 0, NULL), 0);
	m = open_ok(path, false, 64 * MiB, err, sizeof(err));
	struct meta_sb n = *meta_sb(m);
	n.gen_current = 77;
	ck_assert_int_eq(meta_write_sb(m, &n), 0);
	n.gen_current = 78;
	ck_assert_int_eq(meta_write_sb(m, &n), 0);
	int newest = meta_slot(m), older = 1 - newest;
	seq_new = meta_sb(m)->seq;
	meta_close(m);

	/* Corrupt one byte of the newest slot's body: its checksum no longer matches. */
	file_rw(path, &b, 1, (uint64_t)newest * META_SB_SIZE + 60, false);
	b ^= 0x40;
	file_rw(path, &b, 1, (uint64_t)newest * META_SB_SIZE + 60, true);
	m = open_ok(path, false, 64 * MiB, err, sizeof(err));
	ck_assert_int_eq(meta_slot(m), older);
	ck_assert_uint_eq(meta_sb(m)->seq, seq_new - 1);
	ck_assert_uint_eq(meta_sb(m)->gen_current, 77);
	char want[128];
	snprintf(want, sizeof(want), "superblock %c has a bad checksum (stored 0x", 'A' + newest);
	ck_assert_msg(strstr(err, want), "unexpected message: %s", err);
	snprintf(want, sizeof(want), "; using %c (seq %llu)", 'A' + older,
	         (unsigned long long)(seq_new - 1));
	ck_assert_msg(strstr(err, want), "unexpected message: %s", err);
	/* The next write goes over the broken slot and repairs it. */
	n = *meta_sb(m);
	n.gen_current = 79;
	ck_assert_int_eq(meta_write_sb(m, &n), 0);
	ck_assert_int_eq(meta_slot(m), newest);
	meta_close(m);
	ck_assert(raw_slot(path, 0, newest, &seq_old));
	ck_assert_uint_eq(seq_old, seq_new);
	m = open_ok(path, false, 64 * MiB, err, sizeof(err));
	ck_assert_str_eq(err, "");
	ck_assert_uint_eq(meta_sb(m)->gen_current, 79);
	meta_close(m);

	/* Both bad: an error naming both slots. */
	for (int s = 0; s < 2; s++) {
		file_rw(path, &b, 1, (uint64_t)s * META_SB_SIZE + 168, false);
		b ^= 1;
		file_rw(path, &b, 1, (uint64_t)s * META_SB_SIZE + 168, true);
	}
	m = (struct meta *)1;
	ck_assert_int_eq(meta_open(path, false, 64 * MiB, &m, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_null(m);
	ck_assert_msg(strstr(err, "no valid superblock") && strstr(err, "superblock A has a bad") &&
	                  strstr(err, "superblock B has a bad") &&
	                  strstr(err, "The metadata is damaged"),
	              "unexpected message: %s", err);
	tmp_done();
}
END_TEST

START_TEST(bad_files)
{
	const char *path = tmp_path();
	struct meta *m = NULL;
	char err[META_ERR_LEN];
	uint8_t sbuf[META_SB_SIZE];

	ck_assert_int_eq(meta_open(path, false, 0, &m, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, ENOENT);
	ck_assert_ptr_nonnull(strstr(err, path));
	/* All zeros, and a short file. */
	int fd = open(path, O_RDWR | O_CREAT, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 8192), 0);
	close(fd);
	ck_assert_int_eq(meta_open(path, false, 0, &m, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "superblock A is blank (all zeros)") &&
	                  strstr(err, "It is not hak metadata"),
	              "message: %s", err);
	ck_assert_int_eq(truncate(path, 100), 0);
	ck_assert_int_eq(meta_open(path, false, 0, &m, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "lies beyond the end"), "message: %s", err);

	/* A newer version, properly checksummed, in both slots. */
	ck_assert_int_eq(md_create(path, false, 64 * MiB, 0, NULL), 0);
	for (int s = 0; s < 2; s++) {
		uint32_t v = htole32(2), crc;

		file_rw(path, sbuf, sizeof(sbuf), (uint64_t)s * META_SB_SIZE, false);
		memcpy(sbuf + 8, &v, 4);
		crc = htole32(crc32c_update(0, sbuf, 168));
		memcpy(sbuf + 168, &crc, 4);
		file_rw(path, sbuf, sizeof(sbuf), (uint64_t)s * META_SB_SIZE, true);
	}
	ck_assert_int_eq(meta_open(path, false, 0, &m, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "superblock B has metadata version 2"), "message: %s", err);

	/* Size mismatch with the backing store, and a truncated bitmap area. */
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(md_create(path, false, 64 * MiB, 0, NULL), 0);
	ck_assert_int_eq(meta_open(path, false, 128 * MiB, &m, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "describes a volume of 67108864 bytes, but the backing store has "
	                          "134217728 bytes"),
	              "message: %s", err);
	m = open_ok(path, false, 0, err, sizeof(err)); /* 0: no size check (dump-md) */
	struct bitmap *bm = bitmap_create(64 * MiB, 4096);
	ck_assert_ptr_nonnull(bm);
	ck_assert_int_eq(truncate(path, META_BM_OFFSET + 100), 0);
	ck_assert_int_eq(meta_load_bitmap(m, bm), -1);
	ck_assert_int_eq(errno, EIO);
	meta_close(m);
	ck_assert_int_eq(meta_open(path, false, 64 * MiB, &m, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "needs 77824 bytes of metadata, but the file has only 73828"),
	              "message: %s", err);
	bitmap_free(bm);
	tmp_done();
}
END_TEST

START_TEST(create_eexist)
{
	const char *path = tmp_path();
	struct meta_create_args a = {.backing_bytes = 64 * MiB, .node = "alpha"};
	struct meta *m;
	char err[META_ERR_LEN];

	memcpy(a.uuid, uuid1, 16);
	ck_assert_int_eq(meta_create_ex(path, &a, NULL, err, sizeof(err)), 0);
	m = open_ok(path, false, 64 * MiB, err, sizeof(err));
	struct meta_sb n = *meta_sb(m);
	n.gen_current = 5;
	ck_assert_int_eq(meta_write_sb(m, &n), 0);
	meta_close(m);
	errno = 0;
	ck_assert_int_eq(meta_create_ex(path, &a, NULL, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EEXIST);
	ck_assert_msg(strstr(err, "already holds hak metadata") && strstr(err, "--force"),
	              "message: %s", err);
	ck_assert_int_eq(md_create(path, false, 64 * MiB, 0, NULL), -1);
	ck_assert_int_eq(errno, EEXIST);
	/* Still the old metadata. */
	m = open_ok(path, false, 64 * MiB, err, sizeof(err));
	ck_assert_uint_eq(meta_sb(m)->gen_current, 5);
	meta_close(m);
	/* --force starts over: no old superblock survives, whatever its seq. */
	a.force = true;
	a.bitmap_block_size = 65536;
	ck_assert_int_eq(meta_create_ex(path, &a, NULL, err, sizeof(err)), 0);
	m = open_ok(path, false, 64 * MiB, err, sizeof(err));
	ck_assert_uint_eq(meta_sb(m)->gen_current, 0);
	ck_assert_uint_eq(meta_sb(m)->bitmap_block_size, 65536);
	ck_assert_uint_eq(meta_sb(m)->seq, 2);
	meta_close(m);
	ck_assert_uint_eq(file_bytes(path), META_BM_OFFSET + 4096);
	tmp_done();
}
END_TEST

/* Over 128 MiB, so the bitmap at 4 KiB (2 pages) is larger than at 1 MiB (1 page). */
#define INT_BACKING (GiB + 12345)

/*
 * A sparse backing file with 0x5a markers in the first and last data blocks and garbage where
 * the metadata goes, then internal metadata with 4 KiB blocks. Returns the data size.
 */
static uint64_t internal_file(const char *path, uint8_t mark[4096])
{
	uint64_t data = meta_data_size(INT_BACKING, 4096, true);
	int fd = open(path, O_RDWR | O_CREAT, 0600);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)INT_BACKING), 0);
	close(fd);
	memset(mark, 0x5a, 4096);
	file_rw(path, mark, 4096, 0, true);
	file_rw(path, mark, 4096, data - 4096, true);
	file_rw(path, mark, 4096, data + 8192, true);
	ck_assert_int_eq(md_create(path, true, 0, 0, NULL), 0);
	ck_assert_uint_eq(file_bytes(path), INT_BACKING);
	return data;
}

START_TEST(internal_layout)
{
	const char *path = tmp_path();
	uint8_t mark[4096], chk[4096];
	struct meta *m;
	char err[META_ERR_LEN];

	/* External: everything is data. Internal: the tail is metadata, 4 KiB-aligned. */
	ck_assert_uint_eq(meta_data_size(GiB, 4096, false), GiB);
	ck_assert_uint_eq(meta_data_size(GiB, 4096, true), GiB - META_BM_OFFSET - 32768);
	ck_assert_uint_eq(meta_data_size(GiB, 1u << 20, true), GiB - META_BM_OFFSET - 4096);
	ck_assert_uint_eq(meta_data_size(INT_BACKING, 4096, true) % 4096, 0);
	ck_assert_uint_eq(meta_data_size(GiB, 1000, true), 0);
	ck_assert_uint_eq(meta_data_size(70000, 4096, true), 0);
	ck_assert_uint_eq(meta_data_size(16ull << 40, 4096, false), 16ull << 40);
	ck_assert_uint_eq(meta_data_size((16ull << 40) + 1, 4096, false), 0);

	/* The data area is untouched; the metadata starts right after it. */
	uint64_t data = internal_file(path, mark);
	file_rw(path, chk, sizeof(chk), 0, false);
	ck_assert_mem_eq(chk, mark, sizeof(mark));
	file_rw(path, chk, sizeof(chk), data - 4096, false);
	ck_assert_mem_eq(chk, mark, sizeof(mark));
	m = open_ok(path, true, 0, err, sizeof(err));
	ck_assert_str_eq(err, "");
	ck_assert_uint_eq(meta_sb(m)->size, data);
	ck_assert_uint_eq(meta_offset(m), data);
	struct bitmap *bm = bitmap_create(data, 4096);
	ck_assert_ptr_nonnull(bm);
	ck_assert_int_eq(meta_load_bitmap(m, bm), 0);
	ck_assert_uint_eq(bitmap_count(bm), 0); /* the garbage was zeroed */
	bitmap_free(bm);
	meta_close(m);
	/* Opened as external, the same file is not hak metadata at offset 0. */
	ck_assert_int_eq(meta_open(path, false, 0, &m, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "no hak metadata magic"), "message: %s", err);
	/* A backing size that disagrees with the metadata finds nothing valid. */
	ck_assert_int_eq(meta_open(path, true, INT_BACKING - 8 * MiB, &m, err, sizeof(err)), -1);
	ck_assert_int_eq(meta_open(path, true, INT_BACKING + 4096, &m, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "fewer than"), "message: %s", err);
	/*
	 * Seen with a smaller backing size, the 4 KiB superblock sits exactly where 1 MiB blocks
	 * would put the metadata; it must not be taken for 1 MiB metadata of that size.
	 */
	uint64_t shrunk = 1073721344;
	ck_assert_uint_eq(meta_data_size(shrunk, 1u << 20, true), data);
	ck_assert_int_eq(meta_open(path, true, shrunk, &m, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "superblock A, found at offset 1073643520") &&
	                  strstr(err, "was it resized?"),
	              "message: %s", err);
	tmp_done();
}
END_TEST

START_TEST(internal_recreate)
{
	const char *path = tmp_path();
	struct meta_create_args a = {.internal = true, .bitmap_block_size = 1u << 20, .node = "b"};
	uint8_t mark[4096], chk[4096];
	struct meta *m;
	char err[META_ERR_LEN];
	uint64_t data = internal_file(path, mark);

	/* Existing internal metadata at another block size's offset still counts for EEXIST. */
	memcpy(a.uuid, uuid1, 16);
	ck_assert_int_eq(meta_create_ex(path, &a, NULL, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, EEXIST);
	/* Forced with 1 MiB blocks: the probe finds the new offset, the data stays intact. */
	a.force = true;
	ck_assert_int_eq(meta_create_ex(path, &a, NULL, err, sizeof(err)), 0);
	m = open_ok(path, true, INT_BACKING, err, sizeof(err));
	ck_assert_str_eq(err, "");
	ck_assert_uint_eq(meta_sb(m)->bitmap_block_size, 1u << 20);
	ck_assert_uint_eq(meta_offset(m), meta_data_size(INT_BACKING, 1u << 20, true));
	ck_assert_uint_gt(meta_offset(m), data);
	meta_close(m);
	file_rw(path, chk, sizeof(chk), data - 4096, false);
	ck_assert_mem_eq(chk, mark, sizeof(mark));
	/* And back to 4 KiB: the 1 MiB superblock sits in the new metadata area and is wiped. */
	a.bitmap_block_size = 4096;
	ck_assert_int_eq(meta_create_ex(path, &a, NULL, err, sizeof(err)), 0);
	m = open_ok(path, true, INT_BACKING, err, sizeof(err));
	ck_assert_uint_eq(meta_sb(m)->bitmap_block_size, 4096);
	ck_assert_uint_eq(meta_offset(m), data);
	meta_close(m);
	/* Too small for internal metadata. */
	ck_assert_int_eq(truncate(path, 60000), 0);
	a.bitmap_block_size = 0;
	ck_assert_int_eq(meta_create_ex(path, &a, NULL, err, sizeof(err)), -1);
	ck_assert_int_eq(errno, ENOSPC);
	ck_assert_int_eq(meta_open(path, true, 0, &m, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "too small for internal metadata"), "message: %s", err);
	tmp_done();
}
END_TEST

START_TEST(bitmap_persist_dirty_pages)
{
	const char *path = tmp_path();
	/* 4 bitmap pages, the last one partial (10 bits short). */
	uint64_t nbits = 4 * BITMAP_PAGE_BITS - 10, data = nbits * 4096;
	uint64_t bmoff = META_BM_OFFSET;
	uint8_t page[BITMAP_PAGE_BYTES], mark[BITMAP_PAGE_BYTES];
	struct meta *m;
	char err[META_ERR_LEN];

	ck_assert_int_eq(md_create(path, false, data, 4096, NULL), 0);
	ck_assert_uint_eq(file_bytes(path), bmoff + 4 * BITMAP_PAGE_BYTES);
	/* A marker in every bitmap page on disk: pages the flush does not write keep it. */
	memset(mark, 0xa5, sizeof(mark));
	for (int p = 0; p < 4; p++)
		file_rw(path, mark, sizeof(mark), bmoff + (uint64_t)p * BITMAP_PAGE_BYTES, true);

	m = open_ok(path, false, data, err, sizeof(err));
	struct bitmap *bm = bitmap_create(data, 4096);
	ck_assert_ptr_nonnull(bm);
	bitmap_set_bit(bm, BITMAP_PAGE_BITS + 3);         /* page 1, byte 0, bit 3 */
	bitmap_set_bits(bm, 3 * BITMAP_PAGE_BITS - 4, 2); /* page 2, last byte, bits 4-5 */
	ck_assert_uint_eq(bitmap_dirty_pages(bm), 2);
	ck_assert_int_eq(meta_flush_bitmap(m, bm), 0);
	ck_assert_uint_eq(bitmap_dirty_pages(bm), 0);
	for (int p = 0; p < 4; p++) {
		file_rw(path, page, sizeof(page), bmoff + (uint64_t)p * BITMAP_PAGE_BYTES, false);
		if (p == 0 || p == 3) {
			ck_assert_mem_eq(page, mark, sizeof(page));
			continue;
		}
		/* Little-endian bit order: bit i is byte i / 8, bit i % 8. */
		uint8_t want[BITMAP_PAGE_BYTES] = {0};
		if (p == 1)
			want[0] = 1u << 3;
		else
			want[BITMAP_PAGE_BYTES - 1] = 0x30;
		ck_assert_mem_eq(page, want, sizeof(page));
	}
	/* Nothing dirty: a flush writes nothing, so a new marker in page 1 survives. */
	file_rw(path, mark, sizeof(mark), bmoff + BITMAP_PAGE_BYTES, true);
	ck_assert_int_eq(meta_flush_bitmap(m, bm), 0);
	file_rw(path, page, sizeof(page), bmoff + BITMAP_PAGE_BYTES, false);
	ck_assert_mem_eq(page, mark, sizeof(page));

	/* Load: the markers become bits, except past nbits in the last page. */
	struct bitmap *lb = bitmap_create(data, 4096);
	ck_assert_ptr_nonnull(lb);
	bitmap_set_bit(lb, 5); /* replaced, not OR-ed */
	bitmap_set_bit(lb, 2 * BITMAP_PAGE_BITS + 7);
	ck_assert_int_eq(meta_load_bitmap(m, lb), 0);
	ck_assert_uint_eq(bitmap_dirty_pages(lb), 0);
	uint64_t want = 0;
	for (uint64_t b = 0; b < nbits; b++) {
		uint64_t p = b / BITMAP_PAGE_BITS;
		bool v = p == 2 ? b == 3 * BITMAP_PAGE_BITS - 4 || b == 3 * BITMAP_PAGE_BITS - 3
		                : (0xa5 >> (b % 8)) & 1;
		want += v;
		if (bitmap_test(lb, b) != v)
			ck_abort_msg("bit %llu is %d after load, expected %d",
			             (unsigned long long)b, bitmap_test(lb, b), v);
	}
	ck_assert_uint_eq(bitmap_count(lb), want);
	ck_assert(!bitmap_test(lb, 2 * BITMAP_PAGE_BITS + 7));
	/* Geometry mismatch is refused. */
	struct bitmap *other = bitmap_create(data, 8192);
	ck_assert_ptr_nonnull(other);
	ck_assert_int_eq(meta_load_bitmap(m, other), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(meta_flush_bitmap(m, other), -1);
	bitmap_free(other);
	bitmap_free(lb);
	bitmap_free(bm);
	meta_close(m);
	tmp_done();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("meta");
	TCase *c = tcase_create("crc32c");
	TCase *t = tcase_create("core");

	tcase_add_test(c, crc32c_vectors);
	tcase_set_timeout(t, 120);
	tcase_add_unchecked_fixture(t, tmp_setup, tmp_teardown);
	tcase_add_test(t, create_open_roundtrip);
	tcase_add_test(t, create_blank);
	tcase_add_test(t, slot_alternation);
	tcase_add_test(t, forced_flag);
	tcase_add_test(t, torn_write);
	tcase_add_test(t, bad_files);
	tcase_add_test(t, create_eexist);
	tcase_add_test(t, internal_layout);
	tcase_add_test(t, internal_recreate);
	tcase_add_test(t, bitmap_persist_dirty_pages);
	suite_add_tcase(s, c);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
