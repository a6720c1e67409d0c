/*
 * worker.c
 *		A database's worker's life - its fetcher, which claims jobs and
 *		drives every transfer, and hands what it fetched to the database's
 *		apply workers (applier.c); the launcher, launcher.c, starts one per
 *		database: what it is registered as, signals, the connection to the
 *		database whose OID it is given, leaving cleanly when the extension
 *		is not there or it is asked to stop, waiting for an old version's
 *		update and for a read-only server to become writable (a standby
 *		pg_auto_failover is promoting), taking over from a previous
 *		incarnation (and settling what apply workers that died left), then
 *		the loop (worker_loop.c), one pass after another, with the error
 *		recovery that keeps transfers in flight when an ERROR escapes a pass.
 *
 * IDENTIFICATION
 *		src/worker/worker.c
 */
#include "postgres.h"

#include <limits.h>
#include <signal.h>
#include <sys/resource.h>

#include "access/xact.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/procarray.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "webhook_ingest.h"
#include "crash_guard.h"
#include "http.h"
#include "job_store.h"
#include "settings.h"
#include "shmem.h"
#include "sigterm.h"
#include "wait_event.h"
#include "worker.h"
#include "worker_loop.h"

PGDLLEXPORT void webhook_ingest_worker_main(Datum arg);

/* Sockets this process keeps for itself besides curl's. */
#define WI_RESERVED_FDS		100

/* A worker for one database: its OID travels in bgw_main_arg. */
void
wi_worker_describe(BackgroundWorker *worker, Oid database)
{
	memset(worker, 0, sizeof(*worker));
	worker->bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker->bgw_start_time = BgWorkerStart_RecoveryFinished;
	/* The launcher restarts it, with a back-off. */
	worker->bgw_restart_time = BGW_NEVER_RESTART;
	worker->bgw_main_arg = ObjectIdGetDatum(database);
	worker->bgw_notify_pid = MyProcPid;
	snprintf(worker->bgw_library_name, BGW_MAXLEN, "webhook_ingest");
	snprintf(worker->bgw_function_name, BGW_MAXLEN, "webhook_ingest_worker_main");
	snprintf(worker->bgw_name, BGW_MAXLEN, "webhook_ingest worker for database %u", database);
	snprintf(worker->bgw_type, BGW_MAXLEN, "webhook_ingest worker");
}

/* Leave without an error: the launcher knows why from the slot. */
static void
exit_cleanly(WiExitReason reason, const char *state)
{
	wi_shmem_set_exit_reason(reason, state);
	proc_exit(0);
}

/* Asked to stop (DROP DATABASE, DROP EXTENSION, the launcher)? */
void
wi_worker_stop_if_asked(void)
{
	if (wi_shmem_stop_requested())
		exit_cleanly(WI_EXIT_STOPPED, "stopped");
}

/*
 * Raise the soft file limit toward the hard one; every transfer holds a
 * socket.  Returns how many transfers the limit allows.
 */
static int
transfers_allowed_by_file_limit(void)
{
	struct rlimit rl;
	int			allowed;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return wi_max_concurrent_requests;
	if (rl.rlim_cur < rl.rlim_max)
	{
		rlim_t		old = rl.rlim_cur;

		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			rl.rlim_cur = old;
	}
	allowed = (int) Min((rlim_t) INT_MAX, rl.rlim_cur) - max_files_per_process - WI_RESERVED_FDS;
	allowed = Max(allowed, 1);
	if (allowed < wi_max_concurrent_requests)
		ereport(WARNING,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("webhook_ingest worker: file limit %lu allows only %d of webhook_ingest.max_concurrent_requests (%d) transfers in flight",
						(unsigned long) rl.rlim_cur, allowed, wi_max_concurrent_requests),
				 errdetail("Each transfer holds a socket, and max_files_per_process (%d) plus %d descriptors are kept for the server's own files.",
						   max_files_per_process, WI_RESERVED_FDS),
				 errhint("Raise the server's hard open-file limit (LimitNOFILE in its systemd unit, or ulimit -Hn).")));
	else
		ereport(LOG,
				(errmsg("webhook_ingest worker: file limit %lu, up to %d transfers in flight",
						(unsigned long) rl.rlim_cur, wi_max_concurrent_requests)));
	return allowed;
}

static void
wait_for(long timeout_ms, uint32 wait_event)
{
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, timeout_ms, wait_event);
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
	wi_worker_stop_if_asked();
	if (ConfigReloadPending)
	{
		ConfigReloadPending = false;
		ProcessConfigFile(PGC_SIGHUP);
	}
}

/* Until the extension exists here, at this library's version. */
static void
wait_for_extension(WiCounters *counters)
{
	char		version[64];
	bool		told_old = false;

	wi_shmem_publish("waiting for the extension", 0, 0, counters);
	for (;;)
	{
		WiExtensionState ext = wi_extension_state(version, sizeof(version));

		if (ext == WI_EXTENSION_READY)
			return;
		if (ext == WI_EXTENSION_MISSING)
			exit_cleanly(WI_EXIT_NO_EXTENSION, "no extension");
		if (ext == WI_EXTENSION_OLD && !told_old)
		{
			ereport(LOG,
					(errmsg("webhook_ingest worker: extension version %s is installed, the library is %s",
							version, WI_VERSION),
					 errhint("Run ALTER EXTENSION webhook_ingest UPDATE; the worker waits until then.")));
			wi_shmem_publish("waiting for ALTER EXTENSION webhook_ingest UPDATE", 0, 0, counters);
			told_old = true;
		}
		wait_for(wi_poll_interval_ms * 10L, wi_wait_event(WI_WAIT_WORKER_EXTENSION_UPDATE));
	}
}

