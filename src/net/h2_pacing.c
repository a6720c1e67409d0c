/*
 * h2_pacing.c
 *		How many fetches of one https origin are handed to libcurl at once,
 *		so that a burst to an HTTP/2 upstream opens a few connections carrying
 *		max_streams_per_connection streams each, not one connection per
 *		fetch.
 *
 *		libcurl's PIPEWAIT makes fetches wait for a connection that is still
 *		being set up only for the first connection to a host: once that one
 *		is full, libcurl 7.88 (Debian 12's) opens a connection for every
 *		further fetch until max_host_connections is reached, each carrying
 *		one stream (fixed in curl 8.0, curl PR #10456; TAP 060 measured 64
 *		connections for 500 fetches, 59 of them with one request).  So the
 *		worker keeps the surplus itself: per https origin it hands libcurl
 *		at most max_streams_per_connection fetches per connection known to
 *		be open, plus a few probes, each of which opens the next connection;
 *		when a probe's connection is up (its request is about to be sent),
 *		that connection's share of the held fetches follows.  Until the first
 *		answer says which protocol the origin speaks, one probe at a time; an
 *		origin that answers over HTTP/1.1 is not paced at all (libcurl's
 *		max_host_connections is the limit).  With pacing, PIPEWAIT is off:
 *		nothing waits in libcurl's one list of pending transfers, where a
 *		host that never finishes its handshake held up every other host's
 *		fetches (audit F1, TAP 110).
 *
 *		Connections are counted by their sockets (opened and closed through
 *		the worker's callbacks; a table indexed by descriptor says whose a
 *		socket is).  The socket callbacks here run inside libcurl: they only
 *		count, and the fetches they make room for are handed over after
 *		libcurl returns (wi_pacing_release).
 *
 * IDENTIFICATION
 *		src/net/h2_pacing.c
 */
#include "postgres.h"

#include <sys/resource.h>

#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "webhook_ingest.h"
#include "http.h"
#include "h2_pacing.h"
#include "settings.h"

/* New connections being opened to one origin at once, at most. */
#define WI_PACING_PROBES	8

typedef enum OriginProtocol
{
	ORIGIN_UNKNOWN,				/* no answer yet */
	ORIGIN_HTTP2,
	ORIGIN_HTTP1,				/* not paced */
} OriginProtocol;

struct WiOrigin
{
	char	   *key;			/* scheme://host:port */
	int			index;			/* in origins[] */
	OriginProtocol protocol;
	int			ready;			/* connections that have carried a request */
	int			probes;			/* fetches handed over to open a connection */
	int			in_curl;		/* fetches handed to libcurl */
	Transfer   *held_head;		/* fetches waiting for room, in order */
	Transfer   *held_tail;
	int			nheld;
	bool		wants_release;
};

static WiOrigin **origins = NULL;
static int	norigins = 0;
static int	origins_size = 0;
static bool any_release = false;

/*
 * The earliest deadline of a held fetch (0: none held), perhaps earlier than
 * any still held: a fetch's timeout runs while it is held, and one held
 * behind longer fetches of its origin (another source's, with a longer
 * timeout_ms, or a probe whose handshake stalls) ends at its own deadline,
 * not when its origin next has room (audit 0.7.0 second pass, H1, TAP 119).
 */
static TimestampTz held_deadline = 0;

static TimestampTz
deadline_of(Transfer *t)
{
	return TimestampTzPlusMilliseconds(t->started, t->timeout_ms);
}

/* Per descriptor: the origin's index + 1 (0: none), and whether it is ready. */
typedef struct SocketOwner
{
	int32		origin;
	bool		ready;
} SocketOwner;

static SocketOwner *sockets = NULL;
static int	nsockets = 0;

void
wi_pacing_init(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		rl.rlim_cur = 65536;
	nsockets = (int) Min(rl.rlim_cur, (rlim_t) (4 * 1024 * 1024));
	/* calloc: untouched pages cost nothing */
	sockets = calloc(nsockets, sizeof(SocketOwner));
	if (sockets == NULL)
		nsockets = 0;
}

/* The pacing state of an https origin (made on first use), or NULL for http. */
WiOrigin *
wi_pacing_origin(const char *origin, bool tls)
{
	WiOrigin   *o;

	if (!tls || origin == NULL)
		return NULL;
	for (int i = 0; i < norigins; i++)
		if (strcmp(origins[i]->key, origin) == 0)
			return origins[i];
	if (norigins == origins_size)
	{
		origins_size = Max(16, origins_size * 2);
		origins = origins == NULL
			? MemoryContextAlloc(TopMemoryContext, sizeof(WiOrigin *) * origins_size)
			: repalloc(origins, sizeof(WiOrigin *) * origins_size);
	}
	o = MemoryContextAllocZero(TopMemoryContext, sizeof(WiOrigin));
	o->key = MemoryContextStrdup(TopMemoryContext, origin);
	o->index = norigins;
	origins[norigins++] = o;
	return o;
}

/*
 * May one more fetch of the origin go to libcurl now?  If it is to open a
 * connection, *probe says so.
 */
bool
wi_pacing_admit(WiOrigin *o, bool *probe)
{
	int			per_connection = wi_max_streams_per_connection;

	int			probes_allowed;

	*probe = false;
	if (o == NULL || o->protocol == ORIGIN_HTTP1)
		return true;
	if (o->in_curl < per_connection * o->ready + o->probes)
		return true;
	/*
	 * A new connection: one at a time while the protocol is unknown (a host
	 * that never finishes its handshake holds one fetch, not a crowd inside
	 * libcurl); over HTTP/2, as many as the fetches waiting (this one too)
	 * fill.
	 */
	probes_allowed = o->protocol == ORIGIN_UNKNOWN ? 1
		: Min(WI_PACING_PROBES, (o->nheld + per_connection) / per_connection);
	if (o->probes < probes_allowed && o->ready + o->probes < wi_max_host_connections)
	{
		*probe = true;
		return true;
	}
	return false;
}

