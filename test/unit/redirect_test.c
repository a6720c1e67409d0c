/*
 * test/unit/redirect_test.c
 *		Unit tests of src/net/redirect.c, the redirect decisions, on strings only
 *		(no traffic): above all https -> http, which the worker suite cannot
 *		show end to end because test/upstream.py serves no TLS that libcurl
 *		would trust.  Prints one "test NAME ... ok|FAILED" line per case, as
 *		pg_regress does, for test/run to count; exits non-zero on a failure.
 */
#include "postgres.h"

#include <stdio.h>

#include "net_guard.h"
#include "redirect.h"

static int	failures = 0;

static void
check(const char *name, const char *origin_url, const char *location, int policy,
	  WiRedirect expect, const char *expect_why)
{
	bool		from_tls = false;
	bool		to_tls;
	char	   *origin = origin_url ? wi_origin_of(origin_url, &from_tls) : NULL;
	char		why[WI_REFUSAL_SIZE] = "";
	WiRedirect	r = wi_judge_redirect(origin, from_tls, location, policy, &to_tls, why, sizeof(why));
	bool		ok = (r == expect) && (expect_why == NULL || strcmp(why, expect_why) == 0);

	printf("test %-40s ... %s\n", name, ok ? "ok" : "FAILED");
	if (!ok)
	{
		printf("  got %d \"%s\", expected %d \"%s\"\n", (int) r, why, (int) expect, expect_why ? expect_why : "");
		failures++;
	}
	free(origin);
}

static void
check_origin(const char *name, const char *url, const char *expect)
{
	bool		tls;
	char	   *origin = wi_origin_of(url, &tls);
	bool		ok = (origin == NULL) ? (expect == NULL) : (expect != NULL && strcmp(origin, expect) == 0);

	printf("test %-40s ... %s\n", name, ok ? "ok" : "FAILED");
	if (!ok)
	{
		printf("  got \"%s\", expected \"%s\"\n", origin ? origin : "(null)", expect ? expect : "(null)");
		failures++;
	}
	free(origin);
}

int
main(void)
{
	const int	refuse = WI_CROSS_ORIGIN_REFUSE;
	const int	follow = WI_CROSS_ORIGIN_FOLLOW_WITHOUT_HEADERS;
	char		long_url[400];
	char		long_why[WI_REFUSAL_SIZE];

	check_origin("origin_default_port", "HTTPS://API.Example.com/posts/1?x=1#f", "https://api.example.com:443");
	check_origin("origin_explicit_port", "http://127.0.0.1:18080/posts/1", "http://127.0.0.1:18080");
	check_origin("origin_ipv6", "http://[::1]:8080/x", "http://[::1]:8080");
	check_origin("origin_relative", "/posts/1", NULL);

	check("same_origin", "http://127.0.0.1:18080/a", "http://127.0.0.1:18080/echo/x", refuse,
		  WI_REDIRECT_SAME_ORIGIN, NULL);
	check("same_origin_default_port", "https://api.example.com/a", "https://API.example.com:443/b", refuse,
		  WI_REDIRECT_SAME_ORIGIN, NULL);
	check("other_port_refused", "http://127.0.0.1:18080/a", "http://127.0.0.1:18081/b", refuse,
		  WI_REDIRECT_REFUSED,
		  "redirect to another origin (http://127.0.0.1:18081) refused by webhook_ingest.cross_origin_redirects");
	check("other_port_followed", "http://127.0.0.1:18080/a", "http://127.0.0.1:18081/b", follow,
		  WI_REDIRECT_OTHER_ORIGIN, NULL);
	check("other_host_followed", "https://api.example.com/a", "https://cdn.example.net/b", follow,
		  WI_REDIRECT_OTHER_ORIGIN, NULL);
	check("http_to_https_is_other_origin", "http://api.example.com/a", "https://api.example.com/a", refuse,
		  WI_REDIRECT_REFUSED, NULL);
	check("https_to_http_refused", "https://api.example.com/a", "http://api.example.com/a", follow,
		  WI_REDIRECT_REFUSED, "redirect from https to http refused: http://api.example.com/a");
	check("https_to_http_refused_other_host", "https://api.example.com/a", "http://cdn.example.net/a", follow,
		  WI_REDIRECT_REFUSED, "redirect from https to http refused: http://cdn.example.net/a");
	check("https_to_http_refused_policy_refuse", "https://api.example.com/a", "http://api.example.com/a", refuse,
		  WI_REDIRECT_REFUSED, "redirect from https to http refused: http://api.example.com/a");
	check("ftp_refused", "http://127.0.0.1:18080/a", "ftp://127.0.0.1/secret", follow,
		  WI_REDIRECT_REFUSED, "redirect to ftp://127.0.0.1/secret refused: only http and https are followed");
	check("file_refused", "http://127.0.0.1:18080/a", "file:///etc/passwd", follow,
		  WI_REDIRECT_REFUSED, "redirect to file:///etc/passwd refused: only http and https are followed");
	check("unknown_origin_never_same", NULL, "http://127.0.0.1:18080/a", refuse, WI_REDIRECT_REFUSED, NULL);

	/* A refusal quotes at most 100 bytes of the target. */
	snprintf(long_url, sizeof(long_url), "gopher://127.0.0.1/%0300d", 0);
	snprintf(long_why, sizeof(long_why), "redirect to %.100s... refused: only http and https are followed", long_url);
	check("refusal_quotes_100_bytes", "http://127.0.0.1:18080/a", long_url, follow, WI_REDIRECT_REFUSED, long_why);

	return failures == 0 ? 0 : 1;
}
