/*
 * applier.c
 *		An apply worker's life: one of webhook_ingest.apply_workers
 *		processes per database (the launcher starts them once the
 *		database's fetcher is ready, and again when one exits), each
 *		completing the batches of fetched results the fetcher hands it:
 *		running each job's handler as its owner in a subtransaction, marking
 *		the jobs done or recording their failed attempts, in one transaction
 *		per batch (complete.c), and answering with every job's outcome.
 *		The fetcher never runs handler code; an apply worker never fetches.
 *
 *		It makes its hand-off queues (apply_queue.c) and waits for the
 *		fetcher to attach; when the fetcher goes (it restarts), the apply
 *		worker finishes the batch in hand, gives back what it could not
 *		complete, and makes new queues for the next one.  It stops between
 *		batches when asked to (DROP DATABASE, DROP EXTENSION) or when
 *		apply_workers was lowered below its number.
 *
 *		An ERROR that escapes a batch (not a handler's: those stay in their
 *		subtransaction) rolls the batch back; its jobs go back to the
 *		fetcher, which hands each over again alone.
 *
 * IDENTIFICATION
 *		src/worker/applier.c
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/shm_mq.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "webhook_ingest.h"
#include "applier.h"
#include "applier_guard.h"
#include "apply_queue.h"
#include "complete.h"
#include "handler_call.h"
#include "settings.h"
#include "shmem.h"
#include "sigterm.h"
#include "wait_event.h"
#include "worker_tx.h"

PGDLLEXPORT void webhook_ingest_applier_main(Datum arg);

/* What the apply worker keeps between batches. */
typedef struct Applier
{
	int			index;
	WiApplyQueues *queues;		/* NULL: none made yet, or the fetcher left */
	MemoryContext batch_cxt;	/* the batch in hand; reset after each */
	WiCounters	counters;
	/* the batch in hand, for the reply and for an error's recovery */
	ApplyJob   *jobs;
	int			njobs;
	uint64		batch_id;
	int			fetcher_pid;
} Applier;

static Applier applier;

/* Apply worker index of a database: the index travels in bgw_main_arg, the database in bgw_extra. */
void
wi_applier_describe(BackgroundWorker *worker, Oid database, int index)
{
	memset(worker, 0, sizeof(*worker));
	worker->bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker->bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker->bgw_restart_time = BGW_NEVER_RESTART;	/* the launcher restarts it */
	worker->bgw_main_arg = Int32GetDatum(index);
	memcpy(worker->bgw_extra, &database, sizeof(Oid));
	worker->bgw_notify_pid = MyProcPid;
	snprintf(worker->bgw_library_name, BGW_MAXLEN, "webhook_ingest");
	snprintf(worker->bgw_function_name, BGW_MAXLEN, "webhook_ingest_applier_main");
	snprintf(worker->bgw_name, BGW_MAXLEN, "webhook_ingest applier %d for database %u", index, database);
	snprintf(worker->bgw_type, BGW_MAXLEN, "webhook_ingest applier");
}

static void
exit_cleanly(WiExitReason reason, const char *state)
{
	wi_shmem_set_exit_reason(reason, state);
	proc_exit(0);
}

/* Between batches: leave when asked to, or when apply_workers no longer counts this one. */
static void
stop_if_asked(void)
{
	if (wi_shmem_stop_requested())
		exit_cleanly(WI_EXIT_STOPPED, "stopped");
	if (applier.index >= wi_apply_workers)
		exit_cleanly(WI_EXIT_STOPPED, "stopped: webhook_ingest.apply_workers was lowered");
}

static void
publish(const char *state)
{
	wi_shmem_publish_applier(state, applier.njobs, &applier.counters);
}

static void
wait_for(long timeout_ms)
{
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, timeout_ms,
					 wi_wait_event(WI_WAIT_APPLIER_MAIN));
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
	if (ConfigReloadPending)
	{
		ConfigReloadPending = false;
		ProcessConfigFile(PGC_SIGHUP);
	}
}

/* No completion can commit while the server is read-only (a standby being promoted). */
static void
wait_writable(void)
{
	if (!DefaultXactReadOnly)
		return;
	publish("waiting for default_transaction_read_only = off");
	while (DefaultXactReadOnly)
		wait_for(wi_poll_interval_ms * 10L);
}

/* Queues for the fetcher to attach to. */
static void
make_queues(void)
{
	applier.queues = wi_apply_queues_create((Size) wi_apply_queue_size_kb * 1024);
	wi_shmem_publish_queues(dsm_segment_handle(applier.queues->segment));
	publish("waiting for the fetcher");
}

/* The fetcher left: drop its queues (new ones are made for the next). */
static void
drop_queues(void)
{
	wi_apply_queues_detach(applier.queues);
	applier.queues = NULL;
	wi_shmem_publish_queues(DSM_HANDLE_INVALID);
}

