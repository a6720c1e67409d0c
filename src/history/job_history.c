/*
 * job_history.c
 *		Reading the packed history: done jobs kept a block of 128 ids to a
 *		row of job_history_packed (the storage round packs them, see
 *		_pack_history in the extension's SQL).
 *
 *		_packed_jobs(job_id, external_ids, finished_from, finished_to)
 *		returns them one row per job: all of them, or only the one with that
 *		id, or those of these external ids, or those that finished in
 *		[finished_from, finished_to] (either bound may be NULL), and only
 *		those its caller may read (the admin role all, an app role those of
 *		the sources it may enqueue into: the jobs view's rule; to an app role
 *		only the columns the view lets it read, or needs for them).  It
 *		checks its caller and then reads the table as its owner, as enqueue()
 *		does (access.c).  Each narrowing is an index's: the block index for
 *		an id, the object keys' GIN index for external ids (object_keys.c),
 *		the GiST index on each row's span of finished_at for a time window.
 *		To any other role than those two it returns nothing, whatever grant
 *		it has.
 *		The jobs view calls it with no narrowing; the planner hook
 *		(packed_jobs_planner.c) narrows the call by what a query asks.
 *		_packed_jobs_plan shows what it runs.
 *
 *		Between installing this library and ALTER EXTENSION UPDATE, 0.9.0's
 *		definition (0.8.0's), _packed_jobs(job_id) with nine columns, calls
 *		it: it then reads the table 0.8.0 made (no errors) and is narrowed
 *		by id only, as 0.9.0's was (0.9.0 is the oldest schema this library
 *		serves: wi_check_schema_window).
 *
 * IDENTIFICATION
 *		src/history/job_history.c
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "webhook_ingest.h"
#include "access.h"
#include "compat.h"
#include "object_keys.h"
#include "packed_jobs.h"
#include "source_cache.h"
#include "spi_plans.h"

PG_FUNCTION_INFO_V1(webhook_ingest_packed_jobs);
PG_FUNCTION_INFO_V1(webhook_ingest_packed_jobs_plan);

#define PACKED_JOBS_NATTS	10	/* its OUT columns; the 11th column read is the source's name */

/*
 * Every packed job, or those of a narrowing; with its source's name.
 * ($1 id, $2 external ids, $3 finished from, $4 finished to, $5 the ids'
 * buckets, $6 their checks: wi_object_probe.)  All of them, or a time
 * window's: every array of the rows unnested.  An id or external ids: one
 * array unnested and compared, and only the matching elements read from the
 * others (each array of a row is a TOAST value of its own, read as a whole
 * for each element read: right for the one job of a row an object has, not
 * for the many of a window).
 */
#define ALL_JOBS_SQL(errors_array, errors_column, errors) \
	"SELECT u.id, u.finished_at, u.created_at, u.started_at, u.source_id, u.events, u.attempts, " \
	"       u.last_status, u.external_id, " errors ", s.name " \
	"  FROM webhook_ingest.job_history_packed p " \
	"  CROSS JOIN LATERAL ROWS FROM (pg_catalog.unnest(p.ids), pg_catalog.unnest(p.finished), " \
	"       pg_catalog.unnest(p.created), pg_catalog.unnest(p.started), pg_catalog.unnest(p.source_ids), " \
	"       pg_catalog.unnest(p.events), pg_catalog.unnest(p.attempts), pg_catalog.unnest(p.statuses), " \
	"       pg_catalog.unnest(p.external_ids)" errors_array ") " \
	"       AS u(id, finished_at, created_at, started_at, source_id, events, attempts, last_status, " \
	"            external_id" errors_column ") " \
	"  JOIN webhook_ingest.sources s ON s.id OPERATOR(pg_catalog.=) u.source_id WHERE true "
/*
 * (the array unnested gives its element as x.v: read again as p.array[x.k]
 * it would be fetched from TOAST once more, for each job found)
 */
#define MATCHING_JOBS_SQL(array, id, external_id, errors) \
	"SELECT " id ", p.finished[x.k], p.created[x.k], p.started[x.k], p.source_ids[x.k], p.events[x.k], " \
	"       p.attempts[x.k], p.statuses[x.k], " external_id ", " errors ", s.name " \
	"  FROM webhook_ingest.job_history_packed p " \
	"  CROSS JOIN LATERAL pg_catalog.unnest(p." array ") WITH ORDINALITY AS x(v, k) " \
	"  JOIN webhook_ingest.sources s ON s.id OPERATOR(pg_catalog.=) p.source_ids[x.k] WHERE true "
#define BY_ID_SQL \
	" AND p.block OPERATOR(pg_catalog.=) ($1 OPERATOR(pg_catalog.>>) 7) " \
	" AND $1 OPERATOR(pg_catalog.=) ANY (p.ids) AND x.v OPERATOR(pg_catalog.=) $1"
