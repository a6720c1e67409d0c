/*
 * test/unit/signature_test.c
 *		Unit tests of src/intake/signature.c outside the server (built with
 *		-DWI_FRONTEND and -lcrypto only, as a fuzz target would be): the
 *		status of each check, which SQL's boolean cannot show, several
 *		secrets (rotation), header values that are not NUL-terminated,
 *		extreme clocks and tolerances.  Prints one "test NAME ... ok|FAILED"
 *		line per case for test/run to count; exits non-zero on a failure.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "signature.h"

static int	failures = 0;

static void
report(const char *name, bool ok, int got, int expected)
{
	printf("test %-40s ... %s\n", name, ok ? "ok" : "FAILED");
	if (!ok)
	{
		printf("  got %d, expected %d\n", got, expected);
		failures++;
	}
}

/* Headers from "name: value" C strings. */
static int
make_headers(WiHeader *h, const char *const *lines, int n)
{
	for (int i = 0; i < n; i++)
	{
		const char *colon = strchr(lines[i], ':');

		h[i].name = lines[i];
		h[i].name_len = (size_t) (colon - lines[i]);
		h[i].value = colon + 2;
		h[i].value_len = strlen(colon + 2);
	}
	return n;
}

static void
check(const char *name, WiSigScheme scheme, const char *const *lines, int nlines, const char *body,
	  const char *const *secrets, int nsecrets, int64_t now, int64_t tolerance, WiSigStatus expected)
{
	WiHeader	h[8];
	size_t		lens[8];
	int			n = make_headers(h, lines, nlines);
	WiSigStatus got;

	for (int i = 0; i < nsecrets; i++)
		lens[i] = strlen(secrets[i]);
	got = wi_sig_verify(scheme, h, n, body, strlen(body), secrets, lens, nsecrets, now, tolerance);
	report(name, got == expected, (int) got, (int) expected);
}

#define SW_ID	"webhook-id: msg_p5jXN8AQM9LWM0D4loKWxJek"
#define SW_TS	"webhook-timestamp: 1614265330"
#define SW_SIG	"webhook-signature: v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
#define SW_BODY "{\"test\": 2432232314}"
#define SW_NOW	INT64_C(1614265330)
#define GH_SIG	"X-Hub-Signature-256: sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
#define ST_V1	"ff5e34f675feda29d20aa8c342f4418db467551b8e6a1c002339267f80ebb893"
#define ST_OLD	"834554c4412b6d04d265386e60e1754a36a491aeb34fbc822429fd68407fe10d"
#define ST_BODY "{\"id\": \"evt_test_webhook\", \"object\": \"event\"}"