/* Copy n bytes at *pos out of the message, or fail: the message is the fetcher's, but check it. */
static const char *
take(const char *data, Size nbytes, Size *pos, Size n)
{
	const char *p = data + *pos;

	if (n > nbytes - *pos)
		elog(ERROR, "webhook_ingest apply worker: a batch message is cut short");
	*pos += n;
	return p;
}

/* A batch message as ApplyJobs, in the batch's context; its strings stay in the message. */
static void
read_batch(const char *data, Size nbytes)
{
	WiApplyBatchHeader header;
	Size		pos = 0;

	memcpy(&header, take(data, nbytes, &pos, sizeof(header)), sizeof(header));
	if (header.kind != WI_MSG_BATCH || header.njobs > WI_APPLY_MAX_BATCH)
		elog(ERROR, "webhook_ingest apply worker: not a batch message");
	applier.batch_id = header.batch_id;
	applier.fetcher_pid = header.fetcher_pid;
	wi_handler_set_leash(Max(header.leash_ms, 0));
	applier.jobs = MemoryContextAllocZero(applier.batch_cxt, sizeof(ApplyJob) * Max(header.njobs, 1));
	for (uint32 i = 0; i < header.njobs; i++)
	{
		WiApplyItem item;
		ApplyJob   *t = &applier.jobs[i];

		memcpy(&item, take(data, nbytes, &pos, sizeof(item)), sizeof(item));
		t->job_id = item.job_id;
		t->attempt = item.attempt;
		t->max_attempts = item.max_attempts;
		t->handler = item.handler;
		t->created_at = item.created_at;
		t->verdict = (WiApplyVerdict) item.verdict;
		t->status = item.status;
		t->retry_after_s = item.retry_after_s;
		t->fetch_seconds = item.fetch_seconds;
		t->source = take(data, nbytes, &pos, item.source_len + 1);
		t->external_id = take(data, nbytes, &pos, item.external_id_len + 1);
		t->fetch_error = take(data, nbytes, &pos, item.why_len + 1);
		t->link = take(data, nbytes, &pos, item.link_len + 1);
		t->flags = item.flags;
		t->body_len = item.body_len;
		t->body = take(data, nbytes, &pos, item.body_len + 1);
		if (t->source[item.source_len] != '\0' || t->external_id[item.external_id_len] != '\0' ||
			t->fetch_error[item.why_len] != '\0' || t->link[item.link_len] != '\0' ||
			t->body[item.body_len] != '\0')
			elog(ERROR, "webhook_ingest apply worker: a batch message is malformed");
	}
	applier.njobs = (int) header.njobs;
}

/*
 * The fetcher left before it took the batch's outcomes: jobs that were not
 * completed are given back to the queue now (not at their lease's end).
 */
static void
give_back_unfinished(void)
{
	static SPIPlanPtr plan = NULL;
	int64	   *ids = palloc(sizeof(int64) * Max(applier.njobs, 1));
	int			n = 0;
	Oid			types[2] = {INT8ARRAYOID, INT4OID};
	Datum		args[2];

	for (int i = 0; i < applier.njobs; i++)
		if (applier.jobs[i].outcome == WI_OUTCOME_LOCKED || applier.jobs[i].outcome == WI_OUTCOME_NOT_STARTED ||
			applier.jobs[i].outcome == WI_OUTCOME_ERROR || applier.jobs[i].outcome == WI_OUTCOME_TOO_SLOW)
			ids[n++] = applier.jobs[i].job_id;
	if (n == 0)
		return;
	args[0] = wi_id_array(ids, n);
	args[1] = Int32GetDatum(applier.fetcher_pid);
	(void) wi_run_alone("webhook_ingest: giving back jobs the fetcher left", &plan,
						"UPDATE webhook_ingest.queue SET state = 'pending', lease_until = NULL, worker_pid = NULL,"
						" attempts = greatest(attempts - 1, 0), next_attempt_at = now(), updated_at = now(),"
						" last_error = 'reclaimed: the worker that ran it stopped'"
						" WHERE id = ANY ($1) AND state = 'running' AND worker_pid = $2",
						2, types, args);
}

/* The last failure of the batch, for the fetcher's worker_status row. */
static void
last_failure(WiApplyReplyHeader *h)
{
	for (int i = applier.njobs - 1; i >= 0; i--)
	{
		const ApplyJob *t = &applier.jobs[i];

		if ((t->outcome == WI_OUTCOME_RETRY || t->outcome == WI_OUTCOME_DEAD) && t->why)
		{
			snprintf(h->last_error, sizeof(h->last_error), "job %lld (%s/%s): %s",
					 (long long) t->job_id, t->source, t->external_id, t->why);
			h->last_error_at = GetCurrentTimestamp();
			return;
		}
	}
}

