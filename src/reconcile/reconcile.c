/*
 * reconcile.c
 *		What a reconciliation sweep (issue 30) writes outside its own tables,
 *		for the SQL that processes a fetched list page (_reconcile_page in
 *		webhook_ingest--0.9.0--0.10.0.sql):
 *
 *		_reconcile_enqueue(source, external_ids text[]) SETOF (external_id,
 *		job_id, outcome): each object the page found newer than the copy
 *		last fetched, through enqueue()'s own steps (enqueue.c: the lock on
 *		the queue, the source and its enqueue_roles checked for the caller,
 *		then the one upsert as the function's owner), so dedup and
 *		coalescing are enqueue's: a new job counts no webhook (events 0), a
 *		pending one coalesces, a running one is fetched once more; a webhook
 *		that comes later coalesces into the job and counts 1.
 *
 *		_reconcile_failed(source, page_url, attempt, http_status, error,
 *		dead): a page that failed, into recent_failures (stats.c; no job id).
 *
 * IDENTIFICATION
 *		src/reconcile/reconcile.c
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "webhook_ingest.h"
#include "compat.h"
#include "enqueue.h"
#include "stats.h"
#include "validate.h"

PG_FUNCTION_INFO_V1(webhook_ingest_reconcile_enqueue);
PG_FUNCTION_INFO_V1(webhook_ingest_reconcile_failed);

Datum
webhook_ingest_reconcile_enqueue(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	text	   *source;
	ArrayType  *ids;
	Datum	   *elems;
	bool	   *elem_nulls;
	int			n;

	source = wi_intake_source(fcinfo, "webhook_ingest._reconcile_enqueue()");
	wi_check_not_null(PG_ARGISNULL(1), "external_ids");
	ids = PG_GETARG_ARRAYTYPE_P(1);
	deconstruct_array(ids, TEXTOID, -1, false, TYPALIGN_INT, &elems, &elem_nulls, &n);
	wi_init_srf(fcinfo);
	if (n == 0)
		return (Datum) 0;

	wi_enqueue_admit(source);
	for (int i = 0; i < n; i++)
	{
		Datum		values[3];
		bool		nulls[3] = {false, false, false};
		int64		job_id = 0;

		wi_check_not_null(elem_nulls[i], "external_id");
		values[2] = CStringGetTextDatum(wi_enqueue_unannounced(fcinfo, source, DatumGetTextPP(elems[i]), &job_id));
		values[0] = elems[i];
		values[1] = Int64GetDatum(job_id);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		CHECK_FOR_INTERRUPTS();
	}
	return (Datum) 0;
}

Datum
webhook_ingest_reconcile_failed(PG_FUNCTION_ARGS)
{
	char	   *source;
	char	   *page_url;
	char	   *error;

	wi_check_not_null(PG_ARGISNULL(0), "source");
	source = text_to_cstring(PG_GETARG_TEXT_PP(0));
	page_url = PG_ARGISNULL(1) ? "" : text_to_cstring(PG_GETARG_TEXT_PP(1));
	error = PG_ARGISNULL(4) ? "" : text_to_cstring(PG_GETARG_TEXT_PP(4));
	wi_stats_begin();
	wi_stats_failed(source, GetCurrentTimestamp(), 0, page_url, PG_ARGISNULL(2) ? 0 : PG_GETARG_INT32(2),
					PG_ARGISNULL(3) ? 0 : PG_GETARG_INT32(3), error, 0, !PG_ARGISNULL(5) && PG_GETARG_BOOL(5));
	wi_stats_end();
	PG_RETURN_VOID();
}
