/*
 * test/unit/throttle_test.c
 *		Unit tests of wi_throttle_seconds (src/net/retry_after.c) outside the
 *		server: which responses throttle a whole source, for how long, and
 *		what is named as the cause; what does not throttle.  Prints one
 *		"test NAME ... ok|FAILED" line per case for test/run to count; exits
 *		non-zero on a failure.
 */
#include "postgres_fe.h"

#include "retry_after.h"

#define NOW		((time_t) 1764547200)	/* 2025-12-01 00:00:00 UTC */

static int	failures = 0;

static void
check(const char *name, long status, WiRateHeaders h, long expected, const char *expected_by)
{
	const char *by = NULL;
	long		got = wi_throttle_seconds(status, &h, NOW, &by);
	bool		ok = got == expected && (expected < 0 || (by != NULL && strcmp(by, expected_by) == 0));

	printf("test %-44s ... %s\n", name, ok ? "ok" : "FAILED");
	if (!ok)
	{
		printf("  got %ld (%s), expected %ld (%s)\n", got, by ? by : "-", expected,
			   expected_by ? expected_by : "-");
		failures++;
	}
}

int
main(void)
{
	WiRateHeaders none = {0};
	WiRateHeaders h;

	h = none; h.retry_after = "3";
	check("429 with Retry-After: 3", 429, h, 3, "HTTP 429 Retry-After");
	check("503 with Retry-After: 3", 503, h, 3, "HTTP 503 Retry-After");
	check("500 with Retry-After: not a throttle", 500, h, -1, NULL);
	check("200 with Retry-After: not a throttle", 200, h, -1, NULL);
	h = none; h.retry_after = "0";
	check("429 with Retry-After: 0 is no pause", 429, h, -1, NULL);
	h = none; h.retry_after = "Mon, 01 Dec 2025 00:00:07 GMT";
	check("429 with a Retry-After date", 429, h, 7, "HTTP 429 Retry-After");
	h = none; h.retry_after = "99999999999";
	check("Retry-After capped at a day", 429, h, WI_MAX_RETRY_AFTER_S, "HTTP 429 Retry-After");
	check("429 without any header: no throttle", 429, none, -1, NULL);

	h = none; h.x_remaining = "0"; h.x_reset = "1764547230";
	check("GitHub: remaining 0, reset at epoch+30", 200, h, 30, "X-RateLimit-Reset");
	check("GitHub: on a 403 too", 403, h, 30, "X-RateLimit-Reset");
	h.x_remaining = "1";
	check("GitHub: remaining 1 is no throttle", 200, h, -1, NULL);
	h.x_remaining = "0"; h.x_reset = "1764547100";
	check("GitHub: a reset in the past is none", 200, h, -1, NULL);
	h.x_reset = "12";
	check("X-RateLimit-Reset as seconds from now", 200, h, 12, "X-RateLimit-Reset");
	h.x_reset = "12abc";
	check("X-RateLimit-Reset garbage ignored", 200, h, -1, NULL);
	h.x_remaining = " 0 "; h.x_reset = " 5";
	check("blanks around the values", 200, h, 5, "X-RateLimit-Reset");
	h.x_remaining = "00000000000000000000000000"; h.x_reset = "5";
	check("remaining 0 written long", 200, h, 5, "X-RateLimit-Reset");
	h.x_remaining = "-0"; h.x_reset = "5";
	check("remaining -0 is not a count", 200, h, -1, NULL);
	h.x_remaining = "0"; h.x_reset = "99999999999999999999999999999";
	check("a huge reset is capped at a day", 200, h, WI_MAX_RETRY_AFTER_S, "X-RateLimit-Reset");

	h = none; h.remaining = "0"; h.reset = "4";
	check("IETF: RateLimit-Remaining 0, Reset 4", 200, h, 4, "RateLimit-Reset");
	h.remaining = "10";
	check("IETF: remaining 10 is no throttle", 200, h, -1, NULL);

	h = none; h.ratelimit = "\"default\";r=0;t=30";
	check("IETF RateLimit field r=0;t=30", 200, h, 30, "RateLimit");
	h.ratelimit = "limit=100, remaining=0, reset=9";
	check("IETF RateLimit field, older form", 200, h, 9, "RateLimit");
	h.ratelimit = "\"default\";r=5;t=30";
	check("IETF RateLimit field r=5 is no throttle", 200, h, -1, NULL);
	h.ratelimit = "\"default\";r=1000000000;t=30";
	check("a remaining count of 10^9 is no throttle", 200, h, -1, NULL);
	h.ratelimit = "\"default\";rr=0;t=30";
	check("a key only at an item's start", 200, h, -1, NULL);
	h.ratelimit = "r=0;t=";
	check("an empty value is none", 200, h, -1, NULL);
	h.ratelimit = "r=0;t=123456789012345678901234567890";
	check("an overlong value is none", 200, h, -1, NULL);

	h = none; h.retry_after = "2"; h.x_remaining = "0"; h.x_reset = "1764547260";
	check("429 Retry-After wins over X-RateLimit", 429, h, 2, "HTTP 429 Retry-After");

	return failures == 0 ? 0 : 1;
}
