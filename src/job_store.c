/*
 * job_store.c
 *		The worker's SQL: claiming due jobs (a short transaction with FOR
 *		UPDATE SKIP LOCKED), reclaiming what a previous incarnation left
 *		running, and completing finished fetches - each handler in its own
 *		subtransaction, many completions in one transaction, then the
 *		commit's LSN into done_lsn.  Every state change is guarded by (id,
 *		state = 'running', attempts), so a late finisher never overwrites a
 *		newer state (a cancel, a reclaim).  Also the housekeeping statements:
 *		expired leases, parking jobs of paused sources, retention, purging
 *		event ids.  No HTTP happens here.
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#if PG_VERSION_NUM >= 150000
#include "common/pg_prng.h"
#endif
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/pg_lsn.h"
#include "utils/snapmgr.h"

#include "webhook_ingest.h"
#include "http.h"
#include "job_store.h"
#include "verdict.h"

static int
run_prepared(SPIPlanPtr *plan, const char *sql, int nargs, Oid *types, Datum *args, const char *nulls,
			 bool read_only, bool replan)
{
	wi_prepare_once(plan, sql, nargs, types, replan);
	/* Results are read right after each call: free the last one first. */
	SPI_freetuptable(SPI_tuptable);
	return SPI_execute_plan(*plan, args, nulls, read_only, 0);
}

/*
 * A per-job statement, prepared once per worker life with a generic plan.
 * Such statements find their row by id alone: their guards compare
 * state::text, which no partial index predicate is implied by, so the plan
 * cannot pick a small partial index and scan all of it (which, while an old
 * snapshot keeps dead entries there, grows without bound).
 */
static int
run_cached(SPIPlanPtr *plan, const char *sql, int nargs, Oid *types, Datum *args, const char *nulls,
		   bool read_only)
{
	return run_prepared(plan, sql, nargs, types, args, nulls, read_only, false);
}

/*
 * A statement run once per batch or housekeeping round: planned at each
 * execution, with the parameters' values and the table as it is now.
 */
static int
run_replanned(SPIPlanPtr *plan, const char *sql, int nargs, Oid *types, Datum *args, const char *nulls)
{
	return run_prepared(plan, sql, nargs, types, args, nulls, false, true);
}

static void begin_tx(void);
static void end_tx(void);

/*
 * A housekeeping UPDATE in a short transaction of its own, replanned each
 * time; returns how many rows it changed.
 */
static int
run_alone(const char *activity, SPIPlanPtr *plan, const char *sql, int nargs, Oid *types, Datum *args)
{
	int			n;

	begin_tx();
	pgstat_report_activity(STATE_RUNNING, activity);
	if (run_replanned(plan, sql, nargs, types, args, NULL) != SPI_OK_UPDATE)
		elog(ERROR, "could not run \"%s\"", activity);
	n = (int) SPI_processed;
	end_tx();
	return n;
}

/* Plans for calling each handler, by function OID. */
typedef struct HandlerPlan
{
	Oid			handler;
	SPIPlanPtr	plan;
	struct HandlerPlan *next;
} HandlerPlan;

static HandlerPlan *handler_plans = NULL;

static void
begin_tx(void)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	PushActiveSnapshot(GetTransactionSnapshot());
}

static void
end_tx(void)
{
	PopActiveSnapshot();
	SPI_finish();
	CommitTransactionCommand();
	pgstat_report_stat(false);
	pgstat_report_activity(STATE_IDLE, NULL);
}

/*
 * Is the extension installed here, and at this library's version?  The
 * installed version goes to version (size bytes), "" if none.
 */
WiExtensionState
wi_extension_state(char *version, int size)
{
	WiExtensionState state = WI_EXTENSION_MISSING;

	begin_tx();
	pgstat_report_activity(STATE_RUNNING, "webhook_ingest: looking for the extension");
	version[0] = '\0';
	if (SPI_execute("SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'webhook_ingest'",
					true, 1) == SPI_OK_SELECT && SPI_processed == 1)
	{
		strlcpy(version, SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1), size);
		state = strcmp(version, WI_VERSION) == 0 ? WI_EXTENSION_READY : WI_EXTENSION_OLD;
	}
	end_tx();
	return state;
}

