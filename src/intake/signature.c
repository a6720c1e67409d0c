/*
 * signature.c
 *		Webhook signature verification, pure C: the header syntax of each
 *		scheme (Standard Webhooks and Svix, Stripe, GitHub, Shopify, Slack),
 *		the timestamp window, HMAC-SHA256 and base64 from OpenSSL, and a
 *		constant-time comparison of MACs (CRYPTO_memcmp).  No PostgreSQL
 *		calls and no allocation of its own (fixed buffers on the stack), so
 *		that a libFuzzer target links it with -lcrypto alone.  Every loop is
 *		bounded by a length; header values are not NUL-terminated.
 *
 * IDENTIFICATION
 *		src/intake/signature.c
 */
#ifndef WI_FRONTEND
#define WI_FRONTEND
#endif
#include "signature.h"

#include <string.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#define MAC_BYTES		32		/* SHA-256 */
#define MAC_HEX_CHARS	64
#define MAC_B64_CHARS	44
/* Digits of a timestamp at most: 10^18 seconds fits an int64_t. */
#define TS_MAX_DIGITS	18
#define WHSEC_PREFIX	"whsec_"

/* A MAC's input: up to five pieces, hashed in order. */
typedef struct SignedContent
{
	const char *part[5];
	size_t		len[5];
	int			nparts;
} SignedContent;

/* ---- names and messages ---- */

static const struct
{
	const char *name;
	WiSigScheme scheme;
}			scheme_names[] =
{
	{"standard-webhooks", WI_SIG_STANDARD_WEBHOOKS},
	{"svix", WI_SIG_STANDARD_WEBHOOKS},
	{"stripe", WI_SIG_STRIPE},
	{"github", WI_SIG_GITHUB},
	{"shopify", WI_SIG_SHOPIFY},
	{"slack", WI_SIG_SLACK},
};

static char
ascii_lower(char c)
{
	return (c >= 'A' && c <= 'Z') ? (char) (c - 'A' + 'a') : c;
}

/* s (len bytes) equals the NUL-terminated word, in any letter case */
static bool
equal_ci(const char *s, size_t len, const char *word)
{
	size_t		wlen = strlen(word);

	if (len != wlen)
		return false;
	for (size_t i = 0; i < len; i++)
		if (ascii_lower(s[i]) != ascii_lower(word[i]))
			return false;
	return true;
}

static bool
equal_exact(const char *s, size_t len, const char *word)
{
	return len == strlen(word) && memcmp(s, word, len) == 0;
}

bool
wi_sig_scheme_from_name(const char *name, size_t len, WiSigScheme *scheme)
{
	if (name == NULL)
		return false;
	for (size_t i = 0; i < sizeof(scheme_names) / sizeof(scheme_names[0]); i++)
		if (equal_ci(name, len, scheme_names[i].name))
		{
			*scheme = scheme_names[i].scheme;
			return true;
		}
	return false;
}

const char *
wi_sig_scheme_name(WiSigScheme scheme)
{
	switch (scheme)
	{
		case WI_SIG_STANDARD_WEBHOOKS:
			return "standard-webhooks";
		case WI_SIG_STRIPE:
			return "stripe";
		case WI_SIG_GITHUB:
			return "github";
		case WI_SIG_SHOPIFY:
			return "shopify";
		case WI_SIG_SLACK:
			return "slack";
	}
	return "unknown";
}

const char *
wi_sig_scheme_list(void)
{
	return "standard-webhooks (or svix), stripe, github, shopify, slack";
}

const char *
wi_sig_status_detail(WiSigStatus status)
{
	switch (status)
	{
		case WI_SIG_OK:
			return "The signature is valid.";
		case WI_SIG_NO_SIGNATURE:
			return "No signature header.";
		case WI_SIG_MALFORMED:
			return "A signature header is missing or malformed.";
		case WI_SIG_OUTSIDE_WINDOW:
			return "The signed timestamp is outside the tolerance window.";
		case WI_SIG_NO_MATCH:
			return "No signing secret matched the signature.";
		case WI_SIG_BAD_SECRET:
			return "A signing secret is unusable for the signature scheme.";
	}
	return "Unknown signature status.";
}

