/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for the metadata reader: any file must give either metadata that works or
 * one error message, never a crash, a leak or undefined behaviour.
 *
 * Input: u64 little-endian backing size, one byte of options, then the metadata file. Options
 * bit 0/1: recompute the checksum of superblock A/B first, so the fuzzer gets past the crc into
 * the field checks; bit 2: open as internal metadata (the backing size then defaults to the file
 * size when it is 0).
 */
#include <endian.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "meta/bitmap.h"
#include "lib/crc32c.h"
#include "meta/meta.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fix_crc(uint8_t *file, size_t len, size_t off)
{
	uint32_t crc;

	if (len < off + META_HEADER_SIZE)
		return;
	crc = htole32(crc32c_update(0, file + off, META_HEADER_SIZE - 4));
	memcpy(file + off + META_HEADER_SIZE - 4, &crc, 4);
}

/* Whatever meta_open accepted must work: load, dump, write, and read back the same. */
static void exercise(struct meta *m, const char *path, bool internal, uint64_t backing)
{
	const struct meta_sb *sb = meta_sb(m);
	struct bitmap *bm = bitmap_create(sb->size, sb->bitmap_block_size);
	struct meta *again = NULL;
	char err[META_ERR_LEN];
	FILE *null = fopen("/dev/null", "w");

	if (!bm || !null || meta_dump(sb, null) < 0)
		abort();
	/* The file was checked to hold the whole bitmap, so loading must succeed. */
	if (meta_load_bitmap(m, bm) < 0 || bitmap_dirty_pages(bm) != 0)
		abort();
	struct meta_sb n = *sb;
	n.bits_set = bitmap_count(bm);
	n.gen_history[1] = n.gen_history[0];
	n.gen_history[0] = n.gen_current;
	n.gen_current++;
	if (meta_write_sb(m, &n) < 0)
		abort();
	bitmap_set_bit(bm, bitmap_nbits(bm) - 1);
	if (meta_flush_bitmap(m, bm) < 0)
		abort();
	if (meta_open(path, internal, backing, &again, err, sizeof(err)) < 0 ||
	    meta_sb(again)->seq != n.seq + 1 || meta_sb(again)->gen_current != n.gen_current ||
	    meta_offset(again) != meta_offset(m))
		abort();
	meta_close(again);
	fclose(null);
	bitmap_free(bm);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct meta *m = NULL;
	char path[64], err[META_ERR_LEN];
	uint64_t backing;
	uint8_t opt, *file;
	size_t len;
	int fd;

	if (size < 9)
		return 0;
	memcpy(&backing, data, 8);
	backing = le64toh(backing);
	opt = data[8];
	len = size - 9;
	file = malloc(len ? len : 1);
	if (!file)
		return 0;
	memcpy(file, data + 9, len);
	if (opt & 1)
		fix_crc(file, len, 0);
	if (opt & 2)
		fix_crc(file, len, META_SB_SIZE);
	fd = memfd_create("fuzz_meta", MFD_CLOEXEC);
	if (fd < 0 || write(fd, file, len) != (ssize_t)len)
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	if (meta_open(path, opt & 4, backing, &m, err, sizeof(err)) == 0)
		exercise(m, path, opt & 4, backing);
	else if (!err[0] || !memchr(err, '\0', sizeof(err)))
		abort();
	meta_close(m);
	close(fd);
	free(file);
	return 0;
}
