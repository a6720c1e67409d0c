/*
 * enqueue.c
 *		webhook_ingest.enqueue(): accept one webhook inside the caller's
 *		transaction, in two steps (written directly by queue_write.c, or as
 *		SQL statements prepared once per backend):
 *
 *		1. with an event id, remember it (INSERT ... ON CONFLICT DO NOTHING on
 *		   events): no row means this source already accepted it - duplicate;
 *		2. upsert the object's one active job (the partial unique index on
 *		   pending and running jobs is the arbiter): a new row is queued, a
 *		   pending one absorbs the webhook (coalesced), a running one is
 *		   flagged to be fetched once more after it finishes (requeued).
 *
 *		Both rely on ON CONFLICT, so concurrent callers never see a unique
 *		violation: the second waits for the first's transaction and then
 *		takes the other branch.  Nothing here locks more than the rows it
 *		writes, and a rollback of the caller undoes all of it.
 *
 *		Before either step, as the caller (enqueue is not SECURITY DEFINER,
 *		see access.c): the payload's size, the source's existence and its
 *		enqueue_roles.  Only then does it act as the function's owner.
 *		receive() (receive.c) takes the same steps (enqueue.h).
 */
#include "postgres.h"

#include "access/detoast.h"
#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "tcop/tcopprot.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "webhook_ingest.h"
#include "access.h"
#include "queue_write.h"
#include "enqueue.h"

PG_FUNCTION_INFO_V1(webhook_ingest_enqueue);

typedef enum EnqueueOutcome
{
	OUTCOME_QUEUED = 0,
	OUTCOME_COALESCED = 1,
	OUTCOME_REQUEUED = 2,
	OUTCOME_DUPLICATE = 3
} EnqueueOutcome;

static const char *const outcome_names[] = {"queued", "coalesced", "requeued", "duplicate"};

/*
 * Every name is schema-qualified and every operator spelled out, so the
 * plans mean the same whatever search_path the caller has (enqueue has no
 * SET clause: it would cost every call a GUC save and restore).
 */
static const char *const remember_event_sql =
"INSERT INTO webhook_ingest.events (source, event_id) "
"SELECT s.name, $2 FROM webhook_ingest.sources s WHERE s.name OPERATOR(pg_catalog.=) $1 "
"ON CONFLICT DO NOTHING";

static const char *const upsert_job_sql =
"INSERT INTO webhook_ingest.jobs AS j (source, external_id, payload) "
"SELECT s.name, $2, $3 FROM webhook_ingest.sources s WHERE s.name OPERATOR(pg_catalog.=) $1 "
"ON CONFLICT (source, external_id) "
"WHERE state OPERATOR(pg_catalog.=) ANY ('{pending,running}'::webhook_ingest.job_state[]) "
"DO UPDATE SET payload = COALESCE(EXCLUDED.payload, j.payload), "
"              refetch = j.refetch OR j.state OPERATOR(pg_catalog.=) 'running', "
"              events = j.events OPERATOR(pg_catalog.+) 1, "
"              updated_at = pg_catalog.now() "
"RETURNING j.id, "
"          CASE WHEN j.xmax OPERATOR(pg_catalog.=) 0 THEN 0 "
"               WHEN j.state OPERATOR(pg_catalog.=) 'pending' THEN 1 ELSE 2 END";

static const char *const active_job_sql =
"SELECT j.id FROM webhook_ingest.jobs j "
"WHERE j.source OPERATOR(pg_catalog.=) $1 AND j.external_id OPERATOR(pg_catalog.=) $2 "
"AND j.state OPERATOR(pg_catalog.=) ANY ('{pending,running}'::webhook_ingest.job_state[])";

static const char *const source_exists_sql =
"SELECT FROM webhook_ingest.sources s WHERE s.name OPERATOR(pg_catalog.=) $1";

/*
 * Developer-only, for bench/enqueue: webhook_ingest.enqueue_path = sql forces
 * the SQL path in READ COMMITTED, so both paths are measured in the same
 * transactions.  Not documented; goes with the path it measures.
 */
typedef enum EnqueuePath
{
	ENQUEUE_PATH_AUTO,
	ENQUEUE_PATH_SQL,
	ENQUEUE_PATH_SQL1,
	ENQUEUE_PATH_SQL2
} EnqueuePath;

