/*
 * http.c
 *		The worker's HTTP client: one libcurl multi handle for the worker's
 *		life (connection and DNS caches), driven by curl_multi_socket_action.
 *		curl's sockets are registered in one epoll descriptor, which the
 *		worker waits on beside its latch and postmaster death, so signals are
 *		served while transfers are in flight.
 *
 *		Every connection curl opens, and every one it reuses, goes through
 *		the network guard (net_guard.c) with the address it is for, after DNS.
 *		Redirects are followed here, not by libcurl, so that the source's
 *		headers go only to the template's origin: on a 3xx the same easy
 *		handle is sent to the next hop, and wi_http_finished() returns only
 *		transfers that are really finished.
 *
 *		TLS: a source's tls_ca replaces the system's bundle, its client
 *		certificate goes only to the template's origin, and verification is
 *		always on.  HTTP/2 is asked for over TLS (ALPN), and a burst to an
 *		HTTP/2 host shares a few connections, max_streams_per_connection
 *		streams each: with libcurl 7.x h2_pacing.c hands fetches over only as
 *		connections have room, from 8.0 libcurl's PIPEWAIT does it.  TLS sessions
 *		are shared by all transfers (a share handle), so a new connection to
 *		a host resumes a session instead of a full handshake.
 *
 *		Callbacks here run inside libcurl: they never ereport() or palloc();
 *		they record what happened and return a code.
 *
 * IDENTIFICATION
 *		src/net/http.c
 */
#include "postgres.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <arpa/inet.h>

#include <openssl/ssl.h>
#include <time.h>
#include <unistd.h>

#include "webhook_ingest.h"
#include "egress.h"
#include "http.h"
#include "h2_pacing.h"
#include "redirect.h"
#include "retry_after.h"
#include "settings.h"

static CURLM *multi = NULL;
static CURLSH *share = NULL;	/* TLS sessions */
static int	epoll_fd = -1;
static struct timespec timer_deadline;	/* CLOCK_MONOTONIC; valid when timer_armed */
static bool timer_armed = false;
static int	in_flight = 0;
static bool pacing = false;		/* libcurl needs h2_pacing.c */
static Transfer *finished_unfetched = NULL;	/* held fetches whose time ran out */
static int64 connections_opened = 0;	/* since the worker started */
static int64 tls_connections_opened = 0;

/*
 * Easy handles of finished transfers, reset (curl_easy_reset: every option
 * back to its default; connections, TLS sessions and DNS stay the multi's
 * and the share's), for the next transfers, instead of creating and
 * freeing a handle for every fetch.  At most WI_IDLE_HANDLES are kept; the
 * rest are freed.
 */
#define WI_IDLE_HANDLES		256
static CURL *idle_handles[WI_IDLE_HANDLES];
static int	nidle_handles = 0;

/* What a hop to another origin sends instead of the source's headers. */
static struct curl_slist *bare_headers = NULL;

/* CURLMOPT_SOCKETFUNCTION: keep the epoll set in step with curl's sockets. */
static int
socket_cb(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
	struct epoll_event ev;

	if (what == CURL_POLL_REMOVE)
	{
		epoll_ctl(epoll_fd, EPOLL_CTL_DEL, fd, NULL);
		curl_multi_assign(multi, fd, NULL);
		return 0;
	}
	memset(&ev, 0, sizeof(ev));
	ev.data.fd = fd;
	if (what == CURL_POLL_IN || what == CURL_POLL_INOUT)
		ev.events |= EPOLLIN;
	if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT)
		ev.events |= EPOLLOUT;
	if (socketp == NULL)
	{
		if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0 && errno == EEXIST)
			epoll_ctl(epoll_fd, EPOLL_CTL_MOD, fd, &ev);
		curl_multi_assign(multi, fd, (void *) 1);
	}
	else if (epoll_ctl(epoll_fd, EPOLL_CTL_MOD, fd, &ev) != 0 && errno == ENOENT)
		epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev);
	return 0;
}

