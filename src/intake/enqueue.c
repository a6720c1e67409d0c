/*
 * enqueue.c
 *		webhook_ingest.enqueue(): accept one webhook inside the caller's
 *		transaction, in two SQL statements prepared once per backend (a
 *		third, rarely: see REMEMBER_LINKED_SQL):
 *
 *		1. with an event id, remember it (INSERT ... ON CONFLICT DO NOTHING on
 *		   events) with the job it goes to: no row means this source already
 *		   accepted it - duplicate, and the second statement only reads the
 *		   object's active job (and counts the duplicate on the id's row);
 *		2. otherwise upsert the object's one active job (the partial unique
 *		   index on pending and running jobs is the arbiter): a new row is
 *		   queued, a pending one absorbs the webhook (coalesced), a running
 *		   one is flagged to be fetched once more after it finishes
 *		   (requeued).
 *
 *		Both rely on ON CONFLICT, so concurrent callers never see a unique
 *		violation: the second waits for the first's transaction and then
 *		takes the other branch.  Nothing here locks more than the rows it
 *		writes, and a rollback of the caller undoes all of it.  The same
 *		statements serve every isolation level, and fire the triggers of
 *		queue and events like any INSERT ... ON CONFLICT.
 *
 *		Before them, as the caller (enqueue is not SECURITY DEFINER, see
 *		access.c): the payload's size, the lock on the queue, the source's
 *		existence and its enqueue_roles.  Only then does it act as the
 *		function's owner.  receive() (receive.c) takes the same steps
 *		(enqueue.h), and so does reconciliation (reconcile.c) for an object
 *		a sweep found changed: the same upsert with no event id, counting
 *		no webhook (events 0 for a new job, unchanged for an active one).
 *
 * IDENTIFICATION
 *		src/intake/enqueue.c
 */
#include "postgres.h"

#include "access/detoast.h"
#include "access/htup_details.h"
#include "access/genam.h"
#include "access/relation.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "tcop/tcopprot.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "webhook_ingest.h"
#include "access.h"
#include "enqueue.h"
#include "settings.h"
#include "shmem.h"
#include "spi_plans.h"
#include "validate.h"

PG_FUNCTION_INFO_V1(webhook_ingest_enqueue);
PG_FUNCTION_INFO_V1(webhook_ingest_payload_size);

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
 * SET clause: it would cost every call a GUC save and restore).  They take
 * the source as given: wi_enqueue_admit found it, as of now, under the lock
 * on the queue that drop_source() waits for.  ($1 source, $2 external_id,
 * $3 payload, $4 event_id, $5 the source's number, $6 the id a new job is to
 * have (a linked ledger's, or NULL), $7 the webhooks the call brings: 1, or 0
 * for reconciliation.)
 *
 * The schemas this library serves (wi_check_schema_window): 0.10.0's, and
 * 0.9.0's for the time between installing this library and ALTER EXTENSION
 * UPDATE.  An id is new only if no old ledger holds it either: at 0.9.0,
 * 0.5.0's (events_legacy, emptied once all of it is older than
 * dedup_window, dropped by the update to 0.10.0); at 0.10.0, 0.9.0's
 * (event_ledger_090, whose ids purge_events moves into the keyed ledger,
 * then truncates).  Neither takes an insert after the upgrade, and a probe
 * of one that is empty is left out of the statement.
 */

/*
 * 0.9.0's event_ledger; 0.10.0's, which links each id to its job; each
 * with the old ledger that may still hold ids (WI_OLD_LEDGER).
 */
#define WI_LEDGER_090		0
#define WI_LEDGER_0100		2
#define WI_OLD_LEDGER		1	/* events_legacy beside 0.9.0's, event_ledger_090 beside 0.10.0's */

#define REMEMBER_UNLESS(probes) \
	"INSERT INTO webhook_ingest.event_ledger (source_id, event_id) SELECT $5, $4 WHERE " probes \
	" ON CONFLICT DO NOTHING"
#define NOT_IN_EVENTS_LEGACY \
	"NOT EXISTS (SELECT FROM webhook_ingest.events_legacy l " \
	"  WHERE l.source OPERATOR(pg_catalog.=) $1 AND l.event_id OPERATOR(pg_catalog.=) $4)"
