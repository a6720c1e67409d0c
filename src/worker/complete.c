/*
 * complete.c
 *		An apply worker completing a batch of fetched results (the fetcher
 *		hands them over, applier.c receives them) in one transaction:
 *
 *		1. lock the batch's job rows without waiting (FOR NO KEY UPDATE SKIP
 *		   LOCKED): a row another session holds (an application's enqueue
 *		   that requeued a running job, an admin's retry) is left for a
 *		   later turn, the fetcher keeping its result; a row no longer
 *		   running under this attempt and this fetcher (cancelled, taken
 *		   back, claimed again by a fetcher since) has its result dropped;
 *		2. for each locked job, in a subtransaction of its own: load its
 *		   payload (only now, so the worker's memory does not grow with
 *		   payloads times transfers in flight), run its handler as the
 *		   handler's owner (handler_call.c) or store the document - or
 *		   record the failed attempt; a list page of a reconciliation
 *		   sweep goes to _reconcile_page instead (reconcile_apply.c);
 *		3. mark the handled jobs done (or pending again, for a webhook
 *		   that came while they ran) in one statement, and queue their
 *		   NOTIFY webhook_ingest_done;
 *		4. after commit, write the commit LSN (done_batches), wake
 *		   wait_for_job(), count for the views.
 *
 *		A batch stops taking jobs after WI_BATCH_BUDGET_MS; the rest go back
 *		to the fetcher, not started, to be handed over again at once.  In a
 *		leashed batch, a job whose handler runs past the leash is rolled back
 *		and goes back too slow (not an attempt), and so do its source's
 *		other jobs of the batch, not started.
 *
 *		Every state change is guarded by (id, state = 'running', attempts);
 *		no statement here waits for a lock another session holds for longer
 *		than webhook_ingest.lock_timeout.
 *
 * IDENTIFICATION
 *		src/worker/complete.c
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "common/pg_prng.h"
#include "commands/async.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/pg_lsn.h"

#include "webhook_ingest.h"
#include "applier_guard.h"
#include "complete.h"
#include "handler_call.h"
#include "reconcile_apply.h"
#include "settings.h"
#include "shmem.h"
#include "stats.h"
#include "validate.h"
#include "worker_tx.h"

/*
 * A batch stops taking jobs once it has run this long; the rest go back to
 * the fetcher, so slow handlers cannot hold every result's completion (and
 * the commit that makes them visible) behind a whole batch.
 */
#define WI_BATCH_BUDGET_MS	200

/*
 * Completion batches whose done_batches row could not be written yet (a
 * lock timeout): their finished_at, written with a later LSN next time.
 */
#define WI_LSN_BACKLOG_MAX	1024
static TimestampTz lsn_backlog[WI_LSN_BACKLOG_MAX];
static int	lsn_backlog_len = 0;

/* Where the batch's jobs live (the apply worker's batch context): what outlives a job's completion. */
static MemoryContext batch_cxt = NULL;

/* The finished_at of the jobs the last committed batch made done: its now(). */
static TimestampTz batch_finished_at = 0;

/* The batch being completed. */
typedef struct Batch
{
	ApplyJob   *jobs;
	int			njobs;
	int			fetcher_pid;	/* the jobs' worker_pid when they were handed over */
	WiCounters *counters;
} Batch;

static ApplyJob *
find_job(Batch *b, int64 job_id)
{
	for (int i = 0; i < b->njobs; i++)
		if (b->jobs[i].job_id == job_id)
			return &b->jobs[i];
	return NULL;
}

/* The job of each row of the last statement: still ours (running, this attempt, this fetcher's)? */
static void
judge_rows(Batch *b, WiOutcome ours, WiOutcome other)
{
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		bool		isnull;
		ApplyJob   *t = find_job(b, DatumGetInt64(SPI_getbinval(tup, SPI_tuptable->tupdesc, 1, &isnull)));
		bool		running = DatumGetBool(SPI_getbinval(tup, SPI_tuptable->tupdesc, 2, &isnull));
		int32		attempts = DatumGetInt32(SPI_getbinval(tup, SPI_tuptable->tupdesc, 3, &isnull));
		Datum		pid = SPI_getbinval(tup, SPI_tuptable->tupdesc, 4, &isnull);

		if (t != NULL)
			t->outcome = (running && attempts == t->attempt && !isnull && DatumGetInt32(pid) == b->fetcher_pid) ?
				ours : other;
	}
}

