/*
 * job_store.c
 *		The fetcher's SQL, but for completion (the apply workers':
 *		complete.c) and list pages (reconcile_claim.c): claiming due jobs (a
 *		short transaction with FOR UPDATE SKIP LOCKED, the scheduler's
 *		quotas) into Transfers; reading the sources' scheduling settings,
 *		headers and TLS settings when they changed; at start, the extension's
 *		state, done_lsn values a stop left unwritten and the jobs a previous
 *		incarnation left running; and the housekeeping statements: expired
 *		leases, parking jobs of paused sources, retention and partitions
 *		(whose horizon the completions write by), purging event ids, which
 *		jobs are still active (for the crash guard).  No HTTP happens here.
 *
 * IDENTIFICATION
 *		src/worker/job_store.c
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "common/pg_prng.h"
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
#include "access.h"
#include "http.h"
#include "job_store.h"
#include "scheduler.h"
#include "shmem.h"
#include "source_cache.h"
#include "url.h"
#include "worker_tx.h"

/*
 * Is the extension installed here, and at this library's version?  The
 * installed version goes to version (size bytes), "" if none.
 */
WiExtensionState
wi_extension_state(char *version, int size)
{
	WiExtensionState state = WI_EXTENSION_MISSING;

	wi_begin_tx();
	pgstat_report_activity(STATE_RUNNING, "webhook_ingest: looking for the extension");
	version[0] = '\0';
	if (SPI_execute("SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'webhook_ingest'",
					true, 1) == SPI_OK_SELECT && SPI_processed == 1)
	{
		strlcpy(version, SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1), size);
		state = strcmp(version, WI_VERSION) == 0 ? WI_EXTENSION_READY : WI_EXTENSION_OLD;
	}
	wi_end_tx();
	return state;
}

/*
 * Done jobs whose done_lsn the worker did not get to write (it stopped
 * between a batch's commit and that write) get the current WAL position,
 * which is past their commit.  done_batches rows are written batch by batch
 * in commit order, so the missing ones are the batches finished after the
 * newest row; the BRIN index on job_history.finished_at finds them.
 */
