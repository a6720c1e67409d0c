/*
 * retry_after.h
 *		The Retry-After response header, parsed (retry_after.c).
 */
#ifndef WI_RETRY_AFTER_H
#define WI_RETRY_AFTER_H

#include <time.h>

/* Longest Retry-After honoured, in seconds. */
#define WI_MAX_RETRY_AFTER_S	(24L * 3600L)

extern long wi_retry_after_seconds(const char *value, time_t now);

#endif							/* WI_RETRY_AFTER_H */