/*
 * Done jobs whose done_lsn the worker did not get to write (it stopped
 * between the commit and that write) get the current WAL position, which
 * is past their commit.  done_lsn is written batch by batch in commit
 * order, so they are the done jobs finished at or after the newest one
 * that has it; the jobs_finished index finds both.
 */
int
wi_fill_missing_done_lsn(void)
{
	static SPIPlanPtr plan = NULL;

	return run_alone("webhook_ingest: filling in missing done_lsn", &plan,
					 "UPDATE webhook_ingest.jobs SET done_lsn = pg_current_wal_lsn()"
					 " WHERE state <> ALL ('{pending,running,dead}'::webhook_ingest.job_state[])"
					 "   AND state = 'done' AND done_lsn IS NULL"
					 "   AND finished_at >= coalesce("
					 "     (SELECT f.finished_at FROM webhook_ingest.jobs f"
					 "       WHERE f.state <> ALL ('{pending,running,dead}'::webhook_ingest.job_state[])"
					 "         AND f.done_lsn IS NOT NULL"
					 "       ORDER BY f.finished_at DESC LIMIT 1), '-infinity')",
					 0, NULL, NULL);
}

/*
 * Park the pending jobs of paused sources that came due (enqueued, retried
 * or reclaimed since the pause), so that claims need not skip them.
 */
int
wi_park_paused(void)
{
	static SPIPlanPtr plan = NULL;

	return run_alone("webhook_ingest: parking jobs of paused sources", &plan,
					 "UPDATE webhook_ingest.jobs j SET next_attempt_at = 'infinity', updated_at = now()"
					 "  FROM webhook_ingest.sources s"
					 " WHERE s.paused AND j.source = s.name AND j.state = 'pending'"
					 "   AND j.next_attempt_at <= now()",
					 0, NULL, NULL);
}

/*
 * Delete up to max_jobs done or cancelled jobs that finished more than
 * retention_s ago, oldest first, from *from on (the index entries before it
 * are those of rows deleted already; see worker.c); one short transaction.
 * Moves *from to the newest finished_at deleted.
 */
int64
wi_delete_finished(int retention_s, int max_jobs, TimestampTz *from)
{
	static SPIPlanPtr plan = NULL;
	Oid			types[3] = {INT4OID, INT4OID, TIMESTAMPTZOID};
	Datum		args[3] = {Int32GetDatum(retention_s), Int32GetDatum(max_jobs), TimestampTzGetDatum(*from)};
	int64		n;

	begin_tx();
	pgstat_report_activity(STATE_RUNNING, "webhook_ingest: deleting jobs past webhook_ingest.retention");
	/* The outer conditions are checked again on a row changed meanwhile (retry()). */
	if (run_replanned(&plan,
				   "DELETE FROM webhook_ingest.jobs j"
				   " WHERE j.id = ANY (ARRAY("
				   "   SELECT f.id FROM webhook_ingest.jobs f"
				   "    WHERE f.state <> ALL ('{pending,running,dead}'::webhook_ingest.job_state[])"
				   "      AND f.finished_at >= $3 AND f.finished_at < now() - make_interval(secs => $1)"
				   "    ORDER BY f.finished_at LIMIT $2))"
				   "   AND j.state <> ALL ('{pending,running,dead}'::webhook_ingest.job_state[])"
				   "   AND j.finished_at < now() - make_interval(secs => $1)"
				   " RETURNING j.finished_at",
				   3, types, args, NULL) != SPI_OK_DELETE_RETURNING)
		elog(ERROR, "could not delete finished jobs");
	n = (int64) SPI_processed;
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		TimestampTz t = DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1,
														  &isnull));

		if (!isnull && t > *from)
			*from = t;
	}
	end_tx();
	return n;
}

