/* SPDX-License-Identifier: MIT */
/*
 * CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of the metadata
 * superblocks and, later, of resync and verify blocks. Uses the SSE4.2 crc32 instruction when
 * the CPU has it, otherwise a slicing-by-8 table. Both give identical results; thread-safe.
 */
#ifndef HAK_CRC32C_H
#define HAK_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/*
 * Continue a CRC over len more bytes; start with crc = 0. Chaining calls over consecutive pieces
 * gives the CRC of the concatenation: crc32c_update(0, "123456789", 9) == 0xE3069283.
 */
uint32_t crc32c_update(uint32_t crc, const void *buf, size_t len);
/* The portable table version, exposed so tests can compare it with the hardware one. */
uint32_t crc32c_update_sw(uint32_t crc, const void *buf, size_t len);

#endif