/* CURLMOPT_TIMERFUNCTION: remember when curl wants to be called back. */
static int
timer_cb(CURLM *m, long timeout_ms, void *userp)
{
	if (timeout_ms < 0)
		timer_armed = false;
	else
	{
		clock_gettime(CLOCK_MONOTONIC, &timer_deadline);
		timer_deadline.tv_sec += timeout_ms / 1000;
		timer_deadline.tv_nsec += (timeout_ms % 1000) * 1000000L;
		if (timer_deadline.tv_nsec >= 1000000000L)
		{
			timer_deadline.tv_sec++;
			timer_deadline.tv_nsec -= 1000000000L;
		}
		timer_armed = true;
	}
	return 0;
}

/* CURLOPT_WRITEFUNCTION: collect the body, refusing past the cap. */
static size_t
write_cb(char *data, size_t size, size_t nmemb, void *userp)
{
	Transfer   *t = (Transfer *) userp;
	size_t		n = size * nmemb;
	char	   *grown;

	if (t->body_len + n > t->max_body)
	{
		t->too_big = true;
		return 0;				/* makes curl fail with CURLE_WRITE_ERROR */
	}
	grown = realloc(t->body, t->body_len + n + 1);
	if (grown == NULL)
		return 0;
	t->body = grown;
	memcpy(t->body + t->body_len, data, n);
	t->body_len += n;
	t->body[t->body_len] = '\0';
	return n;
}

/*
 * CURLOPT_OPENSOCKETFUNCTION: a new connection to this address, which DNS
 * gave; refused ones are recorded, and curl tries the next address if any.
 */
static curl_socket_t
open_socket_cb(void *clientp, curlsocktype purpose, struct curl_sockaddr *address)
{
	Transfer   *t = (Transfer *) clientp;
	char		why[WI_REFUSAL_SIZE];
	curl_socket_t fd;

	if (!wi_net_allowed_sockaddr(&address->addr, why, sizeof(why)))
	{
		if (t->refused[0] == '\0')
			strlcpy(t->refused, why, sizeof(t->refused));
		return CURL_SOCKET_BAD;
	}
	fd = socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
	if (fd == CURL_SOCKET_BAD)
		return fd;
	t->sockets_opened++;
	connections_opened++;
	if (t->tls)
		tls_connections_opened++;
	wi_pacing_socket_opened(t->pacing, fd);
	return fd;
}

/* CURLOPT_CLOSESOCKETFUNCTION: clientp may be a transfer long gone; only fd counts. */
static int
close_socket_cb(void *clientp, curl_socket_t fd)
{
	wi_pacing_socket_closed(fd);
	return close(fd);
}

#if LIBCURL_VERSION_NUM >= 0x075000
/*
 * CURLOPT_PREREQFUNCTION: before each request, on a new or a reused
 * connection; a connection made before a reload is checked again.
 */
static int
prereq_cb(void *clientp, char *conn_primary_ip, char *conn_local_ip, int conn_primary_port, int conn_local_port)
{
	Transfer   *t = (Transfer *) clientp;

	curl_socket_t fd = CURL_SOCKET_BAD;

	if (!wi_net_allowed_text(conn_primary_ip, t->refused, sizeof(t->refused)))
		return CURL_PREREQFUNC_ABORT;
	if (t->pacing != NULL)
	{
		curl_easy_getinfo(t->easy, CURLINFO_ACTIVESOCKET, &fd);
		wi_pacing_request(t->pacing, (int) fd, t->sockets_opened > 0, &t->probe);
	}
	return CURL_PREREQFUNC_OK;
}
#endif

/* The settings that shape connections, at start and after a reload. */
void
wi_http_set_limits(void)
{
	curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long) wi_max_host_connections);
	curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, (long) wi_max_host_connections);
#if LIBCURL_VERSION_NUM >= 0x074300
	curl_multi_setopt(multi, CURLMOPT_MAX_CONCURRENT_STREAMS, (long) wi_max_streams_per_connection);
#endif
}

