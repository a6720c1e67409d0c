/*
 * redirect.c
 *		Redirect hygiene: the origin (scheme, host, port) of a URL, and
 *		whether a fetch may follow a redirect to another URL, under
 *		webhook_ingest.cross_origin_redirects.  Only http and https are
 *		followed, https never to http, and the source's headers go only to
 *		the template's origin.  Pure decisions on strings: no SQL, no I/O, no
 *		palloc or ereport (malloc'd results, messages into a caller's
 *		buffer), so test/unit can run them on their own.
 *
 * IDENTIFICATION
 *		src/net/redirect.c
 */
#include "postgres.h"

#include <ctype.h>

#include <curl/curl.h>

#include "net_guard.h"
#include "redirect.h"

/* Bytes of a redirect target quoted in a refusal. */
#define WI_QUOTE_BYTES		100

/* Up to WI_QUOTE_BYTES of s, printable ASCII only, then "..." if cut. */
static void
quote(char *dst, size_t dstlen, const char *s)
{
	size_t		n = 0;
	size_t		limit = Min(dstlen - 4, (size_t) WI_QUOTE_BYTES);

	for (; s[n] && n < limit; n++)
		dst[n] = (s[n] > 0x20 && s[n] < 0x7f) ? s[n] : '?';
	dst[n] = '\0';
	if (s[n])
		strcat(dst, "...");
}

/*
 * The origin of an absolute URL, "scheme://host:port" (lowercase, the
 * scheme's port when none is given), malloc'd; NULL if it has none.  *tls
 * says whether the scheme is https.
 */
char *
wi_origin_of(const char *url, bool *tls)
{
	CURLU	   *u = curl_url();
	char	   *scheme = NULL;
	char	   *host = NULL;
	char	   *port = NULL;
	char	   *origin = NULL;

	*tls = false;
	if (u != NULL &&
		curl_url_set(u, CURLUPART_URL, url, CURLU_NON_SUPPORT_SCHEME) == CURLUE_OK &&
		curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
		curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
		curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK)
	{
		size_t		len = strlen(scheme) + strlen(host) + strlen(port) + 5;

		origin = malloc(len);
		if (origin != NULL)
		{
			snprintf(origin, len, "%s://%s:%s", scheme, host, port);
			for (char *c = origin; *c; c++)
				*c = (char) tolower((unsigned char) *c);
			*tls = (strncmp(origin, "https:", 6) == 0);
		}
	}
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	curl_url_cleanup(u);
	return origin;
}

static WiRedirect
refuse(char *why, size_t whylen, const char *format, const char *what)
{
	char		quoted[WI_QUOTE_BYTES + 4];

	quote(quoted, sizeof(quoted), what);
	snprintf(why, whylen, format, quoted);
	return WI_REDIRECT_REFUSED;
}

/*
 * A fetch of origin (NULL: unknown), over https if from_tls, was redirected
 * to location (absolute).  policy is a WiCrossOrigin.  Sets *to_tls; on
 * WI_REDIRECT_REFUSED, why says why.
 */
WiRedirect
wi_judge_redirect(const char *origin, bool from_tls, const char *location, int policy,
				  bool *to_tls, char *why, size_t whylen)
{
	char	   *next = wi_origin_of(location, to_tls);
	WiRedirect	r;

	if (next == NULL || (strncmp(next, "http:", 5) != 0 && strncmp(next, "https:", 6) != 0))
		r = refuse(why, whylen, "redirect to %s refused: only http and https are followed", location);
	else if (from_tls && !*to_tls)
		r = refuse(why, whylen, "redirect from https to http refused: %s", location);
	else if (origin != NULL && strcmp(next, origin) == 0)
		r = WI_REDIRECT_SAME_ORIGIN;
	else if (policy == WI_CROSS_ORIGIN_REFUSE)
		r = refuse(why, whylen, "redirect to another origin (%s) refused by webhook_ingest.cross_origin_redirects",
				   next);
	else
		r = WI_REDIRECT_OTHER_ORIGIN;
	free(next);
	return r;
}