const WiHeader *
wi_header_find(const WiHeader *headers, int nheaders, const char *name)
{
	if (headers == NULL || name == NULL)
		return NULL;
	for (int i = 0; i < nheaders; i++)
		if (headers[i].name != NULL && equal_ci(headers[i].name, headers[i].name_len, name))
			return &headers[i];
	return NULL;
}

/* ---- lexical pieces ---- */

static bool
is_ows(char c)
{
	return c == ' ' || c == '\t';
}

/* Trim spaces and tabs at both ends of s[0..*len). */
static const char *
trim(const char *s, size_t *len)
{
	while (*len > 0 && is_ows(s[0]))
	{
		s++;
		(*len)--;
	}
	while (*len > 0 && is_ows(s[*len - 1]))
		(*len)--;
	return s;
}

/* A header's value, trimmed; false if the header is absent or has no value. */
static bool
header_value(const WiHeader *headers, int nheaders, const char *name, const char **value, size_t *len)
{
	const WiHeader *h = wi_header_find(headers, nheaders, name);

	if (h == NULL || h->value == NULL)
		return false;
	*len = h->value_len;
	*value = trim(h->value, len);
	return *len > 0;
}

/*
 * The next piece of s[0..len) from *pos, up to sep, trimmed; empty pieces
 * are skipped.  false when there is none left.
 */
static bool
next_piece(const char *s, size_t len, char sep, size_t *pos, const char **piece, size_t *plen)
{
	while (*pos < len)
	{
		size_t		start = *pos;
		const char *end = memchr(s + start, sep, len - start);
		size_t		stop = end ? (size_t) (end - s) : len;

		*pos = end ? stop + 1 : len;
		*plen = stop - start;
		*piece = trim(s + start, plen);
		if (*plen > 0)
			return true;
	}
	return false;
}

/* Split a piece at the first sep: false if it has none. */
static bool
split_at(const char *s, size_t len, char sep, size_t *keylen, const char **val, size_t *vallen)
{
	const char *p = memchr(s, sep, len);

	if (p == NULL)
		return false;
	*keylen = (size_t) (p - s);
	*val = p + 1;
	*vallen = len - *keylen - 1;
	return true;
}

/* Integer seconds: 1 to TS_MAX_DIGITS digits, nothing else. */
static bool
parse_timestamp(const char *s, size_t len, int64_t *ts)
{
	int64_t		v = 0;

	if (len == 0 || len > TS_MAX_DIGITS)
		return false;
	for (size_t i = 0; i < len; i++)
	{
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (s[i] - '0');
	}
	*ts = v;
	return true;
}

