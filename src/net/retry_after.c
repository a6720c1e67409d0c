/*
 * retry_after.c
 *		What a response says about when to ask again, as seconds: the
 *		Retry-After header of a 429 or 503 (for the job), and whether the
 *		whole source must hold off (a throttle, for the scheduler): a 429 or
 *		503 with Retry-After, or rate-limit headers saying the budget is spent
 *		(X-RateLimit-Remaining: 0 with X-RateLimit-Reset, GitHub's; the IETF
 *		draft's RateLimit-Remaining/RateLimit-Reset, or its RateLimit field).
 *		Pure functions on strings (HTTP-dates through libcurl's curl_getdate):
 *		no SQL, no palloc or ereport, so the fuzz target (test/fuzz) and the
 *		unit test run them on their own.  http.c reads the headers.
 *
 * IDENTIFICATION
 *		src/net/retry_after.c
 */
#ifdef FRONTEND
#include "postgres_fe.h"
#else
#include "postgres.h"
#endif

#include <ctype.h>
#include <limits.h>

#include <curl/curl.h>

#include "retry_after.h"

/*
 * Retry-After, strictly: delay-seconds (digits only) or an HTTP-date (which
 * starts with the day's name); anything else is ignored (-1).  Capped at a
 * day (WI_MAX_RETRY_AFTER_S); a date before now is 0.
 */
long
wi_retry_after_seconds(const char *value, time_t now)
{
	size_t		len = strlen(value);

	if (len > 0 && strspn(value, "0123456789") == len)
	{
		long		secs = 0;

		for (size_t i = 0; i < len && secs < WI_MAX_RETRY_AFTER_S; i++)
			secs = secs * 10 + (value[i] - '0');
		return Min(secs, WI_MAX_RETRY_AFTER_S);
	}
	if (isalpha((unsigned char) value[0]))
	{
		time_t		when = curl_getdate(value, NULL);

		if (when != -1)
		{
			double		secs = difftime(when, now);

			return (long) Max(0, Min(secs, (double) WI_MAX_RETRY_AFTER_S));
		}
	}
	return -1;
}

/* A header value that is a decimal integer (surrounding blanks allowed), capped; -1 if not. */
static long
parse_count(const char *value, long cap)
{
	long		n = 0;
	bool		digits = false;

	if (value == NULL)
		return -1;
	while (*value == ' ' || *value == '\t')
		value++;
	for (; *value >= '0' && *value <= '9'; value++)
	{
		digits = true;
		if (n < cap)
			n = n * 10 + (*value - '0');
	}
	while (*value == ' ' || *value == '\t')
		value++;
	return (digits && *value == '\0') ? Min(n, cap) : -1;
}

/*
 * A reset: seconds from now, or (from WI_EPOCH_RESET on, as GitHub sends)
 * the Unix time of the reset.  -1 if not a count.
 */
static long
reset_seconds(const char *value, time_t now)
{
	long		n = parse_count(value, LONG_MAX / 10);

	if (n >= WI_EPOCH_RESET)
		n = (long) Max(0, difftime((time_t) n, now));
	return n < 0 ? -1 : Min(n, WI_MAX_RETRY_AFTER_S);
}

/*
 * The value of key in a list of key=value items (the IETF draft's RateLimit
 * field: "default";r=0;t=30, or its older form remaining=0, reset=30), or
 * -1: a reset (is_reset) or a count.  key is matched at an item's start only.
 */
static long
item_value(const char *field, const char *key, bool is_reset, time_t now)
{
	size_t		klen = strlen(key);
	const char *p = field;

	while ((p = strstr(p, key)) != NULL)
	{
		bool		at_start = (p == field || strchr(" ;,\t", p[-1]) != NULL);

		if (at_start && p[klen] == '=')
		{
			char		buf[24];
			size_t		n = strcspn(p + klen + 1, " ;,\t");

			if (n == 0 || n >= sizeof(buf))
				return -1;
			memcpy(buf, p + klen + 1, n);
			buf[n] = '\0';
			return is_reset ? reset_seconds(buf, now) : parse_count(buf, 1);
		}
		p += klen;
	}
	return -1;
}

/*
 * Seconds the whole source must hold off new fetches after this response,
 * or -1 if it says nothing of the kind; *by names what said so.  Only a
 * positive wait is a throttle.
 */
long
wi_throttle_seconds(long status, const WiRateHeaders *h, time_t now, const char **by)
{
	long		secs = -1;

	if ((status == 429 || status == 503) && h->retry_after != NULL &&
		(secs = wi_retry_after_seconds(h->retry_after, now)) > 0)
		*by = status == 429 ? "HTTP 429 Retry-After" : "HTTP 503 Retry-After";
	else if (parse_count(h->x_remaining, 1) == 0 && (secs = reset_seconds(h->x_reset, now)) > 0)
		*by = "X-RateLimit-Reset";
	else if (parse_count(h->remaining, 1) == 0 && (secs = reset_seconds(h->reset, now)) > 0)
		*by = "RateLimit-Reset";
	else if (h->ratelimit != NULL &&
			 (item_value(h->ratelimit, "r", false, now) == 0 ||
			  item_value(h->ratelimit, "remaining", false, now) == 0) &&
			 ((secs = item_value(h->ratelimit, "t", true, now)) > 0 ||
			  (secs = item_value(h->ratelimit, "reset", true, now)) > 0))
		*by = "RateLimit";
	else
		secs = -1;
	return secs;
}
