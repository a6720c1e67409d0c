/*
 * test/fuzz/signature_fuzz.c
 *		libFuzzer target for src/intake/signature.c: the five schemes' header
 *		parsers, the timestamp window and the MAC comparison.  The input is
 *		laid out like a request, so seeds are readable:
 *
 *			SCHEME [NOW [TOLERANCE]]\n
 *			SECRET[\tSECRET...]\n
 *			Name: value\n			(any number of header lines)
 *			\n
 *			BODY (any bytes, to the end)
 *
 *		SCHEME goes through wi_sig_scheme_from_name, and the request is then
 *		verified under every scheme, whatever SCHEME says.  Invariants:
 *		- the status is one of WiSigStatus, the same on a second call and
 *		  with every header name's letter case flipped;
 *		- no secret, or any unusable one: WI_SIG_BAD_SECRET;
 *		- an accepted request is refused once its body changes, is still
 *		  accepted with a wider window, another secret added, or the secrets
 *		  reversed; one outside the window is not once the window is huge;
 *		- wi_header_find returns the first header of that name, any case;
 *		- signing the input's body (and id, timestamp, secret) here, with
 *		  OpenSSL's HMAC, in each scheme's format (with the variations the
 *		  senders use: several signatures, other versions, spaces, svix-*
 *		  names, hex case, base64 padding) verifies, before the input's own
 *		  headers (under one scheme per input, picked by its bytes); one
 *		  changed signature character or body byte, or the
 *		  wrong secret, does not; a timestamp just outside the window is
 *		  WI_SIG_OUTSIDE_WINDOW and one on its edge is accepted.
 *		A broken invariant aborts (a crash for libFuzzer).  With
 *		WI_FUZZ_VERBOSE set, each scheme's verdict on the input is printed.
 */
