/*
 * test/fuzz/retry_after_fuzz.c
 *		libFuzzer target for src/net/retry_after.c, the Retry-After parser.  The
 *		input up to its first NUL is the header value; its first bytes also
 *		pick a date and a delay for the round-trip checks.  Invariants:
 *		- the result is -1 (ignored) or within [0, WI_MAX_RETRY_AFTER_S];
 *		- digits only: the number's value, capped (leading zeros, any length);
 *		- empty, or not starting with a digit-only run or a letter: -1;
 *		- an HTTP-date: later "now" never gives a longer wait; one second
 *		  later gives one second less while the wait is between the bounds;
 *		- an HTTP-date formatted from the input's time, in each of the three
 *		  forms RFC 9110 says a recipient must accept (IMF-fixdate, RFC 850,
 *		  asctime; RFC 850's two-digit years for 1971..2069 only), gives
 *		  exactly the seconds from "now" to it, capped, and 0 once it has
 *		  passed.
 *		A broken invariant aborts (a crash for libFuzzer).
 */
#include "postgres_fe.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "retry_after.h"

#define CAP		WI_MAX_RETRY_AFTER_S
#define NOW		((time_t) 1767225600)	/* 2026-01-01 00:00:00 UTC */

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define require(cond) \
	do { if (!(cond)) { fprintf(stderr, "invariant broken at %s:%d: %s\n", __FILE__, __LINE__, #cond); abort(); } } while (0)

static bool
in_range(long r)
{
	return r == -1 || (r >= 0 && r <= CAP);
}

/* The value of a digits-only string, capped, without arithmetic overflow. */
static long
capped_value(const char *s)
{
	long		v = 0;

	while (*s == '0')
		s++;
	if (strlen(s) > 6)
		return CAP;
	for (; *s; s++)
		v = v * 10 + (*s - '0');
	return Min(v, CAP);
}

static void
check_value(const char *s)
{
	long		r = wi_retry_after_seconds(s, NOW);
	size_t		len = strlen(s);

	require(in_range(r));
	if (len > 0 && strspn(s, "0123456789") == len)
	{
		require(r == capped_value(s));
		return;
	}
	if (len == 0 || !((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z')))
	{
		require(r == -1);
		return;
	}
	if (r < 0)
		return;
	/* A date: the wait shrinks as now advances, second for second. */
	{
		long		later = wi_retry_after_seconds(s, NOW + 1);
		long		earlier = wi_retry_after_seconds(s, NOW - 1);

		require(later >= 0 && later <= r && earlier >= r);
		if (r > 0 && r < CAP)
			require(later == r - 1 && earlier == r + 1);
		require(wi_retry_after_seconds(s, NOW + r) == 0 || r == CAP);
	}
}

/* A date made from the input, in the given strftime form, read back. */
static void
check_roundtrip(const char *fmt, time_t when, long ahead)
{
	struct tm	tm;
	char		buf[64];
	long		expect = Min(ahead, CAP);

	require(gmtime_r(&when, &tm) != NULL);
	require(strftime(buf, sizeof(buf), fmt, &tm) > 0);
	require(wi_retry_after_seconds(buf, when - ahead) == expect);
	require(wi_retry_after_seconds(buf, when + 1 + ahead) == 0);
	require(wi_retry_after_seconds(buf, when) == 0);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char	   *s;

	if (size > 100000)
		return 0;
	s = malloc(size + 1);
	memcpy(s, data, size);
	s[size] = '\0';
	check_value(s);

	if (size >= 7)
	{
		/* 1970 .. 2106, and a wait of 0 .. CAP + a bit */
		uint32_t	t;
		uint32_t	a;
		time_t		when;
		long		ahead;

		memcpy(&t, data, 4);
		a = data[4] | (data[5] << 8) | ((uint32_t) data[6] << 16);
		when = (time_t) t;
		ahead = (long) (a % (CAP + 1000));
		if (when - ahead > 0)
		{
			check_roundtrip("%a, %d %b %Y %H:%M:%S GMT", when, ahead);
			/* two-digit years: libcurl reads 71..99 as 19xx, 00..70 as 20xx */
			if (when >= (time_t) 31536000 && when < (time_t) 3155760000)
				check_roundtrip("%A, %d-%b-%y %H:%M:%S GMT", when, ahead);
			check_roundtrip("%a %b %e %H:%M:%S %Y", when, ahead);
		}
	}
	free(s);
	return 0;
}
