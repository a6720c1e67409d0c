/*
 * wait.c
 *		Replica read-your-writes: wait_for_job() on the primary sleeps until a
 *		job is done and its done_lsn known (after writing done_lsn the worker
 *		broadcasts the condition variable the job's id hashes to, so it wakes
 *		the waiters of the jobs it finished, not all of them), and the procedure wait_replayed()
 *		on a standby sleeps until WAL is replayed up to an LSN (and fails,
 *		retriably, when a promotion or a new timeline came first).  wait_for_job
 *		looks again with a fresh snapshot each time; wait_replayed holds no
 *		snapshot at all while it waits, since one could conflict with the
 *		very replay it waits for.  Both need READ COMMITTED.
 *
 *		wait_for_job is not SECURITY DEFINER: it reads the job as its
 *		caller, so the caller's privileges and row security on jobs decide
 *		what it may learn (an app role: only jobs of sources it may enqueue
 *		into; any other job "does not exist").  Only the check that this
 *		transaction did not write the job itself, which needs xmin, runs as
 *		the function's owner, and only for a job the caller can see.
 *
 * IDENTIFICATION
 *		src/intake/wait.c
 */
#include "postgres.h"

#include "access/timeline.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "access/xlogrecovery.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/condition_variable.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/pg_lsn.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "webhook_ingest.h"
#include "access.h"
#include "shmem.h"
#include "validate.h"
#include "wait_event.h"

PG_FUNCTION_INFO_V1(webhook_ingest_wait_for_job);
PG_FUNCTION_INFO_V1(webhook_ingest_wait_replayed);

#ifndef LSN_FORMAT_ARGS			/* before PostgreSQL 14 */
#define LSN_FORMAT_ARGS(lsn) (uint32) ((lsn) >> 32), (uint32) (lsn)
#endif

/* Longest single sleep: a cancel or a promotion is noticed this soon. */
#define WI_WAIT_RECHECK_MS	1000

static TimestampTz
deadline_of(FunctionCallInfo fcinfo, int argno)
{
	Interval   *timeout;
	double		us;

	wi_check_not_null(PG_ARGISNULL(argno), "timeout");
	timeout = PG_GETARG_INTERVAL_P(argno);
	/* In double: the int64 sum overflows for an interval of 2^63 us or more. */
	us = (double) timeout->time + (double) timeout->day * USECS_PER_DAY +
		(double) timeout->month * DAYS_PER_MONTH * USECS_PER_DAY;
	if (us < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("timeout must not be negative")));
	us = Min(us, (double) 365 * USECS_PER_DAY);
	return GetCurrentTimestamp() + (int64) us;
}

static void
refuse_transaction_snapshot(const char *function)
{
	if (IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s cannot be used in a REPEATABLE READ or SERIALIZABLE transaction", function),
				 errdetail("Such a transaction would not see what it waited for."),
				 errhint("Call it in READ COMMITTED, and read in a later statement.")));
}

static long
ms_until(TimestampTz deadline)
{
	long		ms = (long) ((deadline - GetCurrentTimestamp()) / 1000);

	return Max(ms, 0);
}

/*
 * Did this transaction write the job's current version?  Then the worker
 * cannot see it before we commit, and waiting is pointless.  (It cannot
 * become ours while we wait: we write nothing meanwhile.)  As the owner:
 * the caller may not read xmin.
 */
typedef void (*RowReader) (HeapTuple row, TupleDesc desc, void *arg);
static bool run_released(const char *sql, Datum *args, RowReader read, void *arg);

static void
read_own_write(HeapTuple row, TupleDesc desc, void *arg)
{
	bool		isnull;

	/* (inside the subtransaction: our own writes are those of its parent) */
	*(bool *) arg = TransactionIdIsCurrentTransactionId(DatumGetTransactionId(SPI_getbinval(row, desc, 1, &isnull)));
}

static void
refuse_own_write(FunctionCallInfo fcinfo, Datum *args, int64 job_id)
{
	/* The queue is the only table a transaction writes a job into. */
	const char *sql = "SELECT xmin FROM webhook_ingest.queue WHERE id OPERATOR(pg_catalog.=) $1";
	WiSavedUser caller;
	bool		ours = false;

	wi_become_owner(fcinfo, &caller);
	(void) run_released(sql, args, read_own_write, &ours);
	wi_restore_user(&caller);
	if (ours)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("job %lld was written by this transaction", (long long) job_id),
				 errdetail("The worker sees the job only once this transaction commits."),
				 errhint("Commit first, then call wait_for_job().")));
}