void
wi_http_init(void)
{
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		elog(ERROR, "could not initialize libcurl");
	multi = curl_multi_init();
	if (multi == NULL)
		elog(ERROR, "could not create a libcurl multi handle");
	share = curl_share_init();
	if (share == NULL || curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION) != CURLSHE_OK)
		elog(ERROR, "could not create a libcurl share handle");
	epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (epoll_fd < 0)
		elog(ERROR, "could not create epoll descriptor: %m");
	curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
	curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, timer_cb);
	curl_multi_setopt(multi, CURLMOPT_PIPELINING, (long) CURLPIPE_MULTIPLEX);
	wi_http_set_limits();
#if LIBCURL_VERSION_NUM >= 0x075000
	/* libcurl before 8.0 opens a connection per fetch past the first one's streams */
	pacing = curl_version_info(CURLVERSION_NOW)->version_num < 0x080000;
	if (pacing)
		wi_pacing_init();
#endif
	bare_headers = curl_slist_append(NULL, "Accept: application/json");
	if (bare_headers == NULL)
		elog(ERROR, "out of memory");
}

/* Connections opened since the worker started: all of them, and over TLS. */
void
wi_http_connections(int64 *all, int64 *tls)
{
	*all = connections_opened;
	*tls = tls_connections_opened;
}

int
wi_http_epoll_fd(void)
{
	return epoll_fd;
}

int
wi_http_in_flight(void)
{
	return in_flight;
}

/* Milliseconds until curl's timer runs out (0: now), or -1 if none is set. */
long
wi_http_timeout_ms(void)
{
	struct timespec now;
	long		ms;

	if (!timer_armed)
		return -1;
	clock_gettime(CLOCK_MONOTONIC, &now);
	ms = (timer_deadline.tv_sec - now.tv_sec) * 1000 +
		(timer_deadline.tv_nsec - now.tv_nsec + 999999) / 1000000;
	return ms < 0 ? 0 : ms;
}

/*
 * The proxy of the fetch: the source's or webhook_ingest.proxy, none if
 * empty.  Never one from the environment (http_proxy, ...): the operator
 * would not know where fetches go.
 */
static void
set_egress(Transfer *t)
{
	const char *proxy = wi_proxy_for(t->conf ? t->conf->proxy : NULL);

	curl_easy_setopt(t->easy, CURLOPT_PROXY, proxy);
	curl_easy_setopt(t->easy, CURLOPT_NOPROXY, proxy[0] != '\0' && wi_no_proxy ? wi_no_proxy : NULL);
	t->https_proxy = pg_strncasecmp(proxy, "https:", 6) == 0;
}

/*
 * CURLOPT_SSL_CTX_FUNCTION, for every TLS connection: no renegotiation (TLS
 * 1.2 lets a server ask for another full handshake as often as it likes,
 * each one the worker's single thread's work: audit 0.7.0 second pass, L2,
 * TAP 120); and with ca_shared, the upstream is checked against all the
 * source's CAs, parsed once (source_tls.c); libcurl, given their tag, adds
 * its one certificate to that store (already there).
 *
 * libcurl calls it for every handshake of the transfer, an https:// proxy's
 * too, and (7.88) loads the CAs it was given afterwards, into the store the
 * callback left: for a proxy's handshake the source's store would check the
 * proxy, and take in the system's bundle, meant for the proxy, for every
 * later connection of the source (audit 0.7.0 second pass, P2, TAP 118).
 * So the store is not shared for fetches through an https:// proxy.
 */
static CURLcode
tls_ctx_cb(CURL *curl, void *ssl_ctx, void *userptr)
{
	Transfer   *t = (Transfer *) userptr;

	SSL_CTX_set_options((SSL_CTX *) ssl_ctx, SSL_OP_NO_RENEGOTIATION);
	if (t->ca_shared)
		SSL_CTX_set1_cert_store((SSL_CTX *) ssl_ctx, (X509_STORE *) t->conf->ca_store);
	return CURLE_OK;
}

/*
 * Verification always on; the source's CAs instead of the system's bundle
 * (CAPATH too, or OpenSSL would also look in /etc/ssl/certs); its client
 * certificate while the fetch is at the template's origin.
 */