/* Pages in the events table now. */
int64
wi_events_pages(void)
{
	static SPIPlanPtr plan = NULL;
	bool		isnull;
	int64		pages;

	begin_tx();
	if (run_cached(&plan,
				   "SELECT pg_relation_size('webhook_ingest.events') / current_setting('block_size')::bigint",
				   0, NULL, NULL, NULL, true) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not size the events table");
	pages = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	end_tx();
	return pages;
}

/* Jobs left running by an earlier incarnation of the worker are due again. */
int
wi_reclaim_running(void)
{
	static SPIPlanPtr plan = NULL;

	/* The interrupted attempt does not count against max_attempts. */
	return run_alone("webhook_ingest: reclaiming jobs of a previous worker", &plan,
					 "UPDATE webhook_ingest.jobs SET state = 'pending', lease_until = NULL, worker_pid = NULL,"
					 " attempts = greatest(attempts - 1, 0), next_attempt_at = now(), updated_at = now(),"
					 " last_error = 'reclaimed: the worker that ran it stopped'"
					 " WHERE state = 'running'",
					 0, NULL, NULL);
}

/*
 * Running jobs whose lease has expired (at or after from) and that this
 * worker does not hold (a worker that died without a restart of this one, a
 * claim made by hand) are due again.
 */
int
wi_reclaim_expired(TimestampTz from)
{
	static SPIPlanPtr plan = NULL;
	Oid			types[1] = {TIMESTAMPTZOID};
	Datum		args[1] = {TimestampTzGetDatum(from)};

	return run_alone("webhook_ingest: reclaiming expired leases", &plan,
					 "UPDATE webhook_ingest.jobs SET state = 'pending', lease_until = NULL, worker_pid = NULL,"
					 " next_attempt_at = now(), updated_at = now(),"
					 " last_error = 'reclaimed: its lease expired at ' || lease_until"
					 " WHERE state = 'running' AND lease_until >= $1 AND lease_until < now()"
					 " AND worker_pid IS DISTINCT FROM pg_backend_pid()",
					 1, types, args);
}

/* One slice of the walk that forgets expired event ids (purge_events); how many it forgot. */
int64
wi_purge_events(int max_pages)
{
	static SPIPlanPtr plan = NULL;
	Oid			types[1] = {INT4OID};
	Datum		args[1] = {Int32GetDatum(max_pages)};
	bool		isnull;
	int64		n;

	begin_tx();
	pgstat_report_activity(STATE_RUNNING, "webhook_ingest: forgetting expired event ids");
	if (run_cached(&plan, "SELECT webhook_ingest.purge_events($1)", 1, types, args, NULL, false) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "could not purge event ids");
	n = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	end_tx();
	return n;
}

static struct curl_slist *
headers_list(Jsonb *headers)
{
	struct curl_slist *list = curl_slist_append(NULL, "Accept: application/json");
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	char	   *key = NULL;

	if (headers == NULL || !JB_ROOT_IS_OBJECT(headers))
		return list;
	it = JsonbIteratorInit(&headers->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
			key = pnstrdup(v.val.string.val, v.val.string.len);
		else if (tok == WJB_VALUE && key != NULL && v.type == jbvString)
		{
			char	   *line = psprintf("%s: %.*s", key, v.val.string.len, v.val.string.val);

			list = curl_slist_append(list, line);
			pfree(line);
		}
	}
	return list;
}

/*
 * Claim up to max_jobs due jobs whose next_attempt_at is at or after from
 * (an ordered walk of jobs_due that stops at the limit: the paused sources
 * are looked up first and passed as a value, not joined, so the plan, made
 * for these values, never sorts the whole backlog);
 * returns them as Transfers allocated in cxt, ready for wi_http_start, and
 * the latest next_attempt_at among them in *last_due.
 */
List *
wi_claim(int max_jobs, int lease_s, TimestampTz from, TimestampTz *last_due, MemoryContext cxt)
{
	static const char *sql =
		"WITH due AS ("
		"  SELECT pj.id FROM webhook_ingest.jobs pj"
		"   WHERE pj.state = 'pending' AND pj.next_attempt_at >= $3 AND pj.next_attempt_at <= now()"
		"     AND pj.source <> ALL ($4)"
		"   ORDER BY pj.next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED)"
		" UPDATE webhook_ingest.jobs j"
		"    SET state = 'running', attempts = j.attempts + 1, refetch = false,"
		"        lease_until = now() + make_interval(secs => greatest($2, s.timeout_ms / 1000.0 + 10)),"
		"        worker_pid = pg_backend_pid(), updated_at = now(), started_at = clock_timestamp()"
		"   FROM due, webhook_ingest.sources s"
		"  WHERE j.id = due.id AND s.name = j.source"
		" RETURNING j.id, j.attempts, j.source, j.external_id, j.payload::text,"
		"           s.url_template, s.headers, s.timeout_ms, s.max_attempts, s.handler::oid, j.created_at,"
		"           j.next_attempt_at";
	static SPIPlanPtr plan = NULL;
	static SPIPlanPtr paused_plan = NULL;
	Oid			argtypes[4] = {INT4OID, INT4OID, TIMESTAMPTZOID, TEXTARRAYOID};
	Datum		args[4] = {Int32GetDatum(max_jobs), Int32GetDatum(lease_s), TimestampTzGetDatum(from), (Datum) 0};
	bool		isnull;
	List	   *claimed = NIL;
	MemoryContext caller = CurrentMemoryContext;

	begin_tx();
	pgstat_report_activity(STATE_RUNNING, "webhook_ingest: claiming due jobs");
	if (run_cached(&paused_plan,
				   "SELECT coalesce(array_agg(name), '{}') FROM webhook_ingest.sources WHERE paused",
				   0, NULL, NULL, NULL, true) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not look up paused sources");
	/* A copy: the next statement frees this result. */
	args[3] = datumCopy(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull), false, -1);
	if (run_replanned(&plan, sql, 4, argtypes, args, NULL) != SPI_OK_UPDATE_RETURNING)
		elog(ERROR, "could not claim jobs");
	*last_due = from;

	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		Transfer   *t = MemoryContextAllocZero(cxt, sizeof(Transfer));
		char	   *external_id = SPI_getvalue(tup, desc, 4);
		char	   *payload = SPI_getvalue(tup, desc, 5);
		Datum		headers;

		/* Only what the Transfer keeps goes to cxt; the rest dies with SPI. */
		t->job_id = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
		t->attempt = DatumGetInt32(SPI_getbinval(tup, desc, 2, &isnull));
		t->source = MemoryContextStrdup(cxt, SPI_getvalue(tup, desc, 3));
		t->external_id = MemoryContextStrdup(cxt, external_id);
		t->payload = payload ? MemoryContextStrdup(cxt, payload) : NULL;
		t->url = MemoryContextStrdup(cxt, wi_render_url(SPI_getvalue(tup, desc, 6), external_id,
														strlen(external_id)));
		headers = SPI_getbinval(tup, desc, 7, &isnull);
		t->headers = headers_list(isnull ? NULL : DatumGetJsonbP(headers));
		t->timeout_ms = DatumGetInt32(SPI_getbinval(tup, desc, 8, &isnull));
		t->max_attempts = DatumGetInt32(SPI_getbinval(tup, desc, 9, &isnull));
		t->handler = DatumGetObjectId(SPI_getbinval(tup, desc, 10, &isnull));
		if (isnull)
			t->handler = InvalidOid;
		t->created_at = DatumGetTimestampTz(SPI_getbinval(tup, desc, 11, &isnull));
		*last_due = Max(*last_due, DatumGetTimestampTz(SPI_getbinval(tup, desc, 12, &isnull)));
		t->retry_after_s = -1;
		{
			MemoryContext old = MemoryContextSwitchTo(caller);

			claimed = lappend(claimed, t);
			MemoryContextSwitchTo(old);
		}
	}
	end_tx();
	return claimed;
}

