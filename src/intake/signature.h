/*
 * signature.h
 *		Verifying the signature a webhook's sender put on it: Standard
 *		Webhooks (and Svix), Stripe, GitHub, Shopify and Slack.
 *
 *		Pure C (signature.c): no PostgreSQL calls, no allocation of its
 *		own, safe on any bytes, so that a libFuzzer target can link it with
 *		-lcrypto alone (the unit test and the fuzz target build it with
 *		-DWI_FRONTEND).  The backend glue is signature_sql.h.
 *
 * IDENTIFICATION
 *		src/intake/signature.h
 */
#ifndef WI_SIGNATURE_H
#define WI_SIGNATURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum WiSigScheme
{
	WI_SIG_STANDARD_WEBHOOKS,	/* webhook-id/-timestamp/-signature; also
								 * svix-id/-timestamp/-signature */
	WI_SIG_STRIPE,				/* Stripe-Signature: t=...,v1=... */
	WI_SIG_GITHUB,				/* X-Hub-Signature-256: sha256=<hex> */
	WI_SIG_SHOPIFY,				/* X-Shopify-Hmac-Sha256: base64 */
	WI_SIG_SLACK				/* X-Slack-Signature: v0=<hex>,
								 * X-Slack-Request-Timestamp */
} WiSigScheme;

typedef enum WiSigStatus
{
	WI_SIG_OK,
	WI_SIG_NO_SIGNATURE,		/* the scheme's signature header is absent */
	WI_SIG_MALFORMED,			/* a header the scheme needs is absent or
								 * unparseable (timestamp, id, signature
								 * syntax) */
	WI_SIG_OUTSIDE_WINDOW,		/* signed timestamp further than the
								 * tolerance from now (either direction) */
	WI_SIG_NO_MATCH,			/* well-formed, but no secret yields any of
								 * the signatures given */
	WI_SIG_BAD_SECRET			/* a secret is unusable for the scheme (e.g.
								 * whsec_ not base64, empty) */
} WiSigStatus;

/* One request header; neither string is NUL-terminated. */
typedef struct WiHeader
{
	const char *name;
	size_t		name_len;
	const char *value;
	size_t		value_len;
} WiHeader;

/* Longest Standard Webhooks key, decoded, in bytes (longer: BAD_SECRET). */
#define WI_SIG_MAX_KEY_BYTES	1024

/*
 * "standard-webhooks" (alias "svix"), "stripe", "github", "shopify",
 * "slack", in any letter case.  false for anything else.
 */
extern bool wi_sig_scheme_from_name(const char *name, size_t len, WiSigScheme *scheme);
extern const char *wi_sig_scheme_name(WiSigScheme scheme);
/* The known names, for a hint: "standard-webhooks (or svix), stripe, ..." */
extern const char *wi_sig_scheme_list(void);

/* The first header called name (NUL-terminated), in any letter case; NULL if none. */
extern const WiHeader *wi_header_find(const WiHeader *headers, int nheaders, const char *name);

/*
 * Whether a secret can sign for the scheme: never empty; for Standard
 * Webhooks, base64 (padded or not) of 1 to WI_SIG_MAX_KEY_BYTES bytes after
 * an optional "whsec_".
 */
extern bool wi_sig_secret_valid(WiSigScheme scheme, const char *secret, size_t len);

/*
 * Verify a request.  The checks run in this order, the first failure giving
 * the status: every secret usable (and at least one: nsecrets < 1 is
 * BAD_SECRET), the signature header present, every header the scheme needs
 * well-formed, the signed timestamp within tolerance_s of now_unix, a
 * signature matching.  A negative tolerance_s counts as 0.
 */
extern WiSigStatus wi_sig_verify(WiSigScheme scheme, const WiHeader *headers, int nheaders,
								 const char *body, size_t body_len,
								 const char *const *secrets, const size_t *secret_lens, int nsecrets,
								 int64_t now_unix, int64_t tolerance_s);

/*
 * The delivery id a request's headers carry, trimmed as the signature
 * parser trims it: for standard-webhooks the very id the signature covers
 * (webhook-id, or svix-id when the request is signed with svix-signature),
 * so that no unsigned header can stand in for it; for github
 * X-GitHub-Delivery; for shopify X-Shopify-Event-Id, else
 * X-Shopify-Webhook-Id (neither signed by the sender).  false when there is
 * none, and always for stripe and slack (theirs is in the body).  Points
 * into headers.
 */
extern bool wi_sig_delivery_id(WiSigScheme scheme, const WiHeader *headers, int nheaders,
							   const char **id, size_t *len);

/* A sentence for errdetail, generic (no header name). */
extern const char *wi_sig_status_detail(WiSigStatus status);

#endif							/* WI_SIGNATURE_H */