/*
 * While default_transaction_read_only is on, no transaction of ours could
 * write: wait for the reload that turns it off (SIGHUP sets our latch).
 * pg_auto_failover keeps a standby it promotes read-only until it knows the
 * old primary stopped writing (its guard against split brain); failing
 * instead would cost a restart and the launcher's back-off (1 s, then 2 s)
 * on every promotion.  Also called by the loop, should the setting come
 * back while the worker runs; transfers in flight wait meanwhile.
 */
void
wi_worker_wait_writable(int in_flight, int applying, const WiCounters *counters)
{
	if (!DefaultXactReadOnly)
		return;
	ereport(LOG,
			(errmsg("webhook_ingest worker: waiting for default_transaction_read_only to be turned off"),
			 errdetail("No job can be claimed or completed while the server is read-only.")));
	wi_shmem_publish("waiting for default_transaction_read_only = off", in_flight, applying, counters);
	while (DefaultXactReadOnly)
		wait_for(wi_poll_interval_ms * 10L, wi_wait_event(WI_WAIT_WORKER_DISABLED));
	wi_shmem_publish("running", in_flight, applying, counters);
}

/* Report the error in hand and roll its transaction back (interrupts held). */
static void
report_and_abort(void)
{
	EmitErrorReport();
	AbortCurrentTransaction();
	MemoryContextSwitchTo(TopMemoryContext);
	FlushErrorState();
	pgstat_report_activity(STATE_IDLE, NULL);
}

/* Which of this database's apply workers run (or start) now. */
static void
appliers_running(bool *runs)
{
	WiSlot	   *slot;

	SpinLockAcquire(&wi_shared->mutex);
	slot = wi_slot_of(MyDatabaseId);
	for (int i = 0; i < WI_MAX_APPLIERS; i++)
		runs[i] = slot != NULL && (slot->appliers[i].pid != 0 || slot->appliers[i].starting);
	SpinLockRelease(&wi_shared->mutex);
}

/*
 * What a previous incarnation left: jobs whose handler crashed an apply
 * worker (settled before they are reclaimed, so that the crash counts), jobs
 * left running, done jobs without their done_lsn; and the partitions the
 * first completions write into.  Apply workers that still run (this fetcher
 * alone restarted) keep their batches.
 */
static void
take_over(void)
{
	bool		runs[WI_MAX_APPLIERS];
	int			n;

	appliers_running(runs);
	wi_crash_guard_start(runs);
	n = wi_reclaim_running();
	if (n > 0)
		ereport(LOG, (errmsg("webhook_ingest worker: reclaimed %d jobs left running by a previous worker", n)));
	n = wi_fill_missing_done_lsn();
	if (n > 0)
	{
		ereport(LOG, (errmsg("webhook_ingest worker: filled in done_lsn of %d completion batches a previous worker committed", n)));
		wi_shmem_all_jobs_finished();
	}
	/*
	 * Not under the loop's error recovery yet: an error here (one the round
	 * does not expect) is reported and left for the loop's rounds, not the
	 * end of the worker (which would meet it again at its next start).
	 */
	PG_TRY();
	{
		(void) wi_maintain_storage();
	}
	PG_CATCH();
	{
		HOLD_INTERRUPTS();
		report_and_abort();
		RESUME_INTERRUPTS();
	}
	PG_END_TRY();
}

/*
 * An ERROR escaped a pass of the loop: report it, roll back, and go on with
 * the transfers in flight (the recovery block of the background writer and
 * autovacuum).  Runs with interrupts held.
 */
static void
recover_from_error(WorkerLoop *loop)
{
	error_context_stack = NULL;
	HOLD_INTERRUPTS();
	report_and_abort();
	wi_loop_recover(loop);
	RESUME_INTERRUPTS();
	/* No faster than once a second, in case the error comes back at once. */
	wait_for(1000L, wi_wait_event(WI_WAIT_WORKER_ERROR_BACKOFF));
}

void
webhook_ingest_worker_main(Datum arg)
{
	WorkerLoop	loop;
	WiCounters	counters = {0};
	sigjmp_buf	local_sigjmp_buf;
	int			fd_cap;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	BackgroundWorkerInitializeConnectionByOid(DatumGetObjectId(arg), InvalidOid, 0);
	pgstat_report_appname("webhook_ingest worker");
	/* No slot (a launcher of before a restart) or asked to stop already. */
	if (!wi_shmem_register_worker())
		proc_exit(0);
	wi_catch_sigterm();
	/*
	 * The fetcher runs as the bootstrap superuser: its own SQL sees
	 * pg_catalog and nothing else, whatever ALTER DATABASE says, so nothing
	 * can shadow what it calls.  It runs no handler: the apply workers do.
	 */
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_OVERRIDE);

	wait_for_extension(&counters);
	fd_cap = transfers_allowed_by_file_limit();
	wi_http_init();
	wi_shmem_publish("disabled", 0, 0, &counters);
	while (!wi_enabled)
		wait_for(wi_poll_interval_ms * 10L, wi_wait_event(WI_WAIT_WORKER_DISABLED));
	wi_shmem_publish("running", 0, 0, &counters);
	wi_worker_wait_writable(0, 0, &counters);
	take_over();
	wi_shmem_set_fetcher_ready(true);	/* the launcher starts the apply workers now */

	wi_loop_init(&loop, fd_cap);
	if (sigsetjmp(local_sigjmp_buf, 1) != 0)
		recover_from_error(&loop);
	PG_exception_stack = &local_sigjmp_buf;

	for (;;)
		wi_loop_pass(&loop);
}
