/*
 * http.c
 *		The worker's HTTP client: one libcurl multi handle for the worker's
 *		life (connection and DNS caches), driven by curl_multi_socket_action.
 *		curl's sockets are registered in one epoll descriptor, which the
 *		worker waits on beside its latch and postmaster death, so signals are
 *		served while transfers are in flight.
 *
 *		Callbacks here run inside libcurl: they never ereport() or palloc();
 *		they record what happened and return a code.
 */
#include "postgres.h"

#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "webhook_ingest.h"
#include "http.h"

static CURLM *multi = NULL;
static int	epoll_fd = -1;
static struct timespec timer_deadline;	/* CLOCK_MONOTONIC; valid when timer_armed */
static bool timer_armed = false;
static int	in_flight = 0;

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

void
wi_http_set_host_limit(int max_host_connections)
{
	curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long) max_host_connections);
}

void
wi_http_init(int max_host_connections)
{
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		elog(ERROR, "could not initialize libcurl");
	multi = curl_multi_init();
	if (multi == NULL)
		elog(ERROR, "could not create a libcurl multi handle");
	epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (epoll_fd < 0)
		elog(ERROR, "could not create epoll descriptor: %m");
	curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
	curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, timer_cb);
	curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long) max_host_connections);
	curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, (long) max_host_connections);
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
 * Start fetching t->url.  On failure returns false with *error set, and t
 * holds no curl state.
 */
bool
wi_http_start(Transfer *t, long connect_timeout_ms, const char **error)
{
	CURL	   *easy = curl_easy_init();

	if (easy == NULL)
	{
		*error = "could not create a libcurl handle";
		return false;
	}
	t->easy = easy;
	t->body = NULL;
	t->body_len = 0;
	t->too_big = false;
	t->status = 0;
	t->retry_after_s = -1;
	t->errbuf[0] = '\0';
	t->result = CURLE_OK;

	curl_easy_setopt(easy, CURLOPT_URL, t->url);
	curl_easy_setopt(easy, CURLOPT_PRIVATE, t);
	curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
#if LIBCURL_VERSION_NUM >= 0x075500
	curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#else
	curl_easy_setopt(easy, CURLOPT_PROTOCOLS, (long) (CURLPROTO_HTTP | CURLPROTO_HTTPS));
	curl_easy_setopt(easy, CURLOPT_REDIR_PROTOCOLS, (long) (CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
	curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(easy, CURLOPT_MAXREDIRS, 5L);
	curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, connect_timeout_ms);
	curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, t->timeout_ms);
	curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, 2L);
	curl_easy_setopt(easy, CURLOPT_USERAGENT, WI_EXTENSION_NAME "/" WI_VERSION);
	curl_easy_setopt(easy, CURLOPT_HTTPHEADER, t->headers);
	curl_easy_setopt(easy, CURLOPT_ACCEPT_ENCODING, "");
	/* Small receive buffers: thousands of transfers share the worker's memory. */
	curl_easy_setopt(easy, CURLOPT_BUFFERSIZE, 4096L);
	curl_easy_setopt(easy, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t) t->max_body);
	curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(easy, CURLOPT_WRITEDATA, t);
	curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, t->errbuf);

	if (curl_multi_add_handle(multi, easy) != CURLM_OK)
	{
		curl_easy_cleanup(easy);
		t->easy = NULL;
		*error = "could not add a transfer to libcurl";
		return false;
	}
	in_flight++;
	return true;
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
}

/* curl's timer ran out. */
void
wi_http_on_timer(void)
{
	timer_armed = false;
	curl_multi_socket_action(multi, CURL_SOCKET_TIMEOUT, 0, &running_handles);
}

/* Finished transfers, one per call, or NULL. */
Transfer *
wi_http_finished(void)
{
	CURLMsg    *msg;
	int			left;

	while ((msg = curl_multi_info_read(multi, &left)) != NULL)
	{
		Transfer   *t;

		if (msg->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **) &t);
		t->result = msg->data.result;
		curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &t->status);
		curl_easy_getinfo(t->easy, CURLINFO_TOTAL_TIME, &t->seconds);
#if LIBCURL_VERSION_NUM >= 0x075300
		{
			struct curl_header *h;

			if (curl_easy_header(t->easy, "Retry-After", 0, CURLH_HEADER, -1, &h) == CURLHE_OK)
			{
				char	   *end;
				long		secs;

				errno = 0;
				secs = strtol(h->value, &end, 10);

				if (end != h->value && secs >= 0 && errno != ERANGE)
					t->retry_after_s = Min(secs, 24L * 3600L);
			}
		}
#endif
		curl_multi_remove_handle(multi, t->easy);
		in_flight--;
		return t;
	}
	return NULL;
}

/* Free what curl and the body hold; the Transfer itself is the caller's. */
void
wi_http_release(Transfer *t)
{
	if (t->easy)
		curl_easy_cleanup(t->easy);
	t->easy = NULL;
	if (t->headers)
		curl_slist_free_all(t->headers);
	t->headers = NULL;
	free(t->body);
	t->body = NULL;
}
