/*
 * reconcile_apply.c
 *		An apply worker's part of reconciliation (issue 30), inside the
 *		transaction that completes its batch (complete.c):
 *
 *		- a list page the fetcher fetched (WI_ITEM_PAGE) goes to
 *		  _reconcile_page in a subtransaction of its own: the objects it
 *		  lists newer than the copy last fetched are enqueued and the sweep
 *		  moves on to the next page (or ends), or the page's failure is
 *		  recorded with its back-off.  No user code runs there.  An ERROR
 *		  that escapes it rolls back only the page, which the fetcher hands
 *		  over again (alone, a few times; then its lease ends and it is
 *		  claimed again): a page is never lost.  The page's answer, sent
 *		  after the commit, tells the fetcher that the next page may be due;
 *		- a job of a source that reconciles (WI_ITEM_RECONCILES) records
 *		  the version of the copy it fetched (_reconcile_fetched), in the
 *		  job's subtransaction, just before it is marked done.
 *
 * IDENTIFICATION
 *		src/reconcile/reconcile_apply.c
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

#include "webhook_ingest.h"
#include "complete.h"
#include "reconcile_apply.h"
#include "validate.h"
#include "worker_tx.h"

/* The page's body as a bytea (in the current context). */
static Datum
body_bytea(const ApplyJob *t)
{
	bytea	   *b = palloc(VARHDRSZ + t->body_len);

	SET_VARSIZE(b, VARHDRSZ + t->body_len);
	memcpy(VARDATA(b), t->body, t->body_len);
	return PointerGetDatum(b);
}

/* The response's Retry-After as an interval. */
static Datum
retry_after_interval(const ApplyJob *t)
{
	Interval   *i = palloc0(sizeof(Interval));

	i->time = (TimeOffset) t->retry_after_s * USECS_PER_SEC;
	return IntervalPGetDatum(i);
}

/* _reconcile_page(source, url, status, link, body, error, retry_after): its answer. */
static char *
process_page(const ApplyJob *t)
{
	static SPIPlanPtr plan = NULL;
	Oid			types[7] = {TEXTOID, TEXTOID, INT4OID, TEXTOID, BYTEAOID, TEXTOID, INTERVALOID};
	Datum		args[7];
	char		nulls[7] = {' ', ' ', ' ', ' ', ' ', ' ', ' '};

	args[0] = CStringGetTextDatum(t->source);
	args[1] = CStringGetTextDatum(t->external_id);	/* the page's URL */
	args[2] = Int32GetDatum(t->status);
	nulls[2] = t->status > 0 ? ' ' : 'n';
	args[3] = CStringGetTextDatum(t->link);
	nulls[3] = t->link[0] != '\0' ? ' ' : 'n';
	args[4] = body_bytea(t);
	args[5] = CStringGetTextDatum(t->fetch_error);
	nulls[5] = t->fetch_error[0] != '\0' ? ' ' : 'n';
	args[6] = retry_after_interval(t);
	nulls[6] = t->retry_after_s >= 0 ? ' ' : 'n';
	if (wi_run_cached(&plan, "SELECT webhook_ingest._reconcile_page($1, $2, $3, $4, $5, $6, $7)",
					  7, types, args, nulls, false) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not process a list page");
	return SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
}

/* An ERROR escaped the page: its subtransaction is rolled back, the fetcher hands it over again. */
static void
page_failed(ApplyJob *t, ErrorData *e)
{
	/* the sweep's row held by another session: tried again after lock_timeout, as a job's would be */
	if (e->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE)
	{
		t->outcome = WI_OUTCOME_LOCKED;
		return;
	}
	ereport(WARNING,
			(errcode(e->sqlerrcode),
			 errmsg("webhook_ingest apply worker: could not process list page \"%s\" of source \"%s\"",
					wi_clip(t->external_id, (int) strlen(t->external_id)), t->source),
			 errdetail("%s", wi_clip(e->message, (int) strlen(e->message))),
			 errhint("The fetcher hands the page over again; the sweep stays at this page.")));
	t->outcome = WI_OUTCOME_ERROR;
}

/* A list page of a sweep, in a subtransaction of its own (see the header). */
void
wi_complete_page(ApplyJob *t)
{
	MemoryContext before = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	TimestampTz started = GetCurrentTimestamp();

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(before);
	PG_TRY();
	{
		char	   *answer = process_page(t);

		ReleaseCurrentSubTransaction();
		ereport(DEBUG1, (errmsg("webhook_ingest apply worker: list page of source \"%s\": %s", t->source,
								answer ? answer : "")));
		t->outcome = WI_OUTCOME_PAGE;
	}
	PG_CATCH();
	{
		ErrorData  *e;

		MemoryContextSwitchTo(before);
		e = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(before);
		page_failed(t, e);
		FreeErrorData(e);
	}
	PG_END_TRY();
	MemoryContextSwitchTo(before);
	CurrentResourceOwner = owner;
	t->handler_us = GetCurrentTimestamp() - started;
}

/*
 * A job of a source that reconciles is about to be marked done, with this
 * document (gone: the object is gone): the version of the copy now fetched.
 */
void
wi_reconcile_fetched(const ApplyJob *t, Datum document, bool gone)
{
	static SPIPlanPtr plan = NULL;
	Oid			types[2] = {INT8OID, JSONBOID};
	Datum		args[2] = {Int64GetDatum(t->job_id), document};
	char		nulls[2] = {' ', gone ? 'n' : ' '};

	if (wi_run_cached(&plan, "SELECT webhook_ingest._reconcile_fetched($1, $2)", 2, types, args, nulls,
					  false) != SPI_OK_SELECT)
		elog(ERROR, "could not record the version job %lld fetched", (long long) t->job_id);
}