static const struct config_enum_entry enqueue_path_options[] = {
	{"auto", ENQUEUE_PATH_AUTO, false},
	{"sql", ENQUEUE_PATH_SQL, false},
	{"sql1", ENQUEUE_PATH_SQL1, false},
	{"sql2", ENQUEUE_PATH_SQL2, false},
	{NULL, 0, false}
};

static int	enqueue_path = ENQUEUE_PATH_AUTO;

void
wi_enqueue_define_gucs(void)
{
	DefineCustomEnumVariable("webhook_ingest.enqueue_path",
							 "Developer only: which write path enqueue() takes.",
							 NULL, &enqueue_path, ENQUEUE_PATH_AUTO, enqueue_path_options,
							 PGC_USERSET, GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE,
							 NULL, NULL, NULL);
}

/*
 * One statement per call.  With an event id: remember it, and only if it is
 * new upsert the job; a duplicate reads the object's active job instead.
 * The source's existence was checked (fresh) by wi_enqueue_admit, under the
 * lock on jobs that drop_source() waits for.  Outcomes: 0 queued,
 * 1 coalesced, 2 requeued, 3 duplicate.
 */
static const char *const enqueue1_sql =
"INSERT INTO webhook_ingest.jobs AS j (source, external_id, payload) VALUES ($1, $2, $3) "
"ON CONFLICT (source, external_id) "
"WHERE state OPERATOR(pg_catalog.=) ANY ('{pending,running}'::webhook_ingest.job_state[]) "
"DO UPDATE SET payload = COALESCE(EXCLUDED.payload, j.payload), "
"              refetch = j.refetch OR j.state OPERATOR(pg_catalog.=) 'running', "
"              events = j.events OPERATOR(pg_catalog.+) 1, "
"              updated_at = pg_catalog.now() "
"RETURNING j.id, "
"          CASE WHEN j.xmax OPERATOR(pg_catalog.=) 0 THEN 0 "
"               WHEN j.state OPERATOR(pg_catalog.=) 'pending' THEN 1 ELSE 2 END";

static const char *const enqueue1_event_sql =
"WITH ev AS ("
"  INSERT INTO webhook_ingest.events (source, event_id) VALUES ($1, $4) "
"  ON CONFLICT DO NOTHING RETURNING 1"
"), job AS ("
"  INSERT INTO webhook_ingest.jobs AS j (source, external_id, payload) "
"  SELECT $1, $2, $3 WHERE EXISTS (SELECT FROM ev) "
"  ON CONFLICT (source, external_id) "
"  WHERE state OPERATOR(pg_catalog.=) ANY ('{pending,running}'::webhook_ingest.job_state[]) "
"  DO UPDATE SET payload = COALESCE(EXCLUDED.payload, j.payload), "
"                refetch = j.refetch OR j.state OPERATOR(pg_catalog.=) 'running', "
"                events = j.events OPERATOR(pg_catalog.+) 1, "
"                updated_at = pg_catalog.now() "
"  RETURNING j.id, "
"            CASE WHEN j.xmax OPERATOR(pg_catalog.=) 0 THEN 0 "
"                 WHEN j.state OPERATOR(pg_catalog.=) 'pending' THEN 1 ELSE 2 END AS outcome"
") "
"SELECT id, outcome FROM job "
"UNION ALL "
"SELECT (SELECT a.id FROM webhook_ingest.jobs a "
"        WHERE a.source OPERATOR(pg_catalog.=) $1 AND a.external_id OPERATOR(pg_catalog.=) $2 "
"        AND a.state OPERATOR(pg_catalog.=) ANY ('{pending,running}'::webhook_ingest.job_state[])), 3 "
"WHERE NOT EXISTS (SELECT FROM job)";

/* sql2: two statements, the source taken as given (checked by wi_enqueue_admit). */
static const char *const remember2_sql =
"INSERT INTO webhook_ingest.events (source, event_id) VALUES ($1, $4) ON CONFLICT DO NOTHING";

static const char *const active2_sql =
"SELECT j.id FROM webhook_ingest.jobs j "
"WHERE j.source OPERATOR(pg_catalog.=) $1 AND j.external_id OPERATOR(pg_catalog.=) $2 "
"AND j.state OPERATOR(pg_catalog.=) ANY ('{pending,running}'::webhook_ingest.job_state[])";

