/*
 * shmem.c
 *		Shared state between the launcher, the workers and every backend: one
 *		slot per database (keyed by database OID: its fetcher's and its apply
 *		workers' latches, status and counters, and the handles of the apply
 *		workers' hand-off queues), the condition variables wait_for_job() sleeps on (a
 *		fixed table of buckets keyed by database and job id, so that a worker
 *		finishing jobs wakes only the waiters of those jobs, give or take a
 *		collision), the launcher's latch, the databases the launcher is asked to look at, the
 *		databases blocked while DROP/RENAME/TEMPLATE runs (utility.c), the
 *		databases left without a worker by webhook_ingest.max_databases, and
 *		the wake-ups armed by enqueue() and fired at commit (never on
 *		rollback).  The per-source statistics have their own piece
 *		(stats.c), requested and set up from here.
 *
 * IDENTIFICATION
 *		src/base/shmem.c
 */
#include "postgres.h"

#include <signal.h>

#include "access/htup_details.h"
#include "access/xact.h"
#include "commands/dbcommands.h"
#include "common/hashfn.h"
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
#include "compat.h"
#include "settings.h"
#include "shmem.h"
#include "stats.h"

PG_FUNCTION_INFO_V1(webhook_ingest_worker_status);
PG_FUNCTION_INFO_V1(webhook_ingest_worker_status_all);
PG_FUNCTION_INFO_V1(webhook_ingest_wake_worker_at_commit);
PG_FUNCTION_INFO_V1(webhook_ingest_scheduler_state);
PG_FUNCTION_INFO_V1(webhook_ingest_job_finished_at_commit);

WiShared   *wi_shared = NULL;
static WiSlot *my_slot = NULL;	/* in a fetcher or an apply worker: its database's slot */
static WiApplierSlot *my_applier = NULL;	/* in an apply worker: its own */
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static bool wake_at_commit = false;
static bool xact_callback_registered = false;

/* Jobs this transaction finished outside the worker (cancel()): their waiters wake at commit. */
#define WI_MAX_FINISHED_HERE	64
static int64 finished_here[WI_MAX_FINISHED_HERE];
static int	nfinished_here = 0;
static bool finished_here_overflow = false;

static Size
shared_size(void)
{
	return add_size(offsetof(WiShared, slots), mul_size(sizeof(WiSlot), wi_max_databases));
}

static void
wi_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(shared_size()));
	wi_stats_shmem_request();
}

static void
init_shared(void)
{
	memset(wi_shared, 0, shared_size());
	SpinLockInit(&wi_shared->mutex);
	wi_shared->nslots = wi_max_databases;
	ConditionVariableInit(&wi_shared->slot_changed);
	for (int i = 0; i < WI_WAIT_BUCKETS; i++)
		ConditionVariableInit(&wi_shared->job_finished[i]);
}

static void
wi_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	wi_shared = ShmemInitStruct("webhook_ingest", shared_size(), &found);
	if (!found)
		init_shared();
	wi_stats_shmem_startup();
	LWLockRelease(AddinShmemInitLock);
}

/* Called from _PG_init in the postmaster. */
void
wi_shmem_init(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = wi_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = wi_shmem_startup;
}

/* The slot of a database, or NULL; the caller holds the mutex. */
WiSlot *
wi_slot_of(Oid database)
{
	for (int i = 0; i < wi_shared->nslots; i++)
		if (wi_shared->slots[i].database == database)
			return &wi_shared->slots[i];
	return NULL;
}

/* Does a process of this slot run, or is one starting?  The caller holds the mutex. */
bool
wi_slot_has_processes(const WiSlot *slot)
{
	if (slot->worker_pid != 0 || slot->starting)
		return true;
	for (int i = 0; i < WI_MAX_APPLIERS; i++)
		if (slot->appliers[i].pid != 0 || slot->appliers[i].starting)
			return true;
	return false;
}

static void
tell_launcher_we_left(void)
{
	ConditionVariableBroadcast(&wi_shared->slot_changed);
	if (wi_shared->launcher_latch)
		SetLatch(wi_shared->launcher_latch);
}

static void
forget_worker(int code, Datum arg)
{
	SpinLockAcquire(&wi_shared->mutex);
	my_slot->worker_pid = 0;
	my_slot->worker_latch = NULL;
	my_slot->fetcher_ready = false;
	my_slot->in_flight = 0;
	my_slot->applying = 0;
	SpinLockRelease(&wi_shared->mutex);
	tell_launcher_we_left();
}