static void
set_tls(Transfer *t)
{
	WiSourceTls *conf = t->conf;
	bool		present = conf != NULL && conf->cert.data != NULL && !t->cross_origin;
	bool		callback;

	curl_easy_setopt(t->easy, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(t->easy, CURLOPT_SSL_VERIFYHOST, 2L);
	/*
	 * Wait for a connection that may multiplex only where HTTP/2 can be had
	 * (ALPN, over TLS): over plain http the wait would only keep a fetch
	 * from connecting while the worker runs handlers (TAP 093).  Where
	 * h2_pacing.c paces fetches (libcurl 7.x) it does the waiting.
	 */
	curl_easy_setopt(t->easy, CURLOPT_PIPEWAIT, t->tls && !pacing ? 1L : 0L);
	callback = curl_easy_setopt(t->easy, CURLOPT_SSL_CTX_FUNCTION, tls_ctx_cb) == CURLE_OK &&
		curl_easy_setopt(t->easy, CURLOPT_SSL_CTX_DATA, t) == CURLE_OK;
	/* (through an https:// proxy, libcurl parses the PEM at each handshake: see tls_ctx_cb) */
	t->ca_shared = callback && conf != NULL && conf->ca.data != NULL && conf->ca_store != NULL &&
		!t->https_proxy;
	if (conf != NULL && conf->ca.data != NULL)
	{
		curl_easy_setopt(t->easy, CURLOPT_CAINFO, NULL);
		curl_easy_setopt(t->easy, CURLOPT_CAPATH, NULL);
		curl_easy_setopt(t->easy, CURLOPT_CAINFO_BLOB, t->ca_shared ? &conf->ca_tag : &conf->ca);
	}
	curl_easy_setopt(t->easy, CURLOPT_SSLCERTTYPE, "PEM");
	curl_easy_setopt(t->easy, CURLOPT_SSLKEYTYPE, "PEM");
	curl_easy_setopt(t->easy, CURLOPT_SSLCERT_BLOB, present ? &conf->cert : NULL);
	curl_easy_setopt(t->easy, CURLOPT_SSLKEY_BLOB, present ? &conf->key : NULL);
}

/*
 * May a fetch of origin (wi_origin_of: scheme://host:port) go ahead, as far
 * as its host is an IP address?  The guard checks every address connected
 * to, but through a proxy that is the proxy's: a target named by its address
 * is checked here too, before any connection.  Host names are the proxy's to
 * resolve.  If not, t->refused says why.
 */
static bool
literal_target_allowed(Transfer *t, const char *origin)
{
	const char *host = origin ? strstr(origin, "://") : NULL;
	const char *port;
	char		bare[64];
	unsigned char addr[16];
	size_t		len;

	if (host == NULL || (port = strrchr(host += 3, ':')) == NULL)
		return true;
	len = port - host;
	/* an IPv6 literal comes bracketed (and perhaps with a zone) */
	if (len >= 2 && host[0] == '[' && host[len - 1] == ']')
	{
		host++;
		len -= 2;
	}
	if (len >= sizeof(bare))
		return true;			/* no address is that long */
	memcpy(bare, host, len);
	bare[len] = '\0';
	bare[strcspn(bare, "%")] = '\0';
	/* "127.0.0.3." is that address too (a proxy resolves it so) */
	if (bare[0] != '\0' && bare[strlen(bare) - 1] == '.')
		bare[strlen(bare) - 1] = '\0';
	if (inet_pton(AF_INET, bare, addr) == 1 || inet_pton(AF_INET6, bare, addr) == 1)
		return wi_net_allowed_text(bare, t->refused, sizeof(t->refused));
	return true;
}

static CURL *
take_handle(void)
{
	if (nidle_handles > 0)
		return idle_handles[--nidle_handles];
	return curl_easy_init();
}

/* A handle done with (in the multi or not), for the next transfer. */
static void
give_back_handle(CURL *easy)
{
	(void) curl_multi_remove_handle(multi, easy);	/* CURLM_OK if not in it */
	if (nidle_handles >= WI_IDLE_HANDLES)
	{
		curl_easy_cleanup(easy);
		return;
	}
	curl_easy_reset(easy);
	idle_handles[nidle_handles++] = easy;
}

/*
 * Start fetching t->url.  On failure returns false with *error set (NULL
 * when the network guard refused the URL's address: t->refused says why),
 * and t holds no curl state.
 */
bool
wi_http_start(Transfer *t, long connect_timeout_ms, const char **error)
{
	CURL	   *easy;

	t->refused[0] = '\0';
	*error = NULL;
	t->origin = wi_origin_of(t->url, &t->tls);
	if (!literal_target_allowed(t, t->origin) || (easy = take_handle()) == NULL)
	{
		if (t->refused[0] == '\0')
			*error = "could not create a libcurl handle";
		free(t->origin);
		t->origin = NULL;
		return false;
	}
	t->easy = easy;
	t->body = NULL;
	t->body_len = 0;
	t->too_big = false;
	t->link = NULL;
	t->status = 0;
	t->retry_after_s = -1;
	t->throttle_s = -1;
	t->throttle_by = NULL;
	t->errbuf[0] = '\0';
	t->result = CURLE_OK;
	t->seconds = 0;
	t->hops = 0;
	t->cross_origin = false;
	t->sockets_opened = 0;
	t->refused[0] = '\0';

	curl_easy_setopt(easy, CURLOPT_URL, t->url);
	/*
	 * The path as url_template made it: libcurl 8 (Debian 13's 8.14) takes a
	 * segment "%2E" or "%2E%2E" for a dot-segment and removes it, so an
	 * external id ".." would fetch the template's parent.
	 */
	curl_easy_setopt(easy, CURLOPT_PATH_AS_IS, 1L);
	curl_easy_setopt(easy, CURLOPT_PRIVATE, t);
	curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
#if LIBCURL_VERSION_NUM >= 0x075500
	curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#else
	curl_easy_setopt(easy, CURLOPT_PROTOCOLS, (long) (CURLPROTO_HTTP | CURLPROTO_HTTPS));
	curl_easy_setopt(easy, CURLOPT_REDIR_PROTOCOLS, (long) (CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
	/* Redirects: followed by next_hop(), not by libcurl. */
	curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
	set_egress(t);
	curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, open_socket_cb);
	curl_easy_setopt(easy, CURLOPT_OPENSOCKETDATA, t);
#if LIBCURL_VERSION_NUM >= 0x075000
	curl_easy_setopt(easy, CURLOPT_PREREQFUNCTION, prereq_cb);
	curl_easy_setopt(easy, CURLOPT_PREREQDATA, t);
#endif
	curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, connect_timeout_ms);
	curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, t->timeout_ms);
	set_tls(t);
	curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, (long) CURL_HTTP_VERSION_2TLS);
	curl_easy_setopt(easy, CURLOPT_SHARE, share);
	curl_easy_setopt(easy, CURLOPT_USERAGENT, WI_EXTENSION_NAME "/" WI_VERSION);
	curl_easy_setopt(easy, CURLOPT_HTTPHEADER, t->headers);
	curl_easy_setopt(easy, CURLOPT_ACCEPT_ENCODING, "");
	/* Small receive buffers: thousands of transfers share the worker's memory. */
	curl_easy_setopt(easy, CURLOPT_BUFFERSIZE, 4096L);
	curl_easy_setopt(easy, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t) t->max_body);
	curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(easy, CURLOPT_WRITEDATA, t);
	curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, t->errbuf);

	curl_easy_setopt(easy, CURLOPT_CLOSESOCKETFUNCTION, close_socket_cb);

	t->pacing = pacing ? wi_pacing_origin(t->origin, t->tls) : NULL;
	t->probe = false;
	if (!wi_pacing_admit(t->pacing, &t->probe))
		wi_pacing_hold(t->pacing, t);	/* handed over by start_held() */
	else if (curl_multi_add_handle(multi, easy) != CURLM_OK)
	{
		give_back_handle(easy);
		t->easy = NULL;
		free(t->origin);
		t->origin = NULL;
		*error = "could not add a transfer to libcurl";
		return false;
	}
	else
		wi_pacing_added(t->pacing, t->probe);
	in_flight++;
	return true;
}

