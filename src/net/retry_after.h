/*
 * retry_after.h
 *		What a response says about when to ask again (retry_after.c).
 *
 * IDENTIFICATION
 *		src/net/retry_after.h
 */
#ifndef WI_RETRY_AFTER_H
#define WI_RETRY_AFTER_H

#include <time.h>

/* Longest Retry-After honoured, in seconds. */
#define WI_MAX_RETRY_AFTER_S	(24L * 3600L)

/* A rate-limit reset at or past this is a Unix time (GitHub's), below it seconds from now. */
#define WI_EPOCH_RESET		1000000000L

/* The response headers that can throttle a source; NULL: absent. */
typedef struct WiRateHeaders
{
	const char *retry_after;	/* Retry-After */
	const char *x_remaining;	/* X-RateLimit-Remaining */
	const char *x_reset;		/* X-RateLimit-Reset */
	const char *remaining;		/* RateLimit-Remaining */
	const char *reset;			/* RateLimit-Reset */
	const char *ratelimit;		/* RateLimit */
} WiRateHeaders;

extern long wi_retry_after_seconds(const char *value, time_t now);
extern long wi_throttle_seconds(long status, const WiRateHeaders *h, time_t now, const char **by);

#endif							/* WI_RETRY_AFTER_H */