/* (by the expression of its index, event_ledger_090_once) */
#define NOT_IN_LEDGER_090 \
	"NOT EXISTS (SELECT FROM webhook_ingest.event_ledger_090 o " \
	"  WHERE ((o.source_id::pg_catalog.text OPERATOR(pg_catalog.||) ':') OPERATOR(pg_catalog.||) o.event_id) " \
	"        OPERATOR(pg_catalog.=) (($5::pg_catalog.text OPERATOR(pg_catalog.||) ':') OPERATOR(pg_catalog.||) $4))"

#define ACTIVE_JOB_WHERE \
"WHERE j.source OPERATOR(pg_catalog.=) $1 AND j.external_id OPERATOR(pg_catalog.=) $2 " \
"AND j.state OPERATOR(pg_catalog.=) ANY ('{pending,running}'::webhook_ingest.job_state[])"

/*
 * Since 0.10.0 the ledger's row names the job the webhook went to
 * (history() lists a job's event ids): the object's active job, which it
 * will coalesce into, or else the id its new job is to have, drawn here
 * from the queue's sequence.  Returns that id and whether it is a new one
 * (no row: a duplicate).  Should the upsert after it find otherwise (the
 * active job finished, or another webhook made the object's job first, in
 * between), the row is set right (fix_link_sql).
 */
#define REMEMBER_LINKED_SQL(where) \
"WITH active AS (SELECT j.id FROM webhook_ingest.queue j " ACTIVE_JOB_WHERE "), " \
"ins AS (INSERT INTO webhook_ingest.event_ledger (source_id, event_id, job_id) " \
"        SELECT $5, $4, COALESCE((SELECT a.id FROM active a), " \
"                                pg_catalog.nextval('webhook_ingest.jobs_id_seq'::pg_catalog.regclass)) " \
where \
"        ON CONFLICT DO NOTHING RETURNING job_id) " \
"SELECT i.job_id, NOT EXISTS (SELECT FROM active) FROM ins i"

static const char *const remember_event_sql[] = {
	"INSERT INTO webhook_ingest.event_ledger (source_id, event_id) VALUES ($5, $4) ON CONFLICT DO NOTHING",
	REMEMBER_UNLESS(NOT_IN_EVENTS_LEGACY),
	REMEMBER_LINKED_SQL(""),
	REMEMBER_LINKED_SQL("WHERE " NOT_IN_LEDGER_090 " ")
};

/*
 * Returns the job's id and the outcome, 0 to 2 as in EnqueueOutcome.  With
 * a linked ledger, a new job takes the id its event id was given ($6, or
 * one of its own when that named the active job).
 */
#define UPSERT_JOB_SQL(id_column, id_value) \
"INSERT INTO webhook_ingest.queue AS j (" id_column "source, external_id, payload, events) " \
"VALUES (" id_value "$1, $2, $3, $7) " \
"ON CONFLICT (source, external_id) " \
"WHERE state OPERATOR(pg_catalog.=) ANY ('{pending,running}'::webhook_ingest.job_state[]) " \
"DO UPDATE SET payload = COALESCE(EXCLUDED.payload, j.payload), " \
"              refetch = j.refetch OR j.state OPERATOR(pg_catalog.=) 'running', " \
"              events = j.events OPERATOR(pg_catalog.+) $7, " \
"              updated_at = pg_catalog.now() " \
"RETURNING j.id, " \
"          CASE WHEN j.xmax OPERATOR(pg_catalog.=) 0 THEN 0 " \
"               WHEN j.state OPERATOR(pg_catalog.=) 'pending' THEN 1 ELSE 2 END"

static const char *const upsert_job_sql[] = {
	UPSERT_JOB_SQL("", ""),
	UPSERT_JOB_SQL("id, ", "COALESCE($6, pg_catalog.nextval('webhook_ingest.jobs_id_seq'::pg_catalog.regclass)), ")
};

#define ACTIVE_JOB_SQL "SELECT j.id FROM webhook_ingest.queue j " ACTIVE_JOB_WHERE