#define WI_FRONTEND
#include "signature.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#define MAX_HEADERS		32
#define MAX_SECRETS		4
#define DEFAULT_NOW		INT64_C(1700000000)
#define DEFAULT_TOL		INT64_C(300)
#define MAX_TS			INT64_C(999999999999999999)		/* 18 digits */

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define require(cond) \
	do { if (!(cond)) { fprintf(stderr, "invariant broken at %s:%d: %s\n", __FILE__, __LINE__, #cond); abort(); } } while (0)

static const WiSigScheme all_schemes[] = {
	WI_SIG_STANDARD_WEBHOOKS, WI_SIG_STRIPE, WI_SIG_GITHUB, WI_SIG_SHOPIFY, WI_SIG_SLACK
};

typedef struct Request
{
	const char *scheme_name;
	size_t		scheme_len;
	int64_t		now;
	int64_t		tol;
	const char *secrets[MAX_SECRETS + 1];
	size_t		secret_lens[MAX_SECRETS + 1];
	int			nsecrets;
	WiHeader	headers[MAX_HEADERS + 4];
	int			nheaders;
	const char *body;
	size_t		body_len;
} Request;

/* ---- splitting the input ---- */

/* The next line of data from *pos (without its \n); false at the end. */
static bool
next_line(const char *d, size_t n, size_t *pos, const char **line, size_t *len)
{
	const char *nl;

	if (*pos >= n)
		return false;
	*line = d + *pos;
	nl = memchr(*line, '\n', n - *pos);
	*len = nl ? (size_t) (nl - *line) : n - *pos;
	*pos += *len + (nl ? 1 : 0);
	return true;
}

/* A signed decimal of up to 19 digits at s; *v unchanged if there is none. */
static void
parse_int64(const char *s, size_t len, int64_t *v)
{
	char		buf[21];
	char	   *end;
	long long	x;

	if (len == 0 || len >= sizeof(buf))
		return;
	memcpy(buf, s, len);
	buf[len] = '\0';
	x = strtoll(buf, &end, 10);
	if (end != buf)
		*v = (int64_t) x;
}

static void
parse_first_line(Request *r, const char *line, size_t len)
{
	const char *sp = memchr(line, ' ', len);
	const char *rest;
	size_t		rlen;
	const char *sp2;

	r->scheme_name = line;
	r->scheme_len = sp ? (size_t) (sp - line) : len;
	if (sp == NULL)
		return;
	rest = sp + 1;
	rlen = len - r->scheme_len - 1;
	sp2 = memchr(rest, ' ', rlen);
	parse_int64(rest, sp2 ? (size_t) (sp2 - rest) : rlen, &r->now);
	if (sp2)
		parse_int64(sp2 + 1, rlen - (size_t) (sp2 + 1 - rest), &r->tol);
}

static void
parse_secrets(Request *r, const char *line, size_t len)
{
	size_t		start = 0;

	if (len == 0)
		return;
	while (r->nsecrets < MAX_SECRETS)
	{
		const char *tab = memchr(line + start, '\t', len - start);
		size_t		stop = tab ? (size_t) (tab - line) : len;

		r->secrets[r->nsecrets] = line + start;
		r->secret_lens[r->nsecrets++] = stop - start;
		if (!tab)
			break;
		start = stop + 1;
	}
}

static void
parse_input(Request *r, const char *d, size_t n)
{
	size_t		pos = 0;
	const char *line;
	size_t		len;

	memset(r, 0, sizeof(*r));
	r->now = DEFAULT_NOW;
	r->tol = DEFAULT_TOL;
	r->scheme_name = "";
	r->body = d + n;
	if (next_line(d, n, &pos, &line, &len))
		parse_first_line(r, line, len);
	if (next_line(d, n, &pos, &line, &len))
		parse_secrets(r, line, len);
	while (next_line(d, n, &pos, &line, &len) && len > 0)
	{
		const char *colon = memchr(line, ':', len);
		WiHeader   *h;

		if (r->nheaders == MAX_HEADERS)
			continue;
		h = &r->headers[r->nheaders++];
		h->name = line;
		h->name_len = colon ? (size_t) (colon - line) : len;
		h->value = colon ? colon + 1 : NULL;
		h->value_len = colon ? len - h->name_len - 1 : 0;
	}
	r->body = d + pos;
	r->body_len = n - pos;
}

/* ---- checks on the input as it is ---- */

static WiSigStatus
verify(WiSigScheme s, const WiHeader *h, int nh, const char *body, size_t body_len,
	   const char *const *secrets, const size_t *lens, int ns, int64_t now, int64_t tol)
{
	WiSigStatus st = wi_sig_verify(s, h, nh, body, body_len, secrets, lens, ns, now, tol);

	require(st >= WI_SIG_OK && st <= WI_SIG_BAD_SECRET);
	return st;
}

static WiSigStatus
verify_req(WiSigScheme s, const Request *r)
{
	return verify(s, r->headers, r->nheaders, r->body, r->body_len, r->secrets, r->secret_lens,
				  r->nsecrets, r->now, r->tol);
}

static char
flip_case(char c)
{
	if (c >= 'a' && c <= 'z')
		return (char) (c - 'a' + 'A');
	if (c >= 'A' && c <= 'Z')
		return (char) (c - 'A' + 'a');
	return c;
}

static bool
equal_ci(const char *a, size_t alen, const char *b, size_t blen)
{
	if (alen != blen)
		return false;
	for (size_t i = 0; i < alen; i++)
	{
		char		x = (a[i] >= 'A' && a[i] <= 'Z') ? (char) (a[i] + 32) : a[i];
		char		y = (b[i] >= 'A' && b[i] <= 'Z') ? (char) (b[i] + 32) : b[i];

		if (x != y)
			return false;
	}
	return true;
}

static void
check_scheme_name(const Request *r)
{
	static const char *const names[] = {"standard-webhooks", "svix", "stripe", "github", "shopify", "slack"};
	WiSigScheme s;
	bool		known = false;
	bool		found = wi_sig_scheme_from_name(r->scheme_name, r->scheme_len, &s);

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		known |= equal_ci(r->scheme_name, r->scheme_len, names[i], strlen(names[i]));
	require(found == known);
	if (found)
	{
		const char *canon = wi_sig_scheme_name(s);

		require(equal_ci(r->scheme_name, r->scheme_len, canon, strlen(canon)) ||
				(s == WI_SIG_STANDARD_WEBHOOKS && equal_ci(r->scheme_name, r->scheme_len, "svix", 4)));
	}
	require(!wi_sig_scheme_from_name(NULL, 0, &s));
}

static void
check_header_find(const Request *r)
{
	for (int i = 0; i < r->nheaders; i++)
	{
		char		name[256];
		const WiHeader *h;
		size_t		len = r->headers[i].name_len;

		if (len >= sizeof(name) || memchr(r->headers[i].name, '\0', len))
			continue;
		for (size_t k = 0; k < len; k++)
			name[k] = flip_case(r->headers[i].name[k]);
		name[len] = '\0';
		h = wi_header_find(r->headers, r->nheaders, name);
		require(h != NULL && h >= r->headers && h <= &r->headers[i]);
		require(equal_ci(h->name, h->name_len, name, len));
		for (const WiHeader *p = r->headers; p < h; p++)
			require(!equal_ci(p->name, p->name_len, name, len));
	}
	require(wi_header_find(NULL, 0, "x") == NULL);
}

static void
check_scheme_on_input(WiSigScheme s, Request *r)
{
	WiSigStatus st = verify_req(s, r);
	bool		usable = r->nsecrets > 0;
	WiHeader	flipped[MAX_HEADERS];
	char		names[MAX_HEADERS][64];

	require(verify_req(s, r) == st);
	for (int i = 0; i < r->nsecrets; i++)
		usable &= wi_sig_secret_valid(s, r->secrets[i], r->secret_lens[i]);
	require(usable == (st != WI_SIG_BAD_SECRET));

	/* the letter case of names does not matter */
	memcpy(flipped, r->headers, sizeof(WiHeader) * r->nheaders);
	for (int i = 0; i < r->nheaders; i++)
		if (flipped[i].name_len <= sizeof(names[i]))
		{
			for (size_t k = 0; k < flipped[i].name_len; k++)
				names[i][k] = flip_case(flipped[i].name[k]);
			flipped[i].name = names[i];
		}
	require(verify(s, flipped, r->nheaders, r->body, r->body_len, r->secrets, r->secret_lens,
				   r->nsecrets, r->now, r->tol) == st);

	if (st == WI_SIG_OK)
	{
		char	   *tampered = malloc(r->body_len + 1);
		const char *secrets[MAX_SECRETS + 1];
		size_t		lens[MAX_SECRETS + 1];
		int			n = r->nsecrets;

		memcpy(tampered, r->body, r->body_len);
		tampered[r->body_len] = 'x';
		require(verify(s, r->headers, r->nheaders, tampered, r->body_len + 1, r->secrets,
					   r->secret_lens, n, r->now, r->tol) == WI_SIG_NO_MATCH);
		if (r->body_len > 0)
		{
			tampered[0] ^= 0x20;
			require(verify(s, r->headers, r->nheaders, tampered, r->body_len, r->secrets,
						   r->secret_lens, n, r->now, r->tol) == WI_SIG_NO_MATCH);
		}
		free(tampered);
		if (r->tol < INT64_MAX)
			require(verify(s, r->headers, r->nheaders, r->body, r->body_len, r->secrets,
						   r->secret_lens, n, r->now, r->tol + 1) == WI_SIG_OK);
		for (int i = 0; i < n; i++)
		{
			secrets[i] = r->secrets[n - 1 - i];
			lens[i] = r->secret_lens[n - 1 - i];
		}
		secrets[n] = "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
		lens[n] = strlen(secrets[n]);
		require(verify(s, r->headers, r->nheaders, r->body, r->body_len, secrets, lens, n + 1,
					   r->now, r->tol) == WI_SIG_OK);
	}
	if (st == WI_SIG_OUTSIDE_WINDOW && r->now > -MAX_TS && r->now < MAX_TS)
		require(verify(s, r->headers, r->nheaders, r->body, r->body_len, r->secrets, r->secret_lens,
					   r->nsecrets, r->now, INT64_MAX) != WI_SIG_OUTSIDE_WINDOW);
}

/* ---- requests signed here ---- */

typedef struct Signed
{
	char		sig[512];		/* the signature header's value */
	char		good[128];		/* the correct MAC as written in it */
	char		ts[24];
	char		id[80];
	unsigned char key[WI_SIG_MAX_KEY_BYTES];
	size_t		keylen;
	char		secret[8 + 2 * WI_SIG_MAX_KEY_BYTES];	/* as the source stores it */
	size_t		secret_len;
} Signed;

static void
hmac(const Signed *sg, const char *prefix, size_t plen, const char *body, size_t blen, unsigned char *mac)
{
	unsigned char *msg = malloc(plen + blen + 1);
	unsigned int maclen = 0;

	memcpy(msg, prefix, plen);
	memcpy(msg + plen, body, blen);
	require(HMAC(EVP_sha256(), sg->key, (int) sg->keylen, msg, plen + blen, mac, &maclen) != NULL);
	require(maclen == 32);
	free(msg);
}

static void
to_hex(const unsigned char *mac, char *out, bool upper)
{
	const char *digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";

	for (int i = 0; i < 32; i++)
	{
		out[2 * i] = digits[mac[i] >> 4];
		out[2 * i + 1] = digits[mac[i] & 15];
	}
	out[64] = '\0';
}

static void
to_b64(const unsigned char *mac, char *out, bool padded)
{
	EVP_EncodeBlock((unsigned char *) out, mac, 32);
	if (!padded)
		out[43] = '\0';
}

/*
 * Builds the headers of a request signed under scheme s, in variant v, into
 * h (the fuzzed headers after them); returns how many it wrote.
 */
static int
sign(WiSigScheme s, unsigned v, Signed *sg, const Request *r, WiHeader *h)
{
	unsigned char mac[32];
	char		prefix[128];
	int			plen = 0;
	int			n = 0;
	/* webhook-signature, wherever it is, wins over svix-* (by design) */
	bool		svix = (v & 4) != 0 && !wi_header_find(r->headers, r->nheaders, "webhook-signature");

	switch (s)
	{
		case WI_SIG_STANDARD_WEBHOOKS:
			plen = snprintf(prefix, sizeof(prefix), "%s.%s.", sg->id, sg->ts);
			break;
		case WI_SIG_STRIPE:
			plen = snprintf(prefix, sizeof(prefix), "%s.", sg->ts);
			break;
		case WI_SIG_SLACK:
			plen = snprintf(prefix, sizeof(prefix), "v0:%s:", sg->ts);
			break;
		default:
			break;
	}
	hmac(sg, prefix, plen, r->body, r->body_len, mac);
	switch (s)
	{
		case WI_SIG_STANDARD_WEBHOOKS:
			to_b64(mac, sg->good, (v & 8) == 0);
			snprintf(sg->sig, sizeof(sg->sig),
					 (v & 3) == 0 ? "v1,%s" : (v & 3) == 1 ? "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= v1,%s" :
					 (v & 3) == 2 ? "  v2,c2lnbmF0dXJl   v1,%s  " : "v1a,x v1,%s v1,zzzz",
					 sg->good);
			h[n++] = (WiHeader) {svix ? "svix-id" : "Webhook-Id", svix ? 7 : 10, sg->id, strlen(sg->id)};
			h[n++] = (WiHeader) {svix ? "Svix-Timestamp" : "webhook-timestamp", svix ? 14 : 17, sg->ts, strlen(sg->ts)};
			h[n++] = (WiHeader) {svix ? "SVIX-SIGNATURE" : "webhook-signature", svix ? 14 : 17, sg->sig, strlen(sg->sig)};
			break;
		case WI_SIG_STRIPE:
			to_hex(mac, sg->good, (v & 8) != 0);
			snprintf(sg->sig, sizeof(sg->sig),
					 (v & 3) == 0 ? "t=%s,v1=%s" :
					 (v & 3) == 1 ? "t=%s,v1=0000000000000000000000000000000000000000000000000000000000000000,v1=%s" :
					 (v & 3) == 2 ? "v0=abc, t=%s , v1=%s" :
					 "t=%s,v1=%s,v0=6ffbb59b2300aae63f272406069a9788598b792a944a07aba816edb039989a39",
					 sg->ts, sg->good);
			h[n++] = (WiHeader) {"Stripe-Signature", 16, sg->sig, strlen(sg->sig)};
			break;
		case WI_SIG_GITHUB:
			to_hex(mac, sg->good, (v & 8) != 0);
			snprintf(sg->sig, sizeof(sg->sig), "sha256=%s", sg->good);
			h[n++] = (WiHeader) {"X-Hub-Signature-256", 19, sg->sig, strlen(sg->sig)};
			break;
		case WI_SIG_SHOPIFY:
			to_b64(mac, sg->good, (v & 8) == 0);
			snprintf(sg->sig, sizeof(sg->sig), "%s", sg->good);
			h[n++] = (WiHeader) {"X-Shopify-Hmac-Sha256", 21, sg->sig, strlen(sg->sig)};
			break;
		case WI_SIG_SLACK:
			to_hex(mac, sg->good, (v & 8) != 0);
			snprintf(sg->sig, sizeof(sg->sig), "v0=%s", sg->good);
			h[n++] = (WiHeader) {"X-Slack-Request-Timestamp", 25, sg->ts, strlen(sg->ts)};
			h[n++] = (WiHeader) {"X-Slack-Signature", 17, sg->sig, strlen(sg->sig)};
			break;
	}
	return n;
}

/* The key and secret for s: the input's first secret's bytes, or a fixed one. */
static void
make_secret(WiSigScheme s, const Request *r, Signed *sg)
{
	const char *raw = r->nsecrets > 0 && r->secret_lens[0] > 0 ? r->secrets[0] : "fuzz secret";
	size_t		len = r->nsecrets > 0 && r->secret_lens[0] > 0 ? r->secret_lens[0] : 11;

	if (len > WI_SIG_MAX_KEY_BYTES)
		len = WI_SIG_MAX_KEY_BYTES;
	memcpy(sg->key, raw, len);
	sg->keylen = len;
	if (s == WI_SIG_STANDARD_WEBHOOKS)
	{
		memcpy(sg->secret, "whsec_", 6);
		sg->secret_len = 6 + EVP_EncodeBlock((unsigned char *) sg->secret + 6, sg->key, (int) len);
	}
	else
	{
		memcpy(sg->secret, raw, len);
		sg->secret_len = len;
	}
}

/* The id the standard schemes sign: the input's first header's printable bytes. */
static void
make_id(const Request *r, Signed *sg)
{
	size_t		n = 0;

	if (r->nheaders > 0 && r->headers[0].value)
		for (size_t i = 0; i < r->headers[0].value_len && n < sizeof(sg->id) - 1; i++)
			if (r->headers[0].value[i] > 0x20 && r->headers[0].value[i] < 0x7f)
				sg->id[n++] = r->headers[0].value[i];
	if (n == 0)
		n = (size_t) snprintf(sg->id, sizeof(sg->id), "msg_p5jXN8AQM9LWM0D4loKWxJek");
	sg->id[n] = '\0';
}

/*
 * Whether two keys give the same HMAC: HMAC pads a key of up to a block (64
 * bytes) with zeros, so "k" and "k\0" are one key.
 */
static bool
same_hmac_key(const unsigned char *a, size_t alen, const char *b, size_t blen)
{
	if (alen <= 64)
		while (alen > 0 && a[alen - 1] == 0)
			alen--;
	return alen == blen && memcmp(a, b, blen) == 0;
}

static WiSigStatus
verify_signed(WiSigScheme s, const Request *r, WiHeader *h, int nh, const char *body, size_t blen,
			  const char *secret, size_t slen, int64_t ts_now)
{
	const char *secrets[1] = {secret};
	size_t		lens[1] = {slen};

	return verify(s, h, nh, body, blen, secrets, lens, 1, ts_now, r->tol);
}

static void
check_signed(WiSigScheme s, const Request *r, unsigned v)
{
	Signed		sg;
	WiHeader	h[MAX_HEADERS + 4];
	int			own;
	int			nh;
	int64_t		ts = r->now < 0 ? 0 : (r->now > MAX_TS ? MAX_TS : r->now);
	int64_t		tol = r->tol < 0 ? 0 : r->tol;
	bool		timed = (s == WI_SIG_STANDARD_WEBHOOKS || s == WI_SIG_STRIPE || s == WI_SIG_SLACK);
	char	   *p;
	char		saved;

	memset(&sg, 0, sizeof(sg));
	make_secret(s, r, &sg);
	make_id(r, &sg);
	snprintf(sg.ts, sizeof(sg.ts), "%lld", (long long) ts);
	own = sign(s, v, &sg, r, h);
	memcpy(h + own, r->headers, sizeof(WiHeader) * r->nheaders);
	nh = own + r->nheaders;

	require(verify_signed(s, r, h, nh, r->body, r->body_len, sg.secret, sg.secret_len, ts) == WI_SIG_OK);

	/* one character of the MAC changed, as a valid digit */
	p = strstr(sg.sig, sg.good);
	require(p != NULL);
	saved = *p;
	*p = (saved == 'A') ? 'B' : (saved == '0' ? '1' : (saved >= 'a' && saved <= 'f') || (saved >= 'A' && saved <= 'F') ? '0' : 'A');
	require(verify_signed(s, r, h, nh, r->body, r->body_len, sg.secret, sg.secret_len, ts) == WI_SIG_NO_MATCH);
	*p = saved;

	/* another body, another secret */
	{
		char	   *body = malloc(r->body_len + 1);

		memcpy(body, r->body, r->body_len);
		body[r->body_len] = '\n';
		require(verify_signed(s, r, h, nh, body, r->body_len + 1, sg.secret, sg.secret_len, ts) == WI_SIG_NO_MATCH);
		free(body);
	}
	if (s != WI_SIG_STANDARD_WEBHOOKS && !same_hmac_key(sg.key, sg.keylen, "another secret", 14))
		require(verify_signed(s, r, h, nh, r->body, r->body_len, "another secret", 14, ts) == WI_SIG_NO_MATCH);
	else if (s == WI_SIG_STANDARD_WEBHOOKS && !same_hmac_key(sg.key, sg.keylen, "\x01\x02\x03", 3))
		require(verify_signed(s, r, h, nh, r->body, r->body_len, "whsec_AQID", 10, ts) == WI_SIG_NO_MATCH);

	/* the window's edges, where now stays representable */
	if (timed && tol < INT64_C(1000000000000000) && ts + tol + 1 <= INT64_MAX)
	{
		require(verify_signed(s, r, h, nh, r->body, r->body_len, sg.secret, sg.secret_len, ts + tol) == WI_SIG_OK);
		require(verify_signed(s, r, h, nh, r->body, r->body_len, sg.secret, sg.secret_len, ts - tol) == WI_SIG_OK);
		require(verify_signed(s, r, h, nh, r->body, r->body_len, sg.secret, sg.secret_len, ts + tol + 1) == WI_SIG_OUTSIDE_WINDOW);
		require(verify_signed(s, r, h, nh, r->body, r->body_len, sg.secret, sg.secret_len, ts - tol - 1) == WI_SIG_OUTSIDE_WINDOW);
	}
}

/*
 * The delivery id (receive's event id): a part of one header value, with no
 * blank at either end; none for the schemes whose id is in the body.
 */
static void
check_delivery_id(WiSigScheme scheme, const Request *r)
{
	const char *id;
	size_t		len;
	bool		inside = false;

	if (!wi_sig_delivery_id(scheme, r->headers, r->nheaders, &id, &len))
		return;
	require(scheme != WI_SIG_STRIPE && scheme != WI_SIG_SLACK);
	for (int i = 0; i < r->nheaders && !inside; i++)
		inside = r->headers[i].value != NULL && id >= r->headers[i].value &&
			(size_t) (id - r->headers[i].value) + len <= r->headers[i].value_len;
	require(inside);
	require(len == 0 || (id[0] != ' ' && id[0] != '\t' && id[len - 1] != ' ' && id[len - 1] != '\t'));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int	verbose = -1;
	Request		r;
	unsigned	v = 0;

	if (verbose < 0)
		verbose = getenv("WI_FUZZ_VERBOSE") != NULL;

	if (size > 65536)
		return 0;
	parse_input(&r, (const char *) data, size);
	for (size_t i = 0; i < size; i++)
		v = v * 31 + data[i];
	check_scheme_name(&r);
	check_header_find(&r);
	for (size_t i = 0; i < sizeof(all_schemes) / sizeof(all_schemes[0]); i++)
	{
		if (verbose)
			fprintf(stderr, "%s: %s\n", wi_sig_scheme_name(all_schemes[i]),
					wi_sig_status_detail(verify_req(all_schemes[i], &r)));
		check_scheme_on_input(all_schemes[i], &r);
		check_delivery_id(all_schemes[i], &r);
	}
	/* signing is the costly part: one scheme per input, chosen by its bytes */
	check_signed(all_schemes[v % 5], &r, v / 5);
	return 0;
}
