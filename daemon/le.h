/* SPDX-License-Identifier: MIT */
/*
 * Little-endian field access for the on-disk formats (metadata superblocks, bitmap, activity
 * log), which are little-endian whatever the host; the wire formats are big-endian (nbd_proto.h).
 */
#ifndef HAK_LE_H
#define HAK_LE_H

#include <endian.h>
#include <stdint.h>
#include <string.h>

static inline void le_put16(uint8_t *p, uint16_t v)
{
	v = htole16(v);
	memcpy(p, &v, 2);
}

static inline void le_put32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, 4);
}

static inline void le_put64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, 8);
}

static inline uint16_t le_get16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, 2);
	return le16toh(v);
}

static inline uint32_t le_get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return le32toh(v);
}

static inline uint64_t le_get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return le64toh(v);
}

#endif