/* (rows packed before 0.10.0 and not keyed yet have no checks: their ids are read) */
#define BY_OBJECT_SQL \
	" AND webhook_ingest._object_keys(p.external_ids, p.object_bits) OPERATOR(pg_catalog.&&) $5 " \
	" AND (p.object_checks IS NULL OR p.object_checks OPERATOR(pg_catalog.&&) $6) " \
	" AND x.v OPERATOR(pg_catalog.=) ANY ($2)"
/* (a row's span is [its first finished_at, last_finished]; open above while last_finished is unknown) */
#define BY_TIME_SQL(finished) \
	" AND pg_catalog.tstzrange(p.finished_at, p.last_finished, '[]') " \
	"     OPERATOR(pg_catalog.&&) pg_catalog.tstzrange($3, $4, '[]') " \
	" AND " finished " OPERATOR(pg_catalog.>=) COALESCE($3, '-infinity') " \
	" AND " finished " OPERATOR(pg_catalog.<=) COALESCE($4, 'infinity')"
#define ERRORS			"p.errors[x.k]"
#define NO_ERRORS		"NULL::text"
#define UNNEST_ERRORS	", pg_catalog.unnest(p.errors)"

/* The statements, by narrowing: none, objects, time, both; by id; 0.8.0's table, all and by id. */
#define BY_OBJECT	1
#define BY_TIME		2
#define BY_ID		4
#define OF_080		5
static const char *const packed_jobs_sql[7] = {
	ALL_JOBS_SQL(UNNEST_ERRORS, ", last_error", "u.last_error"),
	MATCHING_JOBS_SQL("external_ids", "p.ids[x.k]", "x.v", ERRORS) BY_OBJECT_SQL,
	ALL_JOBS_SQL(UNNEST_ERRORS, ", last_error", "u.last_error") BY_TIME_SQL("u.finished_at"),
	MATCHING_JOBS_SQL("external_ids", "p.ids[x.k]", "x.v", ERRORS) BY_OBJECT_SQL BY_TIME_SQL("p.finished[x.k]"),
	MATCHING_JOBS_SQL("ids", "x.v", "p.external_ids[x.k]", ERRORS) BY_ID_SQL,
	ALL_JOBS_SQL("", "", NO_ERRORS),
	MATCHING_JOBS_SQL("ids", "x.v", "p.external_ids[x.k]", NO_ERRORS) BY_ID_SQL
};

static Oid	packed_jobs_argtypes[6] = {INT8OID, TEXTARRAYOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT4ARRAYOID,
	INT2ARRAYOID};


/* The sources seen in one call, and whether the caller may read their jobs. */
typedef struct SourceSeen
{
	int32		source_id;
	bool		readable;
} SourceSeen;

static bool
may_read(int32 source_id, text *name, Oid caller, SourceSeen *seen, int *nseen)
{
	WiSourceAccess access;
	bool		readable;

	for (int i = 0; i < *nseen; i++)
		if (seen[i].source_id == source_id)
			return seen[i].readable;
	readable = wi_source_lookup(name, false, &access) && wi_source_admits(&access, caller);
	if (*nseen < 64)
	{
		seen[*nseen].source_id = source_id;
		seen[(*nseen)++].readable = readable;
	}
	return readable;
}

/*
 * An app role may read a job's id, state and done_lsn through the jobs view
 * (a column grant), no more: of a packed job it gets the id, and the
 * finished_at and source_id the view needs for done_lsn and its row filter;
 * the rest NULL, so a direct call shows no more than the view would.
 */
static void
app_columns_only(bool *nulls)
{
	nulls[2] = nulls[3] = true;		/* created_at, started_at */
	for (int c = 5; c < PACKED_JOBS_NATTS; c++)
		nulls[c] = true;			/* events, attempts, last_status, external_id, last_error */
}

/*
 * Which statement the call's arguments pick, and its parameters: none
 * when the call can return nothing (a time window that ends before it
 * starts).
 */
static int
narrowing(FunctionCallInfo fcinfo, Datum *args, char *nulls)
{
	int			which = 0;

	for (int i = 0; i < 6; i++)
	{
		bool		given = i < PG_NARGS() && !PG_ARGISNULL(i);

		args[i] = given ? PG_GETARG_DATUM(i) : (Datum) 0;
		nulls[i] = given ? ' ' : 'n';
	}
	if (PG_NARGS() == PACKED_JOBS_NARGS_080)
		return OF_080 + (nulls[0] == ' ');
	if (!PG_ARGISNULL(0))
		return BY_ID;
	if (!PG_ARGISNULL(1))
	{
		wi_object_probe(PG_GETARG_ARRAYTYPE_P(1), &args[4], &args[5]);
		nulls[4] = nulls[5] = ' ';
		which |= BY_OBJECT;
	}
	if (!PG_ARGISNULL(2) || !PG_ARGISNULL(3))
	{
		if (!PG_ARGISNULL(2) && !PG_ARGISNULL(3) &&
			timestamp_cmp_internal(PG_GETARG_TIMESTAMPTZ(2), PG_GETARG_TIMESTAMPTZ(3)) > 0)
			return -1;
		which |= BY_TIME;
	}
	return which;
}

