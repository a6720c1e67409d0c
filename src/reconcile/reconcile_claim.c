/*
 * reconcile_claim.c
 *		The fetcher's claim of the list pages of reconciliation sweeps
 *		(issue 30).  After the jobs, with the transfer slots left, each
 *		source that reconciles and has room within its limits and its share
 *		of them (scheduler.c) gets its due page: _reconcile_claim leases it
 *		(one per source: a page names the next; none while the source has
 *		pause_backlog due jobs, or is paused).  A page is a Transfer fetched
 *		as the source's jobs are - its headers, TLS settings, proxy and
 *		timeout_ms, under its rate limit and concurrency cap - but with at
 *		most max_page_size bytes, its Link headers kept; the fetcher hands it
 *		to an apply worker (WI_ITEM_PAGE), which calls _reconcile_page.
 *
 *		The claim also says when to look again: when the next page may be
 *		due (_reconcile_wake_at), or soon when a due one had no room.  One
 *		short transaction; none at all while no source reconciles.
 *
 * IDENTIFICATION
 *		src/reconcile/reconcile_claim.c
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "webhook_ingest.h"
#include "http.h"
#include "job_store.h"
#include "reconcile_claim.h"
#include "scheduler.h"
#include "settings.h"
#include "source_tls.h"
#include "worker_tx.h"

/* A claim of pages: the common part first (job_store.c frees what it made if it does not commit). */
typedef struct PageClaim
{
	WiClaim		claim;
	TimestampTz next_at;		/* when to look for due pages again */
} PageClaim;

/* A due page not taken for want of room is looked at again after this at the least (no spinning). */
#define WI_PAGE_RETRY_MIN_MS	10

/* Pages have job ids of their own, below 0, for the hand-off (never a row of the queue). */
static int64 last_page_id = 0;

/* One claimed page (a row of claim_due's statement) as a Transfer in cxt. */
static Transfer *
page_transfer(HeapTuple tup, TupleDesc desc, MemoryContext cxt)
{
	Transfer   *t = MemoryContextAllocZero(cxt, sizeof(Transfer));
	bool		isnull;
	Datum		headers;

	t->page = true;
	t->reconciles = true;
	t->reconciled = true;
	t->job_id = --last_page_id;
	t->source = MemoryContextStrdup(cxt, SPI_getvalue(tup, desc, 1));
	t->url = MemoryContextStrdup(cxt, SPI_getvalue(tup, desc, 2));
	t->external_id = MemoryContextStrdup(cxt, t->url);	/* a page's name, in recent_failures too */
	t->attempt = DatumGetInt32(SPI_getbinval(tup, desc, 3, &isnull));
	headers = SPI_getbinval(tup, desc, 4, &isnull);
	t->headers = wi_source_headers(isnull ? NULL : DatumGetJsonbP(headers));
	t->timeout_ms = DatumGetInt32(SPI_getbinval(tup, desc, 5, &isnull));
	t->max_attempts = DatumGetInt32(SPI_getbinval(tup, desc, 6, &isnull));
	t->max_body = (size_t) DatumGetInt32(SPI_getbinval(tup, desc, 7, &isnull)) * 1024;
	t->handler = InvalidOid;
	t->created_at = GetCurrentTimestamp();
	t->conf = wi_source_tls_acquire(t->source);
	t->retry_after_s = -1;
	t->throttle_s = -1;
	return t;
}

/*
 * The due pages of the sources that have room, leased; but not of a source
 * whose row changed since the fetcher read it (its TLS settings would be the
 * old ones): it waits for the next claim, which reads sources anew.
 */
static void
claim_due(PageClaim *pc, const char **names, int n)
{
	static SPIPlanPtr plan = NULL;
	Oid			types[3] = {TEXTARRAYOID, TIMESTAMPTZARRAYOID, INT4OID};
	Datum		args[3];
	TimestampTz *seen = palloc(sizeof(TimestampTz) * n);

	for (int i = 0; i < n; i++)
		seen[i] = wi_source_tls_seen_at(names[i]);
	args[0] = wi_text_array(names, n);
	args[1] = wi_timestamptz_array(seen, n);
	args[2] = Int32GetDatum(pc->claim.max);
	if (wi_run_cached(&plan,
					  "SELECT c.source, c.url, c.attempt, s.headers, s.timeout_ms, s.max_attempts, r.max_page_size"
					  "  FROM webhook_ingest._reconcile_claim("
					  "         ARRAY(SELECT q.source FROM unnest($1::text[], $2::timestamptz[]) AS q(source, seen_at)"
					  "                 JOIN webhook_ingest.sources x ON x.name = q.source AND x.updated_at = q.seen_at),"
					  "         $3) c"
					  "  JOIN webhook_ingest.sources s ON s.name = c.source"
					  "  JOIN webhook_ingest.reconcile_settings r ON r.source_id = s.id",
					  3, types, args, NULL, false) != SPI_OK_SELECT)
		elog(ERROR, "could not claim list pages");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		Transfer   *t = page_transfer(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, pc->claim.cxt);

		wi_sched_page_claimed(t->source);
		wi_claim_keep(&pc->claim, t);	/* at once: freed if the claim fails */
	}
}

/* When the next page may be due (a sweep's schedule, a back-off, a lease's end); DT_NOEND: no sweep. */
static TimestampTz
wake_at(void)
{
	static SPIPlanPtr plan = NULL;
	bool		isnull;
	Datum		at;

	if (wi_run_cached(&plan, "SELECT webhook_ingest._reconcile_wake_at()", 0, NULL, NULL, NULL, true) !=
		SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not read when a list page is due");
	at = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	return isnull ? DT_NOEND : DatumGetTimestampTz(at);
}

static void
claim_pages(void *arg)
{
	PageClaim  *pc = (PageClaim *) arg;
	TimestampTz now = GetCurrentTimestamp();
	const char **names;
	TimestampTz retry_at;
	int			n;

	TimestampTz next_at;

	wi_sched_begin_claim();
	wi_read_sources();
	n = wi_sched_page_candidates(now, &names, &retry_at);
	if (n > 0)
		claim_due(pc, names, n);
	next_at = wake_at();
	/* Due, but not taken now (no room, a backlog of webhooks, a changed source): look again soon. */
	if (next_at <= now)
		next_at = Max(Min(retry_at, pc->next_at), TimestampTzPlusMilliseconds(now, WI_PAGE_RETRY_MIN_MS));
	pc->next_at = next_at;
}

/*
 * Claim up to max_pages due list pages (one per source at most) and say when
 * to look again (*next_at); the pages as Transfers in cxt, ready for
 * wi_http_start.
 */
List *
wi_claim_pages(int max_pages, MemoryContext cxt, TimestampTz *next_at)
{
	PageClaim  *pc = palloc0(sizeof(PageClaim));	/* read after a longjmp: not on the stack */
	List	   *pages;

	if (!wi_sched_any_reconciles())
	{
		*next_at = DT_NOEND;	/* until the sources change (wi_sources_reread) */
		return NIL;
	}
	pc->claim.max = max_pages;
	pc->claim.cxt = cxt;
	/* unless the claim says otherwise (it met a lock timeout): the poll's */
	pc->next_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), wi_poll_interval_ms);
	pages = wi_claim_in_tx("webhook_ingest: claiming list pages of reconciliation sweeps", claim_pages, &pc->claim);
	*next_at = pc->next_at;
	return pages;
}
