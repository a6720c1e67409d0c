/*
 * siphash.h
 *		SipHash-2-4 (Aumasson and Bernstein), a keyed hash: without the
 *		128-bit key, no one can choose inputs that share a hash code, as one
 *		can for PostgreSQL's unseeded hash_bytes (lookup3).  Pure C
 *		(siphash.c), built into the library and, on its own, into
 *		test/unit/siphash_test.
 *
 * IDENTIFICATION
 *		src/base/siphash.h
 */
#ifndef WI_SIPHASH_H
#define WI_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

#define WI_SIPHASH_KEY_BYTES	16

extern uint64_t wi_siphash24(const unsigned char key[WI_SIPHASH_KEY_BYTES], const unsigned char *in, size_t len);

#endif							/* WI_SIPHASH_H */