static void
forget_applier(int code, Datum arg)
{
	Latch	   *fetcher;

	SpinLockAcquire(&wi_shared->mutex);
	my_applier->pid = 0;
	my_applier->latch = NULL;
	my_applier->in_batch = 0;
	my_applier->queues = DSM_HANDLE_INVALID;
	fetcher = my_slot->worker_latch;
	SpinLockRelease(&wi_shared->mutex);
	if (fetcher)
		SetLatch(fetcher);
	tell_launcher_we_left();
}

/*
 * The worker takes the slot the launcher reserved for its database.  False
 * when there is none (a launcher of before a restart) or it is to stop.
 */
bool
wi_shmem_register_worker(void)
{
	WiSlot	   *slot;
	bool		ok;

	SpinLockAcquire(&wi_shared->mutex);
	slot = wi_slot_of(MyDatabaseId);
	ok = slot != NULL && slot->worker_pid == 0 && !slot->stop_requested;
	if (ok)
	{
		slot->worker_pid = MyProcPid;
		slot->worker_latch = MyLatch;
		slot->starting = false;
		slot->exit_reason = WI_EXIT_UNEXPECTED;
		slot->started_at = GetCurrentTimestamp();
		memset(&slot->counters, 0, sizeof(WiCounters));
		slot->in_flight = 0;
		slot->applying = 0;
		slot->nshown = 0;
		slot->alone[0] = '\0';
		strlcpy(slot->state, "starting", sizeof(slot->state));
	}
	else if (slot != NULL && slot->worker_pid == 0)
		slot->starting = false;
	SpinLockRelease(&wi_shared->mutex);
	if (!ok)
	{
		ConditionVariableBroadcast(&wi_shared->slot_changed);
		return false;
	}
	my_slot = slot;
	on_shmem_exit(forget_worker, (Datum) 0);
	return true;
}

/*
 * An apply worker takes its place in its database's slot (the launcher
 * reserved the slot for the fetcher).  False when there is none, the place
 * is taken, or the database's processes are to stop.
 */
bool
wi_shmem_register_applier(int index)
{
	WiSlot	   *slot;
	WiApplierSlot *a = NULL;
	bool		ok;

	SpinLockAcquire(&wi_shared->mutex);
	slot = wi_slot_of(MyDatabaseId);
	if (slot != NULL && index >= 0 && index < WI_MAX_APPLIERS)
		a = &slot->appliers[index];
	ok = a != NULL && a->pid == 0 && !slot->stop_requested;
	if (ok)
	{
		a->pid = MyProcPid;
		a->latch = MyLatch;
		a->starting = false;
		a->exit_reason = WI_EXIT_UNEXPECTED;
		a->started_at = GetCurrentTimestamp();
		a->queues = DSM_HANDLE_INVALID;
		a->handling_job = 0;
		a->in_batch = 0;
		memset(&a->counters, 0, sizeof(WiCounters));
		strlcpy(a->state, "starting", sizeof(a->state));
	}
	else if (a != NULL && a->pid == 0)
		a->starting = false;
	SpinLockRelease(&wi_shared->mutex);
	if (!ok)
	{
		ConditionVariableBroadcast(&wi_shared->slot_changed);
		return false;
	}
	my_slot = slot;
	my_applier = a;
	on_shmem_exit(forget_applier, (Datum) 0);
	return true;
}

/* Has the launcher or a DROP DATABASE asked this database's processes to stop? */
bool
wi_shmem_stop_requested(void)
{
	bool		stop;

	SpinLockAcquire(&wi_shared->mutex);
	stop = my_slot->stop_requested;
	SpinLockRelease(&wi_shared->mutex);
	return stop;
}

/* The fetcher or an apply worker says why it exits, for the launcher. */
void
wi_shmem_set_exit_reason(WiExitReason reason, const char *state)
{
	SpinLockAcquire(&wi_shared->mutex);
	if (my_applier)
	{
		my_applier->exit_reason = reason;
		strlcpy(my_applier->state, state, sizeof(my_applier->state));
	}
	else
	{
		my_slot->exit_reason = reason;
		strlcpy(my_slot->state, state, sizeof(my_slot->state));
		my_slot->nshown = 0;
	}
	SpinLockRelease(&wi_shared->mutex);
}