/*
 * The start of a call of either function below: its tuplestore, which
 * statement its arguments pick and its parameters, and then SPI as the
 * function's owner; false (nothing to read) when they pick none.
 */
static bool
begin_call(FunctionCallInfo fcinfo, int *which, Datum *args, char *nulls, WiSavedUser *saved)
{
	wi_init_srf(fcinfo);
	*which = narrowing(fcinfo, args, nulls);
	if (*which < 0)
		return false;

	/*
	 * A partition attached to job_history_packed since this transaction took
	 * its lock on it invalidates no plan of ours until invalidations are read,
	 * and taking a lock already held reads none: read them now, so that the
	 * plans below see every partition committed before this statement's
	 * snapshot (the packing moves rows into one only after it committed).
	 */
	AcceptInvalidationMessages();
	wi_become_owner(fcinfo, saved);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	return true;
}

static void
end_call(const WiSavedUser *saved)
{
	SPI_finish();
	wi_restore_user(saved);
}

/*
 * _packed_jobs(job_id bigint, external_ids text[], finished_from
 * timestamptz, finished_to timestamptz), all DEFAULT NULL: see the file's
 * header.  Read through a cursor, a thousand rows at a time, into the
 * call's tuplestore (which spills to disk past work_mem).
 */
Datum
webhook_ingest_packed_jobs(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr plans[lengthof(packed_jobs_sql)];
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			caller = GetUserId();
	Oid			admin = get_role_oid("webhook_ingest_admin", true);
	bool		sees_all = OidIsValid(admin) && has_privs_of_role(caller, admin);
	Oid			app = get_role_oid("webhook_ingest_enqueue", true);
	SourceSeen	seen[64];
	int			nseen = 0;
	Datum		args[6];
	char		nulls_in[6];
	int			which;
	WiSavedUser saved;
	Portal		cursor;

	/* Neither the admin role nor an app role (EXECUTE granted to some other role): no job at all. */
	if (!sees_all && !(OidIsValid(app) && has_privs_of_role(caller, app)))
	{
		wi_init_srf(fcinfo);
		return (Datum) 0;
	}
	if (!begin_call(fcinfo, &which, args, nulls_in, &saved))
		return (Datum) 0;
	wi_prepare_once(&plans[which], packed_jobs_sql[which], 6, packed_jobs_argtypes, false);
	cursor = SPI_cursor_open(NULL, plans[which], args, nulls_in, true);
	for (;;)
	{
		SPI_cursor_fetch(cursor, true, 1000);
		if (SPI_processed == 0)
			break;
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			HeapTuple	row = SPI_tuptable->vals[r];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			Datum		values[PACKED_JOBS_NATTS + 1];
			bool		nulls[PACKED_JOBS_NATTS + 1];

			for (int c = 0; c <= PACKED_JOBS_NATTS; c++)
				values[c] = SPI_getbinval(row, desc, c + 1, &nulls[c]);
			if (!sees_all)
			{
				if (!may_read(DatumGetInt32(values[4]), DatumGetTextPP(values[PACKED_JOBS_NATTS]), caller, seen,
							  &nseen))
					continue;
				app_columns_only(nulls);
			}
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
		SPI_freetuptable(SPI_tuptable);
	}
	SPI_cursor_close(cursor);
	end_call(&saved);
	return (Datum) 0;
}

/*
 * _packed_jobs_plan(job_id, external_ids, finished_from, finished_to):
 * EXPLAIN (COSTS OFF) of the statement _packed_jobs runs for these
 * arguments, planned for their values, a row (n, line) a line (none when
 * the call returns nothing without a statement).  For operators and the
 * plan tests.
 */
Datum
webhook_ingest_packed_jobs_plan(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Datum		args[6];
	char		nulls[6];
	int			which;
	WiSavedUser saved;

	if (!begin_call(fcinfo, &which, args, nulls, &saved))
		return (Datum) 0;
	if (SPI_execute_with_args(psprintf("EXPLAIN (COSTS OFF) %s", packed_jobs_sql[which]), 6, packed_jobs_argtypes,
							  args, nulls, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not explain the packed history's statement");
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		bool		isnull[2] = {false, false};
		Datum		values[2];

		values[0] = Int32GetDatum((int32) r + 1);
		values[1] = SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1, &isnull[1]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, isnull);
	}
	end_call(&saved);
	return (Datum) 0;
}