/*
 * Step 1.  Every job of the batch ends with outcome NONE (locked, ours to
 * complete), DISCARDED or LOCKED.
 */
static void
lock_batch(Batch *b)
{
	static SPIPlanPtr lock_plan = NULL;
	static SPIPlanPtr probe_plan = NULL;
	Oid			types[1] = {INT8ARRAYOID};
	Datum		args[1];
	int64	   *ids = palloc(sizeof(int64) * b->njobs);
	int			n = 0;

	for (int i = 0; i < b->njobs; i++)
	{
		b->jobs[i].outcome = WI_OUTCOME_LOCKED;	/* until its row is found below */
		if (b->jobs[i].flags & WI_ITEM_PAGE)
			b->jobs[i].outcome = WI_OUTCOME_NONE;	/* a list page: no row of the queue */
		else
			ids[n++] = b->jobs[i].job_id;
	}
	args[0] = wi_id_array(ids, n);
	/*
	 * A generic plan (an index scan of the queue's primary key): planned with
	 * the array's values and statistics that lag a burst of enqueues, it
	 * could scan the whole queue, every row another apply worker holds
	 * costing a MultiXact lookup.
	 */
	if (wi_run_cached(&lock_plan,
					  "SELECT j.id, j.state::text = 'running', j.attempts, j.worker_pid FROM webhook_ingest.queue j"
					  " WHERE j.id = ANY ($1) FOR NO KEY UPDATE SKIP LOCKED",
					  1, types, args, NULL, false) != SPI_OK_SELECT)
		elog(ERROR, "could not lock the batch's jobs");
	judge_rows(b, WI_OUTCOME_NONE, WI_OUTCOME_DISCARDED);
	if (SPI_processed == (uint64) n)
		return;

	/*
	 * Not locked: held by another session (the fetcher keeps its result for
	 * later), or gone, or no longer ours (drop it).
	 */
	n = 0;
	for (int i = 0; i < b->njobs; i++)
		if (b->jobs[i].outcome == WI_OUTCOME_LOCKED)
		{
			ids[n++] = b->jobs[i].job_id;
			b->jobs[i].outcome = WI_OUTCOME_DISCARDED;	/* unless found below */
		}
	args[0] = wi_id_array(ids, n);
	if (wi_run_cached(&probe_plan,
					  "SELECT j.id, j.state::text = 'running', j.attempts, j.worker_pid FROM webhook_ingest.queue j"
					  " WHERE j.id = ANY ($1)",
					  1, types, args, NULL, true) != SPI_OK_SELECT)
		elog(ERROR, "could not look up the batch's jobs");
	/* (the rows looked up are those of jobs not locked above: the others keep their verdict) */
	judge_rows(b, WI_OUTCOME_LOCKED, WI_OUTCOME_DISCARDED);
}

static long
backoff_ms(ApplyJob *t)
{
	double		delay = (double) wi_backoff_base_ms;

	for (int i = 1; i < t->attempt && delay < wi_backoff_max_ms; i++)
		delay *= 2;
	if (delay > wi_backoff_max_ms)
		delay = wi_backoff_max_ms;
	/* jitter: half to all of the delay */
	delay = delay * (0.5 + 0.5 * pg_prng_double(&pg_global_prng_state));
	/* Honour Retry-After (http.c caps it at a day). */
	if (t->retry_after_s >= 0 && t->retry_after_s * 1000.0 > delay)
		delay = t->retry_after_s * 1000.0;
	return (long) delay;
}

