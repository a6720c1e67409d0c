/*
 * redirect.h
 *		Whether a fetch may follow a redirect (redirect.c).
 *
 * IDENTIFICATION
 *		src/net/redirect.h
 */
#ifndef WI_REDIRECT_H
#define WI_REDIRECT_H

#include <stdbool.h>
#include <stddef.h>

typedef enum WiRedirect
{
	WI_REDIRECT_SAME_ORIGIN,	/* follow, with the source's headers */
	WI_REDIRECT_OTHER_ORIGIN,	/* follow, without them */
	WI_REDIRECT_REFUSED			/* the fetch ends here */
} WiRedirect;

extern char *wi_origin_of(const char *url, bool *tls);
extern WiRedirect wi_judge_redirect(const char *origin, bool from_tls, const char *location, int policy,
									bool *to_tls, char *why, size_t whylen);

#endif							/* WI_REDIRECT_H */
