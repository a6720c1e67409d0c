/*
 * worker_loop.c
 *		One pass of the fetcher's loop, step by step: reload settings,
 *		housekeeping (expired leases, parked jobs, retention, event ids), the
 *		poll, refilling free transfer slots with claims, then with the list
 *		pages of reconciliation sweeps (reconcile_claim.c), handing what
 *		finished to the apply workers (apply_dispatch.c), and waiting on one
 *		WaitEventSet for the latch (also set by the apply workers' queues),
 *		postmaster death, curl's sockets and curl's timer.  Everything the
 *		loop keeps between passes is in WorkerLoop; Transfers live in the
 *		loop's job context while their job is in flight (fetching, or
 *		fetched and held for an apply worker); everything else a pass
 *		allocates is in a context reset at the start of the next pass.  No
 *		transaction is open while transfers run, and none runs user code:
 *		the fetcher's only transactions are claims and housekeeping.
 *
 *		An ERROR that escapes a pass (the fetcher's own statements) is caught
 *		by worker.c, which calls wi_loop_recover(): transfers in flight stay
 *		in flight, results held stay held.
 *
 * IDENTIFICATION
 *		src/worker/worker_loop.c
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xact.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/interrupt.h"
#include "storage/latch.h"
#include "storage/procarray.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "webhook_ingest.h"
#include "apply_dispatch.h"
#include "compat.h"
#include "crash_guard.h"
#include "http.h"
#include "job_store.h"
#include "reconcile_claim.h"
#include "scheduler.h"
#include "settings.h"
#include "validate.h"
#include "verdict.h"
#include "wait_event.h"
#include "worker.h"
#include "worker_loop.h"

/* Pages of events one purge_events() call looks at. */
#define WI_PURGE_PAGES		100

/* Most time storage upkeep, then the event id purge, take in a round before fetches are served again. */
#define WI_HOUSEKEEPING_MS	50

/*
 * Where the worker's index scans start.  Claims walk the due-jobs index in
 * next_attempt_at order, lease checks the leases index in lease_until order,
 * retention the finished-jobs index in finished_at order; each leaves behind
 * it the index entries of rows it changed.  Those are normally dropped on the
 * next visit or by vacuum, but while some session holds an old snapshot (a
 * long transaction, a standby's hot_standby_feedback) they cannot be, and a
 * scan from the start would wade through all of them every time: a queue's
 * throughput collapses.  So each scan starts where the last one stopped, less
 * a margin for rows that committed late, and from the very start only now and
 * then: claims every poll interval, or every 10 while full scans are slow
 * (held back that way); lease checks every WI_FULL_SCAN_ROUNDS rounds (the
 * margin: WI_SCAN_MARGIN_MS, scheduler.h).  Claims keep where each source's walk stopped (scheduler.c).
 */
#define WI_SLOW_SCAN_MS		50
#define WI_FULL_SCAN_ROUNDS 30

static bool
out_of_time(TimestampTz start)
{
	return TimestampDifferenceExceeds(start, GetCurrentTimestamp(), WI_HOUSEKEEPING_MS);
}

/*
 * Storage upkeep (partitions, retention, the move of 0.5.0's rows), then
 * forget expired event ids, in short transactions, each for at most
 * WI_HOUSEKEEPING_MS.  Returns true when time ran out with work left: the
 * caller comes back soon.
 */
static bool
clean_up(void)
{
	TimestampTz start = GetCurrentTimestamp();
	bool		behind = false;
	int64		pages;
	int64		forgotten = 0;

	while (wi_maintain_storage())
	{
		if (out_of_time(start))
		{
			behind = true;
			break;
		}
	}

	/* The walk resumes where the last call stopped; at most one lap a round. */
	start = GetCurrentTimestamp();
	pages = wi_events_pages();
	for (int64 walked = 0; walked < pages; walked += WI_PURGE_PAGES)
	{
		forgotten += wi_purge_events(WI_PURGE_PAGES);
		if (out_of_time(start))
		{
			/* Only a walk that is finding expired ids is behind. */
			behind |= (forgotten > 0);
			break;
		}
	}
	return behind;
}