/* Record a failed attempt: a retry after a back-off, or dead. */
static void
record_failure(ApplyJob *t, WiApplyVerdict verdict, const char *why, long elapsed_ms)
{
	static const char *sql =
		"UPDATE webhook_ingest.queue SET"
		"  state = CASE WHEN $4 AND NOT refetch THEN 'dead' ELSE 'pending' END::webhook_ingest.job_state,"
		"  attempts = CASE WHEN $4 AND refetch THEN 0 ELSE attempts END,"
		"  next_attempt_at = CASE WHEN $4 THEN now() ELSE now() + $5 * interval '1 millisecond' END,"
		"  finished_at = CASE WHEN $4 AND NOT refetch THEN now() END,"
		"  refetch = false, last_status = $6, last_error = $7,"
		"  lease_until = NULL, worker_pid = NULL, updated_at = now()"
		" WHERE id = $1 AND state::text = 'running' AND attempts = $2 AND $3";
	Oid			argtypes[7] = {INT8OID, INT4OID, BOOLOID, BOOLOID, INT8OID, INT4OID, TEXTOID};
	Datum		args[7];
	char		nulls[7] = {' ', ' ', ' ', ' ', ' ', ' ', ' '};
	bool		dead = (verdict == WI_APPLY_DEAD || t->attempt >= t->max_attempts);
	long		delay = dead ? 0 : backoff_ms(t);
	char	   *msg;
	static SPIPlanPtr plan = NULL;

	msg = psprintf("attempt %d/%d after %ld ms: %s%s", t->attempt, t->max_attempts, elapsed_ms, why,
				   dead ? "" : psprintf("; retrying in %ld ms", delay));
	args[0] = Int64GetDatum(t->job_id);
	args[1] = Int32GetDatum(t->attempt);
	args[2] = BoolGetDatum(true);
	args[3] = BoolGetDatum(dead);
	args[4] = Int64GetDatum(delay);
	args[5] = Int32GetDatum((int32) t->status);
	nulls[5] = t->status > 0 ? ' ' : 'n';
	args[6] = CStringGetTextDatum(msg);

	if (wi_run_cached(&plan, sql, 7, argtypes, args, nulls, false) != SPI_OK_UPDATE)
		elog(ERROR, "could not record a failed attempt");
	if (SPI_processed != 1)
	{
		/* Cancelled or reclaimed meanwhile: the newer state stands. */
		t->outcome = WI_OUTCOME_DISCARDED;
		return;
	}
	t->outcome = dead ? WI_OUTCOME_DEAD : WI_OUTCOME_RETRY;
	/* Kept with the batch (the per-job context is reset) for the failures ring and the reply. */
	t->why = MemoryContextStrdup(batch_cxt, why);
	if (dead)
		ereport(LOG,
				(errmsg("webhook_ingest: job %lld (%s/%s) is dead", (long long) t->job_id,
						t->source, t->external_id),
				 errdetail("%s", msg)));
}

static void
count_failure(WiCounters *counters, ApplyJob *t)
{
	if (t->outcome != WI_OUTCOME_DEAD && t->outcome != WI_OUTCOME_RETRY)
		return;
	if (t->outcome == WI_OUTCOME_DEAD)
		counters->dead++;
	else
		counters->retried++;
	snprintf(counters->last_error, sizeof(counters->last_error), "job %lld (%s/%s): %s",
			 (long long) t->job_id, t->source, t->external_id, t->why);
	counters->last_error_at = GetCurrentTimestamp();
}

/* The job's payload, read now that its row is locked (NULL when it has none). */
static Datum
load_payload(ApplyJob *t, bool *isnull)
{
	static SPIPlanPtr plan = NULL;
	Oid			types[1] = {INT8OID};
	Datum		args[1] = {Int64GetDatum(t->job_id)};
	Datum		value;

	if (wi_run_cached(&plan, "SELECT j.payload FROM webhook_ingest.queue j WHERE j.id = $1",
					  1, types, args, NULL, true) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not read the payload of job %lld", (long long) t->job_id);
	value = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, isnull);
	/* Into the per-job context: freed before the next job's is read. */
	return *isnull ? (Datum) 0 : datumCopy(value, false, -1);
}

/* Without a handler, the document goes to webhook_ingest.documents. */
static void
store_document(ApplyJob *t, Datum external_id, Datum details, bool gone)
{
	static const char *sql =
		"INSERT INTO webhook_ingest.documents (source, external_id, details, fetched_at)"
		" VALUES ($1, $2, $3, now())"
		" ON CONFLICT (source, external_id) DO UPDATE SET details = EXCLUDED.details, fetched_at = now()";
	static SPIPlanPtr plan = NULL;
	Oid			types[3] = {TEXTOID, TEXTOID, JSONBOID};
	Datum		args[3] = {CStringGetTextDatum(t->source), external_id, details};
	char		nulls[3] = {' ', ' ', gone ? 'n' : ' '};

	if (wi_run_cached(&plan, sql, 3, types, args, nulls, false) != SPI_OK_INSERT)
		elog(ERROR, "could not store the document");
}