/* What is left of a fetch's timeout, in ms (at most 0). */
static long
time_left_ms(Transfer *t)
{
	return t->timeout_ms - (long) ((GetCurrentTimestamp() - t->started) / 1000);
}

static void
finish_unfetched(Transfer *t, CURLcode result, const char *why)
{
	t->result = result;
	strlcpy(t->errbuf, why, sizeof(t->errbuf));
	t->next = finished_unfetched;
	finished_unfetched = t;
}

/* A held fetch whose time ran out before its origin had room (wi_pacing_expire). */
static void
expire_held(Transfer *t)
{
	finish_unfetched(t, CURLE_OPERATION_TIMEDOUT, "Timeout was reached while waiting for a connection");
}

/* Milliseconds until a held fetch's time runs out (0: now), or -1 (none held). */
long
wi_http_held_timeout_ms(void)
{
	return pacing ? wi_pacing_held_timeout_ms() : -1;
}

/* A held fetch has room now (wi_pacing_release): to libcurl, with the time it has left. */
static void
start_held(Transfer *t, bool probe)
{
	long		left_ms = time_left_ms(t);

	if (left_ms <= 0)
	{
		finish_unfetched(t, CURLE_OPERATION_TIMEDOUT, "Timeout was reached while waiting for a connection");
		return;
	}
	curl_easy_setopt(t->easy, CURLOPT_TIMEOUT_MS, left_ms);
	if (curl_multi_add_handle(multi, t->easy) != CURLM_OK)
	{
		finish_unfetched(t, CURLE_FAILED_INIT, "could not add a transfer to libcurl");
		return;
	}
	t->probe = probe;
	wi_pacing_added(t->pacing, probe);
}