int
wi_fill_missing_done_lsn(void)
{
	static SPIPlanPtr plan = NULL;

	return wi_run_alone("webhook_ingest: filling in missing done_lsn", &plan,
						"INSERT INTO webhook_ingest.done_batches (finished_at, done_lsn)"
						" SELECT DISTINCT h.finished_at, pg_current_wal_lsn() FROM webhook_ingest.job_history h"
						"  WHERE h.finished_at > coalesce((SELECT max(b.finished_at)"
						"                                   FROM webhook_ingest.done_batches b), '-infinity')"
						" ON CONFLICT (finished_at) DO NOTHING",
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

	return wi_run_alone("webhook_ingest: parking jobs of paused sources", &plan,
					 "WITH parked AS ("
					 "  SELECT p.id FROM webhook_ingest.queue p, webhook_ingest.sources s"
					 "   WHERE s.paused AND p.source = s.name AND p.state = 'pending'"
					 "     AND p.next_attempt_at <= now()"
					 "   FOR NO KEY UPDATE OF p SKIP LOCKED)"
					 " UPDATE webhook_ingest.queue j SET next_attempt_at = 'infinity', updated_at = now()"
					 "   FROM parked WHERE j.id = parked.id",
					 0, NULL, NULL);
}

/*
 * The storage round, one short transaction under lock_timeout
 * (_maintain_storage in the extension's SQL): job_history and kept_payloads
 * partitions made ahead, those past retention dropped with their disk,
 * cancelled jobs past retention deleted, one step of the move of 0.5.0's
 * rows.  Returns true when work is left for soon (false too when the round
 * met a lock timeout: it is tried again next round).
 */

static void
maintain_storage(void *arg)
{
	bool	   *behind = (bool *) arg;
	static SPIPlanPtr plan = NULL;
	HeapTuple	row;
	TupleDesc	desc;
	bool		isnull;

	if (wi_run_cached(&plan, "SELECT behind, history_until, kept_until FROM webhook_ingest._maintain_storage()",
					  0, NULL, NULL, NULL, false) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not maintain storage");
	row = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	*behind = DatumGetBool(SPI_getbinval(row, desc, 1, &isnull));
	/*
	 * Until when the partitions of job_history and kept_payloads take rows
	 * without a gap (DT_NOBEGIN: none found): for the apply workers, whose
	 * completions put rows past it into the overflow tables (complete.c).
	 */
	wi_shmem_publish_horizon(DatumGetTimestampTz(SPI_getbinval(row, desc, 2, &isnull)),
							 DatumGetTimestampTz(SPI_getbinval(row, desc, 3, &isnull)));
}


bool
wi_maintain_storage(void)
{
	bool		behind = false;

	if (!wi_in_tx("webhook_ingest: partitions, retention and moving 0.5.0's jobs", maintain_storage, &behind))
		return false;
	return behind;
}

/* Pages in the event ledger now (and in 0.9.0's, which purge_events moves into it). */
int64
wi_events_pages(void)
{
	static SPIPlanPtr plan = NULL;
	bool		isnull;
	int64		pages;

	wi_begin_tx();
	if (wi_run_cached(&plan,
				   "SELECT (pg_relation_size('webhook_ingest.event_ledger')"
				   " + coalesce(pg_relation_size(to_regclass('webhook_ingest.event_ledger_090')), 0))"
				   " / current_setting('block_size')::bigint",
				   0, NULL, NULL, NULL, true) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not size the events table");
	pages = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	wi_end_tx();
	return pages;
}

/* What taking back a job of a previous incarnation does (wi_reclaim_running, wi_reclaim_left). */
#define WI_RECLAIM_SET \
	" UPDATE webhook_ingest.queue j SET state = 'pending', lease_until = NULL, worker_pid = NULL," \
	" attempts = greatest(j.attempts - 1, 0), next_attempt_at = now(), updated_at = now()," \
	" last_error = 'reclaimed: the worker that ran it stopped'"

/*
 * Jobs left running by an earlier incarnation of the worker are due again,
 * and so are the list pages it had leased (reconciliation: its sweep goes on
 * at that page now, not when the lease ends).
 */
int
wi_reclaim_running(void)
{
	static SPIPlanPtr plan = NULL;

	/*
	 * The interrupted attempt does not count against max_attempts.  A row
	 * some session holds locked is taken back by the lease check instead.
	 */
	return wi_run_alone("webhook_ingest: reclaiming jobs of a previous worker", &plan,
					 "WITH pages AS ("
					 "  UPDATE webhook_ingest.reconcile_sweeps SET leased_until = NULL WHERE leased_until > now()),"
					 " left_running AS ("
					 "  SELECT r.id FROM webhook_ingest.queue r WHERE r.state = 'running'"
					 "   FOR NO KEY UPDATE SKIP LOCKED)"
					 WI_RECLAIM_SET
					 " FROM left_running WHERE j.id = left_running.id",
					 0, NULL, NULL);
}

/*
 * Of these jobs (those a gone apply worker was completing), the ones still
 * running under an earlier incarnation of the worker are due again: that
 * worker is gone, and this one does not hold them (its own are handed over
 * again from its memory).  An apply worker that outlived its worker and was
 * then ended in that worker's batch leaves them so; without this they would
 * wait for their leases.
 */
int
wi_reclaim_left(const int64 *ids, int n)
{
	static SPIPlanPtr plan = NULL;
	Oid			types[1] = {INT8ARRAYOID};
	Datum		args[1];

	if (n == 0)
		return 0;
	args[0] = wi_id_array(ids, n);
	return wi_run_alone("webhook_ingest: reclaiming jobs of a previous worker", &plan,
					 "WITH left_running AS ("
					 "  SELECT r.id FROM webhook_ingest.queue r"
					 "   WHERE r.id = ANY ($1) AND r.state = 'running' AND r.worker_pid IS DISTINCT FROM pg_backend_pid()"
					 "   FOR NO KEY UPDATE SKIP LOCKED)"
					 WI_RECLAIM_SET
					 " FROM left_running WHERE j.id = left_running.id",
					 1, types, args);
}

/*
 * Running jobs whose lease has expired (at or after from) and that this
 * worker does not hold (a worker that died without a restart of this one, a
 * claim made by hand, a job this worker gave up completing: given_up) are
 * due again.
 */
int
wi_reclaim_expired(TimestampTz from, const int64 *given_up, int ngiven_up)
{
	static SPIPlanPtr plan = NULL;
	Oid			types[2] = {TIMESTAMPTZOID, INT8ARRAYOID};
	Datum		args[2] = {TimestampTzGetDatum(from), wi_id_array(given_up, ngiven_up)};

	return wi_run_alone("webhook_ingest: reclaiming expired leases", &plan,
					 "WITH expired AS ("
					 "  SELECT x.id FROM webhook_ingest.queue x"
					 "   WHERE x.state = 'running' AND x.lease_until >= $1 AND x.lease_until < now()"
					 "     AND (x.worker_pid IS DISTINCT FROM pg_backend_pid() OR x.id = ANY ($2))"
					 "   FOR NO KEY UPDATE SKIP LOCKED)"
					 " UPDATE webhook_ingest.queue j SET state = 'pending', lease_until = NULL, worker_pid = NULL,"
					 " next_attempt_at = now(), updated_at = now(),"
					 " last_error = 'reclaimed: its lease expired at ' || j.lease_until"
					 " FROM expired WHERE j.id = expired.id",
					 2, types, args);
}

static void
purge_events(void *arg)
{
	static SPIPlanPtr plan = NULL;
	int64	   *forgotten = (int64 *) arg;
	Oid			types[1] = {INT4OID};
	Datum		args[1] = {Int32GetDatum((int32) *forgotten)};
	bool		isnull;

	if (wi_run_cached(&plan, "SELECT webhook_ingest.purge_events($1)", 1, types, args, NULL, false) !=
		SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not purge event ids");
	*forgotten = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

/* One slice of the walk that forgets expired event ids (purge_events); how many it forgot. */
int64
wi_purge_events(int max_pages)
{
	int64		n = max_pages;	/* in: pages, out: ids forgotten */

	if (!wi_in_tx("webhook_ingest: forgetting expired event ids", purge_events, &n))
		return 0;
	return n;
}

typedef struct ActiveJobs
{
	const int64 *ids;
	int			n;
	bool		held_here;		/* only those running under this worker's pid */
	int64	   *active;
	int			nactive;
} ActiveJobs;

static void
active_jobs(void *arg)
{
	static SPIPlanPtr plan = NULL;
	ActiveJobs *a = (ActiveJobs *) arg;
	Oid			types[2] = {INT8ARRAYOID, BOOLOID};
	Datum		args[2] = {wi_id_array(a->ids, a->n), BoolGetDatum(a->held_here)};

	if (wi_run_replanned(&plan,
						 "SELECT j.id FROM webhook_ingest.queue j"
						 " WHERE j.id = ANY ($1) AND j.state = ANY ('{pending,running}'::webhook_ingest.job_state[])"
						 "   AND (NOT $2 OR (j.state = 'running' AND j.worker_pid = pg_backend_pid()))",
						 2, types, args, NULL) != SPI_OK_SELECT)
		elog(ERROR, "could not look up jobs");
	for (uint64 i = 0; i < SPI_processed && a->nactive < a->n; i++)
	{
		bool		isnull;

		a->active[a->nactive++] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1,
															  &isnull));
	}
}

/*
 * Which of these n jobs are pending or running (held_here: running under
 * this worker's pid): into active; how many.
 */
int
wi_active_jobs(const int64 *ids, int n, bool held_here, int64 *active)
{
	ActiveJobs	a = {ids, n, held_here, active, 0};

	if (!wi_in_tx("webhook_ingest: looking up suspects of a crash", active_jobs, &a))
	{
		memcpy(active, ids, sizeof(int64) * n);	/* could not tell: keep them all */
		return n;
	}
	return a.nactive;
}

/* A source's headers (NULL: none) as the request's, after Accept: application/json. */
struct curl_slist *
wi_source_headers(Jsonb *headers)
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
 * Claim up to max_jobs due jobs, shared fairly among the sources that may
 * fetch now (scheduler.c): read the sources' settings, probe which of the
 * sources that may fetch have due jobs, then claim in passes, each an
 * ordered walk of jobs_due per source up to its quota (no sort of a
 * backlog); returns them as Transfers allocated in cxt, ready for
 * wi_http_start.  One short transaction.
 */
#define WI_CLAIM_PASSES		8

static void claim(void *arg);

/* Transfers of a claim that did not commit: nothing was started for them. */
static void
free_claimed(List *claimed)
{
	ListCell   *lc;

	foreach(lc, claimed)
		wi_transfer_free((Transfer *) lfirst(lc));
	list_free(claimed);
}

/* A Transfer the claim made, kept at once (freed if the claim does not commit). */
void
wi_claim_keep(WiClaim *c, Transfer *t)
{
	MemoryContext old = MemoryContextSwitchTo(c->cxt);

	c->claimed = lappend(c->claimed, t);
	MemoryContextSwitchTo(old);
}

/*
 * A claim's body, with its commit asynchronous: the fetcher does not wait
 * for the WAL flush of each claim (a fifth of its time at a 1 ms upstream).
 * A claim lost in a crash leaves its jobs pending, as the start after the
 * crash would leave them (wi_reclaim_running: the interrupted attempt does
 * not count), so nothing is lost and no attempt counts twice; a completion
 * commits synchronously, and its WAL flush makes the claim before it
 * durable, as does the commit of an enqueue that saw the job running.
 */
typedef struct AsyncClaim
{
	WiTxBody	body;
	WiClaim    *claim;
} AsyncClaim;

/*
 * The end of the last claim's commit record: a job about to be completed
 * alone as a suspect of a crash has its claim flushed first
 * (wi_claims_flush).  A crash restart loses the WAL not yet written, and a
 * claim lost with it leaves the job pending under its previous attempt, so
 * the crash guard would not count the crash (count_crash wants the job
 * running): a handler that kills its apply worker (SIGKILL, a segfault)
 * within the walwriter's delay of its claim would crash the cluster again
 * and again, never dead.
 */
static XLogRecPtr claims_end = InvalidXLogRecPtr;

void
wi_claims_flush(void)
{
	if (!XLogRecPtrIsInvalid(claims_end))
		XLogFlush(claims_end);
}

static void
claim_async(void *arg)
{
	AsyncClaim *a = (AsyncClaim *) arg;

	(void) set_config_option("synchronous_commit", "off", PGC_SUSET, PGC_S_SESSION, GUC_ACTION_LOCAL,
							 true, 0, false);
	a->body(a->claim);
}

/*
 * Run body, a claim (c: palloc'd, read after a longjmp), in a transaction of
 * its own, committed asynchronously (claim_async); its Transfers, or NIL
 * when it did not commit.
 */
List *
wi_claim_in_tx(const char *activity, WiTxBody body, WiClaim *c)
{
	bool		committed;
	AsyncClaim	a = {body, c};

	PG_TRY();
	{
		committed = wi_in_tx(activity, claim_async, &a);
	}
	PG_CATCH();
	{
		free_claimed(c->claimed);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (!committed)
	{
		free_claimed(c->claimed);
		return NIL;
	}
	if (XactLastCommitEnd > claims_end)
		claims_end = XactLastCommitEnd;
	return c->claimed;
}

List *
wi_claim(int max_jobs, int lease_s, MemoryContext cxt)
{
	WiClaim    *c = palloc0(sizeof(WiClaim));

	c->max = max_jobs;
	c->lease_s = lease_s;
	c->cxt = cxt;
	return wi_claim_in_tx("webhook_ingest: claiming due jobs", claim, c);
}

/* sources_generation as of the last complete read_sources (0: read again) */
static uint64 sources_read_generation = 0;
static bool sources_reread = false; /* since wi_sources_reread last said so */

/*
 * Every source's scheduling settings (and its reconciliation share), into
 * the scheduler, if sources changed since the last complete read
 * (wi_sources_generation); claims in between (thousands a second under load,
 * with any number of sources) read nothing.
 */
void
wi_read_sources(void)
{
	static SPIPlanPtr plan = NULL;
	uint64		generation = wi_sources_generation();	/* a change during the read counts again */

	if (generation == sources_read_generation)
		return;
	wi_sched_begin_refresh();
	wi_source_tls_begin_refresh();
	if (wi_run_cached(&plan,
					  "SELECT s.name, s.paused, s.weight, coalesce(s.rate_limit, 0), coalesce(s.rate_burst, 0),"
					  "       coalesce(s.max_in_flight, 0), s.updated_at, s.tls_ca, s.tls_client_cert,"
					  "       k.tls_client_key, s.proxy, coalesce(r.share, 0)"
					  "  FROM webhook_ingest.sources s"
					  "  LEFT JOIN webhook_ingest.source_tls_keys k ON k.source = s.name"
					  "  LEFT JOIN webhook_ingest.reconcile_settings r ON r.source_id = s.id",
					  0, NULL, NULL, NULL, true) != SPI_OK_SELECT)
		elog(ERROR, "could not read sources");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;

		wi_sched_refresh(SPI_getvalue(tup, desc, 1),
						 DatumGetBool(SPI_getbinval(tup, desc, 2, &isnull)),
						 DatumGetInt32(SPI_getbinval(tup, desc, 3, &isnull)),
						 DatumGetFloat4(SPI_getbinval(tup, desc, 4, &isnull)),
						 DatumGetInt32(SPI_getbinval(tup, desc, 5, &isnull)),
						 DatumGetInt32(SPI_getbinval(tup, desc, 6, &isnull)),
						 DatumGetTimestampTz(SPI_getbinval(tup, desc, 7, &isnull)),
						 DatumGetFloat4(SPI_getbinval(tup, desc, 12, &isnull)));
		wi_source_tls_refresh(SPI_getvalue(tup, desc, 1), DatumGetTimestampTz(SPI_getbinval(tup, desc, 7, &isnull)),
							  SPI_getvalue(tup, desc, 8), SPI_getvalue(tup, desc, 9),
							  SPI_getvalue(tup, desc, 10), SPI_getvalue(tup, desc, 11));
	}
	wi_source_tls_end_refresh();
	wi_sched_forget_dropped();
	sources_read_generation = generation;	/* complete: an error above reads again next time */
	sources_reread = true;
}

/* Were the sources read anew since the last call?  (A sweep may be due now: the page claim looks.) */
bool
wi_sources_reread(void)
{
	bool		reread = sources_reread;

	sources_reread = false;
	return reread;
}

/*
 * Which of the sources that may fetch now have due jobs: one index probe
 * each (a LATERAL ... LIMIT 1 can only be a parameterised probe of jobs_due
 * from the source's walk position; an EXISTS let the plan, made once,
 * hash every due job instead).
 */
static void
probe_due(TimestampTz now)
{
	static SPIPlanPtr plan = NULL;
	const char **names;
	TimestampTz *froms;
	int			n = wi_sched_candidates(now, &names, &froms);
	Oid			types[2] = {TEXTARRAYOID, TIMESTAMPTZARRAYOID};
	Datum		args[2];

	if (n == 0)
		return;
	args[0] = wi_text_array(names, n);
	args[1] = wi_timestamptz_array(froms, n);
	if (wi_run_cached(&plan,
					  "SELECT q.source FROM unnest($1::text[], $2::timestamptz[]) AS q(source, from_at)"
					  " CROSS JOIN LATERAL (SELECT FROM webhook_ingest.queue pj"
					  "   WHERE pj.state = 'pending' AND pj.source = q.source COLLATE \"C\""
					  "     AND pj.next_attempt_at >= q.from_at AND pj.next_attempt_at <= now()"
					  "   ORDER BY pj.next_attempt_at LIMIT 1) due",
					  2, types, args, NULL, true) != SPI_OK_SELECT)
		elog(ERROR, "could not look for due jobs");
	for (uint64 i = 0; i < SPI_processed; i++)
		wi_sched_has_due(SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));
}

static void claim_pass(WiClaim *c, WiQuota *quotas, int n);

static void
claim(void *arg)
{
	WiClaim    *c = (WiClaim *) arg;
	TimestampTz start = GetCurrentTimestamp();
	int			capacity = c->max;

	wi_sched_begin_claim();
	wi_read_sources();
	probe_due(start);
	for (int pass = 0; pass < WI_CLAIM_PASSES && capacity > 0; pass++)
	{
		WiQuota    *quotas;
		int			n = wi_sched_plan(capacity, start, &quotas);
		int			got;

		if (n == 0)
			break;
		claim_pass(c, quotas, n);
		got = wi_sched_end_pass(start);
		capacity -= got;
		if (got == 0)
			break;
	}
}

/*
 * One pass: each source's quota of its due jobs, in due order, claimed; of
 * a source that reconciles (reconciled >= 0), the jobs a webhook announced
 * first, then those no webhook announced (events 0), at most reconciled of
 * them (its share, scheduler.c).  Such jobs are few in its walk: a sweep
 * waits while the source has pause_backlog due jobs.
 */
static void
claim_pass(WiClaim *c, WiQuota *quotas, int n)
{
	static const char *sql =
		"WITH walk AS ("
		"  SELECT * FROM unnest($2::text[], $3::int[], $4::timestamptz[], $5::timestamptz[], $6::int[])"
		"    AS q(source, n, from_at, seen_at, reconciled)),"
		" announced AS ("
		"  SELECT d.id, w.source, w.seen_at FROM walk w"
		"  CROSS JOIN LATERAL ("
		"    SELECT pj.id FROM webhook_ingest.queue pj"
		"     WHERE pj.state = 'pending' AND pj.source = w.source COLLATE \"C\""
		"       AND pj.next_attempt_at >= w.from_at AND pj.next_attempt_at <= now()"
		"       AND (w.reconciled < 0 OR pj.events > 0)"
		"     ORDER BY pj.next_attempt_at LIMIT w.n FOR UPDATE SKIP LOCKED) d),"
		" unannounced AS ("
		"  SELECT d.id, w.source, w.seen_at FROM walk w"
		"  CROSS JOIN LATERAL ("
		"    SELECT pj.id FROM webhook_ingest.queue pj"
		"     WHERE pj.state = 'pending' AND pj.source = w.source COLLATE \"C\""
		"       AND pj.next_attempt_at >= w.from_at AND pj.next_attempt_at <= now() AND pj.events = 0"
		"     ORDER BY pj.next_attempt_at"
		"     LIMIT least(w.reconciled, w.n - (SELECT count(*) FROM announced a WHERE a.source = w.source))"
		"       FOR UPDATE SKIP LOCKED) d"
		"   WHERE w.reconciled > 0),"
		" due AS (SELECT * FROM announced UNION ALL SELECT * FROM unannounced)"
		" UPDATE webhook_ingest.queue j"
		"    SET state = 'running', attempts = j.attempts + 1, refetch = false,"
		"        lease_until = now() + make_interval(secs => greatest($1, s.timeout_ms / 1000.0 + 10)),"
		"        worker_pid = pg_backend_pid(), updated_at = now(), started_at = clock_timestamp()"
		"   FROM due, webhook_ingest.sources s"
		"  WHERE j.id = due.id AND s.name = j.source AND NOT s.paused"
		" RETURNING j.id, j.attempts, j.source, j.external_id,"
		"           s.url_template, s.headers, s.timeout_ms, s.max_attempts, s.handler::oid, j.created_at,"
		"           j.next_attempt_at, s.updated_at IS NOT DISTINCT FROM due.seen_at,"
		/* a source changed since read_sources: its TLS settings of this same version */
		"           CASE WHEN s.updated_at IS DISTINCT FROM due.seen_at THEN s.tls_ca END,"
		"           CASE WHEN s.updated_at IS DISTINCT FROM due.seen_at THEN s.tls_client_cert END,"
		"           CASE WHEN s.updated_at IS DISTINCT FROM due.seen_at THEN"
		"             (SELECT k.tls_client_key FROM webhook_ingest.source_tls_keys k WHERE k.source = s.name) END,"
		"           CASE WHEN s.updated_at IS DISTINCT FROM due.seen_at THEN s.proxy END,"
		"           j.events = 0";
	static SPIPlanPtr plan = NULL;
	MemoryContext cxt = c->cxt;
	Oid			argtypes[6] = {INT4OID, TEXTARRAYOID, INT4ARRAYOID, TIMESTAMPTZARRAYOID, TIMESTAMPTZARRAYOID,
							   INT4ARRAYOID};
	Datum		args[6];
	const char **names = palloc(sizeof(char *) * n);
	int		   *counts = palloc(sizeof(int) * n);
	TimestampTz *froms = palloc(sizeof(TimestampTz) * n);
	TimestampTz *seen = palloc(sizeof(TimestampTz) * n);
	int		   *reconciled = palloc(sizeof(int) * n);

	for (int i = 0; i < n; i++)
	{
		names[i] = quotas[i].source;
		counts[i] = quotas[i].quota;
		froms[i] = quotas[i].from;
		seen[i] = wi_source_tls_seen_at(quotas[i].source);
		reconciled[i] = quotas[i].reconciled;
	}
	args[0] = Int32GetDatum(c->lease_s);
	args[1] = wi_text_array(names, n);
	args[2] = wi_int4_array(counts, n);
	args[3] = wi_timestamptz_array(froms, n);
	args[4] = wi_timestamptz_array(seen, n);
	args[5] = wi_int4_array(reconciled, n);
	if (wi_run_replanned(&plan, sql, 6, argtypes, args, NULL) != SPI_OK_UPDATE_RETURNING)
		elog(ERROR, "could not claim jobs");

	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		Transfer   *t = MemoryContextAllocZero(cxt, sizeof(Transfer));
		char	   *external_id = SPI_getvalue(tup, desc, 4);
		Datum		headers;

		/* Only what the Transfer keeps goes to cxt; the rest dies with SPI. */
		t->job_id = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
		t->attempt = DatumGetInt32(SPI_getbinval(tup, desc, 2, &isnull));
		t->source = MemoryContextStrdup(cxt, SPI_getvalue(tup, desc, 3));
		t->external_id = MemoryContextStrdup(cxt, external_id);
		t->url = MemoryContextStrdup(cxt, wi_render_url(SPI_getvalue(tup, desc, 5), external_id,
														strlen(external_id)));
		headers = SPI_getbinval(tup, desc, 6, &isnull);
		t->headers = wi_source_headers(isnull ? NULL : DatumGetJsonbP(headers));
		t->timeout_ms = DatumGetInt32(SPI_getbinval(tup, desc, 7, &isnull));
		t->max_attempts = DatumGetInt32(SPI_getbinval(tup, desc, 8, &isnull));
		t->handler = DatumGetObjectId(SPI_getbinval(tup, desc, 9, &isnull));
		if (isnull)
			t->handler = InvalidOid;
		t->created_at = DatumGetTimestampTz(SPI_getbinval(tup, desc, 10, &isnull));
		if (DatumGetBool(SPI_getbinval(tup, desc, 12, &isnull)))
			t->conf = wi_source_tls_acquire(t->source);
		else
		{
			t->conf = wi_source_tls_of_claim(t->source, SPI_getvalue(tup, desc, 13), SPI_getvalue(tup, desc, 14),
											 SPI_getvalue(tup, desc, 15), SPI_getvalue(tup, desc, 16));
			sources_read_generation = 0;	/* the next claim reads them again */
		}
		t->reconciles = wi_sched_reconciles(t->source);
		t->reconciled = t->reconciles && DatumGetBool(SPI_getbinval(tup, desc, 17, &isnull));
		wi_sched_claimed(t->source, DatumGetTimestampTz(SPI_getbinval(tup, desc, 11, &isnull)), t->reconciled);
		t->retry_after_s = -1;
		t->throttle_s = -1;
		wi_claim_keep(c, t);	/* at once: freed if the claim fails */
	}
}