/*
 * The batch's handled jobs are done - or pending again, those a webhook came
 * for while they ran - in one statement, after their handlers (each in its
 * subtransaction) all ran: a statement per job cost more than a no-op
 * handler.  A done job leaves the queue for job_history (its payload to
 * kept_payloads if the source keeps them, the error of its last failed
 * attempt, if any, with it); its finished_at is the batch's now(), the key
 * of its done_batches row.  A row whose time no partition covered at the
 * last storage round goes to the overflow table instead, so a missing
 * partition never fails a completion.  A job whose row its own handler
 * changed (no longer running under this attempt: cancelled, say) is not
 * returned: DISCARDED, its handler's work kept, as that of a job cancelled
 * after it ran.
 */
static void
mark_done(ApplyJob **handled, int n)
{
	static const char *sql =
		/* each job's attempt and status: at its id's place in $1 (no join: a batch is a few hundred) */
		"WITH again AS ("
		"  UPDATE webhook_ingest.queue q SET"
		"    state = 'pending', attempts = 0, finished_at = NULL, next_attempt_at = now(), refetch = false,"
		"    last_status = ($3::int2[])[array_position($1, q.id)], last_error = NULL, lease_until = NULL,"
		"    worker_pid = NULL, updated_at = now()"
		"   WHERE q.id = ANY ($1) AND q.state::text = 'running'"
		"     AND q.attempts = ($2::int4[])[array_position($1, q.id)] AND q.refetch"
		"   RETURNING q.id),"
		" gone AS ("
		"  DELETE FROM webhook_ingest.queue q"
		"   WHERE q.id = ANY ($1) AND q.state::text = 'running'"
		"     AND q.attempts = ($2::int4[])[array_position($1, q.id)] AND NOT q.refetch"
		"   RETURNING q.id, q.source, q.external_id, q.payload, q.events, q.attempts, q.created_at,"
		"             q.started_at, q.last_error, ($3::int2[])[array_position($1, q.id)] AS status),"
		" done AS ("
		"  SELECT g.id, now() AS finished_at, g.created_at, g.started_at, s.id AS source_id, g.events,"
		"         least(g.attempts, 32767)::smallint AS attempts, g.status AS last_status, g.external_id,"
		"         g.payload, now() + s.keep_payloads AS kept_until, g.last_error"
		"    FROM gone g JOIN webhook_ingest.sources s ON s.name = g.source),"
		" history AS ("
		"  INSERT INTO webhook_ingest.job_history (id, finished_at, created_at, started_at, source_id, events,"
		"                                          attempts, last_status, external_id, last_error)"
		"  SELECT id, finished_at, created_at, started_at, source_id, events, attempts, last_status, external_id,"
		"         last_error"
		"    FROM done WHERE finished_at < $4),"
		" history_overflow AS ("
		"  INSERT INTO webhook_ingest.job_history_overflow (id, finished_at, created_at, started_at, source_id,"
		"                                                   events, attempts, last_status, external_id, last_error)"
		"  SELECT id, finished_at, created_at, started_at, source_id, events, attempts, last_status, external_id,"
		"         last_error"
		"    FROM done WHERE finished_at >= $4),"
		" kept AS ("
		"  INSERT INTO webhook_ingest.kept_payloads (job_id, kept_until, payload)"
		"  SELECT id, kept_until, payload FROM done"
		"   WHERE kept_until < $5 AND payload IS NOT NULL),"
		" kept_overflow AS ("
		"  INSERT INTO webhook_ingest.kept_payloads_overflow (job_id, kept_until, payload)"
		"  SELECT id, kept_until, payload FROM done"
		"   WHERE kept_until >= $5 AND payload IS NOT NULL)"
		" SELECT id, false FROM again UNION ALL SELECT id, true FROM gone";
	static SPIPlanPtr plan = NULL;
	TimestampTz history_until;
	TimestampTz kept_until;
	Oid			types[5] = {INT8ARRAYOID, INT4ARRAYOID, INT2ARRAYOID, TIMESTAMPTZOID, TIMESTAMPTZOID};
	Datum		args[5];
	int64	   *ids;
	int		   *attempts;
	Datum	   *statuses;

	if (n == 0)
		return;
	ids = palloc(sizeof(int64) * n);
	attempts = palloc(sizeof(int) * n);
	statuses = palloc(sizeof(Datum) * n);
	for (int i = 0; i < n; i++)
	{
		ids[i] = handled[i]->job_id;
		attempts[i] = handled[i]->attempt;
		statuses[i] = Int16GetDatum((int16) Max(Min(handled[i]->status, PG_INT16_MAX), 0));
		handled[i]->outcome = WI_OUTCOME_DISCARDED;	/* unless its row is returned below */
	}
	/* the storage horizon the fetcher's last storage round found (shmem.c) */
	wi_shmem_horizon(&history_until, &kept_until);
	args[0] = wi_id_array(ids, n);
	args[1] = wi_int4_array(attempts, n);
	args[2] = PointerGetDatum(construct_array(statuses, n, INT2OID, sizeof(int16), true, TYPALIGN_SHORT));
	args[3] = TimestampTzGetDatum(history_until);
	args[4] = TimestampTzGetDatum(kept_until);

	if (wi_run_cached(&plan, sql, 5, types, args, NULL, false) != SPI_OK_SELECT)
		elog(ERROR, "could not mark the batch's jobs done");
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		HeapTuple	tup = SPI_tuptable->vals[r];
		bool		isnull;
		int64		id = DatumGetInt64(SPI_getbinval(tup, SPI_tuptable->tupdesc, 1, &isnull));
		bool		done = DatumGetBool(SPI_getbinval(tup, SPI_tuptable->tupdesc, 2, &isnull));

		for (int i = 0; i < n; i++)
			if (handled[i]->job_id == id)
			{
				handled[i]->outcome = done ? WI_OUTCOME_DONE : WI_OUTCOME_REFETCH;
				break;
			}
	}
	for (int i = 0; i < n; i++)
		if (handled[i]->outcome == WI_OUTCOME_DISCARDED)
			ereport(LOG,
					(errmsg("webhook_ingest worker: job %lld was no longer running under attempt %d after its handler",
							(long long) handled[i]->job_id, handled[i]->attempt),
					 errdetail("Its handler's work is kept; the job is not marked done.")));
}

