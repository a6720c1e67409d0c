/*
 * ledger_collide.c: event ids whose ledger keys all hash to one value
 * under PostgreSQL's unseeded hash_bytes (lookup3): hashtext(PREFIX || id)
 * is the same for each.  The key is PREFIX (at most 11 bytes: the source's
 * number and ':') and the id, 24 bytes in all: the first 12-byte block is
 * the prefix and random characters, the second is solved so that the state
 * after it is a fixed target (mix() is invertible), and is kept when each of
 * its bytes is an allowed character (about 1 in 300 000 tries).
 *
 * Usage: ledger_collide PREFIX COUNT [SEED]   (one id a line; with a long
 * prefix there are few such ids, and some repeat: keep the first of each)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define rot(x, k) (((x) << (k)) | ((x) >> (32 - (k))))
#define mix(a, b, c) \
{ \
	a -= c; a ^= rot(c, 4); c += b; \
	b -= a; b ^= rot(a, 6); a += c; \
	c -= b; c ^= rot(b, 8); b += a; \
	a -= c; a ^= rot(c, 16); c += b; \
	b -= a; b ^= rot(a, 19); a += c; \
	c -= b; c ^= rot(b, 4); b += a; \
}
#define unmix(a, b, c) \
{ \
	b -= a; c ^= rot(b, 4); c += b; \
	a -= c; b ^= rot(a, 19); b += a; \
	c -= b; a ^= rot(c, 16); a += c; \
	b -= a; c ^= rot(b, 8); c += b; \
	a -= c; b ^= rot(a, 6); b += a; \
	c -= b; a ^= rot(c, 4); a += c; \
}
#define KEYLEN 24

/* Printable ASCII less space and the characters quoting makes awkward. */
static int
allowed(unsigned c)
{
	return c > 0x20 && c < 0x7f && c != '\'' && c != '"' && c != '\\' && c != '$';
}

static uint32_t
word(const unsigned char *k)
{
	return k[0] | (uint32_t) k[1] << 8 | (uint32_t) k[2] << 16 | (uint32_t) k[3] << 24;
}

static uint64_t rng;

/* splitmix64: its high bits, a printable character at a time */
static unsigned
next_char(void)
{
	for (;;)
	{
		uint64_t	z = (rng += UINT64_C(0x9e3779b97f4a7c15));

		z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
		z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
		z ^= z >> 31;
		if (allowed((unsigned) (z >> 57)))
			return (unsigned) (z >> 57);
	}
}

int
main(int argc, char **argv)
{
	const char *prefix;
	size_t		plen;
	long		want, made = 0;
	uint32_t	init = 0x9e3779b9 + KEYLEN + 3923095;
	uint32_t	ta = 0x12345678, tb = 0x9abcdef0, tc = 0x0badcafe;	/* the target state */
	unsigned char key[KEYLEN + 1];

	if (argc < 3)
	{
		fprintf(stderr, "usage: %s PREFIX COUNT [SEED]\n", argv[0]);
		return 2;
	}
	prefix = argv[1];
	plen = strlen(prefix);
	want = atol(argv[2]);
	rng = argc > 3 ? strtoull(argv[3], NULL, 10) : 0;
	if (plen > 11)
	{
		fprintf(stderr, "prefix too long\n");
		return 2;
	}
	unmix(ta, tb, tc);			/* the state the second block must bring */
	memcpy(key, prefix, plen);
	key[KEYLEN] = '\0';
	while (made < want)
	{
		uint32_t	a = init, b = init, c = init;
		uint32_t	w[3];
		int			ok = 1;

		for (size_t i = plen; i < 12; i++)
			key[i] = (unsigned char) next_char();
		a += word(key); b += word(key + 4); c += word(key + 8);
		mix(a, b, c);
		w[0] = ta - a; w[1] = tb - b; w[2] = tc - c;
		for (int i = 0; i < 12 && ok; i++)
		{
			unsigned char ch = (unsigned char) (w[i / 4] >> (8 * (i % 4)));

			ok = allowed(ch);
			key[12 + i] = ch;
		}
		if (!ok)
			continue;
		puts((char *) key + plen);
		made++;
	}
	return 0;
}
