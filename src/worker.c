/*
 * worker.c
 *		The background worker's life: registration, signals, waiting for the
 *		extension and for the end of recovery, and the loop that keeps up to
 *		webhook_ingest.max_concurrent_requests fetches in flight - claiming
 *		more as slots free up, driving libcurl from one WaitEventSet beside
 *		the latch and postmaster death, and completing finished fetches in
 *		batches; between them, time-boxed clean-up (event ids, retention).
 *		No transaction is open while transfers run.
 */
#include "postgres.h"

#include <limits.h>
#include <sys/resource.h>

#include "access/transam.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/procarray.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "webhook_ingest.h"
#include "crash_guard.h"
#include "handler_call.h"
#include "http.h"
#include "job_store.h"

PGDLLEXPORT void webhook_ingest_worker_main(Datum arg);

/* Sockets this process keeps for itself besides curl's. */
#define WI_RESERVED_FDS		100

/* Pages of events one purge_events() call looks at. */
#define WI_PURGE_PAGES		100

/* Finished jobs one retention transaction deletes. */
#define WI_RETENTION_BATCH	1000

/* Most time retention, then the event id purge, take in a round before fetches are served again. */
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
 * (held back that way); lease checks and retention every WI_FULL_SCAN_ROUNDS
 * rounds.
 */
#define WI_SCAN_MARGIN_MS	2000
#define WI_SLOW_SCAN_MS		50
#define WI_FULL_SCAN_ROUNDS 30

void
wi_register_worker(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	/* Not on a standby: the postmaster starts it once recovery has ended. */
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 5;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "webhook_ingest");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "webhook_ingest_worker_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "webhook_ingest worker");
	snprintf(worker.bgw_type, BGW_MAXLEN, "webhook_ingest worker");
	RegisterBackgroundWorker(&worker);
}

/*
 * Raise the soft file limit toward the hard one; every transfer holds a
 * socket.  Returns how many transfers the limit allows.
 */
static int
transfers_allowed_by_file_limit(void)
{
	struct rlimit rl;
	int			allowed;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return wi_max_concurrent_requests;
	if (rl.rlim_cur < rl.rlim_max)
	{
		rlim_t		old = rl.rlim_cur;

		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			rl.rlim_cur = old;
	}
	allowed = (int) Min((rlim_t) INT_MAX, rl.rlim_cur) - max_files_per_process - WI_RESERVED_FDS;
	allowed = Max(allowed, 1);
	ereport(LOG,
			(errmsg("webhook_ingest worker: file limit %lu, up to %d transfers in flight",
					(unsigned long) rl.rlim_cur, Min(allowed, wi_max_concurrent_requests))));
	return allowed;
}

static void
wait_for(long timeout_ms)
{
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, timeout_ms, PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
	if (ConfigReloadPending)
	{
		ConfigReloadPending = false;
		ProcessConfigFile(PGC_SIGHUP);
	}
}

static int
completion_batch_size(void)
{
#if PG_VERSION_NUM >= 140000
	TransactionId horizon = GetOldestNonRemovableTransactionId(NULL);
#else
	TransactionId horizon = GetOldestXmin(NULL, PROCARRAY_FLAGS_DEFAULT);
#endif
	TransactionId next = ReadNextTransactionId();

	if (TransactionIdIsNormal(horizon) && (int32) (next - horizon) > WI_OLD_SNAPSHOT_XIDS)
		return WI_COMPLETE_BATCH_SAFE;
	return WI_COMPLETE_BATCH;
}

/* Where a scan starts again: where the last one stopped, less the margin. */
static TimestampTz
scan_start(TimestampTz stopped_at)
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
 * Delete jobs past webhook_ingest.retention, then forget expired event ids,
 * in short transactions, each for at most WI_HOUSEKEEPING_MS.  Returns true
 * when time ran out with work left: the caller comes back soon.
 */