static long
backoff_ms(Transfer *t)
{
	double		delay = (double) wi_backoff_base_ms;

	for (int i = 1; i < t->attempt && delay < wi_backoff_max_ms; i++)
		delay *= 2;
	if (delay > wi_backoff_max_ms)
		delay = wi_backoff_max_ms;
	/* jitter: half to all of the delay */
#if PG_VERSION_NUM >= 150000
	delay = delay * (0.5 + 0.5 * pg_prng_double(&pg_global_prng_state));
#else
	delay = delay * (0.5 + 0.5 * ((double) random() / (double) MAX_RANDOM_VALUE));
#endif
	/* Honour Retry-After (http.c caps it at a day). */
	if (t->retry_after_s >= 0 && t->retry_after_s * 1000.0 > delay)
		delay = t->retry_after_s * 1000.0;
	return (long) delay;
}

static bool
record_failure(Transfer *t, WiVerdict verdict, const char *why, long elapsed_ms)
{
	static const char *sql =
		"UPDATE webhook_ingest.jobs SET"
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
	bool		dead = (verdict == WI_V_DEAD || t->attempt >= t->max_attempts);
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

	if (run_cached(&plan, sql, 7, argtypes, args, nulls, false) != SPI_OK_UPDATE)
		elog(ERROR, "could not record a failed attempt");
	if (SPI_processed != 1)
	{
		/* Cancelled or reclaimed meanwhile: the newer state stands. */
		t->outcome = WI_OUTCOME_DISCARDED;
		return false;
	}
	t->outcome = dead ? WI_OUTCOME_DEAD : WI_OUTCOME_RETRY;
	if (dead)
		ereport(LOG,
				(errmsg("webhook_ingest: job %lld (%s/%s) is dead", (long long) t->job_id,
						t->source, t->external_id),
				 errdetail("%s", msg)));
	return dead;
}

