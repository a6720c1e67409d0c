/*
 * retry_after.c
 *		The Retry-After header of a 429 or 503, as seconds to wait.  A pure
 *		function on a string (HTTP-dates through libcurl's curl_getdate): no
 *		SQL, no palloc or ereport, so the fuzz target (test/fuzz) runs it on
 *		its own.  http.c reads the header and calls it.
 */
#ifdef FRONTEND
#include "postgres_fe.h"
#else
#include "postgres.h"
#endif

#include <ctype.h>

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