/*
 * NOTIFY webhook_ingest_done, for this batch?  Not while the notification
 * queue is more than half full: a listener that never reads holds its tail,
 * and a full queue would fail every commit of the worker.  Checked once per
 * batch; a skipped batch is logged (at most every WI_NOTIFY_LOG_EVERY_S).
 */
#define WI_NOTIFY_MAX_QUEUE_USAGE	0.5
#define WI_NOTIFY_LOG_EVERY_S		60
static bool notify_this_batch = true;

static void
decide_notify(void)
{
	static TimestampTz last_logged = 0;
	double		usage = DatumGetFloat8(OidFunctionCall0(F_PG_NOTIFICATION_QUEUE_USAGE));

	notify_this_batch = usage < WI_NOTIFY_MAX_QUEUE_USAGE;
	if (!notify_this_batch &&
		TimestampDifferenceExceeds(last_logged, GetCurrentTimestamp(), WI_NOTIFY_LOG_EVERY_S * 1000))
	{
		ereport(WARNING,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("webhook_ingest worker: not sending NOTIFY webhook_ingest_done: the notification queue is %.0f%% full",
						usage * 100),
				 errhint("A session that LISTENs does not read its notifications, or holds a transaction open.")));
		last_logged = GetCurrentTimestamp();
	}
}

static void
notify_done(ApplyJob *t)
{
	char		payload[64];

	if (!notify_this_batch || t->outcome != WI_OUTCOME_DONE)
		return;
	/* The job's id alone: any role that may connect can LISTEN (audit 0.10.0 third pass, 2). */
	snprintf(payload, sizeof(payload), "{\"job_id\": %lld}", (long long) t->job_id);
	Async_Notify("webhook_ingest_done", payload);
}

/*
 * Run the handler (or store the document), inside the caller's
 * subtransaction; the job is marked done with the batch's others after
 * (mark_done).  Errors propagate to the caller.
 */
static void
handle(ApplyJob *t, bool gone)
{
	Datum		args[3];
	bool		nulls[3] = {false, gone, false};
	TimestampTz started = GetCurrentTimestamp();
	int64		parse_us;

	args[1] = (Datum) 0;
	if (!gone)
	{
		const char *body = t->body ? t->body : "";

		if (strlen(body) != t->body_len || !pg_verifymbstr(body, t->body_len, true))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
					 errmsg("response body is not valid text in the database encoding")));
		args[1] = DirectFunctionCall1(jsonb_in, CStringGetDatum(body));
	}
	parse_us = GetCurrentTimestamp() - started;
	args[0] = CStringGetTextDatum(t->external_id);
	if (OidIsValid(t->handler))
		args[2] = load_payload(t, &nulls[2]);
	/*
	 * Charged to its source (sched_apply.c): its document's parse and its
	 * handler's own time (a document slow to parse is the source's cost too),
	 * not the bookkeeping around them.
	 */
	started = GetCurrentTimestamp();
	if (OidIsValid(t->handler))
		wi_call_handler(t->handler, args, nulls);
	else
		store_document(t, args[0], args[1], gone);
	t->handler_us = parse_us + (GetCurrentTimestamp() - started);
	if (t->flags & WI_ITEM_RECONCILES)
		wi_reconcile_fetched(t, args[1], gone);
}

