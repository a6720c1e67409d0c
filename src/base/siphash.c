/*
 * siphash.c
 *		SipHash-2-4 of a byte string under a 128-bit key, as the reference
 *		implementation computes it (little-endian words; the test vectors of
 *		the paper are checked by test/unit/siphash_test).  No PostgreSQL
 *		calls, no allocation.
 *
 * IDENTIFICATION
 *		src/base/siphash.c
 */
#include "siphash.h"

#define ROTL(x, b)	(uint64_t) (((x) << (b)) | ((x) >> (64 - (b))))

#define SIPROUND \
	do { \
		v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32); \
		v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2; \
		v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0; \
		v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32); \
	} while (0)

static uint64_t
le64(const unsigned char *p)
{
	uint64_t	v = 0;

	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

uint64_t
wi_siphash24(const unsigned char key[WI_SIPHASH_KEY_BYTES], const unsigned char *in, size_t len)
{
	uint64_t	k0 = le64(key);
	uint64_t	k1 = le64(key + 8);
	uint64_t	v0 = UINT64_C(0x736f6d6570736575) ^ k0;
	uint64_t	v1 = UINT64_C(0x646f72616e646f6d) ^ k1;
	uint64_t	v2 = UINT64_C(0x6c7967656e657261) ^ k0;
	uint64_t	v3 = UINT64_C(0x7465646279746573) ^ k1;
	uint64_t	last = (uint64_t) len << 56;
	size_t		whole = len - len % 8;

	for (size_t i = 0; i < whole; i += 8)
	{
		uint64_t	m = le64(in + i);

		v3 ^= m;
		SIPROUND;
		SIPROUND;
		v0 ^= m;
	}
	for (size_t i = whole; i < len; i++)
		last |= (uint64_t) in[i] << (8 * (i - whole));
	v3 ^= last;
	SIPROUND;
	SIPROUND;
	v0 ^= last;
	v2 ^= 0xff;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}