/*
 * Run a one-row query (planned afresh: partitions come and go between two
 * runs) in a subtransaction rolled back at once, so that the locks it takes
 * go with it: a waiter holds none on the tables under the jobs view (every
 * partition of the history) or on the queue while it sleeps, and never keeps
 * the worker from dropping a partition or anyone from a stronger lock.
 * read() copies what the caller needs from the row, in the caller's memory
 * context; false when there is no row.
 */
static bool
run_released(const char *sql, Datum *args, RowReader read, void *arg)
{
	MemoryContext caller = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	Oid			types[1] = {INT8OID};
	bool		found = false;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(caller);
	PG_TRY();
	{
		/* Not read-only: each execution takes a new snapshot. */
		if (SPI_execute_with_args(sql, 1, types, args, NULL, false, 1) != SPI_OK_SELECT)
			elog(ERROR, "could not look up job");
		found = SPI_processed > 0;
		if (found)
			read(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, arg);
		SPI_freetuptable(SPI_tuptable);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(caller);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(caller);
		CurrentResourceOwner = owner;
		ReThrowError(edata);
	}
	PG_END_TRY();
	RollbackAndReleaseCurrentSubTransaction();
	MemoryContextSwitchTo(caller);
	CurrentResourceOwner = owner;
	return found;
}

typedef struct JobState
{
	char	   *state;
	bool		has_lsn;
} JobState;

static void
read_job_state(HeapTuple row, TupleDesc desc, void *arg)
{
	JobState   *js = (JobState *) arg;
	bool		isnull;

	js->state = SPI_getvalue(row, desc, 1);
	js->has_lsn = DatumGetBool(SPI_getbinval(row, desc, 2, &isnull));
}

/*
 * wait_for_job(job_id bigint, timeout interval) returns boolean
 */
Datum
webhook_ingest_wait_for_job(PG_FUNCTION_ARGS)
{
	int64		job_id;
	TimestampTz deadline;
	Datum		args[1];
	ConditionVariable *cv;
	bool		result = false;
	bool		first = true;
	uint32		wait_event;

	wi_check_not_null(PG_ARGISNULL(0), "job_id");
	job_id = PG_GETARG_INT64(0);
	cv = wi_shmem_job_cv(job_id);
	deadline = deadline_of(fcinfo, 1);
	refuse_transaction_snapshot("wait_for_job()");
	/* Registered (17+) before any sleep is prepared: it may take a lock. */
	wait_event = wi_wait_event(WI_WAIT_FOR_JOB);
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("wait_for_job() runs on the primary"),
				 errhint("On a standby, call wait_replayed() with the job's done_lsn.")));

	args[0] = Int64GetDatum(job_id);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");

	for (;;)
	{
		JobState	js = {NULL, false};
		char	   *state;
		bool		has_lsn;
		long		ms;

		/* As the caller: only the columns webhook_ingest_enqueue may read. */
		if (!run_released("SELECT state::pg_catalog.text, done_lsn IS NOT NULL FROM webhook_ingest.jobs "
						  "WHERE id OPERATOR(pg_catalog.=) $1", args, read_job_state, &js))
			ereport(ERROR,
					(errcode(ERRCODE_NO_DATA_FOUND),
					 errmsg("job %lld does not exist", (long long) job_id),
					 errhint("Finished jobs are removed after webhook_ingest.retention.")));
		state = js.state;
		has_lsn = js.has_lsn;
		if (first)
		{
			refuse_own_write(fcinfo, args, job_id);
			first = false;
		}
		if (strcmp(state, "done") == 0 && has_lsn)
		{
			result = true;
			break;
		}
		if (strcmp(state, "dead") == 0 || strcmp(state, "cancelled") == 0)
			break;
		ms = ms_until(deadline);
		if (ms == 0)
			break;
		pfree(state);
		/*
		 * Prepared only now: the lookup's subtransaction, rolled back, would
		 * have cancelled it.  A wake-up between the lookup and here is
		 * caught by the next recheck (WI_WAIT_RECHECK_MS).
		 */
		ConditionVariablePrepareToSleep(cv);
		(void) ConditionVariableTimedSleep(cv, Min(ms, WI_WAIT_RECHECK_MS), wait_event);
	}
	ConditionVariableCancelSleep();
	SPI_finish();
	PG_RETURN_BOOL(result);
}

/*
 * How far WAL of the timeline the wait began on (start_tli) is replayed here.
 * A standby that follows a new primary replays another timeline, which
 * shares start_tli's WAL only up to the point where it branched off: the
 * old timeline's WAL past that point was never replayed here, and never will
 * be (a standby cannot follow a new timeline it has replayed past the branch
 * point), though the new timeline's LSNs pass it.  *switched says replay
 * left start_tli, *branched where (0: start_tli is not in the new
 * timeline's history at all, so nothing of it counts).
 */
