/*
 * worker_loop.c
 *		One pass of the worker's loop, step by step: reload settings, house-
 *		keeping (expired leases, parked jobs, retention, event ids), the poll,
 *		refilling free transfer slots with claims, completing what finished,
 *		and waiting on one WaitEventSet for the latch, postmaster death,
 *		curl's sockets and curl's timer.  Everything the loop keeps between
 *		passes is in WorkerLoop; Transfers (and the lists holding them) live
 *		in the loop's job context while their job is in flight; everything
 *		else a pass allocates is in a context reset at the start of the next
 *		pass.  No transaction is open while transfers run.
 *
 *		An ERROR that escapes a pass (the worker's own statements, out of
 *		memory in a batch) is caught by worker.c, which calls
 *		wi_loop_recover(): transfers in flight stay in flight; those that
 *		were being completed are tried again, alone, and after
 *		WI_MAX_COMPLETION_ERRORS such errors given back to the queue.
 *
 * IDENTIFICATION
 *		src/worker_loop.c
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
#include "crash_guard.h"
#include "http.h"
#include "job_store.h"
#include "scheduler.h"
#include "worker_loop.h"

/* Pages of events one purge_events() call looks at. */
#define WI_PURGE_PAGES		100

/* Most time storage upkeep, then the event id purge, take in a round before fetches are served again. */
#define WI_HOUSEKEEPING_MS	50

/*
 * Most completions committed in one transaction: few commits (each waits for
 * its WAL flush) keep the worker fast.  But each job runs its handler in a
 * subtransaction of its own, and past PGPROC_MAX_CACHED_SUBXIDS (64) written
 * subtransactions a transaction's subxid cache overflows: every snapshot
 * taken anywhere while it runs must then look xids up in pg_subtrans.  That
 * is cheap while all snapshots are recent, and thrashes pg_subtrans when
 * some session holds an old one (bench/soak saw minute-long stalls).  So
 * while the oldest snapshot is more than WI_OLD_SNAPSHOT_XIDS behind, the
 * worker commits every WI_COMPLETE_BATCH_SAFE jobs, which leaves room for
 * one subtransaction of the handler's own per job.
 */
#define WI_COMPLETE_BATCH		256
#define WI_COMPLETE_BATCH_SAFE	32
#define WI_OLD_SNAPSHOT_XIDS	10000

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
 * (held back that way); lease checks every WI_FULL_SCAN_ROUNDS rounds.  Claims keep where each source's walk stopped (scheduler.c).
 */
#define WI_SCAN_MARGIN_MS	2000
#define WI_SLOW_SCAN_MS		50
#define WI_FULL_SCAN_ROUNDS 30

/* Recovered errors a finished transfer may meet before its job goes back to the queue. */
#define WI_MAX_COMPLETION_ERRORS	3

static int
completion_batch_size(void)
{
#if PG_VERSION_NUM >= 140000
	TransactionId horizon = GetOldestNonRemovableTransactionId(NULL);
#else
	TransactionId horizon = GetOldestXmin(NULL, PROCARRAY_FLAGS_DEFAULT);
#endif
#if PG_VERSION_NUM >= 140000
	TransactionId next = ReadNextTransactionId();
#else
	TransactionId next = XidFromFullTransactionId(ReadNextFullTransactionId());
#endif

	if (TransactionIdIsNormal(horizon) && (int32) (next - horizon) > WI_OLD_SNAPSHOT_XIDS)
		return WI_COMPLETE_BATCH_SAFE;
	return WI_COMPLETE_BATCH;
}

/* Where a scan starts again: where the last one stopped, less the margin. */
TimestampTz
wi_scan_start(TimestampTz stopped_at)
{
	if (stopped_at == DT_NOBEGIN)
		return DT_NOBEGIN;
	return TimestampTzPlusMilliseconds(stopped_at, -WI_SCAN_MARGIN_MS);
}

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

static void abandon(WorkerLoop *loop, Transfer *t);