static void
count_failure(WiCounters *counters, bool dead, Transfer *t, const char *why)
{
	if (t->outcome == WI_OUTCOME_DISCARDED)
		return;
	/* Kept with the Transfer (the worker frees both) for the failures ring. */
	t->why = MemoryContextStrdup(GetMemoryChunkContext(t), why);
	if (dead)
		counters->dead++;
	else
		counters->retried++;
	snprintf(counters->last_error, sizeof(counters->last_error), "job %lld (%s/%s): %s",
			 (long long) t->job_id, t->source, t->external_id, why);
	counters->last_error_at = GetCurrentTimestamp();
}

static int
call_handler(Oid handler, Datum *args, const char *nulls)
{
	static Oid	types[3] = {TEXTOID, JSONBOID, JSONBOID};
	HandlerPlan *hp;

	for (hp = handler_plans; hp != NULL; hp = hp->next)
		if (hp->handler == handler)
			break;
	if (hp == NULL)
	{
		char	   *nsp = get_namespace_name(get_func_namespace(handler));
		char	   *name = get_func_name(handler);
		SPIPlanPtr	plan = NULL;
		int			rc;

		if (nsp == NULL || name == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_FUNCTION),
					 errmsg("handler function with OID %u does not exist", handler)));
		rc = run_cached(&plan, psprintf("SELECT %s($1, $2, $3)", quote_qualified_identifier(nsp, name)),
						3, types, args, nulls, false);

		/* Only a plan that was prepared is kept. */
		hp = MemoryContextAllocZero(TopMemoryContext, sizeof(HandlerPlan));
		hp->handler = handler;
		hp->plan = plan;
		hp->next = handler_plans;
		handler_plans = hp;
		return rc;
	}
	return run_cached(&hp->plan, NULL, 3, types, args, nulls, false);
}

/*
 * Run the handler (or store the document) and mark the job done, inside the
 * caller's subtransaction.  Errors propagate to the caller.
 */