/* The ledger's row of ($5, $4), found through its index. */
#define LEDGER_ROW_SQL \
"WHERE l.source_id OPERATOR(pg_catalog.=) $5 AND l.event_id OPERATOR(pg_catalog.=) $4 " \
"  AND ((l.source_id::pg_catalog.text OPERATOR(pg_catalog.||) ':') OPERATOR(pg_catalog.||) l.event_id) " \
"      OPERATOR(pg_catalog.=) (($5::pg_catalog.text OPERATOR(pg_catalog.||) ':') OPERATOR(pg_catalog.||) $4)"

/*
 * With a linked ledger a duplicate is counted on the row of its event id,
 * up to WI_DUPLICATES_COUNTED: past that a replay writes nothing (each
 * count is a new row version).
 */
#define WI_DUPLICATES_COUNTED "1000"
static const char *const active_job_sql[] = {
	ACTIVE_JOB_SQL,
	"WITH counted AS (UPDATE webhook_ingest.event_ledger l "
	"                    SET duplicates = COALESCE(l.duplicates, 0) OPERATOR(pg_catalog.+) 1 " LEDGER_ROW_SQL
	"                    AND COALESCE(l.duplicates, 0) OPERATOR(pg_catalog.<) " WI_DUPLICATES_COUNTED ") "
	ACTIVE_JOB_SQL
};

static const char *const fix_link_sql =
"UPDATE webhook_ingest.event_ledger l SET job_id = $6 " LEDGER_ROW_SQL;

/* Which statements this call uses, and the admitted source's number: found by wi_enqueue_admit(). */
static int	ledger = WI_LEDGER_090;	/* the statement of remember_event_sql */
static int32 admitted_source_id = 0;

static SPIPlanPtr remember_event_plan[lengthof(remember_event_sql)];
static SPIPlanPtr upsert_job_plan[lengthof(upsert_job_sql)];
static SPIPlanPtr active_job_plan[lengthof(active_job_sql)];
static SPIPlanPtr fix_link_plan;
static TupleDesc result_desc;

/* Run one of the statements above; its first row's columns in values. */
static uint64
run(SPIPlanPtr *plan, const char *sql, int nargs, Datum *args, const char *nulls, int ncols, Datum *values,
	bool *isnull)
{
	static Oid	argtypes[7] = {TEXTOID, TEXTOID, JSONBOID, TEXTOID, INT4OID, INT8OID, INT4OID};

	wi_prepare_once(plan, sql, nargs, argtypes, false);
	/* Not read-only: each statement sees what committed before it began. */
	if (SPI_execute_plan(*plan, args, nulls, false, 0) < 0)
		elog(ERROR, "could not run \"%s\"", sql);
	for (int i = 0; i < ncols && SPI_processed > 0; i++)
		values[i] = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, i + 1, &isnull[i]);
	return SPI_processed;
}

/*
 * Remember the event id, if there is one, then upsert the job; a duplicate
 * only reads the object's active job (and is counted, where the ledger
 * links ids to jobs).  Two statements, and a third when a linked event id
 * named another job than the one its webhook went to.  events: the
 * webhooks this call counts (1, or 0).
 */