/* Append in the job context, where the lists of Transfers live. */
static List *
keep(WorkerLoop *loop, List *list, void *t)
{
	MemoryContext old = MemoryContextSwitchTo(loop->job_cxt);

	list = lappend(list, t);
	MemoryContextSwitchTo(old);
	return list;
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
#if PG_VERSION_NUM >= 170000
	loop->wait_set = CreateWaitEventSet(NULL, 3);	/* for the process's life */
#else
	loop->wait_set = CreateWaitEventSet(TopMemoryContext, 3);
#endif
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
 * Now and then, take back expired leases that are not ours, park the due
 * jobs of paused sources and retry done_lsn that met a lock; and clean up,
 * again right away while there is a backlog of it.
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

		if (wi_reclaim_expired(lease_from, loop->abandoned, loop->nabandoned) > 0)
			loop->claim_now = true;
		if (loop->nabandoned > 0)
			loop->nabandoned = wi_active_jobs(loop->abandoned, loop->nabandoned, true, loop->abandoned);
		loop->last_lease_check = now;
		(void) wi_park_paused();
		wi_retry_done_lsn();
		rewind_claims(loop);
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

/* A job claimed again is this worker's once more. */
static void
forget_abandoned(WorkerLoop *loop, int64 job_id)
{
	for (int i = 0; i < loop->nabandoned; i++)
		if (loop->abandoned[i] == job_id)
			loop->abandoned[i--] = loop->abandoned[--loop->nabandoned];
}

/*
 * Transfer slots free now; deferred results hold none (an application holding
 * rows locked must not starve the rest).
 */
static int
free_slots(WorkerLoop *loop)
{
	if (!wi_enabled)
		return 0;
	return Min(wi_max_concurrent_requests, loop->fd_cap) - wi_http_in_flight() - list_length(loop->finished);
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
		const char *error;

		forget_abandoned(loop, t->job_id);
		wi_sched_started(t->source);
		t->max_body = (size_t) wi_max_response_size_kb * 1024;
		t->started = GetCurrentTimestamp();
		if (!wi_http_start(t, wi_connect_timeout_ms, &error))
		{
			/* Counts as a failed attempt (a refused address ends the job: verdict.c). */
			if (error != NULL)
				ereport(WARNING,
						(errcode(ERRCODE_SYSTEM_ERROR),
						 errmsg("webhook_ingest worker: could not start fetching job %lld: %s",
								(long long) t->job_id, error)));
			t->result = CURLE_FAILED_INIT;
			wi_sched_finished(t->source, false, -1, NULL);
			loop->finished = keep(loop, loop->finished, t);
		}
	}
	list_free(claimed);
	if (claimed != NIL)
		wi_http_on_timer();		/* let curl start the new transfers */
}

/* A transfer that met an error, or a suspect of a crash, is completed alone. */
static bool
must_go_alone(Transfer *t)
{
	return t->errors > 0 || wi_crash_guard_must_go_alone(t);
}

/*
 * The next batch: a prefix of loop->finished - one transfer that must go
 * alone, or up to batch_size others.
 */
static List *
next_batch(WorkerLoop *loop, int batch_size)
{
	List	   *batch = NIL;
	ListCell   *lc;

	foreach(lc, loop->finished)
	{
		Transfer   *t = (Transfer *) lfirst(lc);

		if (must_go_alone(t))
		{
			if (batch == NIL)
				batch = list_make1(t);
			break;
		}
		batch = lappend(batch, t);
		if (list_length(batch) == batch_size)
			break;
	}
	return batch;
}

/* loop->finished without its first n (a completed batch). */
static void
drop_finished_head(WorkerLoop *loop, int n)
{
	MemoryContext old = MemoryContextSwitchTo(loop->job_cxt);
	List	   *rest = list_copy_tail(loop->finished, n);

	MemoryContextSwitchTo(old);
	list_free(loop->finished);
	loop->finished = rest;
}

/*
 * Complete loop->finished, batch by batch (several transactions for a large
 * one, see WI_COMPLETE_BATCH).  While a batch is completed its transfers
 * stay at the head of loop->finished (loop->completing says how many), so
 * an error leaves them there for wi_loop_recover.  What is done with is
 * freed; transfers whose rows were locked by another session go to
 * loop->deferred.
 */
static void
complete_finished(WorkerLoop *loop)
{
	int			batch_size = completion_batch_size();

	while (loop->finished != NIL)
	{
		List	   *batch = next_batch(loop, batch_size);
		List	   *later;
		ListCell   *lc;

		loop->completing = list_length(batch);
		later = wi_complete(batch, &loop->counters);
		loop->completing = 0;
		drop_finished_head(loop, list_length(batch));
		foreach(lc, batch)
		{
			if (list_member_ptr(later, lfirst(lc)))
				loop->deferred = keep(loop, loop->deferred, lfirst(lc));
			else
				wi_transfer_free((Transfer *) lfirst(lc));
		}
	}
}

/*
 * Results waiting for a row lock are kept up to max_concurrent_requests of
 * them; past that the oldest are given up (an application holding that many
 * rows locked delays those jobs until their leases expire, not the worker).
 */
static void
bound_deferred(WorkerLoop *loop)
{
	static TimestampTz last_logged = 0;
	int			dropped = 0;

	while (list_length(loop->deferred) > wi_max_concurrent_requests)
	{
		abandon(loop, (Transfer *) linitial(loop->deferred));
		loop->deferred = list_delete_first(loop->deferred);
		dropped++;
	}
	if (dropped > 0 && TimestampDifferenceExceeds(last_logged, GetCurrentTimestamp(), 10000))
	{
		ereport(WARNING,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("webhook_ingest worker: gave up the results of %d jobs whose rows other sessions hold locked",
						dropped),
				 errdetail("They are fetched again once their leases expire.")));
		last_logged = GetCurrentTimestamp();
	}
}