static int	running_handles;

/* The epoll descriptor is readable: serve every ready socket. */
void
wi_http_on_sockets(void)
{
	struct epoll_event events[64];
	int			n;

	/* One pass per wake-up, so the loop also gets to interrupts and completions. */
	if ((n = epoll_wait(epoll_fd, events, lengthof(events), 0)) > 0)
	{
		for (int i = 0; i < n; i++)
		{
			int			mask = 0;

			if (events[i].events & (EPOLLIN | EPOLLHUP))
				mask |= CURL_CSELECT_IN;
			if (events[i].events & EPOLLOUT)
				mask |= CURL_CSELECT_OUT;
			if (events[i].events & EPOLLERR)
				mask |= CURL_CSELECT_ERR;
			curl_multi_socket_action(multi, events[i].data.fd, mask, &running_handles);
		}
	}
	wi_pacing_release(start_held);
}

/* curl's timer ran out. */
void
wi_http_on_timer(void)
{
	timer_armed = false;
	curl_multi_socket_action(multi, CURL_SOCKET_TIMEOUT, 0, &running_handles);
	wi_pacing_release(start_held);
}

/* A header of the last response, or NULL. */
static const char *
header_value(Transfer *t, const char *name)
{
#if LIBCURL_VERSION_NUM >= 0x075300
	struct curl_header *h;

	if (curl_easy_header(t->easy, name, 0, CURLH_HEADER, -1, &h) == CURLHE_OK)
		return h->value;
#endif
	return NULL;
}

/* When to ask again: Retry-After for the job, a throttle for the source. */
static void
read_retry_after(Transfer *t)
{
	WiRateHeaders h;
	time_t		now = time(NULL);

	h.retry_after = header_value(t, "Retry-After");
	if (h.retry_after != NULL)
		t->retry_after_s = wi_retry_after_seconds(h.retry_after, now);
	h.x_remaining = header_value(t, "X-RateLimit-Remaining");
	h.x_reset = h.x_remaining ? header_value(t, "X-RateLimit-Reset") : NULL;
	h.remaining = header_value(t, "RateLimit-Remaining");
	h.reset = h.remaining ? header_value(t, "RateLimit-Reset") : NULL;
	h.ratelimit = header_value(t, "RateLimit");
	t->throttle_s = wi_throttle_seconds(t->status, &h, now, &t->throttle_by);
}