/* A handler that could not be called, or whose error no retry fixes, ends the job. */
static WiApplyVerdict
handler_error_verdict(ApplyJob *t, ErrorData *e)
{
	if (OidIsValid(t->handler) && wi_handler_was_refused())
		return WI_APPLY_DEAD;
	return wi_handler_error_final(e->sqlerrcode) ? WI_APPLY_DEAD : WI_APPLY_RETRY;
}

/* What went wrong in a handler, for last_error. */
static char *
handler_failure(ApplyJob *t, ErrorData *e, bool gone, double handler_ms)
{
	const char *what = gone ? "handler (object gone)" : "handler";

	if (wi_handler_timed_out(e, handler_ms))
		return psprintf("%s: cancelled after webhook_ingest.handler_timeout (%d ms)", what, wi_handler_timeout_ms);
	/* The message is clipped right after CopyErrorData. */
	if (wi_handler_error_final(e->sqlerrcode))
		return psprintf("%s: %s (SQLSTATE %s, not retried)", what,
						e->message, unpack_sql_state(e->sqlerrcode));
	return psprintf("%s: %s", what, e->message);
}

/*
 * Step 2 for one job whose row this transaction holds: true when its handler
 * succeeded (the job is marked done with the batch's others, mark_done).
 */
static bool
complete_one(ApplyJob *t, WiCounters *counters)
{
	volatile bool handled = false;
	StringInfoData why;
	WiApplyVerdict verdict = t->verdict;
	long		elapsed_ms = (long) (t->fetch_seconds * 1000.0);
	MemoryContext before = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	TimestampTz started;

	if (t->flags & WI_ITEM_PAGE)
	{
		wi_complete_page(t);
		return false;
	}
	if (verdict != WI_APPLY_HANDLE && verdict != WI_APPLY_GONE)
	{
		record_failure(t, verdict, t->fetch_error, elapsed_ms);
		count_failure(counters, t);
		return false;
	}

	started = GetCurrentTimestamp();
	wi_applier_guard_handling(t->job_id);
	BeginInternalSubTransaction(NULL);
	/* The parsed document lives in the per-job context, not the batch's. */
	MemoryContextSwitchTo(before);
	PG_TRY();
	{
		handle(t, verdict == WI_APPLY_GONE);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(before);
		CurrentResourceOwner = owner;
		counters->succeeded++;
		handled = true;
	}
	PG_CATCH();
	{
		ErrorData  *e;
		double		handler_ms = (double) (GetCurrentTimestamp() - started) / 1000.0;

		MemoryContextSwitchTo(before);
		e = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		/* A handler's message can be any size: keep a bounded part, and free the rest now. */
		if (e->message && strlen(e->message) > WI_HANDLER_ERROR_BYTES)
		{
			char	   *whole = e->message;

			e->message = wi_clip_to(whole, (int) strlen(whole), WI_HANDLER_ERROR_BYTES);
			pfree(whole);
		}
		MemoryContextSwitchTo(before);
		CurrentResourceOwner = owner;
		t->handler_us = (int64) (handler_ms * 1000.0);	/* until it failed, the bookkeeping with it */
		if (OidIsValid(t->handler) && wi_handler_leash_hit())
			t->outcome = WI_OUTCOME_TOO_SLOW;	/* not an attempt of the job's: it goes again, alone */
		else
		{
			counters->handler_errors++;
			t->handler_error = true;
			initStringInfo(&why);
			appendStringInfoString(&why, handler_failure(t, e, verdict == WI_APPLY_GONE, handler_ms));
			record_failure(t, handler_error_verdict(t, e), why.data, elapsed_ms);
			count_failure(counters, t);
		}
		FreeErrorData(e);
	}
	PG_END_TRY();
	wi_applier_guard_handling(0);
	counters->handler_us += t->handler_us;
	wi_handler_end_job();
	return handled;
}