static void
standard_webhooks(void)
{
	const char *key[] = {"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"};
	const char *rotated[] = {"whsec_c2Vjb25kIGtleQ==", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"};
	const char *bad_second[] = {"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_"};
	const char *ok[] = {SW_ID, SW_TS, SW_SIG};
	const char *no_sig[] = {SW_ID, SW_TS};
	const char *no_id[] = {SW_TS, SW_SIG};
	const char *bad_ts[] = {SW_ID, "webhook-timestamp: 1614265330.5", SW_SIG};
	const char *no_comma[] = {SW_ID, SW_TS, "webhook-signature: v1 g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="};
	const char *only_v2[] = {SW_ID, SW_TS, "webhook-signature: v2,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="};
	const char *empty_sig[] = {SW_ID, SW_TS, "webhook-signature: "};

	check("sw_published_vector", WI_SIG_STANDARD_WEBHOOKS, ok, 3, SW_BODY, key, 1, SW_NOW, 300, WI_SIG_OK);
	check("sw_tampered_body", WI_SIG_STANDARD_WEBHOOKS, ok, 3, "{\"test\": 1}", key, 1, SW_NOW, 300, WI_SIG_NO_MATCH);
	check("sw_expired", WI_SIG_STANDARD_WEBHOOKS, ok, 3, SW_BODY, key, 1, SW_NOW + 301, 300, WI_SIG_OUTSIDE_WINDOW);
	check("sw_edge_of_window", WI_SIG_STANDARD_WEBHOOKS, ok, 3, SW_BODY, key, 1, SW_NOW + 300, 300, WI_SIG_OK);
	check("sw_future", WI_SIG_STANDARD_WEBHOOKS, ok, 3, SW_BODY, key, 1, SW_NOW - 301, 300, WI_SIG_OUTSIDE_WINDOW);
	check("sw_rotated_second_secret", WI_SIG_STANDARD_WEBHOOKS, ok, 3, SW_BODY, rotated, 2, SW_NOW, 300, WI_SIG_OK);
	check("sw_rotated_first_only", WI_SIG_STANDARD_WEBHOOKS, ok, 3, SW_BODY, rotated, 1, SW_NOW, 300, WI_SIG_NO_MATCH);
	check("sw_one_bad_secret", WI_SIG_STANDARD_WEBHOOKS, ok, 3, SW_BODY, bad_second, 2, SW_NOW, 300, WI_SIG_BAD_SECRET);
	check("sw_no_secrets", WI_SIG_STANDARD_WEBHOOKS, ok, 3, SW_BODY, key, 0, SW_NOW, 300, WI_SIG_BAD_SECRET);
	check("sw_no_signature", WI_SIG_STANDARD_WEBHOOKS, no_sig, 2, SW_BODY, key, 1, SW_NOW, 300, WI_SIG_NO_SIGNATURE);
	check("sw_empty_signature", WI_SIG_STANDARD_WEBHOOKS, empty_sig, 3, SW_BODY, key, 1, SW_NOW, 300, WI_SIG_MALFORMED);
	check("sw_no_id", WI_SIG_STANDARD_WEBHOOKS, no_id, 2, SW_BODY, key, 1, SW_NOW, 300, WI_SIG_MALFORMED);
	check("sw_fractional_timestamp", WI_SIG_STANDARD_WEBHOOKS, bad_ts, 3, SW_BODY, key, 1, SW_NOW, 300, WI_SIG_MALFORMED);
	check("sw_entry_without_comma", WI_SIG_STANDARD_WEBHOOKS, no_comma, 3, SW_BODY, key, 1, SW_NOW, 300, WI_SIG_MALFORMED);
	check("sw_only_other_versions", WI_SIG_STANDARD_WEBHOOKS, only_v2, 3, SW_BODY, key, 1, SW_NOW, 300, WI_SIG_MALFORMED);
	check("sw_max_tolerance", WI_SIG_STANDARD_WEBHOOKS, ok, 3, SW_BODY, key, 1, 0, INT64_MAX, WI_SIG_OK);
	check("sw_extreme_clock", WI_SIG_STANDARD_WEBHOOKS, ok, 3, SW_BODY, key, 1, INT64_MIN, INT64_MAX,
		  WI_SIG_OUTSIDE_WINDOW);
	check("sw_extreme_clock_no_tolerance", WI_SIG_STANDARD_WEBHOOKS, ok, 3, SW_BODY, key, 1, INT64_MAX, 0,
		  WI_SIG_OUTSIDE_WINDOW);
	check("sw_negative_tolerance_is_zero", WI_SIG_STANDARD_WEBHOOKS, ok, 3, SW_BODY, key, 1, SW_NOW, -5, WI_SIG_OK);
}

static void
others(void)
{
	const char *gh_key[] = {"It's a Secret to Everybody"};
	const char *gh[] = {GH_SIG};
	const char *gh_bad[] = {"X-Hub-Signature-256: sha256=zz7107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"};
	const char *st_keys[] = {"whsec_other", "whsec_test_secret"};
	const char *st[] = {"Stripe-Signature: t=1600000000,v1=" ST_OLD ",v1=" ST_V1};
	const char *st_two_t[] = {"Stripe-Signature: t=1600000000,v1=" ST_V1 ",t=1"};
	const char *sl_key[] = {"8f742231b10e8888abcd99yyyzzz85a5"};
	const char *sl[] = {"X-Slack-Request-Timestamp: 1531420618",
	"X-Slack-Signature: v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"};
	const char *sh_key[] = {"hush"};
	const char *sh[] = {"X-Shopify-Hmac-Sha256: fp5HwmAHEVGQQwJU1KRpk57Ts2YHF6/TLOCczCtB5bs="};
	const char *sh_bad[] = {"X-Shopify-Hmac-Sha256: fp5HwmAHEVGQQwJU1KRpk57Ts2YHF6/TLOCczCtB5b="};
	const char *empty_key[] = {""};

	check("github_published_vector", WI_SIG_GITHUB, gh, 1, "Hello, World!", gh_key, 1, 0, 0, WI_SIG_OK);
	check("github_tampered", WI_SIG_GITHUB, gh, 1, "Hello, World", gh_key, 1, 0, 0, WI_SIG_NO_MATCH);
	check("github_not_hex", WI_SIG_GITHUB, gh_bad, 1, "Hello, World!", gh_key, 1, 0, 0, WI_SIG_MALFORMED);
	check("github_none", WI_SIG_GITHUB, sl, 2, "Hello, World!", gh_key, 1, 0, 0, WI_SIG_NO_SIGNATURE);
	check("github_empty_secret", WI_SIG_GITHUB, gh, 1, "Hello, World!", empty_key, 1, 0, 0, WI_SIG_BAD_SECRET);
	check("stripe_rotated", WI_SIG_STRIPE, st, 1, ST_BODY, st_keys, 2, 1600000000, 300, WI_SIG_OK);
	check("stripe_wrong_secret", WI_SIG_STRIPE, st, 1, ST_BODY, st_keys, 1, 1600000000, 300, WI_SIG_NO_MATCH);
	check("stripe_expired", WI_SIG_STRIPE, st, 1, ST_BODY, st_keys, 2, 1600000301, 300, WI_SIG_OUTSIDE_WINDOW);
	check("stripe_two_timestamps", WI_SIG_STRIPE, st_two_t, 1, ST_BODY, st_keys, 2, 1600000000, 300, WI_SIG_MALFORMED);
	check("slack_published_vector", WI_SIG_SLACK, sl, 2,
		  "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&"
		  "channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&"
		  "response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&"
		  "trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c",
		  sl_key, 1, 1531420618, 300, WI_SIG_OK);
	check("slack_missing_timestamp", WI_SIG_SLACK, sl + 1, 1, "x", sl_key, 1, 1531420618, 300, WI_SIG_MALFORMED);
	check("shopify_vector", WI_SIG_SHOPIFY, sh, 1, "{\"id\":820982911946154508,\"email\":\"jon@doe.ca\"}", sh_key, 1, 0, 0,
		  WI_SIG_OK);
	check("shopify_short", WI_SIG_SHOPIFY, sh_bad, 1, "{}", sh_key, 1, 0, 0, WI_SIG_MALFORMED);
}

/* Values that are not NUL-terminated: the bytes after value_len must not count. */
static void
unterminated(void)
{
	char		buf[200];
	const char *sig = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
	WiHeader	h = {"x-hub-signature-256", 19, buf, strlen(sig)};
	const char *key = "It's a Secret to Everybody";
	size_t		klen = strlen(key);
	WiSigStatus got;

	memset(buf, 'f', sizeof(buf));
	memcpy(buf, sig, strlen(sig));
	got = wi_sig_verify(WI_SIG_GITHUB, &h, 1, "Hello, World!", 13, &key, &klen, 1, 0, 0);
	report("unterminated_value", got == WI_SIG_OK, (int) got, WI_SIG_OK);
	h.value_len = strlen(sig) - 1;
	got = wi_sig_verify(WI_SIG_GITHUB, &h, 1, "Hello, World!", 13, &key, &klen, 1, 0, 0);
	report("value_len_cuts_the_mac", got == WI_SIG_MALFORMED, (int) got, WI_SIG_MALFORMED);
	h.name_len = 18;
	got = wi_sig_verify(WI_SIG_GITHUB, &h, 1, "Hello, World!", 13, &key, &klen, 1, 0, 0);
	report("name_len_counts", got == WI_SIG_NO_SIGNATURE, (int) got, WI_SIG_NO_SIGNATURE);
	got = wi_sig_verify(WI_SIG_GITHUB, NULL, 0, NULL, 0, &key, &klen, 1, 0, 0);
	report("no_headers_at_all", got == WI_SIG_NO_SIGNATURE, (int) got, WI_SIG_NO_SIGNATURE);
}

/* A 10 MB header of 64-hex v1 entries: bounded, no match. */
static void
huge(void)
{
	size_t		n = 10 * 1024 * 1024;
	char	   *v = malloc(n);
	WiHeader	h = {"Stripe-Signature", 16, v, n};
	const char *key = "whsec_test_secret";
	size_t		klen = strlen(key);
	size_t		pos = 0;
	WiSigStatus got;

	pos += (size_t) sprintf(v, "t=1600000000");
	while (pos + 68 < n)
		pos += (size_t) sprintf(v + pos, ",v1=%s", ST_OLD);
	memset(v + pos, ',', n - pos);
	got = wi_sig_verify(WI_SIG_STRIPE, &h, 1, ST_BODY, strlen(ST_BODY), &key, &klen, 1, 1600000000, 300);
	report("huge_stripe_header", got == WI_SIG_NO_MATCH, (int) got, WI_SIG_NO_MATCH);
	free(v);
}

static void
names(void)
{
	WiSigScheme s = WI_SIG_GITHUB;
	bool		ok;

	ok = wi_sig_scheme_from_name("Standard-Webhooks", 17, &s) && s == WI_SIG_STANDARD_WEBHOOKS &&
		wi_sig_scheme_from_name("svix", 4, &s) && s == WI_SIG_STANDARD_WEBHOOKS &&
		wi_sig_scheme_from_name("SLACKX", 5, &s) && s == WI_SIG_SLACK &&
		!wi_sig_scheme_from_name("slack", 4, &s) && !wi_sig_scheme_from_name("gitlab", 6, &s) &&
		strcmp(wi_sig_scheme_name(WI_SIG_SHOPIFY), "shopify") == 0;
	report("scheme_names", ok, ok, 1);
	ok = wi_sig_secret_valid(WI_SIG_STANDARD_WEBHOOKS, "whsec_QQ", 8) &&
		wi_sig_secret_valid(WI_SIG_STANDARD_WEBHOOKS, "QQ==", 4) &&
		!wi_sig_secret_valid(WI_SIG_STANDARD_WEBHOOKS, "Q", 1) &&
		!wi_sig_secret_valid(WI_SIG_STANDARD_WEBHOOKS, "QQ=", 3) &&
		!wi_sig_secret_valid(WI_SIG_STANDARD_WEBHOOKS, "Q=Q=", 4) &&
		!wi_sig_secret_valid(WI_SIG_STANDARD_WEBHOOKS, "whsec_", 6) &&
		wi_sig_secret_valid(WI_SIG_STRIPE, "whsec_", 6) &&
		!wi_sig_secret_valid(WI_SIG_SLACK, "", 0);
	report("secret_validity", ok, ok, 1);
	ok = strcmp(wi_sig_status_detail(WI_SIG_NO_MATCH), "No signing secret matched the signature.") == 0 &&
		strcmp(wi_sig_status_detail(WI_SIG_OUTSIDE_WINDOW), "The signed timestamp is outside the tolerance window.") == 0;
	report("status_details", ok, ok, 1);
}

/* The delivery id: the signed one for Standard Webhooks, trimmed, never an unsigned stand-in. */
static bool
delivery_id_is(WiSigScheme scheme, const char *const *lines, int nlines, const char *expected)
{
	WiHeader	h[8];
	int			n = make_headers(h, lines, nlines);
	const char *id;
	size_t		len;

	if (!wi_sig_delivery_id(scheme, h, n, &id, &len))
		return expected == NULL;
	return expected != NULL && len == strlen(expected) && memcmp(id, expected, len) == 0;
}

static void
delivery_ids(void)
{
	const char *const svix_plus[] = {"svix-id: msg_1", "svix-timestamp: 1", "svix-signature: v1,x",
	"webhook-id: forged"};
	const char *const std_plus[] = {"webhook-id: msg_2 ", "svix-id: other", "webhook-signature: v1,x"};
	const char *const empty_sig[] = {"webhook-signature: ", "webhook-id: forged", "svix-id: msg_3"};
	const char *const shop[] = {"X-Shopify-Event-Id:  ", "X-Shopify-Webhook-Id: w1"};
	const char *const gh[] = {"x-github-delivery: d1"};
	bool		ok;

	ok = delivery_id_is(WI_SIG_STANDARD_WEBHOOKS, svix_plus, 4, "msg_1") &&
		delivery_id_is(WI_SIG_STANDARD_WEBHOOKS, std_plus, 3, "msg_2") &&
		delivery_id_is(WI_SIG_STANDARD_WEBHOOKS, empty_sig, 3, "msg_3") &&
		delivery_id_is(WI_SIG_SHOPIFY, shop, 2, "w1") &&
		delivery_id_is(WI_SIG_GITHUB, gh, 1, "d1") &&
		delivery_id_is(WI_SIG_STRIPE, gh, 1, NULL) &&
		delivery_id_is(WI_SIG_SLACK, gh, 1, NULL) &&
		delivery_id_is(WI_SIG_GITHUB, gh, 0, NULL);
	report("delivery_ids", ok, ok, 1);
}

int
main(void)
{
	standard_webhooks();
	others();
	unterminated();
	huge();
	names();
	delivery_ids();
	return failures == 0 ? 0 : 1;
}