static EnqueueOutcome
enqueue_statements(text *source, text *external_id, Datum payload, bool payload_null, text *event_id,
				   int32 events, int64 *job_id, bool *job_id_null)
{
	Datum		args[7];
	char		nulls[7] = {' ', ' ', payload_null ? 'n' : ' ', ' ', ' ', 'n', ' '};
	Datum		values[2];
	bool		isnull[2];
	bool		linked = event_id != NULL && ledger >= WI_LEDGER_0100;
	int			upsert = linked ? 1 : 0;
	int64		ticket = 0;
	EnqueueOutcome outcome = OUTCOME_DUPLICATE;

	args[0] = PointerGetDatum(source);
	args[1] = PointerGetDatum(external_id);
	args[2] = payload;
	args[3] = PointerGetDatum(event_id);
	args[4] = Int32GetDatum(admitted_source_id);
	args[5] = (Datum) 0;
	args[6] = Int32GetDatum(events);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (event_id != NULL &&
		run(&remember_event_plan[ledger], remember_event_sql[ledger], 5, args, nulls,
			linked ? 2 : 0, values, isnull) == 0)
	{
		int			active = linked ? 1 : 0;

		*job_id_null = run(&active_job_plan[active], active_job_sql[active], linked ? 5 : 2, args, nulls, 1, values,
						   isnull) == 0;
	}
	else
	{
		if (linked)
		{
			ticket = DatumGetInt64(values[0]);
			args[5] = values[0];
			nulls[5] = DatumGetBool(values[1]) ? ' ' : 'n';
		}
		if (run(&upsert_job_plan[upsert], upsert_job_sql[upsert], 7, args, nulls, 2, values, isnull) != 1)
			elog(ERROR, "could not upsert job");
		outcome = (EnqueueOutcome) DatumGetInt32(values[1]);
		if (linked && DatumGetInt64(values[0]) != ticket)
		{
			args[5] = values[0];
			nulls[5] = ' ';
			run(&fix_link_plan, fix_link_sql, 6, args, nulls, 0, NULL, NULL);
		}
	}
	if (!*job_id_null)
		*job_id = DatumGetInt64(values[0]);
	SPI_finish();
	return outcome;
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
 * Does an old ledger (0.5.0's events, kept until dedup_window has passed
 * since the upgrade; 0.9.0's, until its ids are moved) hold any id?  Its
 * size says: it takes no insert after the upgrade, and it goes by
 * TRUNCATE.  The lock is the one the probe of it would take.
 */
static bool
legacy_ids_left(Oid nsp, const char *relname)
{
	Oid			relid = get_relname_relid(relname, nsp);
	Relation	rel;
	bool		left;

	if (!OidIsValid(relid))
		return false;
	rel = relation_open(relid, AccessShareLock);
	left = RelationGetNumberOfBlocks(rel) > 0;
	relation_close(rel, NoLock);
	return left;
}

/* Is the ledger 0.10.0's, with a job_id (or is ALTER EXTENSION UPDATE yet to come)? */
static bool
ledger_links_jobs(Oid nsp)
{
	Oid			relid = get_relname_relid("event_ledger", nsp);

	return OidIsValid(relid) && get_attnum(relid, "job_id") != InvalidAttrNumber;
}

/* The installed extension's version (palloc'd), NULL if none. */
static char *
get_extension_version(void)
{
	Relation	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	char	   *version = NULL;

	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber, F_NAMEEQ,
				CStringGetDatum(WI_EXTENSION_NAME));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		bool		isnull;
		Datum		d = heap_getattr(tuple, Anum_pg_extension_extversion, RelationGetDescr(rel), &isnull);

		if (!isnull)
			version = TextDatumGetCString(d);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return version;
}

/*
 * The schema versions this library serves: its own, and the one before it
 * for the time between installing the package and ALTER EXTENSION UPDATE
 * (doc/operations.md, "Upgrades").  An older schema (or a newer one) is
 * refused with a hint, not guessed at.  The answer is kept per queue table
 * once it is yes: an update only moves forward, and DROP and CREATE
 * EXTENSION make another queue.
 */
void
wi_check_schema_window(void)
{
	static Oid	served_queue = InvalidOid;
	Oid			nsp = get_namespace_oid(WI_SCHEMA_NAME, false);
	Oid			queue = get_relname_relid("queue", nsp);
	char	   *version;

	if (OidIsValid(queue) && queue == served_queue)
		return;
	version = get_extension_version();
	if (version == NULL || (strcmp(version, WI_VERSION) != 0 && strcmp(version, WI_OLDEST_SCHEMA) != 0))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("webhook_ingest's schema is at version %s, which library %s does not serve",
						version ? version : "(none)", WI_VERSION),
				 errdetail("Library %s serves schema versions %s and %s.", WI_VERSION, WI_OLDEST_SCHEMA, WI_VERSION),
				 errhint("Run ALTER EXTENSION webhook_ingest UPDATE.")));
	if (!OidIsValid(queue))
		elog(ERROR, "relation webhook_ingest.queue is missing");
	served_queue = queue;
}