static SPIPlanPtr remember2_plan;
static SPIPlanPtr active2_plan;

static SPIPlanPtr enqueue1_plan;
static SPIPlanPtr enqueue1_event_plan;

static SPIPlanPtr remember_event_plan;
static SPIPlanPtr upsert_job_plan;
static SPIPlanPtr active_job_plan;
static SPIPlanPtr source_exists_plan;
static TupleDesc result_desc;

/* Every statement here takes (source text, text, jsonb) or a prefix of it. */
static SPIPlanPtr
prepare_once(SPIPlanPtr *plan, const char *sql, int nargs)
{
	static Oid	argtypes[3] = {TEXTOID, TEXTOID, JSONBOID};

	return wi_prepare_once(plan, sql, nargs, argtypes, false);
}

static void
report_unknown_source(text *source)
{
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("source \"%s\" does not exist", wi_clip_text(source)),
			 errhint("Register it with webhook_ingest.add_source().")));
}

static bool
source_exists(Datum *args)
{
	SPIPlanPtr	plan = prepare_once(&source_exists_plan, source_exists_sql, 1);

	if (SPI_execute_plan(plan, args, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not look up source");
	return SPI_processed > 0;
}

static Datum
make_result(int64 job_id, bool job_id_null, EnqueueOutcome outcome)
{
	Datum		values[2];
	bool		nulls[2] = {job_id_null, false};

	values[0] = Int64GetDatum(job_id);
	values[1] = CStringGetTextDatum(outcome_names[outcome]);
	return HeapTupleGetDatum(heap_form_tuple(result_desc, values, nulls));
}

/*
 * The SQL path: the same two steps as prepared statements.  Serves callers in
 * REPEATABLE READ or SERIALIZABLE (where ON CONFLICT's visibility checks
 * apply) and servers older than PostgreSQL 14.
 */
static EnqueueOutcome
enqueue_sql(text *source, text *external_id, Datum payload, bool payload_null, text *event_id,
			int64 *job_id, bool *job_id_null)
{
	Datum		args[3];
	char		nulls[3] = {' ', ' ', payload_null ? 'n' : ' '};
	EnqueueOutcome outcome;
	SPIPlanPtr	plan;
	bool		isnull;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");

	args[0] = PointerGetDatum(source);
	if (event_id != NULL)
	{
		plan = prepare_once(&remember_event_plan, remember_event_sql, 2);
		args[1] = PointerGetDatum(event_id);
		if (SPI_execute_plan(plan, args, NULL, false, 0) != SPI_OK_INSERT)
			elog(ERROR, "could not remember event id");
		if (SPI_processed == 0)
		{
			/* Unknown source, or an event id this source already gave. */
			if (!source_exists(args))
				report_unknown_source(source);

			plan = prepare_once(&active_job_plan, active_job_sql, 2);
			args[1] = PointerGetDatum(external_id);
			if (SPI_execute_plan(plan, args, NULL, true, 1) != SPI_OK_SELECT)
				elog(ERROR, "could not look up the active job");
			*job_id_null = (SPI_processed == 0);
			if (!*job_id_null)
				*job_id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
													  &isnull));
			SPI_finish();
			return OUTCOME_DUPLICATE;
		}
	}

	plan = prepare_once(&upsert_job_plan, upsert_job_sql, 3);
	args[1] = PointerGetDatum(external_id);
	args[2] = payload;
	if (SPI_execute_plan(plan, args, nulls, false, 0) != SPI_OK_INSERT_RETURNING)
		elog(ERROR, "could not upsert job");
	if (SPI_processed == 0)
		report_unknown_source(source);
	*job_id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	outcome = (EnqueueOutcome) DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0],
														   SPI_tuptable->tupdesc, 2, &isnull));
	SPI_finish();
	return outcome;
}