/*
 * A list page's Link headers (a sweep's next page may be named there, as
 * GitHub and Shopify do), all of them joined with ", " as RFC 9110 allows;
 * into malloc'd t->link (NULL: none).  libcurl bounds each header's size.
 */
static void
read_links(Transfer *t)
{
#if LIBCURL_VERSION_NUM >= 0x075300
	struct curl_header *h;
	size_t		amount = 1;

	for (size_t i = 0; i < amount && curl_easy_header(t->easy, "Link", i, CURLH_HEADER, -1, &h) == CURLHE_OK; i++)
	{
		size_t		had = t->link ? strlen(t->link) : 0;
		char	   *grown = realloc(t->link, had + 2 + strlen(h->value) + 1);

		if (grown == NULL)
			return;				/* the page then has no next link: its sweep says so */
		t->link = grown;
		if (had > 0)
		{
			memcpy(t->link + had, ", ", 2);
			had += 2;
		}
		strcpy(t->link + had, h->value);
		amount = h->amount;
	}
#endif
}

/*
 * A guard refusal decides the outcome only when no connection was made: one
 * address refused and another that worked (or failed on its own) is not a
 * refusal of the fetch.  A refusal of a reused connection always is.
 */
static void
settle_refusal(Transfer *t)
{
	if (t->refused[0] != '\0' && t->result != CURLE_ABORTED_BY_CALLBACK &&
		(t->result == CURLE_OK || t->sockets_opened > 0))
		t->refused[0] = '\0';
}

/* The HTTP version of the last response (CURL_HTTP_VERSION_NONE: none). */
static long
http_version(Transfer *t)
{
	long		version = CURL_HTTP_VERSION_NONE;

	if (t->status > 0)
		curl_easy_getinfo(t->easy, CURLINFO_HTTP_VERSION, &version);
	return version;
}