/* Why this process is exiting, as set so far (WI_EXIT_UNEXPECTED unless said otherwise). */
WiExitReason
wi_shmem_exit_reason(void)
{
	WiExitReason reason;

	SpinLockAcquire(&wi_shared->mutex);
	reason = my_applier ? my_applier->exit_reason : my_slot->exit_reason;
	SpinLockRelease(&wi_shared->mutex);
	return reason;
}

/* The fetcher found the extension ready (true), or is about to leave (false). */
void
wi_shmem_set_fetcher_ready(bool ready)
{
	Latch	   *launcher;

	SpinLockAcquire(&wi_shared->mutex);
	my_slot->fetcher_ready = ready;
	launcher = wi_shared->launcher_latch;
	SpinLockRelease(&wi_shared->mutex);
	if (launcher)
		SetLatch(launcher);
}

/*
 * An apply worker publishes the segment of its hand-off queues for the
 * fetcher (DSM_HANDLE_INVALID: none) and wakes it.
 */
void
wi_shmem_publish_queues(dsm_handle queues)
{
	Latch	   *fetcher;

	SpinLockAcquire(&wi_shared->mutex);
	my_applier->queues = queues;
	my_applier->queues_generation++;
	fetcher = my_slot->worker_latch;
	SpinLockRelease(&wi_shared->mutex);
	if (fetcher)
		SetLatch(fetcher);
}

/*
 * The fetcher: apply worker index's published queues, its pid, why it last
 * exited and the job whose handler it ran (0: none).  Returns the
 * generation of the queues (changes when a new segment is published).
 */
uint32
wi_shmem_applier(int index, dsm_handle *queues, pid_t *pid, WiExitReason *reason, int64 *handling_job)
{
	WiApplierSlot *a = &my_slot->appliers[index];
	uint32		generation;

	SpinLockAcquire(&wi_shared->mutex);
	*queues = a->queues;
	*pid = a->pid;
	*reason = a->exit_reason;
	*handling_job = a->handling_job;
	generation = a->queues_generation;
	SpinLockRelease(&wi_shared->mutex);
	return generation;
}

/* An apply worker: the job whose handler it calls now (0: none). */
void
wi_shmem_set_handling(int64 job_id)
{
	SpinLockAcquire(&wi_shared->mutex);
	my_applier->handling_job = job_id;
	SpinLockRelease(&wi_shared->mutex);
}

/* An apply worker publishes what it is doing. */
void
wi_shmem_publish_applier(const char *state, int in_batch, const WiCounters *counters)
{
	SpinLockAcquire(&wi_shared->mutex);
	strlcpy(my_applier->state, state, sizeof(my_applier->state));
	my_applier->in_batch = in_batch;
	memcpy(&my_applier->counters, counters, sizeof(WiCounters));
	SpinLockRelease(&wi_shared->mutex);
}

/* The fetcher publishes the storage horizon its storage round found; apply workers write by it. */
void
wi_shmem_publish_horizon(TimestampTz history_until, TimestampTz kept_until)
{
	SpinLockAcquire(&wi_shared->mutex);
	my_slot->history_until = history_until;
	my_slot->kept_until = kept_until;
	SpinLockRelease(&wi_shared->mutex);
}

void
wi_shmem_horizon(TimestampTz *history_until, TimestampTz *kept_until)
{
	SpinLockAcquire(&wi_shared->mutex);
	*history_until = my_slot->history_until;
	*kept_until = my_slot->kept_until;
	SpinLockRelease(&wi_shared->mutex);
}

/* The fetcher publishes which handlers it completes alone after a crash, and why. */
void
wi_shmem_publish_alone(const char *text)
{
	SpinLockAcquire(&wi_shared->mutex);
	strlcpy(my_slot->alone, text, sizeof(my_slot->alone));
	SpinLockRelease(&wi_shared->mutex);
}

/*
 * The fetcher publishes what it is doing: in_flight jobs claimed and not
 * completed, of which applying fetched and waiting for or in an apply
 * worker.  Readers copy it under the spinlock.
 */
void
wi_shmem_publish(const char *state, int in_flight, int applying, const WiCounters *counters)
{
	SpinLockAcquire(&wi_shared->mutex);
	strlcpy(my_slot->state, state, sizeof(my_slot->state));
	my_slot->in_flight = in_flight;
	my_slot->applying = applying;
	memcpy(&my_slot->counters, counters, sizeof(WiCounters));
	SpinLockRelease(&wi_shared->mutex);
}