static void
handle(Transfer *t, bool gone)
{
	static const char *store_sql =
		"INSERT INTO webhook_ingest.documents (source, external_id, details, fetched_at)"
		" VALUES ($1, $2, $3, now())"
		" ON CONFLICT (source, external_id) DO UPDATE SET details = EXCLUDED.details, fetched_at = now()";
	static const char *done_sql =
		"UPDATE webhook_ingest.jobs SET"
		"  state = CASE WHEN refetch THEN 'pending' ELSE 'done' END::webhook_ingest.job_state,"
		"  attempts = CASE WHEN refetch THEN 0 ELSE attempts END,"
		"  finished_at = CASE WHEN refetch THEN NULL ELSE now() END,"
		"  next_attempt_at = now(), refetch = false, last_status = $3, last_error = NULL,"
		"  lease_until = NULL, worker_pid = NULL, updated_at = now()"
		" WHERE id = $1 AND state::text = 'running' AND attempts = $2"
		" RETURNING state::text";
	Datum		args[3];
	char		nulls[3] = {' ', ' ', ' '};
	Datum		details = (Datum) 0;
	Oid			handler = t->handler;
	static SPIPlanPtr store_plan = NULL;
	static SPIPlanPtr done_plan = NULL;
	static SPIPlanPtr notify_plan = NULL;

	if (!gone)
	{
		const char *body = t->body ? t->body : "";

		if (strlen(body) != t->body_len || !pg_verifymbstr(body, t->body_len, true))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
					 errmsg("response body is not valid text in the database encoding")));
		details = DirectFunctionCall1(jsonb_in, CStringGetDatum(body));
	}

	args[0] = CStringGetTextDatum(t->external_id);
	args[1] = details;
	nulls[1] = gone ? 'n' : ' ';
	if (OidIsValid(handler))
	{
		args[2] = t->payload ? DirectFunctionCall1(jsonb_in, CStringGetDatum(t->payload)) : (Datum) 0;
		nulls[2] = t->payload ? ' ' : 'n';
		if (call_handler(handler, args, nulls) != SPI_OK_SELECT)
			elog(ERROR, "handler call failed");
	}
	else
	{
		Oid			store_types[3] = {TEXTOID, TEXTOID, JSONBOID};
		Datum		store_args[3] = {CStringGetTextDatum(t->source), args[0], details};
		char		store_nulls[3] = {' ', ' ', gone ? 'n' : ' '};

		if (run_cached(&store_plan, store_sql, 3, store_types, store_args, store_nulls, false) != SPI_OK_INSERT)
			elog(ERROR, "could not store the document");
	}

	{
		Oid			done_types[3] = {INT8OID, INT4OID, INT4OID};
		Datum		done_args[3] = {Int64GetDatum(t->job_id), Int32GetDatum(t->attempt),
		Int32GetDatum((int32) t->status)};

		if (run_cached(&done_plan, done_sql, 3, done_types, done_args, NULL, false) != SPI_OK_UPDATE_RETURNING)
			elog(ERROR, "could not mark the job done");
		/* Not running under our attempt any more (cancelled, reclaimed): undo the handler's work. */
		if (SPI_processed != 1)
		{
			t->outcome = WI_OUTCOME_DISCARDED;
			ereport(ERROR,
					(errmsg("job %lld changed while it was fetched", (long long) t->job_id)));
		}
		t->outcome = strcmp(SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1), "done") == 0 ?
			WI_OUTCOME_DONE : WI_OUTCOME_REFETCH;
	}

	{
		Oid			ntypes[1] = {TEXTOID};
		Datum		nargs[1];
		StringInfoData buf;

		initStringInfo(&buf);
		appendStringInfo(&buf, "{\"job_id\": %lld, \"source\": ", (long long) t->job_id);
		escape_json(&buf, t->source);
		appendStringInfoString(&buf, ", \"external_id\": ");
		escape_json(&buf, t->external_id);
		appendStringInfoChar(&buf, '}');
		nargs[0] = CStringGetTextDatum(buf.data);
		if (run_cached(&notify_plan, "SELECT pg_catalog.pg_notify('webhook_ingest_done', $1)", 1, ntypes, nargs,
					   NULL, false) != SPI_OK_SELECT)
			elog(ERROR, "could not notify");
	}
}

/*
 * After the batch committed: its done jobs learn the commit's LSN.  A short
 * transaction of its own, committed asynchronously - if it is lost, the
 * worker's next start fills in the gap (wi_fill_missing_done_lsn).
 */