static int
hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = ascii_lower(c);
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Exactly MAC_HEX_CHARS hex digits, either case, to MAC_BYTES bytes. */
static bool
decode_hex_mac(const char *s, size_t len, unsigned char *mac)
{
	if (len != MAC_HEX_CHARS)
		return false;
	for (size_t i = 0; i < MAC_BYTES; i++)
	{
		int			hi = hex_digit(s[2 * i]);
		int			lo = hex_digit(s[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return false;
		mac[i] = (unsigned char) (hi << 4 | lo);
	}
	return true;
}

static bool
is_b64_char(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
}

/*
 * Standard base64, padded or not, to at most cap bytes; false for anything
 * else (other characters, misplaced padding, an impossible length).  The
 * syntax is checked here, the decoding is OpenSSL's.
 */
static bool
decode_b64(const char *s, size_t len, unsigned char *out, size_t cap, size_t *outlen)
{
	size_t		pad = 0;
	size_t		body;
	size_t		full;
	size_t		tail;
	size_t		n;

	while (pad < 2 && pad < len && s[len - 1 - pad] == '=')
		pad++;
	body = len - pad;
	if (body == 0 || (pad > 0 && len % 4 != 0) || body % 4 == 1)
		return false;
	for (size_t i = 0; i < body; i++)
		if (!is_b64_char(s[i]))
			return false;
	tail = body % 4;
	full = body - tail;
	n = full / 4 * 3 + (tail == 0 ? 0 : tail - 1);
	if (n > cap)
		return false;
	if (full > 0 && EVP_DecodeBlock(out, (const unsigned char *) s, (int) full) != (int) (full / 4 * 3))
		return false;
	if (tail > 0)
	{
		unsigned char quad[4] = {'=', '=', '=', '='};
		unsigned char three[3];

		memcpy(quad, s + full, tail);
		if (EVP_DecodeBlock(three, quad, 4) != 3)
			return false;
		memcpy(out + full / 4 * 3, three, tail - 1);
	}
	*outlen = n;
	return true;
}

/* A base64 MAC: exactly MAC_BYTES bytes once decoded. */
static bool
decode_b64_mac(const char *s, size_t len, unsigned char *mac)
{
	size_t		n;

	return len <= MAC_B64_CHARS && decode_b64(s, len, mac, MAC_BYTES, &n) && n == MAC_BYTES;
}

/* ---- keys and MACs ---- */

/* A Standard Webhooks key: the base64 after an optional whsec_. */
static bool
standard_key(const char *secret, size_t len, unsigned char *key, size_t *keylen)
{
	size_t		plen = strlen(WHSEC_PREFIX);

	if (len >= plen && memcmp(secret, WHSEC_PREFIX, plen) == 0)
	{
		secret += plen;
		len -= plen;
	}
	return decode_b64(secret, len, key, WI_SIG_MAX_KEY_BYTES, keylen) && *keylen > 0;
}

bool
wi_sig_secret_valid(WiSigScheme scheme, const char *secret, size_t len)
{
	unsigned char key[WI_SIG_MAX_KEY_BYTES];
	size_t		keylen;
	bool		ok;

	if (secret == NULL || len == 0)
		return false;
	if (scheme != WI_SIG_STANDARD_WEBHOOKS)
		return true;
	ok = standard_key(secret, len, key, &keylen);
	OPENSSL_cleanse(key, sizeof(key));
	return ok;
}

/* HMAC-SHA256 of the content; false if OpenSSL fails (then nothing matches). */
static bool
hmac_sha256(const unsigned char *key, size_t keylen, const SignedContent *content, unsigned char *mac)
{
	static EVP_MAC *hmac = NULL;
	char		digest[] = "SHA256";
	OSSL_PARAM	params[2];
	EVP_MAC_CTX *ctx;
	size_t		maclen = 0;
	bool		ok;

	if (hmac == NULL && (hmac = EVP_MAC_fetch(NULL, "HMAC", NULL)) == NULL)
		return false;
	if ((ctx = EVP_MAC_CTX_new(hmac)) == NULL)
		return false;
	params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0);
	params[1] = OSSL_PARAM_construct_end();
	ok = EVP_MAC_init(ctx, key, keylen, params) == 1;
	for (int i = 0; ok && i < content->nparts; i++)
		ok = EVP_MAC_update(ctx, (const unsigned char *) content->part[i], content->len[i]) == 1;
	ok = ok && EVP_MAC_final(ctx, mac, &maclen, MAC_BYTES) == 1 && maclen == MAC_BYTES;
	EVP_MAC_CTX_free(ctx);
	return ok;
}

/* The MAC of the content under secret i, as the scheme keys it. */
static bool
mac_for_secret(WiSigScheme scheme, const char *secret, size_t len, const SignedContent *content,
			   unsigned char *mac)
{
	unsigned char key[WI_SIG_MAX_KEY_BYTES];
	size_t		keylen;
	bool		ok;

	if (scheme != WI_SIG_STANDARD_WEBHOOKS)
		return hmac_sha256((const unsigned char *) secret, len, content, mac);
	ok = standard_key(secret, len, key, &keylen) && hmac_sha256(key, keylen, content, mac);
	OPENSSL_cleanse(key, sizeof(key));
	return ok;
}

static void
add_part(SignedContent *c, const char *s, size_t len)
{
	c->part[c->nparts] = s;
	c->len[c->nparts] = len;
	c->nparts++;
}

/* ---- what each scheme sends ---- */

/* The parsed headers of a request, whatever the scheme. */
typedef struct SigRequest
{
	const char *sig;			/* the signature header's value, trimmed */
	size_t		sig_len;
	const char *one;			/* GitHub, Shopify, Slack: the MAC's text */
	size_t		one_len;
	bool		has_ts;			/* the scheme signs a timestamp */
	int64_t		ts;
	SignedContent content;		/* what the sender signed */
} SigRequest;

/*
 * The MACs a signature header offers, one at a time from *pos: true and the
 * next MAC, or false when there are no more.  The syntax was checked by the
 * scheme's parser first.
 */
static bool
next_offered_mac(WiSigScheme scheme, const SigRequest *req, size_t *pos, unsigned char *mac)
{
	const char *piece;
	size_t		plen;
	size_t		klen;
	const char *val;
	size_t		vlen;

	switch (scheme)
	{
		case WI_SIG_STANDARD_WEBHOOKS:
			while (next_piece(req->sig, req->sig_len, ' ', pos, &piece, &plen))
				if (split_at(piece, plen, ',', &klen, &val, &vlen) && equal_exact(piece, klen, "v1") &&
					decode_b64_mac(val, vlen, mac))
					return true;
			return false;
		case WI_SIG_STRIPE:
			while (next_piece(req->sig, req->sig_len, ',', pos, &piece, &plen))
				if (split_at(piece, plen, '=', &klen, &val, &vlen) && equal_exact(piece, klen, "v1") &&
					decode_hex_mac(val, vlen, mac))
					return true;
			return false;
		case WI_SIG_GITHUB:
		case WI_SIG_SLACK:
			if ((*pos)++ > 0)
				return false;
			return decode_hex_mac(req->one, req->one_len, mac);
		case WI_SIG_SHOPIFY:
			if ((*pos)++ > 0)
				return false;
			return decode_b64_mac(req->one, req->one_len, mac);
	}
	return false;
}

/* Standard Webhooks' two header families: the signature, the id, the timestamp. */
static const char *const standard_names[2][3] = {
	{"webhook-signature", "webhook-id", "webhook-timestamp"},
	{"svix-signature", "svix-id", "svix-timestamp"},
};

/* The family a request is signed in: webhook-* if it has a webhook-signature, else svix-*. */
static int
standard_family(const WiHeader *headers, int nheaders)
{
	const char *sig;
	size_t		sig_len;

	return header_value(headers, nheaders, standard_names[0][0], &sig, &sig_len) ? 0 : 1;
}

/* The first of two headers that has a value, trimmed. */
static bool
first_value(const WiHeader *headers, int nheaders, const char *first, const char *second,
			const char **value, size_t *len)
{
	return header_value(headers, nheaders, first, value, len) ||
		(second != NULL && header_value(headers, nheaders, second, value, len));
}

bool
wi_sig_delivery_id(WiSigScheme scheme, const WiHeader *headers, int nheaders, const char **id, size_t *len)
{
	if (nheaders < 0)
		nheaders = 0;
	switch (scheme)
	{
		case WI_SIG_STANDARD_WEBHOOKS:
			return header_value(headers, nheaders, standard_names[standard_family(headers, nheaders)][1],
								id, len);
		case WI_SIG_GITHUB:
			return first_value(headers, nheaders, "x-github-delivery", NULL, id, len);
		case WI_SIG_SHOPIFY:
			return first_value(headers, nheaders, "x-shopify-event-id", "x-shopify-webhook-id", id, len);
		case WI_SIG_STRIPE:
		case WI_SIG_SLACK:
			return false;
	}
	return false;
}

/*
 * Standard Webhooks: webhook-* or, when there is no webhook-signature,
 * svix-*; all three from the same family.  The signature is space-separated
 * "version,signature" entries; entries of other versions are ignored, and
 * at least one v1 with a 32-byte base64 MAC is needed.
 */
static WiSigStatus
parse_standard(const WiHeader *headers, int nheaders, SigRequest *req)
{
	int			family = standard_family(headers, nheaders);
	const char *id;
	size_t		id_len;
	const char *ts;
	size_t		ts_len;
	size_t		pos = 0;
	const char *piece;
	size_t		plen;
	size_t		klen;
	const char *val;
	size_t		vlen;
	unsigned char mac[MAC_BYTES];

	if (!header_value(headers, nheaders, standard_names[family][0], &req->sig, &req->sig_len))
		return wi_header_find(headers, nheaders, standard_names[0][0]) ||
			wi_header_find(headers, nheaders, standard_names[1][0]) ? WI_SIG_MALFORMED : WI_SIG_NO_SIGNATURE;
	if (!header_value(headers, nheaders, standard_names[family][1], &id, &id_len) ||
		!header_value(headers, nheaders, standard_names[family][2], &ts, &ts_len) ||
		!parse_timestamp(ts, ts_len, &req->ts))
		return WI_SIG_MALFORMED;
	while (next_piece(req->sig, req->sig_len, ' ', &pos, &piece, &plen))
		if (!split_at(piece, plen, ',', &klen, &val, &vlen))
			return WI_SIG_MALFORMED;
	pos = 0;
	if (!next_offered_mac(WI_SIG_STANDARD_WEBHOOKS, req, &pos, mac))
		return WI_SIG_MALFORMED;
	req->has_ts = true;
	add_part(&req->content, id, id_len);
	add_part(&req->content, ".", 1);
	add_part(&req->content, ts, ts_len);
	add_part(&req->content, ".", 1);
	return WI_SIG_OK;
}

/*
 * Stripe: comma-separated key=value items, exactly one t, at least one v1
 * of 64 hex digits; other keys (v0, ...) ignored.
 */
static WiSigStatus
parse_stripe(const WiHeader *headers, int nheaders, SigRequest *req)
{
	size_t		pos = 0;
	const char *piece;
	size_t		plen;
	size_t		klen;
	const char *val;
	size_t		vlen;
	const char *ts = NULL;
	size_t		ts_len = 0;
	unsigned char mac[MAC_BYTES];

	if (!header_value(headers, nheaders, "stripe-signature", &req->sig, &req->sig_len))
		return wi_header_find(headers, nheaders, "stripe-signature") ? WI_SIG_MALFORMED : WI_SIG_NO_SIGNATURE;
	while (next_piece(req->sig, req->sig_len, ',', &pos, &piece, &plen))
	{
		if (!split_at(piece, plen, '=', &klen, &val, &vlen))
			return WI_SIG_MALFORMED;
		if (equal_exact(piece, klen, "t"))
		{
			if (ts != NULL || !parse_timestamp(val, vlen, &req->ts))
				return WI_SIG_MALFORMED;
			ts = val;
			ts_len = vlen;
		}
	}
	pos = 0;
	if (ts == NULL || !next_offered_mac(WI_SIG_STRIPE, req, &pos, mac))
		return WI_SIG_MALFORMED;
	req->has_ts = true;
	add_part(&req->content, ts, ts_len);
	add_part(&req->content, ".", 1);
	return WI_SIG_OK;
}

/* GitHub: sha256=<64 hex digits> of the body, no timestamp. */
static WiSigStatus
parse_github(const WiHeader *headers, int nheaders, SigRequest *req)
{
	unsigned char mac[MAC_BYTES];

	if (!header_value(headers, nheaders, "x-hub-signature-256", &req->sig, &req->sig_len))
		return wi_header_find(headers, nheaders, "x-hub-signature-256") ? WI_SIG_MALFORMED : WI_SIG_NO_SIGNATURE;
	if (req->sig_len < 7 || memcmp(req->sig, "sha256=", 7) != 0)
		return WI_SIG_MALFORMED;
	req->one = req->sig + 7;
	req->one_len = req->sig_len - 7;
	return decode_hex_mac(req->one, req->one_len, mac) ? WI_SIG_OK : WI_SIG_MALFORMED;
}

/* Shopify: the base64 MAC of the body, no timestamp. */
static WiSigStatus
parse_shopify(const WiHeader *headers, int nheaders, SigRequest *req)
{
	unsigned char mac[MAC_BYTES];

	if (!header_value(headers, nheaders, "x-shopify-hmac-sha256", &req->sig, &req->sig_len))
		return wi_header_find(headers, nheaders, "x-shopify-hmac-sha256") ? WI_SIG_MALFORMED : WI_SIG_NO_SIGNATURE;
	req->one = req->sig;
	req->one_len = req->sig_len;
	return decode_b64_mac(req->one, req->one_len, mac) ? WI_SIG_OK : WI_SIG_MALFORMED;
}

/* Slack: v0=<64 hex digits> of v0:<timestamp>:<body>. */
static WiSigStatus
parse_slack(const WiHeader *headers, int nheaders, SigRequest *req)
{
	const char *ts;
	size_t		ts_len;
	unsigned char mac[MAC_BYTES];

	if (!header_value(headers, nheaders, "x-slack-signature", &req->sig, &req->sig_len))
		return wi_header_find(headers, nheaders, "x-slack-signature") ? WI_SIG_MALFORMED : WI_SIG_NO_SIGNATURE;
	if (req->sig_len < 3 || memcmp(req->sig, "v0=", 3) != 0)
		return WI_SIG_MALFORMED;
	req->one = req->sig + 3;
	req->one_len = req->sig_len - 3;
	if (!decode_hex_mac(req->one, req->one_len, mac) ||
		!header_value(headers, nheaders, "x-slack-request-timestamp", &ts, &ts_len) ||
		!parse_timestamp(ts, ts_len, &req->ts))
		return WI_SIG_MALFORMED;
	req->has_ts = true;
	add_part(&req->content, "v0:", 3);
	add_part(&req->content, ts, ts_len);
	add_part(&req->content, ":", 1);
	return WI_SIG_OK;
}

static WiSigStatus
parse_request(WiSigScheme scheme, const WiHeader *headers, int nheaders, SigRequest *req)
{
	switch (scheme)
	{
		case WI_SIG_STANDARD_WEBHOOKS:
			return parse_standard(headers, nheaders, req);
		case WI_SIG_STRIPE:
			return parse_stripe(headers, nheaders, req);
		case WI_SIG_GITHUB:
			return parse_github(headers, nheaders, req);
		case WI_SIG_SHOPIFY:
			return parse_shopify(headers, nheaders, req);
		case WI_SIG_SLACK:
			return parse_slack(headers, nheaders, req);
	}
	return WI_SIG_MALFORMED;
}

/* |now - ts| > tolerance, without overflow for any int64_t values. */
static bool
outside_window(int64_t ts, int64_t now, int64_t tolerance)
{
	uint64_t	distance = ts > now ? (uint64_t) ts - (uint64_t) now : (uint64_t) now - (uint64_t) ts;

	return distance > (uint64_t) (tolerance < 0 ? 0 : tolerance);
}

/* Whether any MAC the header offers equals mac, each compared in constant time. */
static bool
any_offered_matches(WiSigScheme scheme, const SigRequest *req, const unsigned char *mac)
{
	size_t		pos = 0;
	unsigned char offered[MAC_BYTES];
	bool		match = false;

	while (next_offered_mac(scheme, req, &pos, offered))
		if (CRYPTO_memcmp(offered, mac, MAC_BYTES) == 0)
			match = true;
	return match;
}

WiSigStatus
wi_sig_verify(WiSigScheme scheme, const WiHeader *headers, int nheaders,
			  const char *body, size_t body_len,
			  const char *const *secrets, const size_t *secret_lens, int nsecrets,
			  int64_t now_unix, int64_t tolerance_s)
{
	SigRequest	req;
	WiSigStatus status;
	unsigned char mac[MAC_BYTES];

	if (nsecrets < 1 || secrets == NULL || secret_lens == NULL)
		return WI_SIG_BAD_SECRET;
	for (int i = 0; i < nsecrets; i++)
		if (!wi_sig_secret_valid(scheme, secrets[i], secret_lens[i]))
			return WI_SIG_BAD_SECRET;
	memset(&req, 0, sizeof(req));
	if ((status = parse_request(scheme, headers, nheaders < 0 ? 0 : nheaders, &req)) != WI_SIG_OK)
		return status;
	if (req.has_ts && outside_window(req.ts, now_unix, tolerance_s))
		return WI_SIG_OUTSIDE_WINDOW;
	add_part(&req.content, body ? body : "", body ? body_len : 0);
	for (int i = 0; i < nsecrets; i++)
		if (mac_for_secret(scheme, secrets[i], secret_lens[i], &req.content, mac) &&
			any_offered_matches(scheme, &req, mac))
			return WI_SIG_OK;
	return WI_SIG_NO_MATCH;
}