static bool
is_redirect(long status)
{
	return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

/*
 * May the fetch follow its redirect to location?  If not, t->refused says
 * why.  Once the chain has left the origin, the source's headers never come
 * back, even on a hop back to it.
 */
static bool
redirect_allowed(Transfer *t, const char *location, bool *tls)
{
	WiRedirect	r = wi_judge_redirect(t->origin, t->tls, location, wi_cross_origin_redirects, tls,
									  t->refused, sizeof(t->refused));

	if (r == WI_REDIRECT_REFUSED)
		return false;
	t->cross_origin |= (r == WI_REDIRECT_OTHER_ORIGIN);
	return true;
}

/*
 * After a redirect response: send the same handle to the next hop and return
 * true, or return false when the transfer is finished (no Location, or the
 * redirect refused: t->refused or t->result say why).
 */
static bool
next_hop(Transfer *t)
{
	char	   *location = NULL;
	char	   *next;
	long		left_ms;
	bool		tls;
	char	   *next_origin;
	bool		next_tls;
	bool		allowed;

	if (curl_easy_getinfo(t->easy, CURLINFO_REDIRECT_URL, &location) != CURLE_OK || location == NULL)
		return false;
	if (t->hops >= WI_MAX_REDIRECTS)
	{
		t->result = CURLE_TOO_MANY_REDIRECTS;
		snprintf(t->errbuf, sizeof(t->errbuf), "Maximum (%d) redirects followed", WI_MAX_REDIRECTS);
		return false;
	}
	if (!redirect_allowed(t, location, &tls))
		return false;
	next_origin = wi_origin_of(location, &next_tls);	/* NULL for a relative one: same host */
	allowed = literal_target_allowed(t, next_origin);
	free(next_origin);
	if (!allowed)
		return false;
	left_ms = time_left_ms(t);
	if (left_ms <= 0)
	{
		t->result = CURLE_OPERATION_TIMEDOUT;
		snprintf(t->errbuf, sizeof(t->errbuf), "Timeout was reached after %d redirects", t->hops);
		return false;
	}
	next = strdup(location);
	if (next == NULL)
		return false;

	curl_multi_remove_handle(multi, t->easy);
	wi_pacing_removed(t->pacing, t->probe, http_version(t));
	t->probe = false;
	wi_pacing_added(t->pacing, false);	/* (counted under its first origin) */
	free(t->body);
	t->body = NULL;
	t->body_len = 0;
	t->status = 0;
	t->sockets_opened = 0;
	t->errbuf[0] = '\0';
	t->tls = tls;
	t->hops++;
	curl_easy_setopt(t->easy, CURLOPT_URL, next);
	curl_easy_setopt(t->easy, CURLOPT_HTTPHEADER, t->cross_origin ? bare_headers : t->headers);
	set_tls(t);
	curl_easy_setopt(t->easy, CURLOPT_TIMEOUT_MS, left_ms);
	free(next);
	if (curl_multi_add_handle(multi, t->easy) != CURLM_OK)
	{
		t->result = CURLE_FAILED_INIT;
		snprintf(t->errbuf, sizeof(t->errbuf), "could not add a transfer to libcurl");
		return false;
	}
	return true;
}

/*
 * A fetch that timed out before it had a connection to send its request on
 * (waiting for one inside libcurl) gets libcurl's message for whatever it
 * was at ("Failed to resolve host ... after 0 ms"): say what happened.
 */
static void
explain_no_connection(Transfer *t)
{
	double		pretransfer = 0;

	if (t->result != CURLE_OPERATION_TIMEDOUT || t->sockets_opened > 0)
		return;
	curl_easy_getinfo(t->easy, CURLINFO_PRETRANSFER_TIME, &pretransfer);
	if (pretransfer == 0)
		snprintf(t->errbuf, sizeof(t->errbuf), "Timeout was reached while waiting for a connection to %.200s",
				 t->origin ? t->origin : "the upstream");
}

/* Finished transfers, one per call, or NULL. */
Transfer *
wi_http_finished(void)
{
	CURLMsg    *msg;
	int			left;

	/*
	 * Held fetches that have room since the last call (a fetch of their
	 * origin finished: nothing else may happen in libcurl to hand them over).
	 */
	wi_pacing_release(start_held);
	if (pacing)
		wi_pacing_expire(expire_held);
	if (finished_unfetched != NULL)
	{
		Transfer   *t = finished_unfetched;

		finished_unfetched = t->next;
		t->next = NULL;
		in_flight--;
		return t;
	}
	while ((msg = curl_multi_info_read(multi, &left)) != NULL)
	{
		Transfer   *t;
		double		seconds = 0;

		if (msg->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **) &t);
		t->result = msg->data.result;
		curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &t->status);
		curl_easy_getinfo(t->easy, CURLINFO_TOTAL_TIME, &seconds);
		t->seconds += seconds;
		settle_refusal(t);
		explain_no_connection(t);
		if (t->result == CURLE_OK && is_redirect(t->status) && next_hop(t))
			continue;			/* on its way to the next hop */
		read_retry_after(t);
		if (t->page)
			read_links(t);
		curl_multi_remove_handle(multi, t->easy);
		wi_pacing_removed(t->pacing, t->probe, http_version(t));
		t->probe = false;
		in_flight--;
		return t;
	}
	return NULL;
}

static void http_release(Transfer *t);

/* A Transfer and all it holds (curl's, the body, its strings). */
void
wi_transfer_free(Transfer *t)
{
	http_release(t);
	pfree(t->source);
	pfree(t->external_id);
	pfree(t->url);
	if (t->why)
		pfree(t->why);
	pfree(t);
}

/* Free what curl and the body hold; the Transfer itself is the caller's. */
static void
http_release(Transfer *t)
{
	if (t->held)
		wi_pacing_unhold(t->pacing, t);
	if (t->easy)
		give_back_handle(t->easy);
	t->easy = NULL;
	wi_source_tls_release(t->conf);	/* after curl, which may use its blobs */
	t->conf = NULL;
	if (t->headers)
		curl_slist_free_all(t->headers);
	t->headers = NULL;
	free(t->body);
	t->body = NULL;
	free(t->link);
	t->link = NULL;
	free(t->origin);
	t->origin = NULL;
}