static void
record_done_lsn(List *finished, XLogRecPtr commit_end)
{
	static SPIPlanPtr plan = NULL;
	Oid			types[2] = {PG_LSNOID, INT8ARRAYOID};
	Datum		args[2];
	Datum	   *ids;
	int			n = 0;
	ListCell   *lc;

	foreach(lc, finished)
		if (((Transfer *) lfirst(lc))->outcome == WI_OUTCOME_DONE)
			n++;
	if (n == 0)
		return;
	begin_tx();
	/* In the transaction's memory: gone at its end. */
	ids = palloc(sizeof(Datum) * n);
	n = 0;
	foreach(lc, finished)
	{
		Transfer   *t = (Transfer *) lfirst(lc);

		if (t->outcome == WI_OUTCOME_DONE)
			ids[n++] = Int64GetDatum(t->job_id);
	}
	pgstat_report_activity(STATE_RUNNING, "webhook_ingest: recording the commit LSN of done jobs");
	(void) set_config_option("synchronous_commit", "off", PGC_SUSET, PGC_S_SESSION, GUC_ACTION_LOCAL,
							 true, 0, false);
	args[0] = LSNGetDatum(commit_end);
	args[1] = PointerGetDatum(construct_array(ids, n, INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	if (run_replanned(&plan,
					  "UPDATE webhook_ingest.jobs SET done_lsn = $1"
					  " WHERE id = ANY ($2) AND state::text = 'done' AND done_lsn IS NULL",
					  2, types, args, NULL) != SPI_OK_UPDATE)
		elog(ERROR, "could not record done_lsn");
	end_tx();
}

/* After the batch committed: what it did, for the views. */
static void
record_stats(List *finished)
{
	TimestampTz now = GetCurrentTimestamp();
	ListCell   *lc;

	wi_stats_begin();
	foreach(lc, finished)
	{
		Transfer   *t = (Transfer *) lfirst(lc);

		switch ((WiOutcome) t->outcome)
		{
			case WI_OUTCOME_DONE:
				wi_stats_done(t->source, now, (double) (now - t->created_at), t->seconds * 1000000.0);
				break;
			case WI_OUTCOME_RETRY:
			case WI_OUTCOME_DEAD:
				wi_stats_failed(t->source, now, t->job_id, t->external_id, t->attempt, (int) t->status,
								t->why ? t->why : "", t->seconds * 1000.0, t->outcome == WI_OUTCOME_DEAD);
				break;
			default:
				break;
		}
	}
	wi_stats_end();
}

/*
 * Complete a batch of finished transfers in one transaction; then record
 * the commit LSN of the jobs it made done, wake wait_for_job(), and count.
 */
void
wi_complete(List *finished, WiCounters *counters)
{
	ListCell   *lc;
	MemoryContext outer = CurrentMemoryContext;
	MemoryContext batch;
	MemoryContext per_job;
	volatile bool finished_some = false;

	begin_tx();
	pgstat_report_activity(STATE_RUNNING, "webhook_ingest: completing fetched jobs");
	batch = CurrentMemoryContext;
	per_job = AllocSetContextCreate(batch, "webhook_ingest job", ALLOCSET_DEFAULT_SIZES);
	foreach(lc, finished)
	{
		Transfer   *t = (Transfer *) lfirst(lc);
		StringInfoData why;
		volatile WiVerdict verdict;
		long		elapsed_ms = (long) (t->seconds * 1000.0);

		MemoryContextSwitchTo(per_job);
		counters->fetched++;
		counters->bytes += t->body_len;
		t->outcome = WI_OUTCOME_NONE;
		t->why = NULL;
		initStringInfo(&why);
		verdict = wi_judge(t, &why);
		if (verdict == WI_V_HANDLE || verdict == WI_V_GONE)
		{
			MemoryContext before = CurrentMemoryContext;
			ResourceOwner owner = CurrentResourceOwner;

			BeginInternalSubTransaction(NULL);
			/* The parsed document lives in the per-job context, not the batch's. */
			MemoryContextSwitchTo(before);
			PG_TRY();
			{
				handle(t, verdict == WI_V_GONE);
				ReleaseCurrentSubTransaction();
				MemoryContextSwitchTo(before);
				CurrentResourceOwner = owner;
				counters->succeeded++;
			}
			PG_CATCH();
			{
				ErrorData  *e;

				MemoryContextSwitchTo(before);
				e = CopyErrorData();
				FlushErrorState();
				RollbackAndReleaseCurrentSubTransaction();
				MemoryContextSwitchTo(before);
				CurrentResourceOwner = owner;
				/* A job cancelled or reclaimed meanwhile is not a failure: just drop the result. */
				if (t->outcome != WI_OUTCOME_DISCARDED)
				{
					appendStringInfo(&why, "%s: %s", verdict == WI_V_GONE ? "handler (object gone)" : "handler",
									 e->message);
					counters->handler_errors++;
					count_failure(counters, record_failure(t, WI_V_RETRY, why.data, elapsed_ms), t, why.data);
				}
				FreeErrorData(e);
			}
			PG_END_TRY();
		}
		else
		{
			count_failure(counters, record_failure(t, verdict, why.data, elapsed_ms), t, why.data);
		}
		if (t->outcome == WI_OUTCOME_DONE || t->outcome == WI_OUTCOME_DEAD)
			finished_some = true;
		MemoryContextSwitchTo(batch);
		MemoryContextReset(per_job);
	}
	end_tx();
	MemoryContextSwitchTo(outer);

	if (getenv("WI_NO_LSN") == NULL) record_done_lsn(finished, XactLastCommitEnd);
	MemoryContextSwitchTo(outer);
	if (finished_some)
		wi_shmem_jobs_finished();
	record_stats(finished);
}
