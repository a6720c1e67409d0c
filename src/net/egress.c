/*
 * egress.c
 *		Which proxy a fetch goes through: webhook_ingest.proxy (every
 *		source's, unless it names its own in sources.proxy; an empty one
 *		means none) and webhook_ingest.no_proxy (hosts reached directly,
 *		libcurl's NOPROXY list).  A proxy is an http:// or https:// URL of a
 *		host and port, with no path and no credentials (the setting is
 *		readable by every role, the column by the admins); the same check
 *		serves the setting and _check_proxy(), which add_source,
 *		alter_source and sources_guard call.
 *
 *		The network guard (net_guard.c) checks the address libcurl connects
 *		to, so with a proxy it sees the proxy's; the target's address is
 *		the proxy's to resolve and check (http.c still refuses a target URL
 *		that names a denied address literally).
 *
 * IDENTIFICATION
 *		src/net/egress.c
 */
#include "postgres.h"

#include <curl/curl.h>

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"

#include "webhook_ingest.h"
#include "egress.h"
#include "validate.h"

PG_FUNCTION_INFO_V1(webhook_ingest_check_proxy);

char	   *wi_proxy = NULL;
char	   *wi_no_proxy = NULL;

/*
 * Is value a proxy URL the worker can use?  If not, why says so (static
 * text).  "" is: no proxy.
 */
static bool
proxy_usable(const char *value, const char **why)
{
	CURLU	   *url;
	char	   *part = NULL;
	bool		ok = false;

	if (value[0] == '\0')
		return true;
	*why = "it is not a URL";
	if ((url = curl_url()) == NULL)
		return false;
	if (curl_url_set(url, CURLUPART_URL, value, 0) != CURLUE_OK)
		goto done;
	*why = "its scheme must be http or https";
	if (curl_url_get(url, CURLUPART_SCHEME, &part, 0) != CURLUE_OK ||
		(strcmp(part, "http") != 0 && strcmp(part, "https") != 0))
		goto done;
	curl_free(part);
	part = NULL;
	*why = "it must name a host";
	if (curl_url_get(url, CURLUPART_HOST, &part, 0) != CURLUE_OK || part[0] == '\0')
		goto done;
	curl_free(part);
	part = NULL;
	*why = "it must not carry a user name or password";
	if (curl_url_get(url, CURLUPART_USER, &part, 0) == CURLUE_OK)
		goto done;
	*why = "it must be scheme://host:port, with no path, query or fragment";
	if (curl_url_get(url, CURLUPART_PATH, &part, 0) == CURLUE_OK && strcmp(part, "/") != 0)
		goto done;
	curl_free(part);
	part = NULL;
	if (curl_url_get(url, CURLUPART_QUERY, &part, 0) == CURLUE_OK ||
		curl_url_get(url, CURLUPART_FRAGMENT, &part, 0) == CURLUE_OK)
		goto done;
	ok = true;
done:
	curl_free(part);
	curl_url_cleanup(url);
	return ok;
}

/* _check_proxy(proxy text): what sources.proxy may hold. */
Datum
webhook_ingest_check_proxy(PG_FUNCTION_ARGS)
{
	char	   *value = text_to_cstring(PG_GETARG_TEXT_PP(0));
	const char *why;

	/* (the value is not quoted: a secret pasted in the wrong argument stays out of the message) */
	if (!proxy_usable(value, &why))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("proxy cannot be used: %s", why),
				 errhint("Name it as http://host:port or https://host:port; '' means no proxy, NULL webhook_ingest.proxy.")));
	PG_RETURN_VOID();
}

/* A bad proxy in the configuration file at start: the server does not start. */
static char *invalid_proxy = NULL;

static bool
check_proxy_setting(char **newval, void **extra, GucSource source)
{
	const char *why;

	if (proxy_usable(*newval, &why))
		return true;
	GUC_check_errdetail("It cannot be used as a proxy: %s.", why);
	if (source == PGC_S_FILE && process_shared_preload_libraries_in_progress && invalid_proxy == NULL)
		invalid_proxy = strdup(*newval);
	return false;
}

/*
 * The proxy of a fetch: the source's (NULL: none of its own), else the
 * setting's; "" means none.
 */
const char *
wi_proxy_for(const char *source_proxy)
{
	if (source_proxy != NULL)
		return source_proxy;
	return wi_proxy ? wi_proxy : "";
}

void
wi_egress_define_gucs(void)
{
	DefineCustomStringVariable("webhook_ingest.proxy",
							   "HTTP(S) proxy every fetch goes through (http://host:port); empty: none.",
							   "A source's own proxy (add_source's proxy, '' for none) wins. "
							   "The network guard then checks the proxy's address, not the target's.",
							   &wi_proxy,
							   "",
							   PGC_SIGHUP, 0,
							   check_proxy_setting, NULL, NULL);
	DefineCustomStringVariable("webhook_ingest.no_proxy",
							   "Hosts fetched directly, not through the proxy (comma-separated).",
							   "libcurl's NOPROXY syntax: host names match their subdomains too, IP "
							   "addresses and CIDR ranges match literally; * means every host.",
							   &wi_no_proxy,
							   "",
							   PGC_SIGHUP, 0,
							   NULL, NULL, NULL);
	/*
	 * Started with the default instead, the worker would fetch directly, past
	 * the proxy meant as the egress barrier.  (On a reload PostgreSQL keeps
	 * the previous value.)
	 */
	if (invalid_proxy != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for parameter \"webhook_ingest.proxy\": \"%s\"",
						wi_clip(invalid_proxy, (int) strlen(invalid_proxy))),
				 errdetail("A proxy that cannot be used would leave the worker fetching directly; the server does not start."),
				 errhint("Correct it in postgresql.conf (or postgresql.auto.conf); the warning above says what is wrong.")));
}