/* Complete what has finished, and what waited for a row lock. */
static bool
complete(WorkerLoop *loop)
{
	Transfer   *t;
	bool		had_deferred = (loop->deferred != NIL);
	bool		retrying = false;

	while ((t = wi_http_finished()) != NULL)
	{
		/* answered: a whole response (headers then a reset is a connection error) */
		wi_sched_finished(t->source, t->status > 0 && t->result == CURLE_OK, t->throttle_s, t->throttle_by);
		loop->finished = keep(loop, loop->finished, t);
	}
	if (had_deferred && GetCurrentTimestamp() >= loop->next_deferred_try)
	{
		MemoryContext old = MemoryContextSwitchTo(loop->job_cxt);

		loop->finished = list_concat(loop->finished, loop->deferred);
		MemoryContextSwitchTo(old);
		list_free(loop->deferred);
		loop->deferred = NIL;
		retrying = true;
	}
	if (loop->finished == NIL)
		return false;
	complete_finished(loop);
	bound_deferred(loop);
	/*
	 * The next try of deferred results: lock_timeout after this one, or after
	 * the first deferral - not pushed back by every other completion, which
	 * under steady traffic would postpone it for ever.
	 */
	if (retrying || !had_deferred)
		loop->next_deferred_try = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), wi_lock_timeout_ms);
	/* Slots are free, and refetches may be due now. */
	loop->claim_now = true;
	return true;
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
	wi_shmem_publish(wi_enabled ? "running" : "disabled", wi_http_in_flight(), &loop->counters);
	wi_shmem_publish_sources();
	timeout = wi_http_timeout_ms();
	if (timeout < 0 || timeout > wi_poll_interval_ms)
		timeout = wi_poll_interval_ms;
	/* a held fetch's time running out (the next pass's completions see it) */
	if (wi_http_held_timeout_ms() >= 0)
		timeout = Min(timeout, wi_http_held_timeout_ms());
	/* (while every slot is taken, a completion wakes the loop anyway) */
	if (sched_ms >= 0 && free_slots(loop) > 0)
		timeout = Min(timeout, sched_ms);
	if (loop->deferred != NIL)
		timeout = Min(timeout, Max(wi_lock_timeout_ms, 1));
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
		wi_worker_wait_writable(wi_http_in_flight(), &loop->counters);
		wi_http_set_limits();	/* the wait took the reloads */
	}
	housekeeping(loop);
	poll_if_due(loop);
	refill(loop);
	if (complete(loop))
		return;					/* straight to the next pass: slots are free */
	wait_for_events(loop);
}

/* Give a finished transfer up: its job goes back to the queue when its lease expires. */
static void
abandon(WorkerLoop *loop, Transfer *t)
{
	if (loop->nabandoned == loop->abandoned_size)
	{
		loop->abandoned_size = Max(64, loop->abandoned_size * 2);
		loop->abandoned = loop->abandoned ?
			repalloc(loop->abandoned, sizeof(int64) * loop->abandoned_size) :
			MemoryContextAlloc(loop->job_cxt, sizeof(int64) * loop->abandoned_size);
	}
	loop->abandoned[loop->nabandoned++] = t->job_id;
	wi_transfer_free(t);
}

/*
 * After an ERROR escaped a pass (worker.c has aborted the transaction and
 * reported the error): transfers in flight stay in flight; those of the
 * batch that was being completed count an error and are tried again, each
 * alone; one that met WI_MAX_COMPLETION_ERRORS is given up, and its job
 * left to the lease check.
 */
void
wi_loop_recover(WorkerLoop *loop)
{
	List	   *keep_list = NIL;
	int			i = 0;
	ListCell   *lc;

	MemoryContextSwitchTo(loop->job_cxt);
	foreach(lc, loop->finished)
	{
		Transfer   *t = (Transfer *) lfirst(lc);

		if (i++ < loop->completing && ++t->errors >= WI_MAX_COMPLETION_ERRORS)
		{
			ereport(WARNING,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("webhook_ingest worker: giving up completing job %lld after %d errors",
							(long long) t->job_id, t->errors),
					 errdetail("The lease check takes the job back once its lease has expired.")));
			abandon(loop, t);
		}
		else
			keep_list = lappend(keep_list, t);
	}
	list_free(loop->finished);
	loop->finished = keep_list;
	loop->completing = 0;
	MemoryContextSwitchTo(loop->pass_cxt);
	loop->claim_now = true;
}
