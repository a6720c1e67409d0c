/*
 * http.h
 *		One fetch in flight (Transfer) and the libcurl multi driver (http.c).
 *
 * IDENTIFICATION
 *		src/net/http.h
 */
#ifndef WI_HTTP_H
#define WI_HTTP_H

#include "postgres.h"

#include <curl/curl.h>

#include "utils/timestamp.h"

#include "net_guard.h"
#include "source_tls.h"

typedef struct WiOrigin WiOrigin;	/* h2_pacing.c */

/* Redirects followed at most, per fetch. */
#define WI_MAX_REDIRECTS	5

typedef struct Transfer
{
	/* the job, copied at claim time */
	int64		job_id;
	int			attempt;
	int			max_attempts;
	char	   *source;
	char	   *external_id;
	char	   *url;
	long		timeout_ms;
	Oid			handler;		/* InvalidOid: store the document */
	WiSourceTls *conf;			/* the source's TLS settings and proxy, or NULL */
	TimestampTz created_at;		/* when the job's first webhook came */
	/* reconciliation (issue 30) */
	bool		page;			/* a list page of a sweep: url is the page's (external_id too), job_id < 0 */
	bool		reconciles;		/* a job of a source that reconciles: its completion records the version */
	bool		reconciled;		/* a page, or a job no webhook announced: within the source's share */

	/* set by the fetcher once the transfer is over (apply_dispatch.c) */
	int			verdict;		/* WiApplyVerdict (verdict.c) */
	char	   *why;			/* what went wrong with the transfer, for a failed verdict */
	int			errors;			/* errors its completion met in an apply worker */
	double		charged_us;		/* apply time charged to its source (sched_apply.c) */
	bool		alone;			/* handed over in a batch of its own */
	bool		too_slow;		/* came back past a quick batch's leash: completes alone, as a slow source's */

	/* owned by http.c; callbacks touch only these, and never ereport */
	CURL	   *easy;
	struct curl_slist *headers;
	char	   *body;			/* malloc'd, NUL-terminated */
	size_t		body_len;
	size_t		max_body;
	bool		too_big;
	char	   *link;			/* malloc'd: a page's Link headers, joined with ", "; NULL: none */
	CURLcode	result;
	long		status;
	long		retry_after_s;	/* -1: none */
	long		throttle_s;		/* the source must hold off this long; -1: no */
	const char *throttle_by;	/* what said so (a constant string) */
	double		seconds;
	char		errbuf[CURL_ERROR_SIZE];
	TimestampTz started;

	/* redirects, which http.c follows itself, and the network guard */
	char	   *origin;			/* malloc'd scheme://host:port of url, or NULL */
	bool		tls;			/* the current hop is https */
	bool		cross_origin;	/* the chain left the origin: no source headers */
	bool		https_proxy;	/* set_egress gave it an https:// proxy */
	bool		ca_shared;		/* set_tls: its handshakes use conf's parsed CAs */
	int			hops;			/* redirects followed */
	int			sockets_opened; /* connections the guard let through, this hop */
	char		refused[WI_REFUSAL_SIZE];	/* why the guard or the redirect
											 * policy refused; "" if not */

	/* pacing of https fetches (h2_pacing.c) */
	WiOrigin   *pacing;			/* the origin's state; NULL: not paced */
	bool		probe;			/* handed over to open a connection */
	bool		held;			/* waiting for room, not yet in libcurl */
	struct Transfer *held_next;
	struct Transfer *next;		/* finished without libcurl (http.c) */
} Transfer;

extern void wi_http_init(void);
extern void wi_http_set_limits(void);
extern void wi_http_connections(int64 *all, int64 *tls);
extern int	wi_http_epoll_fd(void);
extern bool wi_http_start(Transfer *t, long connect_timeout_ms, const char **error);
extern void wi_http_on_sockets(void);
extern void wi_http_on_timer(void);
extern long wi_http_held_timeout_ms(void);
extern long wi_http_timeout_ms(void);
extern Transfer *wi_http_finished(void);
extern int	wi_http_in_flight(void);
extern void wi_transfer_free(Transfer *t);

#endif							/* WI_HTTP_H */