/* Tell the fetcher how each job of the batch ended; false if it has left. */
static bool
reply(void)
{
	Size		size = sizeof(WiApplyReplyHeader) + sizeof(WiApplyOutcome) * applier.njobs;
	char	   *msg = MemoryContextAllocZero(applier.batch_cxt, size);
	WiApplyReplyHeader *h = (WiApplyReplyHeader *) msg;
	WiApplyOutcome *o = (WiApplyOutcome *) (msg + sizeof(WiApplyReplyHeader));

	h->kind = WI_MSG_OUTCOMES;
	h->njobs = applier.njobs;
	h->batch_id = applier.batch_id;
	last_failure(h);
	for (int i = 0; i < applier.njobs; i++)
	{
		o[i].job_id = applier.jobs[i].job_id;
		o[i].handler_us = applier.jobs[i].handler_us;
		o[i].outcome = applier.jobs[i].outcome;
		o[i].flags = applier.jobs[i].handler_error ? WI_OUTCOME_FLAG_HANDLER_ERROR : 0;
	}
	return shm_mq_send(applier.queues->out, size, msg, false, true) == SHM_MQ_SUCCESS;
}

/* The batch is over (completed, or rolled back): answer, and forget it. */
static void
end_batch(void)
{
	if (!reply())
	{
		give_back_unfinished();
		drop_queues();
	}
	applier.jobs = NULL;
	applier.njobs = 0;
	publish("idle");
}

static void
complete_message(const char *data, Size nbytes)
{
	wait_writable();
	read_batch(data, nbytes);
	publish("completing a batch");
	wi_complete(applier.jobs, applier.njobs, applier.fetcher_pid, &applier.counters);
	end_batch();
}

/*
 * One turn: take the next batch and complete it, or wait for one; with no
 * fetcher attached, the done_lsn backlog is paid meanwhile.
 */
static void
applier_turn(void)
{
	Size		nbytes;
	void	   *data;
	shm_mq_result res;

	MemoryContextReset(applier.batch_cxt);
	MemoryContextSwitchTo(applier.batch_cxt);
	CHECK_FOR_INTERRUPTS();
	stop_if_asked();
	if (applier.queues == NULL)
		make_queues();
	res = shm_mq_receive(applier.queues->in, &nbytes, &data, true);
	if (res == SHM_MQ_SUCCESS)
		complete_message((const char *) data, nbytes);
	else if (res == SHM_MQ_DETACHED)
		drop_queues();			/* the fetcher left: new queues for the next one */
	else
	{
		if (shm_mq_get_sender(shm_mq_get_queue(applier.queues->in)) != NULL)
			publish("idle");	/* the fetcher is attached */
		wi_retry_done_lsn();
		wait_for(wi_poll_interval_ms * 10L);
	}
}

/*
 * An ERROR escaped a batch (worker.c's recovery, as the background writer's):
 * report it, roll back, and give its jobs back to the fetcher as failed
 * completions.  Runs with interrupts held.
 */
static void
recover_from_error(void)
{
	error_context_stack = NULL;
	HOLD_INTERRUPTS();
	EmitErrorReport();
	AbortCurrentTransaction();
	MemoryContextSwitchTo(TopMemoryContext);
	FlushErrorState();
	pgstat_report_activity(STATE_IDLE, NULL);
	wi_applier_guard_completed();
	for (int i = 0; i < applier.njobs; i++)
		applier.jobs[i].outcome = WI_OUTCOME_ERROR;
	RESUME_INTERRUPTS();
	if (applier.queues != NULL && applier.njobs > 0)
		end_batch();
	/* No faster than once a second, in case the error comes back at once. */
	wait_for(1000L);
}

void
webhook_ingest_applier_main(Datum arg)
{
	Oid			database;
	sigjmp_buf	local_sigjmp_buf;

	memcpy(&database, MyBgworkerEntry->bgw_extra, sizeof(Oid));
	applier.index = DatumGetInt32(arg);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(database, InvalidOid, 0);
	pgstat_report_appname("webhook_ingest applier");
	if (!wi_shmem_register_applier(applier.index))
		proc_exit(0);
	wi_catch_sigterm();
	/* As the fetcher: its own SQL sees pg_catalog only; handlers get the database's search_path. */
	wi_handler_remember_search_path();
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_OVERRIDE);
	wi_applier_guard_open(applier.index);
	applier.batch_cxt = AllocSetContextCreate(TopMemoryContext, "webhook_ingest apply batch",
											  ALLOCSET_DEFAULT_SIZES);
	ereport(DEBUG1, (errmsg("webhook_ingest apply worker %d started", applier.index)));

	if (sigsetjmp(local_sigjmp_buf, 1) != 0)
		recover_from_error();
	PG_exception_stack = &local_sigjmp_buf;

	for (;;)
		applier_turn();
}