void
wi_pacing_added(WiOrigin *o, bool probe)
{
	if (o == NULL)
		return;
	o->in_curl++;
	if (probe)
		o->probes++;
}

/* Keep a fetch until there is room for it. */
void
wi_pacing_hold(WiOrigin *o, Transfer *t)
{
	TimestampTz deadline = deadline_of(t);

	t->held = true;
	t->held_next = NULL;
	if (held_deadline == 0 || deadline < held_deadline)
		held_deadline = deadline;
	o->nheld++;
	if (o->held_tail)
		o->held_tail->held_next = t;
	else
		o->held_head = t;
	o->held_tail = t;
}

/* A held fetch that goes without being fetched (its worker lets it go). */
void
wi_pacing_unhold(WiOrigin *o, Transfer *t)
{
	Transfer  **p = &o->held_head;

	t->held = false;
	while (*p != NULL && *p != t)
		p = &(*p)->held_next;
	if (*p == NULL)
		return;
	*p = t->held_next;
	o->nheld--;
	if (o->held_tail == t)
	{
		o->held_tail = NULL;
		for (Transfer *h = o->held_head; h != NULL; h = h->held_next)
			o->held_tail = h;
	}
}

static void
want_release(WiOrigin *o)
{
	if (o->held_head != NULL)
	{
		o->wants_release = true;
		any_release = true;
	}
}

/*
 * A fetch left libcurl (finished, or on its way to a redirect's next hop):
 * the first answer tells the origin's protocol.
 */
void
wi_pacing_removed(WiOrigin *o, bool probe, long http_version)
{
	if (o == NULL)
		return;
	o->in_curl--;
	if (probe && o->probes > 0)
		o->probes--;
	if (o->protocol == ORIGIN_UNKNOWN && http_version != CURL_HTTP_VERSION_NONE)
		o->protocol = http_version >= CURL_HTTP_VERSION_2_0 ? ORIGIN_HTTP2 : ORIGIN_HTTP1;
	want_release(o);
}

/* In libcurl's open-socket callback: a socket for a fetch of o. */
void
wi_pacing_socket_opened(WiOrigin *o, int fd)
{
	if (o == NULL || fd < 0 || fd >= nsockets)
		return;
	sockets[fd].origin = o->index + 1;
	sockets[fd].ready = false;
}

/*
 * In libcurl's pre-request callback: the fetch is about to send its request
 * on the connection of fd; if that connection is one the fetch opened, it is
 * the origin's next ready connection.
 */
void
wi_pacing_request(WiOrigin *o, int fd, bool opened_here, bool *probe)
{
	if (o == NULL)
		return;
	if (opened_here && fd >= 0 && fd < nsockets && sockets[fd].origin == o->index + 1 && !sockets[fd].ready)
	{
		sockets[fd].ready = true;
		o->ready++;
	}
	if (*probe)
	{
		*probe = false;
		if (o->probes > 0)
			o->probes--;
	}
	want_release(o);
}

/* In libcurl's close-socket callback. */
void
wi_pacing_socket_closed(int fd)
{
	WiOrigin   *o;

	if (fd < 0 || fd >= nsockets || sockets[fd].origin == 0)
		return;
	o = origins[sockets[fd].origin - 1];
	if (sockets[fd].ready && o->ready > 0)
		o->ready--;
	sockets[fd].origin = 0;
	sockets[fd].ready = false;
	want_release(o);
}

/*
 * Hand libcurl the held fetches there is room for now, through start (which
 * may also finish one instead: its time ran out while it was held).  Outside
 * libcurl's callbacks.
 */
void
wi_pacing_release(void (*start) (Transfer *t, bool probe))
{
	if (!any_release)
		return;
	any_release = false;
	for (int i = 0; i < norigins; i++)
	{
		WiOrigin   *o = origins[i];
		bool		probe;

		if (!o->wants_release)
			continue;
		o->wants_release = false;
		while (o->held_head != NULL && wi_pacing_admit(o, &probe))
		{
			Transfer   *t = o->held_head;

			o->held_head = t->held_next;
			o->nheld--;
			if (o->held_head == NULL)
				o->held_tail = NULL;
			t->held = false;
			start(t, probe);
		}
	}
}

/* Milliseconds until a held fetch's time runs out (0: now), or -1 if none is held. */
long
wi_pacing_held_timeout_ms(void)
{
	TimestampTz now;

	if (held_deadline == 0)
		return -1;
	now = GetCurrentTimestamp();
	return held_deadline <= now ? 0 : (long) ((held_deadline - now + 999) / 1000);
}

/*
 * Held fetches whose time ran out go to finish (outside libcurl's
 * callbacks); the others stay, in order.
 */
void
wi_pacing_expire(void (*finish) (Transfer *t))
{
	TimestampTz now;

	if (held_deadline == 0 || held_deadline > (now = GetCurrentTimestamp()))
		return;
	held_deadline = 0;
	for (int i = 0; i < norigins; i++)
	{
		WiOrigin   *o = origins[i];
		Transfer  **p = &o->held_head;

		o->held_tail = NULL;
		while (*p != NULL)
		{
			Transfer   *t = *p;
			TimestampTz deadline = deadline_of(t);

			if (deadline <= now)
			{
				*p = t->held_next;
				t->held_next = NULL;
				t->held = false;
				o->nheld--;
				finish(t);
				continue;
			}
			if (held_deadline == 0 || deadline < held_deadline)
				held_deadline = deadline;
			o->held_tail = t;
			p = &t->held_next;
		}
	}
}
