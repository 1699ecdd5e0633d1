/* SPDX-License-Identifier: MIT */
/*
 * Byte-order field access through unaligned pointers. The on-disk formats (metadata
 * superblocks, bitmap, activity log) are little-endian whatever the host; the wire formats (NBD,
 * replication frames, heartbeats) are big-endian, network order. Every integer that crosses a
 * disk or a socket goes through these, never through a cast.
 */
#ifndef HAK_ENDIAN_H
#define HAK_ENDIAN_H

#include <endian.h>
#include <stdint.h>
#include <string.h>

/*
 * le_put16 le_put32 le_put64 le_get16 le_get32 le_get64
 * be_put16 be_put32 be_put64 be_get16 be_get32 be_get64
 * put stores v at p in the byte order, get loads it; p need not be aligned.
 */
#define HAK_ENDIAN_ACCESSORS(order, bits)                                                          \
	static inline void order##_put##bits(uint8_t *p, uint##bits##_t v)                         \
	{                                                                                          \
		v = hto##order##bits(v);                                                           \
		memcpy(p, &v, sizeof(v));                                                          \
	}                                                                                          \
	static inline uint##bits##_t order##_get##bits(const uint8_t *p)                           \
	{                                                                                          \
		uint##bits##_t v;                                                                  \
		memcpy(&v, p, sizeof(v));                                                          \
		return order##bits##toh(v);                                                        \
	}

HAK_ENDIAN_ACCESSORS(le, 16)
HAK_ENDIAN_ACCESSORS(le, 32)
HAK_ENDIAN_ACCESSORS(le, 64)
HAK_ENDIAN_ACCESSORS(be, 16)
HAK_ENDIAN_ACCESSORS(be, 32)
HAK_ENDIAN_ACCESSORS(be, 64)

#undef HAK_ENDIAN_ACCESSORS

#endif