static bool
clean_up(TimestampTz *retention_from)
{
	TimestampTz start = GetCurrentTimestamp();
	bool		behind = false;
	int64		pages;
	int64		forgotten = 0;

	while (wi_retention_s >= 0)
	{
		TimestampTz from = scan_start(*retention_from);
		int64		deleted = wi_delete_finished(wi_retention_s, WI_RETENTION_BATCH, &from);

		*retention_from = Max(*retention_from, from);
		if (deleted < WI_RETENTION_BATCH)
			break;
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

static void
free_transfer(Transfer *t)
{
	wi_http_release(t);
	pfree(t->source);
	pfree(t->external_id);
	pfree(t->url);
	if (t->why)
		pfree(t->why);
	pfree(t);
}

/*
 * Complete finished transfers: in batches (several transactions for a
 * large one, see WI_COMPLETE_BATCH), except suspects of a crash, each alone
 * (crash_guard.c).  Frees what is done with; returns the transfers left for
 * a later turn (their rows were locked by another session).
 */
static List *
complete_finished(List *finished, WiCounters *counters)
{
	int			batch_size = completion_batch_size();
	List	   *batch = NIL;
	List	   *later = NIL;
	ListCell   *lc;

	foreach(lc, finished)
	{
		Transfer   *t = (Transfer *) lfirst(lc);

		if (wi_crash_guard_is_suspect(t->job_id))
		{
			List	   *alone = list_make1(t);

			later = list_concat(later, wi_complete(alone, counters));
			list_free(alone);
			continue;
		}
		batch = lappend(batch, t);
		if (list_length(batch) == batch_size)
		{
			later = list_concat(later, wi_complete(batch, counters));
			list_free(batch);
			batch = NIL;
		}
	}
	if (batch != NIL)
	{
		later = list_concat(later, wi_complete(batch, counters));
		list_free(batch);
	}
	foreach(lc, finished)
		if (!list_member_ptr(later, lfirst(lc)))
			free_transfer((Transfer *) lfirst(lc));
	return later;
}

void
webhook_ingest_worker_main(Datum arg)
{
	MemoryContext job_cxt;
	WaitEventSet *wait_set;
	WiCounters	counters = {0};
	int			fd_cap;
	bool		claim_now = true;
	TimestampTz next_lease_check = 0;
	TimestampTz next_clean_up = 0;
	TimestampTz next_poll = 0;
	TimestampTz claim_from = DT_NOBEGIN;	/* see WI_SCAN_MARGIN_MS */
	bool		full_claims_slow = false;
	TimestampTz last_lease_check = DT_NOBEGIN;
	TimestampTz retention_from = DT_NOBEGIN;
	uint64		lease_rounds = 0;
	uint64		clean_up_rounds = 0;
	char		version[64];
	bool		told_old = false;
	List	   *deferred = NIL; /* finished, their rows locked by another session */
	TimestampTz next_deferred_try = 0;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	BackgroundWorkerInitializeConnection(wi_database, NULL, 0);
	pgstat_report_appname("webhook_ingest worker");
	/*
	 * The worker runs as the bootstrap superuser: its own SQL sees pg_catalog
	 * and nothing else, whatever ALTER DATABASE says, so nothing can shadow
	 * what it calls.  Handlers start with the database's search_path, and
	 * whatever they change is undone after each (handler_call.c).
	 */
	wi_handler_remember_search_path();
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_OVERRIDE);
	wi_shmem_register_worker();

	/* Nothing to do until the extension exists in this database. */
	wi_shmem_publish("waiting for the extension", 0, &counters);
	for (;;)
	{
		WiExtensionState ext = wi_extension_state(version, sizeof(version));

		if (ext == WI_EXTENSION_READY)
			break;
		if (ext == WI_EXTENSION_OLD && !told_old)
		{
			ereport(LOG,
					(errmsg("webhook_ingest worker: extension version %s is installed, the library is %s",
							version, WI_VERSION),
					 errhint("Run ALTER EXTENSION webhook_ingest UPDATE; the worker waits until then.")));
			wi_shmem_publish("waiting for ALTER EXTENSION webhook_ingest UPDATE", 0, &counters);
			told_old = true;
		}
		wait_for(wi_poll_interval_ms * 10L);
	}

	fd_cap = transfers_allowed_by_file_limit();
	wi_http_init(wi_max_host_connections);

	wi_shmem_publish("disabled", 0, &counters);
	while (!wi_enabled)
		wait_for(wi_poll_interval_ms * 10L);
	wi_shmem_publish("running", 0, &counters);

	{
		int			n;

		wi_crash_guard_start();
		n = wi_reclaim_running();

		if (n > 0)
			ereport(LOG, (errmsg("webhook_ingest worker: reclaimed %d jobs left running by a previous worker", n)));
		n = wi_fill_missing_done_lsn();
		if (n > 0)
		{
			ereport(LOG, (errmsg("webhook_ingest worker: filled in done_lsn of %d jobs a previous worker finished", n)));
			wi_shmem_jobs_finished();
		}
	}

	job_cxt = AllocSetContextCreate(TopMemoryContext, "webhook_ingest jobs", ALLOCSET_DEFAULT_SIZES);
#if PG_VERSION_NUM >= 170000
	wait_set = CreateWaitEventSet(NULL, 3);	/* for the process's life */
#else
	wait_set = CreateWaitEventSet(TopMemoryContext, 3);
#endif
	AddWaitEventToSet(wait_set, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	AddWaitEventToSet(wait_set, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
	AddWaitEventToSet(wait_set, WL_SOCKET_READABLE, wi_http_epoll_fd(), NULL, NULL);

	for (;;)
	{
		WaitEvent	events[3];
		int			nevents;
		long		timeout;
		List	   *finished = NIL;
		Transfer   *t;
		int			capacity;
		TimestampTz now;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			wi_http_set_host_limit(wi_max_host_connections);
		}

		/*
		 * Now and then, take back expired leases that are not ours and park
		 * the due jobs of paused sources; and clean up, again right away
		 * while there is a backlog of it.
		 */
		now = GetCurrentTimestamp();
		if (wi_enabled && now >= next_lease_check)
		{
			TimestampTz lease_from = (lease_rounds++ % WI_FULL_SCAN_ROUNDS == 0) ? DT_NOBEGIN :
				scan_start(last_lease_check);

			if (wi_reclaim_expired(lease_from) > 0)
				claim_now = true;
			last_lease_check = now;
			(void) wi_park_paused();
			wi_retry_done_lsn();
			claim_from = DT_NOBEGIN;
			next_lease_check = TimestampTzPlusMilliseconds(now, wi_poll_interval_ms * 10L);
		}
		if (wi_enabled && now >= next_clean_up)
		{
			bool		behind;

			if (clean_up_rounds++ % WI_FULL_SCAN_ROUNDS == 0)
				retention_from = DT_NOBEGIN;
			behind = clean_up(&retention_from);
			now = GetCurrentTimestamp();
			next_clean_up = behind ? now : TimestampTzPlusMilliseconds(now, wi_poll_interval_ms * 10L);
		}

		/* The poll: retries that came due, rows written another way. */
		if (now >= next_poll)
		{
			claim_now = true;
			if (!full_claims_slow)
				claim_from = DT_NOBEGIN;
			next_poll = TimestampTzPlusMilliseconds(now, wi_poll_interval_ms);
		}

		/* Refill: claim as many due jobs as there are free slots. */
		capacity = wi_enabled ?
			Min(wi_max_concurrent_requests, fd_cap) - wi_http_in_flight() - list_length(deferred) : 0;
		if (claim_now && capacity > 0)
		{
			TimestampTz before = GetCurrentTimestamp();
			TimestampTz last_due;
			List	   *claimed = wi_claim(capacity, wi_lease_timeout_s, claim_from, &last_due, job_cxt);
			ListCell   *lc;

			if (claim_from == DT_NOBEGIN)
				full_claims_slow = TimestampDifferenceExceeds(before, GetCurrentTimestamp(), WI_SLOW_SCAN_MS);
			/* All due jobs up to the last one claimed, or to now, are taken. */
			claim_from = scan_start(list_length(claimed) == capacity ? last_due : before);
			claim_now = (list_length(claimed) == capacity);
			counters.claimed += list_length(claimed);
			foreach(lc, claimed)
			{
				const char *error;

				t = (Transfer *) lfirst(lc);
				t->max_body = (size_t) wi_max_response_size_kb * 1024;
				t->started = GetCurrentTimestamp();
				if (!wi_http_start(t, wi_connect_timeout_ms, &error))
				{
					/* Counts as a failed attempt; the lease brings it back. */
					ereport(WARNING, (errmsg("webhook_ingest worker: %s", error)));
					t->result = CURLE_FAILED_INIT;
					finished = lappend(finished, t);
				}
			}
			list_free(claimed);
			if (claimed != NIL)
				wi_http_on_timer();		/* let curl start the new transfers */
		}

		/* Complete what has finished, and what waited for a row lock. */
		while ((t = wi_http_finished()) != NULL)
			finished = lappend(finished, t);
		if (deferred != NIL && GetCurrentTimestamp() >= next_deferred_try)
		{
			finished = list_concat(finished, deferred);
			list_free(deferred);
			deferred = NIL;
			wi_retry_done_lsn();
		}
		if (finished != NIL)
		{
			deferred = list_concat(deferred, complete_finished(finished, &counters));
			list_free(finished);
			next_deferred_try = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), wi_lock_timeout_ms);
			/* Slots are free, and refetches may be due now. */
			claim_now = true;
			continue;
		}

		wi_shmem_publish(wi_enabled ? "running" : "disabled", wi_http_in_flight(), &counters);

		/* Wait for the latch, curl's sockets, curl's timer, or the poll. */
		timeout = wi_http_timeout_ms();
		if (timeout < 0 || timeout > wi_poll_interval_ms)
			timeout = wi_poll_interval_ms;
		if (deferred != NIL)
			timeout = Min(timeout, Max(wi_lock_timeout_ms, 1));
		nevents = WaitEventSetWait(wait_set, timeout, events, lengthof(events), PG_WAIT_EXTENSION);
		for (int i = 0; i < nevents; i++)
		{
			if (events[i].events & WL_LATCH_SET)
			{
				ResetLatch(MyLatch);
				claim_now = true;
			}
			if (events[i].events & WL_SOCKET_READABLE)
				wi_http_on_sockets();
		}
		if (wi_http_timeout_ms() == 0)
			wi_http_on_timer();
	}
}