/*
 * The scheduler's state of the busiest and the throttled sources, for
 * queue_stats; at most every WI_PUBLISH_SOURCES_MS (the copy is a few kB,
 * under the spinlock every backend shares), and at once when a throttle
 * begins or is ended by a change of its source.
 */
#define WI_PUBLISH_SOURCES_MS	100

void
wi_shmem_publish_sources(void)
{
	static TimestampTz last = 0;
	TimestampTz now = GetCurrentTimestamp();
	WiSourceShown shown[WI_SHOWN_SOURCES];
	int			n;

	if (!TimestampDifferenceExceeds(last, now, WI_PUBLISH_SOURCES_MS) && !wi_sched_throttles_changed())
		return;
	last = now;
	n = wi_sched_shown(shown, WI_SHOWN_SOURCES);

	SpinLockAcquire(&wi_shared->mutex);
	memcpy(my_slot->shown, shown, sizeof(WiSourceShown) * n);
	my_slot->nshown = n;
	SpinLockRelease(&wi_shared->mutex);
}

/* One row of worker_status: the fetcher of a database, or one of its apply workers. */
typedef struct WorkerRow
{
	Oid			database;
	const char *role;			/* "fetcher", "applier" */
	int			applier;		/* the apply worker's number; -1: the fetcher */
	pid_t		pid;
	const char *state;
	TimestampTz started_at;
	int			in_flight;
	int			applying;
	const WiCounters *counters;
	const char *alone;
} WorkerRow;

#define WI_STATUS_COLUMNS	22

/*
 * A worker_status tuple of desc's shape: the 16 columns of 0.7.0 to 0.9.0
 * (14 before 0.7.0), then role, applier, applying, applied, handler_ms and
 * alone_handlers from 0.10.0.
 */
static HeapTuple
status_tuple(TupleDesc desc, const WorkerRow *r)
{
	Datum		values[WI_STATUS_COLUMNS];
	bool		nulls[WI_STATUS_COLUMNS] = {0};
	char	   *dbname = get_database_name(r->database);
	const WiCounters *c = r->counters;

	values[0] = Int32GetDatum(r->pid);
	nulls[0] = r->pid == 0;
	values[1] = dbname ? CStringGetTextDatum(dbname) : (Datum) 0;
	nulls[1] = dbname == NULL;
	values[2] = CStringGetTextDatum(r->state[0] ? r->state : "not running");
	values[3] = TimestampTzGetDatum(r->started_at);
	nulls[3] = r->pid == 0;
	values[4] = Int32GetDatum(r->in_flight);
	values[5] = Int64GetDatum(c->claimed);
	values[6] = Int64GetDatum(c->fetched);
	values[7] = Int64GetDatum(c->succeeded);
	values[8] = Int64GetDatum(c->retried);
	values[9] = Int64GetDatum(c->dead);
	values[10] = Int64GetDatum(c->handler_errors);
	values[11] = Int64GetDatum(c->bytes);
	values[12] = CStringGetTextDatum(c->last_error);
	nulls[12] = c->last_error[0] == '\0';
	values[13] = TimestampTzGetDatum(c->last_error_at);
	nulls[13] = c->last_error_at == 0;
	values[14] = Int64GetDatum(c->connections_opened);
	values[15] = Int64GetDatum(c->tls_connections_opened);
	values[16] = CStringGetTextDatum(r->role);
	values[17] = Int32GetDatum(r->applier);
	nulls[17] = r->applier < 0;
	values[18] = Int32GetDatum(r->applying);
	values[19] = Int64GetDatum(c->applied);
	values[20] = Float8GetDatum((double) c->handler_us / 1000.0);
	values[21] = CStringGetTextDatum(r->alone ? r->alone : "");
	nulls[21] = r->alone == NULL || r->alone[0] == '\0';
	Assert(desc->natts <= lengthof(values));
	return heap_form_tuple(desc, values, nulls);
}

/* The fetcher's row of a copy of a slot. */
static HeapTuple
fetcher_tuple(TupleDesc desc, const WiSlot *copy)
{
	WorkerRow	r = {copy->database, "fetcher", -1, copy->worker_pid, copy->state, copy->started_at,
	copy->in_flight, copy->applying, &copy->counters, copy->alone};

	return status_tuple(desc, &r);
}