static EnqueueOutcome
enqueue_sql1(text *source, text *external_id, Datum payload, bool payload_null, text *event_id,
			 int64 *job_id, bool *job_id_null)
{
	static Oid	argtypes[4] = {TEXTOID, TEXTOID, JSONBOID, TEXTOID};
	Datum		args[4];
	char		nulls[4] = {' ', ' ', payload_null ? 'n' : ' ', ' '};
	SPIPlanPtr	plan;
	HeapTuple	row;
	TupleDesc	desc;
	bool		isnull;
	EnqueueOutcome outcome;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	args[0] = PointerGetDatum(source);
	args[1] = PointerGetDatum(external_id);
	args[2] = payload;
	args[3] = PointerGetDatum(event_id);
	if (event_id != NULL)
		plan = wi_prepare_once(&enqueue1_event_plan, enqueue1_event_sql, 4, argtypes, false);
	else
		plan = wi_prepare_once(&enqueue1_plan, enqueue1_sql, 3, argtypes, false);
	if (SPI_execute_plan(plan, args, nulls, false, 0) < 0 || SPI_processed != 1)
		elog(ERROR, "could not enqueue");
	row = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	*job_id = DatumGetInt64(SPI_getbinval(row, desc, 1, job_id_null));
	outcome = (EnqueueOutcome) DatumGetInt32(SPI_getbinval(row, desc, 2, &isnull));
	SPI_finish();
	return outcome;
}

static EnqueueOutcome
enqueue_sql2(text *source, text *external_id, Datum payload, bool payload_null, text *event_id,
			 int64 *job_id, bool *job_id_null)
{
	static Oid	argtypes[4] = {TEXTOID, TEXTOID, JSONBOID, TEXTOID};
	Datum		args[4];
	char		nulls[4] = {' ', ' ', payload_null ? 'n' : ' ', ' '};
	SPIPlanPtr	plan;
	bool		isnull;
	EnqueueOutcome outcome;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	args[0] = PointerGetDatum(source);
	args[1] = PointerGetDatum(external_id);
	args[2] = payload;
	args[3] = PointerGetDatum(event_id);
	if (event_id != NULL)
	{
		plan = wi_prepare_once(&remember2_plan, remember2_sql, 4, argtypes, false);
		if (SPI_execute_plan(plan, args, nulls, false, 0) != SPI_OK_INSERT)
			elog(ERROR, "could not remember event id");
		if (SPI_processed == 0)
		{
			plan = wi_prepare_once(&active2_plan, active2_sql, 2, argtypes, false);
			if (SPI_execute_plan(plan, args, nulls, false, 1) != SPI_OK_SELECT)
				elog(ERROR, "could not look up the active job");
			*job_id_null = (SPI_processed == 0);
			if (!*job_id_null)
				*job_id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
			SPI_finish();
			return OUTCOME_DUPLICATE;
		}
	}
	plan = wi_prepare_once(&enqueue1_plan, enqueue1_sql, 3, argtypes, false);
	if (SPI_execute_plan(plan, args, nulls, false, 0) != SPI_OK_INSERT_RETURNING || SPI_processed != 1)
		elog(ERROR, "could not upsert job");
	*job_id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	outcome = (EnqueueOutcome) DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	SPI_finish();
	return outcome;
}

/*
 * The fast path (queue_write.c); wi_direct_write_possible() said it applies.
 */
static EnqueueOutcome
enqueue_direct(text *source, text *external_id, Datum payload, bool payload_null, text *event_id,
			   int64 *job_id, bool *job_id_null)
{
	bool		was_running;
	EState	   *estate;
	WriteResult result;

	estate = wi_write_begin();
	if (event_id != NULL)
	{
		if (wi_remember_event(estate, source, event_id) == WRITE_EXISTED)
		{
			wi_write_end(estate);
			*job_id_null = !wi_active_job(source, external_id, job_id);
			return OUTCOME_DUPLICATE;
		}
	}

	result = wi_upsert_job(estate, source, external_id, payload, payload_null, job_id, &was_running);
	wi_write_end(estate);
	return result == WRITE_INSERTED ? OUTCOME_QUEUED :
		was_running ? OUTCOME_REQUEUED : OUTCOME_COALESCED;
}

/*
 * webhook_ingest.max_payload_size applies to the jsonb datum as passed:
 * its uncompressed size, varlena header included (pg_column_size of the
 * freshly built value), read without detoasting it.
 */