static XLogRecPtr
replayed_on(TimeLineID start_tli, bool *switched, XLogRecPtr *branched)
{
	TimeLineID	tli;
	XLogRecPtr	reached = GetXLogReplayRecPtr(&tli);
	List	   *history;
	ListCell   *lc;

	*switched = tli != start_tli;
	*branched = 0;
	if (!*switched)
		return reached;
	history = readTimeLineHistory(tli);
	foreach(lc, history)
	{
		TimeLineHistoryEntry *e = (TimeLineHistoryEntry *) lfirst(lc);

		if (e->tli == start_tli)
			*branched = e->end;
	}
	list_free_deep(history);
	return Min(reached, *branched);
}

/* The target's WAL is not on this server's history, or will not be replayed. */
static void
raise_switched(XLogRecPtr target, XLogRecPtr reached, TimeLineID start_tli, bool promoted)
{
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 promoted ?
			 errmsg("recovery ended before WAL replay reached %X/%X", LSN_FORMAT_ARGS(target)) :
			 errmsg("WAL replay switched to a new timeline before reaching %X/%X", LSN_FORMAT_ARGS(target)),
			 errdetail("Timeline %u was replayed up to %X/%X; WAL past that was written by a primary this server no longer follows, and may have been lost in a failover.",
					   start_tli, LSN_FORMAT_ARGS(reached)),
			 errhint("Read the job's done_lsn again from the current primary, and wait for that.")));
}

/*
 * CALL wait_replayed(lsn pg_lsn, timeout interval): returns once replayed,
 * raises query_canceled when the timeout passes, and serialization_failure
 * (retriable) when a failover came between: this standby was promoted, or
 * follows a new primary on a new timeline, before it replayed the target.
 * LSNs of the new timeline passing the target mean nothing then: the WAL at
 * the target (a commit the old primary acknowledged under asynchronous
 * replication) may be gone.  A target in the history both timelines share
 * still counts once replayed.
 *
 * A procedure without output, not a function: a function runs inside a
 * query, whose snapshot stays registered for the whole wait (so does the
 * snapshot a CALL that returns a row keeps for it).  On a standby, a cleanup
 * record ahead of the target that conflicts with that snapshot stops replay
 * until max_standby_streaming_delay cancels the waiter - the wait would
 * block what it waits for.  CALL's own snapshot (it evaluated the
 * arguments) is dropped here; any other means the caller holds one.
 */
Datum
webhook_ingest_wait_replayed(PG_FUNCTION_ARGS)
{
	XLogRecPtr	target;
	TimestampTz deadline;
	long		nap_ms = 1;
	bool		snapshot_held;
	bool		standby;
	TimeLineID	start_tli = 0;

	wi_check_not_null(PG_ARGISNULL(0), "lsn");
	target = PG_GETARG_LSN(0);
	deadline = deadline_of(fcinfo, 1);
	refuse_transaction_snapshot("wait_replayed()");

	if (ActiveSnapshotSet())
		PopActiveSnapshot();
	InvalidateCatalogSnapshot();
	snapshot_held = HaveRegisteredOrActiveSnapshot();
	if (snapshot_held)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("wait_replayed() must be called on its own"),
				 errdetail("A snapshot held while waiting could stop the replay it waits for."),
				 errhint("CALL it as a statement of its own, not from a function.")));

	standby = RecoveryInProgress();
	if (standby)
		(void) GetXLogReplayRecPtr(&start_tli);

	for (;;)
	{
		XLogRecPtr	reached;
		XLogRecPtr	branched = 0;
		bool		switched = false;
		bool		recovering = RecoveryInProgress();
		long		ms;

		if (standby)
			/* After a promotion: what was replayed before it. */
			reached = replayed_on(start_tli, &switched, &branched);
		else
			reached = GetFlushRecPtr(NULL);
		if (reached >= target)
			PG_RETURN_VOID();
		if (standby && (!recovering || (switched && target > branched)))
			raise_switched(target, reached, start_tli, !recovering);
		ms = ms_until(deadline);
		if (ms == 0)
			ereport(ERROR,
					(errcode(ERRCODE_QUERY_CANCELED),
					 errmsg("timed out waiting for WAL replay to reach %X/%X", LSN_FORMAT_ARGS(target)),
					 errdetail("%s %X/%X.", standby ? "Replayed up to" : "Flushed up to",
							   LSN_FORMAT_ARGS(reached))));
		/* No signal marks replay progress: poll, 1 ms at first, then less often. */
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 Min(ms, nap_ms), wi_wait_event(WI_WAIT_REPLAYED));
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		nap_ms = Min(nap_ms * 2, 16);
	}
}