/* A copy of this database's slot (palloc'd), or an empty one. */
static WiSlot *
copy_own_slot(void)
{
	WiSlot	   *copy = palloc0(sizeof(WiSlot));
	WiSlot	   *slot;

	copy->database = MyDatabaseId;
	SpinLockAcquire(&wi_shared->mutex);
	slot = wi_slot_of(MyDatabaseId);
	if (slot)
		memcpy(copy, slot, sizeof(WiSlot));
	SpinLockRelease(&wi_shared->mutex);
	return copy;
}

/*
 * webhook_ingest_worker_status: the 0.1.0 and 0.2.0 function, one row, this
 * database's worker (until ALTER EXTENSION UPDATE).
 */
Datum
webhook_ingest_worker_status(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	PG_RETURN_DATUM(HeapTupleGetDatum(fetcher_tuple(desc, copy_own_slot())));
}

/* The rows of one database: its fetcher, then (from 0.10.0's view on) each apply worker that runs. */
static void
put_slot_rows(ReturnSetInfo *rsinfo, const WiSlot *copy)
{
	tuplestore_puttuple(rsinfo->setResult, fetcher_tuple(rsinfo->setDesc, copy));
	if (rsinfo->setDesc->natts < WI_STATUS_COLUMNS)
		return;					/* an older view: one row per database */
	for (int i = 0; i < WI_MAX_APPLIERS; i++)
	{
		const WiApplierSlot *a = &copy->appliers[i];
		WorkerRow	r = {copy->database, "applier", i, a->pid, a->state, a->started_at,
		a->in_batch, a->in_batch, &a->counters, NULL};

		if (a->pid != 0 || a->starting)
			tuplestore_puttuple(rsinfo->setResult, status_tuple(rsinfo->setDesc, &r));
	}
}

/*
 * webhook_ingest.worker_status from 0.3.0: a row per database that has a
 * worker, is starting one, or is refused one by max_databases; from 0.10.0
 * also a row per apply worker.
 */
Datum
webhook_ingest_worker_status_all(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	WiSlot	   *copies;
	Oid			capped[WI_MAX_CAPPED];
	int			ncapped;
	int			n = 0;

	wi_init_srf(fcinfo);
	copies = palloc(sizeof(WiSlot) * wi_shared->nslots);
	SpinLockAcquire(&wi_shared->mutex);
	for (int i = 0; i < wi_shared->nslots; i++)
		if (OidIsValid(wi_shared->slots[i].database))
			memcpy(&copies[n++], &wi_shared->slots[i], sizeof(WiSlot));
	ncapped = wi_shared->ncapped;
	memcpy(capped, wi_shared->capped, sizeof(Oid) * ncapped);
	SpinLockRelease(&wi_shared->mutex);

	for (int i = 0; i < n; i++)
		put_slot_rows(rsinfo, &copies[i]);
	for (int i = 0; i < ncapped; i++)
	{
		WiSlot	   *row = palloc0(sizeof(WiSlot));

		row->database = capped[i];
		snprintf(row->state, sizeof(row->state), "no worker: webhook_ingest.max_databases (%d) reached",
				 wi_shared->nslots);
		tuplestore_puttuple(rsinfo->setResult, fetcher_tuple(rsinfo->setDesc, row));
	}
	return (Datum) 0;
}

/* The condition variable the waiters of a job of this database sleep on. */
ConditionVariable *
wi_shmem_job_cv(int64 job_id)
{
	uint32		key = hash_combine(murmurhash32((uint32) MyDatabaseId),
								   murmurhash32((uint32) job_id ^ murmurhash32((uint32) ((uint64) job_id >> 32))));

	return &wi_shared->job_finished[key % WI_WAIT_BUCKETS];
}

/*
 * The worker: these jobs turned done (with their done_lsn) or dead; wake
 * their waiters, and only theirs (and those of jobs sharing a bucket, who
 * look and sleep again: with WI_WAIT_BUCKETS at 16384, a batch of 100 jobs
 * while 2 000 others are waited for wakes about 12 of them).  After the
 * commit: a waiter is in its bucket's list before it reads its job, so
 * one that read the job before the commit is woken now.
 */
void
wi_shmem_jobs_finished(const int64 *job_ids, int n)
{
	for (int i = 0; i < n; i++)
		ConditionVariableBroadcast(wi_shmem_job_cv(job_ids[i]));
}

/* The worker: jobs it cannot name finished (a previous worker's); wake all. */
void
wi_shmem_all_jobs_finished(void)
{
	for (int i = 0; i < WI_WAIT_BUCKETS; i++)
		ConditionVariableBroadcast(&wi_shared->job_finished[i]);
}