void
wi_loop_init(WorkerLoop *loop, int fd_cap)
{
	memset(loop, 0, sizeof(*loop));
	loop->fd_cap = fd_cap;
	loop->claim_now = true;
	loop->rewound = true;
	loop->last_lease_check = DT_NOBEGIN;
	loop->job_cxt = AllocSetContextCreate(TopMemoryContext, "webhook_ingest jobs", ALLOCSET_DEFAULT_SIZES);
	wi_sched_init();
	loop->pass_cxt = AllocSetContextCreate(TopMemoryContext, "webhook_ingest loop pass", ALLOCSET_DEFAULT_SIZES);
	loop->wait_set = wi_process_wait_event_set(3);	/* for the process's life */
	AddWaitEventToSet(loop->wait_set, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	AddWaitEventToSet(loop->wait_set, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
	AddWaitEventToSet(loop->wait_set, WL_SOCKET_READABLE, wi_http_epoll_fd(), NULL, NULL);
}

/* The next claim walks every source's due jobs from the start. */
static void
rewind_claims(WorkerLoop *loop)
{
	wi_sched_rewind();
	loop->rewound = true;
}

static void
reload_settings(WorkerLoop *loop)
{
	if (!ConfigReloadPending)
		return;
	ConfigReloadPending = false;
	ProcessConfigFile(PGC_SIGHUP);
	wi_http_set_limits();
}

/*
 * Now and then, take back expired leases that are not ours (or that we gave
 * up) and park the due jobs of paused sources; and clean up, again right
 * away while there is a backlog of it.
 */
static void
housekeeping(WorkerLoop *loop)
{
	TimestampTz now = GetCurrentTimestamp();

	if (!wi_enabled)
		return;
	if (now >= loop->next_lease_check)
	{
		TimestampTz lease_from = (loop->lease_rounds++ % WI_FULL_SCAN_ROUNDS == 0) ? DT_NOBEGIN :
			wi_scan_start(loop->last_lease_check);
		int			nabandoned;
		int64	   *abandoned = wi_dispatch_abandoned(&nabandoned);

		if (wi_reclaim_expired(lease_from, abandoned, nabandoned) > 0)
			loop->claim_now = true;
		if (nabandoned > 0)
			wi_dispatch_set_abandoned(wi_active_jobs(abandoned, nabandoned, true, abandoned));
		loop->last_lease_check = now;
		(void) wi_park_paused();
		rewind_claims(loop);
		loop->next_pages = 0;	/* rows written another way */
		loop->next_lease_check = TimestampTzPlusMilliseconds(now, wi_poll_interval_ms * 10L);
	}
	if (now >= loop->next_clean_up)
	{
		bool		behind = clean_up();

		now = GetCurrentTimestamp();
		loop->next_clean_up = behind ? now : TimestampTzPlusMilliseconds(now, wi_poll_interval_ms * 10L);
	}
}

/* The poll: retries that came due, rows written another way. */
static void
poll_if_due(WorkerLoop *loop)
{
	TimestampTz now = GetCurrentTimestamp();

	if (now < loop->next_poll)
		return;
	loop->claim_now = true;
	if (!loop->full_claims_slow)
		rewind_claims(loop);
	loop->next_poll = TimestampTzPlusMilliseconds(now, wi_poll_interval_ms);
}

/*
 * Transfer slots free now: a result held for an apply worker holds one (when
 * the apply workers fall behind, fewer transfers start); one waiting for a
 * row lock holds none (an application holding rows locked must not starve
 * the rest).
 */
static int
free_slots(WorkerLoop *loop)
{
	if (!wi_enabled)
		return 0;
	return Min(wi_max_concurrent_requests, loop->fd_cap) - wi_http_in_flight() - wi_dispatch_held();
}

/* A transfer is over: judged, and held for an apply worker. */
static void
finished(WorkerLoop *loop, Transfer *t)
{
	StringInfoData why;

	loop->counters.fetched++;
	loop->counters.bytes += t->body_len;
	initStringInfo(&why);
	t->verdict = wi_judge(t, &why);
	t->why = MemoryContextStrdup(loop->job_cxt, why.data);
	pfree(why.data);
	wi_dispatch_result(t);
}

/* What a fetch is for, in a message. */
static char *
fetch_name(Transfer *t)
{
	if (t->page)
		return psprintf("list page \"%s\" of source \"%s\"", wi_clip(t->url, strlen(t->url)), t->source);
	return psprintf("job %lld", (long long) t->job_id);
}

/* Start the fetch of a claimed job (or list page). */
static void
start_fetch(WorkerLoop *loop, Transfer *t)
{
	const char *error;

	wi_dispatch_claimed_again(t->job_id);
	wi_sched_started(t->source, t->reconciled);
	t->started = GetCurrentTimestamp();
	if (!wi_http_start(t, wi_connect_timeout_ms, &error))
	{
		/* Counts as a failed attempt (a refused address ends the job: verdict.c). */
		if (error != NULL)
			ereport(WARNING,
					(errcode(ERRCODE_SYSTEM_ERROR),
					 errmsg("webhook_ingest worker: could not start fetching %s: %s", fetch_name(t), error)));
		t->result = CURLE_FAILED_INIT;
		wi_sched_finished(t->source, false, -1, NULL);
		finished(loop, t);
	}
}

/* Claim as many due jobs as there are free slots, and start their fetches. */
static void
refill(WorkerLoop *loop)
{
	int			capacity = free_slots(loop);
	TimestampTz before = GetCurrentTimestamp();
	List	   *claimed;
	ListCell   *lc;

	/* A source held back by a limit or a throttle may fetch again. */
	if (wi_sched_wait_ms(before) == 0)
		loop->claim_now = true;
	/* A list page may be due: the jobs are claimed first, it gets the slots they leave. */
	if (before >= loop->next_pages)
		loop->claim_now = true;
	if (!loop->claim_now || capacity <= 0)
		return;
	claimed = wi_claim(capacity, wi_lease_timeout_s, loop->job_cxt);
	if (loop->rewound)
		loop->full_claims_slow = TimestampDifferenceExceeds(before, GetCurrentTimestamp(), WI_SLOW_SCAN_MS);
	loop->rewound = false;
	loop->claim_now = (list_length(claimed) == capacity);
	loop->counters.claimed += list_length(claimed);
	foreach(lc, claimed)
	{
		Transfer   *t = (Transfer *) lfirst(lc);

		t->max_body = (size_t) wi_max_response_size_kb * 1024;
		start_fetch(loop, t);
	}
	list_free(claimed);
	if (claimed != NIL)
		wi_http_on_timer();		/* let curl start the new transfers */
}

/*
 * Reconciliation: the due list pages of the sources with room, in the slots
 * the jobs left (webhooks first), when one may be due - at a sweep's time,
 * once a page was answered (the next may be due), when sources changed, at
 * the lease check's round - and start their fetches.
 */
static void
refill_pages(WorkerLoop *loop)
{
	int			capacity = free_slots(loop);
	List	   *pages;
	ListCell   *lc;

	if (wi_sources_reread())
		loop->next_pages = 0;
	if (capacity <= 0 || GetCurrentTimestamp() < loop->next_pages)
		return;
	pages = wi_claim_pages(capacity, loop->job_cxt, &loop->next_pages);
	foreach(lc, pages)
		start_fetch(loop, (Transfer *) lfirst(lc));
	list_free(pages);
	if (pages != NIL)
		wi_http_on_timer();
}

/*
 * Hand what finished to the apply workers, and take what they answered;
 * true when transfers finished (slots are free, and refetches may be due).
 */
static bool
hand_over(WorkerLoop *loop)
{
	Transfer   *t;
	bool		some = false;

	while ((t = wi_http_finished()) != NULL)
	{
		/* answered: a whole response (headers then a reset is a connection error) */
		wi_sched_finished(t->source, t->status > 0 && t->result == CURLE_OK, t->throttle_s, t->throttle_by);
		finished(loop, t);
		some = true;
	}
	wi_dispatch_pass(&loop->counters);
	if (wi_dispatch_page_answered())
		loop->next_pages = 0;	/* its sweep's next page may be due now */
	if (some)
		loop->claim_now = true;
	return some;
}

/* What the fetcher is doing, for worker_status. */
static void
publish(WorkerLoop *loop)
{
	int			held = wi_dispatch_held_all();
	const char *state = !wi_enabled ? "disabled" :
		(wi_dispatch_appliers() == 0 && held > 0) ? "running: waiting for an apply worker" : "running";

	wi_shmem_publish(state, wi_http_in_flight() + held, held, &loop->counters);
}

/* Wait for the latch, curl's sockets, curl's timer, or the poll. */
static void
wait_for_events(WorkerLoop *loop)
{
	WaitEvent	events[3];
	int			nevents;
	long		timeout;
	long		sched_ms = wi_sched_wait_ms(GetCurrentTimestamp());

	wi_http_connections(&loop->counters.connections_opened, &loop->counters.tls_connections_opened);
	publish(loop);
	wi_shmem_publish_sources();
	wi_crash_guard_publish();
	timeout = wi_http_timeout_ms();
	if (timeout < 0 || timeout > wi_poll_interval_ms)
		timeout = wi_poll_interval_ms;
	/* a held fetch's time running out (the next pass's completions see it) */
	if (wi_http_held_timeout_ms() >= 0)
		timeout = Min(timeout, wi_http_held_timeout_ms());
	/* (while every slot is taken, a completion wakes the loop anyway) */
	if (sched_ms >= 0 && free_slots(loop) > 0)
		timeout = Min(timeout, sched_ms);
	if (loop->next_pages != DT_NOEND && free_slots(loop) > 0)
		timeout = Min(timeout, Max(0, (long) ((loop->next_pages - GetCurrentTimestamp() + 999) / 1000)));
	if (wi_dispatch_timeout_ms() >= 0)
		timeout = Min(timeout, Max(wi_dispatch_timeout_ms(), 1));
	nevents = WaitEventSetWait(loop->wait_set, timeout, events, lengthof(events),
							   wi_wait_event(WI_WAIT_WORKER_MAIN));
	for (int i = 0; i < nevents; i++)
	{
		if (events[i].events & WL_LATCH_SET)
		{
			ResetLatch(MyLatch);
			loop->claim_now = true;
		}
		if (events[i].events & WL_SOCKET_READABLE)
			wi_http_on_sockets();
	}
	if (wi_http_timeout_ms() == 0)
		wi_http_on_timer();
}

/* One pass of the loop. */
void
wi_loop_pass(WorkerLoop *loop)
{
	MemoryContextReset(loop->pass_cxt);
	MemoryContextSwitchTo(loop->pass_cxt);

	CHECK_FOR_INTERRUPTS();
	wi_worker_stop_if_asked();
	reload_settings(loop);
	if (DefaultXactReadOnly)
	{
		wi_worker_wait_writable(wi_http_in_flight() + wi_dispatch_held_all(), wi_dispatch_held_all(),
								&loop->counters);
		wi_http_set_limits();	/* the wait took the reloads */
	}
	housekeeping(loop);
	poll_if_due(loop);
	refill(loop);
	refill_pages(loop);
	if (hand_over(loop))
		return;					/* straight to the next pass: slots are free */
	wait_for_events(loop);
}

/*
 * After an ERROR escaped a pass (worker.c has aborted the transaction and
 * reported the error): transfers in flight stay in flight, results held
 * stay held; the next pass claims again.
 */
void
wi_loop_recover(WorkerLoop *loop)
{
	MemoryContextSwitchTo(loop->pass_cxt);
	loop->claim_now = true;
}
