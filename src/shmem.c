/*
 * shmem.c
 *		Shared state between the worker and every backend: where the worker's
 *		latch is, the wake-up that enqueue() arms and a transaction callback
 *		fires at commit (never on rollback), the worker's status and
 *		counters that the worker_status view reads, and the condition
 *		variable wait_for_job() sleeps on.  The per-source statistics have
 *		their own piece (stats.c), requested and set up from here.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "commands/dbcommands.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/condition_variable.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "webhook_ingest.h"

typedef struct WiShared
{
	slock_t		mutex;
	pid_t		worker_pid;		/* 0 when no worker runs */
	Latch	   *worker_latch;	/* the worker's PGPROC latch, in shared memory */
	Oid			database;
	TimestampTz started_at;
	char		state[64];
	int			in_flight;
	WiCounters	counters;
	ConditionVariable jobs_finished;	/* broadcast when jobs turned done or dead */
} WiShared;

PG_FUNCTION_INFO_V1(webhook_ingest_worker_status);
PG_FUNCTION_INFO_V1(webhook_ingest_wake_worker_at_commit);

static WiShared *wi_shared = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;
#if PG_VERSION_NUM >= 150000
static shmem_request_hook_type prev_shmem_request_hook = NULL;
#endif
static bool wake_at_commit = false;
static bool xact_callback_registered = false;

#if PG_VERSION_NUM >= 150000
static void
wi_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(sizeof(WiShared)));
	wi_stats_shmem_request();
}
#endif

static void
wi_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	wi_shared = ShmemInitStruct("webhook_ingest", sizeof(WiShared), &found);
	if (!found)
	{
		SpinLockInit(&wi_shared->mutex);
		wi_shared->worker_pid = 0;
		wi_shared->worker_latch = NULL;
		strlcpy(wi_shared->state, "not running", sizeof(wi_shared->state));
		ConditionVariableInit(&wi_shared->jobs_finished);
	}
	wi_stats_shmem_startup();
	LWLockRelease(AddinShmemInitLock);
}

/* Called from _PG_init in the postmaster. */
void
wi_shmem_init(void)
{
#if PG_VERSION_NUM >= 150000
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = wi_shmem_request;
#else
	RequestAddinShmemSpace(MAXALIGN(sizeof(WiShared)));
	wi_stats_shmem_request();
#endif
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = wi_shmem_startup;
}

static void
forget_worker(int code, Datum arg)
{
	SpinLockAcquire(&wi_shared->mutex);
	if (wi_shared->worker_pid == MyProcPid)
	{
		wi_shared->worker_pid = 0;
		wi_shared->worker_latch = NULL;
		strlcpy(wi_shared->state, "not running", sizeof(wi_shared->state));
		wi_shared->in_flight = 0;
	}
	SpinLockRelease(&wi_shared->mutex);
}

/* The worker announces itself; its entry is cleared when it exits. */
void
wi_shmem_register_worker(void)
{
	SpinLockAcquire(&wi_shared->mutex);
	wi_shared->worker_pid = MyProcPid;
	wi_shared->worker_latch = MyLatch;
	wi_shared->database = MyDatabaseId;
	wi_shared->started_at = GetCurrentTimestamp();
	memset(&wi_shared->counters, 0, sizeof(WiCounters));
	wi_shared->in_flight = 0;
	SpinLockRelease(&wi_shared->mutex);
	on_shmem_exit(forget_worker, (Datum) 0);
}

/* The worker publishes what it is doing; readers copy it under the spinlock. */
void
wi_shmem_publish(const char *state, int in_flight, const WiCounters *counters)
{
	SpinLockAcquire(&wi_shared->mutex);
	strlcpy(wi_shared->state, state, sizeof(wi_shared->state));
	wi_shared->in_flight = in_flight;
	memcpy(&wi_shared->counters, counters, sizeof(WiCounters));
	SpinLockRelease(&wi_shared->mutex);
}

/*
 * webhook_ingest.worker_status: one row from shared memory, no table read.
 */
Datum
webhook_ingest_worker_status(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Datum		values[14];
	bool		nulls[14] = {0};
	WiShared	copy;
	char	   *dbname;

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	SpinLockAcquire(&wi_shared->mutex);
	memcpy(&copy, wi_shared, sizeof(WiShared));
	SpinLockRelease(&wi_shared->mutex);

	values[0] = Int32GetDatum(copy.worker_pid);
	nulls[0] = copy.worker_pid == 0;
	dbname = copy.worker_pid != 0 ? get_database_name(copy.database) : NULL;
	values[1] = dbname ? CStringGetTextDatum(dbname) : (Datum) 0;
	nulls[1] = dbname == NULL;
	values[2] = CStringGetTextDatum(copy.state);
	values[3] = TimestampTzGetDatum(copy.started_at);
	nulls[3] = copy.worker_pid == 0;
	values[4] = Int32GetDatum(copy.in_flight);
	values[5] = Int64GetDatum(copy.counters.claimed);
	values[6] = Int64GetDatum(copy.counters.fetched);
	values[7] = Int64GetDatum(copy.counters.succeeded);
	values[8] = Int64GetDatum(copy.counters.retried);
	values[9] = Int64GetDatum(copy.counters.dead);
	values[10] = Int64GetDatum(copy.counters.handler_errors);
	values[11] = Int64GetDatum(copy.counters.bytes);
	values[12] = CStringGetTextDatum(copy.counters.last_error);
	nulls[12] = copy.counters.last_error[0] == '\0';
	values[13] = TimestampTzGetDatum(copy.counters.last_error_at);
	nulls[13] = copy.counters.last_error_at == 0;
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}

/* The worker: jobs turned done (with their done_lsn) or dead. */
void
wi_shmem_jobs_finished(void)
{
	ConditionVariableBroadcast(&wi_shared->jobs_finished);
}

/* wait_for_job(): what to sleep on. */
ConditionVariable *
wi_shmem_jobs_finished_cv(void)
{
	return &wi_shared->jobs_finished;
}

static void
wake_worker(void)
{
	Latch	   *latch;

	if (wi_shared == NULL)
		return;
	SpinLockAcquire(&wi_shared->mutex);
	latch = wi_shared->worker_latch;
	SpinLockRelease(&wi_shared->mutex);
	if (latch != NULL)
		SetLatch(latch);
}

static void
wake_at_end_of_xact(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			if (wake_at_commit)
				wake_worker();
			wake_at_commit = false;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			wake_at_commit = false;
			break;
		default:
			break;
	}
}

/* enqueue(): wake the worker when (and only if) this transaction commits. */
void
wi_wake_worker_at_commit(void)
{
	if (!xact_callback_registered)
	{
		RegisterXactCallback(wake_at_end_of_xact, NULL);
		xact_callback_registered = true;
	}
	wake_at_commit = true;
}

/* _wake_worker_at_commit(): retry() and friends make jobs due now. */
Datum
webhook_ingest_wake_worker_at_commit(PG_FUNCTION_ARGS)
{
	wi_wake_worker_at_commit();
	PG_RETURN_VOID();
}