/*
 * Take ROW EXCLUSIVE on the queue before any lookup takes its snapshot:
 * drop_source() holds SHARE on it while it deletes, so once we have the
 * lock a dropped source is gone from our snapshot too.  Lock, then look
 * again (the lock processed pending invalidations) until the name still
 * means the table locked.  Not RangeVarGetRelid: it checks the caller's
 * USAGE on the schema, which enqueue() never needed (a wrapper bound at its
 * creation calls it without naming the schema).  The ledger's shape (0.9.0
 * or 0.10.0, and an old ledger beside it) sets the statements.
 */
static void
lock_queue(void)
{
	Oid			locked = InvalidOid;

	wi_check_schema_window();
	for (;;)
	{
		Oid			nsp = get_namespace_oid(WI_SCHEMA_NAME, false);
		Oid			queue = get_relname_relid("queue", nsp);

		if (!OidIsValid(queue))
			elog(ERROR, "relation webhook_ingest.queue is missing");
		if (queue == locked)
		{
			if (!ledger_links_jobs(nsp))
				ledger = WI_LEDGER_090 + (legacy_ids_left(nsp, "events_legacy") ? WI_OLD_LEDGER : 0);
			else
				ledger = WI_LEDGER_0100 + (legacy_ids_left(nsp, "event_ledger_090") ? WI_OLD_LEDGER : 0);
			return;
		}
		LockRelationOid(queue, RowExclusiveLock);
		locked = queue;
	}
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
 * _payload_size(jsonb) returns bigint: the size max_payload_size measures
 * (uncompressed, however the value is stored or was fetched), for the dead
 * payloads' accounting (dead_payload_limit): the same value always counts
 * the same, so what is added when a job dies is what is taken off later.
 */
Datum
webhook_ingest_payload_size(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64((int64) toast_raw_datum_size(PG_GETARG_DATUM(0)));
}

/*
 * The first step of every intake function, before it reads anything for the
 * caller: the lock on the queue (see lock_queue), then, as the caller, the
 * source's existence and whether it admits the caller.
 */
void
wi_enqueue_admit(text *source)
{
	lock_queue();
	admitted_source_id = wi_check_may_enqueue(source, GetUserId());
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
	outcome = enqueue_statements(source, external_id, payload, payload_null, event_id, 1, &job_id, &job_id_null);
	wi_restore_user(&caller);

	if (outcome != OUTCOME_DUPLICATE)
		wi_wake_worker_at_commit();
	return make_result(job_id, job_id_null, outcome);
}

/*
 * For reconciliation, after wi_enqueue_admit: the upsert of an object a
 * sweep found changed, as the function's owner, with no payload, no event
 * id and no webhook counted.  Sets the job's id; returns the outcome's
 * name ("queued": no job was active, so no webhook had announced it).
 */
const char *
wi_enqueue_unannounced(FunctionCallInfo fcinfo, text *source, text *external_id, int64 *job_id)
{
	bool		job_id_null = false;
	EnqueueOutcome outcome;
	WiSavedUser caller;

	wi_check_external_id(VARDATA_ANY(external_id), VARSIZE_ANY_EXHDR(external_id));
	wi_become_owner(fcinfo, &caller);
	outcome = enqueue_statements(source, external_id, (Datum) 0, true, NULL, 0, job_id, &job_id_null);
	wi_restore_user(&caller);
	wi_wake_worker_at_commit();
	return outcome_names[outcome];
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
	source = wi_intake_source(fcinfo, "webhook_ingest.enqueue()");
	wi_check_not_null(PG_ARGISNULL(1), "external_id");
	external_id = PG_GETARG_TEXT_PP(1);
	wi_check_external_id(VARDATA_ANY(external_id), VARSIZE_ANY_EXHDR(external_id));
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

/*
 * The first checks of a function that writes jobs (enqueue, reconciliation):
 * not read-only, not in parallel mode, its source (argument 0) given and
 * named.  Returns the source.
 */
text *
wi_intake_source(FunctionCallInfo fcinfo, const char *function)
{
	text	   *source;

	PreventCommandIfReadOnly(function);
	PreventCommandIfParallelMode(function);
	wi_check_not_null(PG_ARGISNULL(0), "source");
	source = PG_GETARG_TEXT_PP(0);
	wi_check_source_name(source);
	return source;
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
