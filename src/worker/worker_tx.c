/*
 * worker_tx.c
 *		The worker's transactions: each begins with SPI and a snapshot and
 *		ends with a commit and a statistics report.  Its statements resolve
 *		only pg_catalog objects (the worker's search_path is pg_catalog,
 *		pg_temp) and wait at most webhook_ingest.lock_timeout for a lock;
 *		a statement that waited longer is given up for this turn
 *		(abort_if_lock_timeout), never left to stall the worker.  Also
 *		the two ways a statement is prepared and run (see spi_plans.c).
 *
 * IDENTIFICATION
 *		src/worker/worker_tx.c
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "pgstat.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/elog.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "webhook_ingest.h"
#include "settings.h"
#include "spi_plans.h"
#include "worker_tx.h"

#define WI_LOCK_LOG_EVERY_S	10

/* Where the caller allocated before wi_begin_tx: wi_end_tx returns there. */
static MemoryContext tx_caller = NULL;

void
wi_begin_tx(void)
{
	char		lock_timeout[32];

	tx_caller = CurrentMemoryContext;
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	snprintf(lock_timeout, sizeof(lock_timeout), "%dms", wi_lock_timeout_ms);
	(void) set_config_option("lock_timeout", lock_timeout, PGC_SUSET, PGC_S_SESSION, GUC_ACTION_LOCAL,
							 true, 0, false);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	PushActiveSnapshot(GetTransactionSnapshot());
}

void
wi_end_tx(void)
{
	PopActiveSnapshot();
	SPI_finish();
	CommitTransactionCommand();
	pgstat_report_stat(false);
	pgstat_report_activity(STATE_IDLE, NULL);
	/* Not TopMemoryContext, where the commit leaves us: the loop's pass context. */
	if (tx_caller != NULL)
		MemoryContextSwitchTo(tx_caller);
}

/*
 * In a PG_CATCH block of a worker transaction: if the error is a lock
 * timeout, abort the transaction, log it and return true (the caller tries
 * again on a later turn); otherwise return false and the caller re-throws.
 * keep is a context that survives the abort.
 */
static bool
abort_if_lock_timeout(MemoryContext keep, const char *activity)
{
	static TimestampTz last_logged = 0;
	TimestampTz now;
	ErrorData  *e;

	MemoryContextSwitchTo(keep);
	e = CopyErrorData();
	if (e->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE)
	{
		FreeErrorData(e);
		return false;
	}
	FlushErrorState();
	AbortCurrentTransaction();
	MemoryContextSwitchTo(keep);
	pgstat_report_activity(STATE_IDLE, NULL);
	/* At most one LOG line in WI_LOCK_LOG_EVERY_S: a lock held for minutes must not flood the log. */
	now = GetCurrentTimestamp();
	ereport(TimestampDifferenceExceeds(last_logged, now, WI_LOCK_LOG_EVERY_S * 1000) ? LOG : DEBUG1,
			(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
			 errmsg("webhook_ingest worker: %s waited longer than webhook_ingest.lock_timeout; trying again later",
					activity),
			 errdetail("%s", e->message)));
	if (TimestampDifferenceExceeds(last_logged, now, WI_LOCK_LOG_EVERY_S * 1000))
		last_logged = now;
	FreeErrorData(e);
	return true;
}

/* An int8[] of ids, for a statement's parameter. */
Datum
wi_id_array(const int64 *ids, int n)
{
	Datum	   *elems = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		elems[i] = Int64GetDatum(ids[i]);
	return PointerGetDatum(construct_array(elems, n, INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

/* A text[] of strings, for a statement's parameter. */
Datum
wi_text_array(const char **values, int n)
{
	Datum	   *elems = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		elems[i] = CStringGetTextDatum(values[i]);
	return PointerGetDatum(construct_array(elems, n, TEXTOID, -1, false, TYPALIGN_INT));
}

/* A timestamptz[], for a statement's parameter. */
Datum
wi_timestamptz_array(const TimestampTz *values, int n)
{
	Datum	   *elems = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		elems[i] = TimestampTzGetDatum(values[i]);
	return PointerGetDatum(construct_array(elems, n, TIMESTAMPTZOID, sizeof(TimestampTz), FLOAT8PASSBYVAL,
										   TYPALIGN_DOUBLE));
}

/* An int4[], for a statement's parameter. */
Datum
wi_int4_array(const int *values, int n)
{
	Datum	   *elems = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		elems[i] = Int32GetDatum(values[i]);
	return PointerGetDatum(construct_array(elems, n, INT4OID, 4, true, TYPALIGN_INT));
}

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
int
wi_run_cached(SPIPlanPtr *plan, const char *sql, int nargs, Oid *types, Datum *args, const char *nulls,
			  bool read_only)
{
	return run_prepared(plan, sql, nargs, types, args, nulls, read_only, false);
}

/*
 * A statement run once per batch or housekeeping round: planned at each
 * execution, with the parameters' values and the table as it is now.
 */
int
wi_run_replanned(SPIPlanPtr *plan, const char *sql, int nargs, Oid *types, Datum *args, const char *nulls)
{
	return run_prepared(plan, sql, nargs, types, args, nulls, false, true);
}

/*
 * Run body(arg) in a transaction of its own.  Returns false, with the
 * transaction rolled back, when it met a lock held longer than
 * webhook_ingest.lock_timeout: the caller tries again on a later turn.
 * Any other error propagates.
 */
bool
wi_in_tx(const char *activity, WiTxBody body, void *arg)
{
	MemoryContext caller = CurrentMemoryContext;
	volatile bool done = false;

	PG_TRY();
	{
		wi_begin_tx();
		pgstat_report_activity(STATE_RUNNING, activity);
		body(arg);
		wi_end_tx();
		done = true;
	}
	PG_CATCH();
	{
		if (!abort_if_lock_timeout(caller, activity))
			PG_RE_THROW();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(caller);
	return done;
}

typedef struct AloneUpdate
{
	const char *activity;
	SPIPlanPtr *plan;
	const char *sql;
	int			nargs;
	Oid		   *types;
	Datum	   *args;
	int			changed;
} AloneUpdate;

static void
run_update(void *arg)
{
	AloneUpdate *u = (AloneUpdate *) arg;
	int			rc = wi_run_replanned(u->plan, u->sql, u->nargs, u->types, u->args, NULL);

	if (rc != SPI_OK_UPDATE && rc != SPI_OK_INSERT)
		elog(ERROR, "could not run \"%s\"", u->activity);
	u->changed = (int) SPI_processed;
}

/*
 * A housekeeping UPDATE (or INSERT) in a short transaction of its own,
 * replanned each time; returns how many rows it changed (0 when it met a lock held longer
 * than webhook_ingest.lock_timeout: it runs again next round).
 */
int
wi_run_alone(const char *activity, SPIPlanPtr *plan, const char *sql, int nargs, Oid *types, Datum *args)
{
	AloneUpdate u = {activity, plan, sql, nargs, types, args, 0};

	return wi_in_tx(activity, run_update, &u) ? u.changed : 0;
}