static void
wake_worker(void)
{
	Latch	   *latch = NULL;
	WiSlot	   *slot;

	if (wi_shared == NULL)
		return;
	SpinLockAcquire(&wi_shared->mutex);
	slot = wi_slot_of(MyDatabaseId);
	if (slot)
		latch = slot->worker_latch;
	SpinLockRelease(&wi_shared->mutex);
	if (latch != NULL)
		SetLatch(latch);
}

/* Ask the launcher to look at a database now (from any backend). */
void
wi_shmem_wake_launcher(Oid database)
{
	Latch	   *latch;

	if (wi_shared == NULL)
		return;
	SpinLockAcquire(&wi_shared->mutex);
	if (wi_shared->nlook < WI_MAX_LOOK)
		wi_shared->look[wi_shared->nlook++] = database;
	else
		wi_shared->look_all = true;
	latch = wi_shared->launcher_latch;
	SpinLockRelease(&wi_shared->mutex);
	if (latch != NULL)
		SetLatch(latch);
}

/*
 * The same at the commit of CREATE EXTENSION (superusers only): the launcher
 * starts the database's worker without the wait other looks have (at most
 * one start a second per database: launcher.c).
 */
void
wi_shmem_wake_launcher_installed(Oid database)
{
	if (wi_shared == NULL)
		return;
	SpinLockAcquire(&wi_shared->mutex);
	if (wi_shared->ninstalled < WI_MAX_LOOK)
		wi_shared->installed[wi_shared->ninstalled++] = database;
	SpinLockRelease(&wi_shared->mutex);
	wi_shmem_wake_launcher(database);
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
			if (finished_here_overflow)
				wi_shmem_all_jobs_finished();
			else
				wi_shmem_jobs_finished(finished_here, nfinished_here);
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			break;
		default:
			return;
	}
	/* the transaction is over: nothing armed outlives it */
	wake_at_commit = false;
	nfinished_here = 0;
	finished_here_overflow = false;
}

static void
register_xact_callback(void)
{
	if (!xact_callback_registered)
	{
		RegisterXactCallback(wake_at_end_of_xact, NULL);
		xact_callback_registered = true;
	}
}

/* enqueue(): wake the worker when (and only if) this transaction commits. */
void
wi_wake_worker_at_commit(void)
{
	register_xact_callback();
	wake_at_commit = true;
}

/*
 * _job_finished_at_commit(job_id): cancel() finished the job; its
 * wait_for_job() callers wake when (and only if) this transaction commits.
 */
Datum
webhook_ingest_job_finished_at_commit(PG_FUNCTION_ARGS)
{
	register_xact_callback();
	if (nfinished_here < WI_MAX_FINISHED_HERE)
		finished_here[nfinished_here++] = PG_GETARG_INT64(0);
	else
		finished_here_overflow = true;
	PG_RETURN_VOID();
}

/* _wake_worker_at_commit(): retry() and friends make jobs due now. */
Datum
webhook_ingest_wake_worker_at_commit(PG_FUNCTION_ARGS)
{
	wi_wake_worker_at_commit();
	PG_RETURN_VOID();
}

/*
 * webhook_ingest._scheduler_state(): what this database's fetcher holds for
 * its sources with jobs in flight or a throttle (queue_stats).
 */
Datum
webhook_ingest_scheduler_state(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	WiSlot	   *copy;
	TimestampTz now = GetCurrentTimestamp();

	wi_init_srf(fcinfo);
	copy = copy_own_slot();
	for (int i = 0; i < copy->nshown; i++)
	{
		WiSourceShown *row = &copy->shown[i];
		Datum		values[5];
		bool		nulls[5] = {0};

		/* published up to 100 ms ago: a throttle over since is not shown */
		if (row->throttled_until <= now)
			row->throttled_until = 0;
		values[0] = CStringGetTextDatum(row->name);
		values[1] = Int32GetDatum(row->in_flight);
		values[2] = TimestampTzGetDatum(row->throttled_until);
		nulls[2] = row->throttled_until == 0;
		values[3] = CStringGetTextDatum(row->throttled_by);
		nulls[3] = row->throttled_until == 0;
		/* from 0.10.0: of those in flight, fetched and waiting for or in an apply worker */
		values[4] = Int32GetDatum(row->applying);
		Assert(rsinfo->setDesc->natts <= lengthof(values));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