static void
complete_batch(void *arg)
{
	Batch	   *b = (Batch *) arg;
	MemoryContext batch = CurrentMemoryContext;
	MemoryContext per_job = AllocSetContextCreate(batch, "webhook_ingest job", ALLOCSET_DEFAULT_SIZES);
	TimestampTz started = GetCurrentTimestamp();
	bool		out_of_time = false;
	const char *too_slow = NULL;	/* a source whose handler ran past the batch's leash */
	ApplyJob  **handled = palloc(sizeof(ApplyJob *) * Max(b->njobs, 1));
	int			nhandled = 0;

	batch_finished_at = GetCurrentTransactionStartTimestamp();
	lock_batch(b);
	decide_notify();
	for (int i = 0; i < b->njobs; i++)
	{
		ApplyJob   *t = &b->jobs[i];

		if (t->outcome != WI_OUTCOME_NONE)
			continue;
		if (out_of_time || (too_slow != NULL && strcmp(t->source, too_slow) == 0))
		{
			t->outcome = WI_OUTCOME_NOT_STARTED;	/* handed over again, to the next batch */
			continue;
		}
		MemoryContextSwitchTo(per_job);
		if (complete_one(t, b->counters))
			handled[nhandled++] = t;
		MemoryContextSwitchTo(batch);
		MemoryContextReset(per_job);
		if (t->outcome == WI_OUTCOME_TOO_SLOW)
			too_slow = t->source;
		out_of_time = TimestampDifferenceExceeds(started, GetCurrentTimestamp(), WI_BATCH_BUDGET_MS);
	}
	mark_done(handled, nhandled);
	for (int i = 0; i < nhandled; i++)
		notify_done(handled[i]);
}

/*
 * Give the batch's done jobs their done_lsn: one done_batches row keyed by
 * the batch's now() (every job it made done has it as finished_at), with
 * lsn, at or past the batch's commit; with it, rows the backlog still owes.
 * A short transaction of its own, committed asynchronously - if it is lost,
 * the fetcher's next start fills in the gap (wi_fill_missing_done_lsn), and
 * an apply worker that stopped before it is followed by one that does
 * (applier_guard.c).  Then wakes the waiters of the batch's done jobs.
 */
typedef struct DoneLsn
{
	TimestampTz *batches;
	int			n;
	XLogRecPtr	lsn;
} DoneLsn;

static void
write_done_lsn(void *arg)
{
	DoneLsn    *d = (DoneLsn *) arg;
	static SPIPlanPtr plan = NULL;
	Oid			types[2] = {PG_LSNOID, TIMESTAMPTZARRAYOID};
	Datum		args[2];
	Datum	   *elems = palloc(sizeof(Datum) * d->n);

	for (int i = 0; i < d->n; i++)
		elems[i] = TimestampTzGetDatum(d->batches[i]);
	args[0] = LSNGetDatum(d->lsn);
	args[1] = PointerGetDatum(construct_array(elems, d->n, TIMESTAMPTZOID, sizeof(TimestampTz), true,
											  TYPALIGN_DOUBLE));
	pgstat_report_activity(STATE_RUNNING, "webhook_ingest: recording the commit LSN of done jobs");
	(void) set_config_option("synchronous_commit", "off", PGC_SUSET, PGC_S_SESSION, GUC_ACTION_LOCAL,
							 true, 0, false);
	if (wi_run_cached(&plan,
					  "INSERT INTO webhook_ingest.done_batches (finished_at, done_lsn)"
					  " SELECT f, $1 FROM unnest($2) f"
					  " ON CONFLICT (finished_at) DO UPDATE"
					  "   SET done_lsn = greatest(webhook_ingest.done_batches.done_lsn, EXCLUDED.done_lsn)",
					  2, types, args, NULL, false) != SPI_OK_INSERT)
		elog(ERROR, "could not record done_lsn");
}

/* The ids of the batch's jobs with this outcome, into ids; how many. */
static int
ids_with_outcome(const Batch *b, WiOutcome outcome, int64 *ids)
{
	int			n = 0;

	for (int i = 0; i < b->njobs; i++)
		if (b->jobs[i].outcome == outcome)
			ids[n++] = b->jobs[i].job_id;
	return n;
}