void
wi_check_payload_size(Datum payload)
{
	Size		size = toast_raw_datum_size(payload);

	if (size > (Size) wi_max_payload_size_kb * 1024)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("payload of %zu bytes exceeds webhook_ingest.max_payload_size (%d kB)",
						size, wi_max_payload_size_kb),
				 errdetail("The size is that of the jsonb value, uncompressed."),
				 errhint("Pass the object id and let the worker fetch the object, or raise webhook_ingest.max_payload_size.")));
}

/*
 * The first step of every intake function, before it reads anything for the
 * caller: the lock on jobs (see wi_lock_jobs), then, as the caller, the
 * source's existence and whether it admits the caller.
 */
void
wi_enqueue_admit(text *source)
{
	wi_lock_jobs();
	wi_check_may_enqueue(source, GetUserId());
}

/*
 * The last step, after wi_enqueue_admit and the function's own checks:
 * remember the event, upsert the job (as the function's owner), wake the
 * worker at commit.  Returns the (job_id, outcome) row.
 */
Datum
wi_enqueue_write(FunctionCallInfo fcinfo, text *source, text *external_id, Datum payload, bool payload_null,
				 text *event_id)
{
	int64		job_id = 0;
	bool		job_id_null = false;
	EnqueueOutcome outcome;
	WiSavedUser caller;

	if (result_desc == NULL)
	{
		TupleDesc	desc;
		MemoryContext old;

		if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
			elog(ERROR, "return type of an intake function must be a row type");
		old = MemoryContextSwitchTo(TopMemoryContext);
		desc = CreateTupleDescCopy(desc);
		MemoryContextSwitchTo(old);
		result_desc = BlessTupleDesc(desc);
	}

	wi_become_owner(fcinfo, &caller);
	if (enqueue_path == ENQUEUE_PATH_AUTO && wi_direct_write_possible())
	{
		elog(DEBUG1, "webhook_ingest: enqueue writes directly");
		outcome = enqueue_direct(source, external_id, payload, payload_null, event_id, &job_id, &job_id_null);
	}
	else if (enqueue_path == ENQUEUE_PATH_SQL2)
		outcome = enqueue_sql2(source, external_id, payload, payload_null, event_id, &job_id, &job_id_null);
	else if (enqueue_path == ENQUEUE_PATH_SQL1)
		outcome = enqueue_sql1(source, external_id, payload, payload_null, event_id, &job_id, &job_id_null);
	else
		outcome = enqueue_sql(source, external_id, payload, payload_null, event_id, &job_id, &job_id_null);
	wi_restore_user(&caller);

	if (outcome != OUTCOME_DUPLICATE)
		wi_wake_worker_at_commit();
	return make_result(job_id, job_id_null, outcome);
}

Datum
webhook_ingest_enqueue(PG_FUNCTION_ARGS)
{
	text	   *source;
	text	   *external_id;
	text	   *event_id = NULL;
	Datum		payload = (Datum) 0;
	bool		payload_null = PG_ARGISNULL(2);

	/* Check everything before touching anything. */
	PreventCommandIfReadOnly("webhook_ingest.enqueue()");
	PreventCommandIfParallelMode("webhook_ingest.enqueue()");
	wi_check_not_null(PG_ARGISNULL(0), "source");
	wi_check_not_null(PG_ARGISNULL(1), "external_id");
	source = PG_GETARG_TEXT_PP(0);
	external_id = PG_GETARG_TEXT_PP(1);
	wi_check_source_name(source);
	wi_check_id("external_id", VARDATA_ANY(external_id), VARSIZE_ANY_EXHDR(external_id));
	if (!PG_ARGISNULL(3))
	{
		event_id = PG_GETARG_TEXT_PP(3);
		wi_check_id("event_id", VARDATA_ANY(event_id), VARSIZE_ANY_EXHDR(event_id));
	}
	if (!payload_null)
	{
		wi_check_payload_size(PG_GETARG_DATUM(2));
		payload = PointerGetDatum(PG_GETARG_JSONB_P(2));
	}

	wi_enqueue_admit(source);
	return wi_enqueue_write(fcinfo, source, external_id, payload, payload_null, event_id);
}

/* A source name as an intake function's argument: not empty. */
void
wi_check_source_name(text *source)
{
	if (VARSIZE_ANY_EXHDR(source) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("source must not be empty")));
}