static void
record_done_lsn(const Batch *b, XLogRecPtr lsn)
{
	DoneLsn		d;
	int64	   *ids = palloc(sizeof(int64) * (b->njobs + 1));
	int			n = b->njobs > 0 ? ids_with_outcome(b, WI_OUTCOME_DONE, ids) : 0;

	if (n > 0 && lsn_backlog_len < WI_LSN_BACKLOG_MAX)
		lsn_backlog[lsn_backlog_len++] = batch_finished_at;
	if (lsn_backlog_len == 0)
	{
		pfree(ids);
		return;
	}
	d.batches = lsn_backlog;
	d.n = lsn_backlog_len;
	d.lsn = lsn;
	/* On a lock timeout everything waits for the next try; else the backlog is paid. */
	if (wi_in_tx("webhook_ingest: recording the commit LSN of done jobs", write_done_lsn, &d))
	{
		lsn_backlog_len = 0;
		wi_shmem_jobs_finished(ids, n);
	}
	pfree(ids);
}

/* Try the done_lsn backlog again, with the current WAL position. */
void
wi_retry_done_lsn(void)
{
	Batch		none = {NULL, 0, 0, NULL};

	if (lsn_backlog_len > 0)
		record_done_lsn(&none, GetXLogInsertRecPtr());
}

/* Wake the waiters of the jobs the batch made dead. */
static void
wake_dead(const Batch *b)
{
	int64	   *ids = palloc(sizeof(int64) * b->njobs);

	wi_shmem_jobs_finished(ids, ids_with_outcome(b, WI_OUTCOME_DEAD, ids));
	pfree(ids);
}

/* After the batch committed: what it did, for the views. */
static void
record_stats(const Batch *b)
{
	TimestampTz now = GetCurrentTimestamp();

	wi_stats_begin();
	for (int i = 0; i < b->njobs; i++)
	{
		const ApplyJob *t = &b->jobs[i];

		switch (t->outcome)
		{
			case WI_OUTCOME_DONE:
				wi_stats_done(t->source, now, (double) (now - t->created_at), t->fetch_seconds * 1000000.0);
				break;
			case WI_OUTCOME_RETRY:
			case WI_OUTCOME_DEAD:
				wi_stats_failed(t->source, now, t->job_id, t->external_id, t->attempt, t->status,
								t->why ? t->why : "", t->fetch_seconds * 1000.0, t->outcome == WI_OUTCOME_DEAD);
				break;
			default:
				break;
		}
	}
	wi_stats_end();
}

/* Did this job's completion end (whatever the outcome), as opposed to waiting for another turn? */
static bool
completion_ended(WiOutcome outcome)
{
	return outcome != WI_OUTCOME_LOCKED && outcome != WI_OUTCOME_NOT_STARTED && outcome != WI_OUTCOME_ERROR &&
		outcome != WI_OUTCOME_TOO_SLOW;
}

/*
 * Complete a batch of fetched results in one transaction; then record the
 * commit LSN of the jobs it made done, wake wait_for_job(), and count.
 * Each job's outcome says what became of it: LOCKED (its row was locked by
 * another session, or the whole batch met a lock timeout) and NOT_STARTED
 * ones go back to the fetcher for a later turn.
 */
void
wi_complete(ApplyJob *jobs, int njobs, int fetcher_pid, WiCounters *counters)
{
	Batch		b = {jobs, njobs, fetcher_pid, counters};
	bool		finished_some = false;

	batch_cxt = GetMemoryChunkContext(jobs);

	for (int i = 0; i < njobs; i++)
	{
		jobs[i].outcome = WI_OUTCOME_NONE;
		jobs[i].why = NULL;
		jobs[i].handler_us = 0;
		jobs[i].handler_error = false;
	}
	wi_applier_guard_completing(jobs, njobs);
	if (!wi_in_tx("webhook_ingest: completing fetched jobs", complete_batch, &b))
	{
		for (int i = 0; i < njobs; i++)
			jobs[i].outcome = WI_OUTCOME_LOCKED;
	}
	for (int i = 0; i < njobs; i++)
	{
		if (!completion_ended(jobs[i].outcome) || jobs[i].outcome == WI_OUTCOME_PAGE)
			continue;
		counters->applied++;
		counters->bytes += jobs[i].body_len;
		if (jobs[i].outcome == WI_OUTCOME_DONE || jobs[i].outcome == WI_OUTCOME_DEAD)
			finished_some = true;
	}
	if (finished_some)
	{
		record_done_lsn(&b, XactLastCommitEnd);
		wake_dead(&b);
	}
	wi_applier_guard_completed();
	record_stats(&b);
}
