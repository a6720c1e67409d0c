/*
 * applier_guard.c
 *		An apply worker's guard file (format: apply_queue.h): before it
 *		completes a batch it writes the batch's jobs down ("completing"), and
 *		clears them once the batch is over, its done_lsn written.  Should it
 *		die in a batch the file tells the fetcher what it was doing
 *		(crash_guard.c settles it):
 *
 *		- a handler that ran past its hard deadline ended the process: the
 *		  file names that job ("deadline"), which is dead at once, and the
 *		  rest of the batch as interrupted;
 *		- a handler that terminated its own backend: the file names that job
 *		  alone, the culprit;
 *		- a signal not of the batch's making (an administrator's
 *		  pg_terminate_backend, a shutdown, SIGQUIT after another process
 *		  crashed): the batch is "interrupted", and nobody is blamed;
 *		- anything else (a crash, an OOM kill, a FATAL): the batch stays
 *		  "completing", and its jobs are suspects.
 *
 *		The SIGQUIT handler writes the interrupted form, prepared with each
 *		batch, with nothing but pwrite and ftruncate (both async-signal-safe).
 *		No fsync: the file guards against the process's death, not the
 *		machine's.
 *
 * IDENTIFICATION
 *		src/worker/applier_guard.c
 */
#include "postgres.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "utils/memutils.h"

#include "webhook_ingest.h"
#include "applier_guard.h"
#include "complete.h"
#include "handler_call.h"
#include "shmem.h"
#include "sigterm.h"

static int	guard_fd = -1;
static char *guard_path = NULL;
static StringInfoData blamed;	/* "completing ..." */

/*
 * The "interrupted ..." form of the batch, double-buffered: the SIGQUIT
 * handler writes innocent[innocent_now], which is switched only once the
 * other buffer is complete.
 */
static StringInfoData innocent[2];
static volatile sig_atomic_t innocent_now = 0;
static volatile sig_atomic_t innocent_len = 0;

/* The batch in hand (NULL: none) and the job whose handler runs. */
static const ApplyJob *batch = NULL;
static int	batch_len = 0;
static int64 handling_job = 0;

static void
write_guard(const char *data, int len)
{
	if (guard_fd < 0)
		return;
	if (pwrite(guard_fd, data, len, 0) != len || ftruncate(guard_fd, len) != 0)
		ereport(WARNING,
				(errcode_for_file_access(),
				 errmsg("webhook_ingest apply worker: could not write \"%s\": %m", guard_path)));
}

static void
append_job(StringInfo buf, const ApplyJob *t)
{
	appendStringInfo(buf, " %lld:%d:%u", (long long) t->job_id, t->attempt, t->handler);
}

/* "<label> <each job of the batch but skip>\n" */
static void
batch_line(StringInfo buf, const char *label, int64 skip)
{
	appendStringInfoString(buf, label);
	for (int i = 0; i < batch_len; i++)
		if (batch[i].job_id != skip)
			append_job(buf, &batch[i]);
	appendStringInfoChar(buf, '\n');
}

static const ApplyJob *
job_in_hand(void)
{
	for (int i = 0; i < batch_len; i++)
		if (batch[i].job_id == handling_job)
			return &batch[i];
	return NULL;
}

/*
 * On exit in a batch: what the file should say now (see the header).  A
 * FATAL or an error that ended the process leaves "completing" as it is.
 */
static void
settle_on_exit(int code, Datum arg)
{
	const ApplyJob *culprit = job_in_hand();
	StringInfoData buf;

	if (batch == NULL)
		return;
	initStringInfo(&buf);
	if (wi_handler_killed_worker() && culprit != NULL)
	{
		appendStringInfoString(&buf, WI_GUARD_DEADLINE);
		append_job(&buf, culprit);
		appendStringInfo(&buf, ":%d\n", wi_handler_call_leash());
		batch_line(&buf, WI_GUARD_INTERRUPTED, culprit->job_id);
		wi_shmem_set_exit_reason(WI_EXIT_DEADLINE, "ended: a handler ran past its hard deadline");
	}
	else if (wi_sigterm_sender() == MyProcPid && culprit != NULL)
	{
		/* the handler terminated its own backend */
		appendStringInfoString(&buf, WI_GUARD_COMPLETING);
		append_job(&buf, culprit);
		appendStringInfoChar(&buf, '\n');
	}
	else if (wi_sigterm_sender() != 0 && wi_sigterm_sender() != MyProcPid)
		batch_line(&buf, WI_GUARD_INTERRUPTED, 0);
	else
		return;
	write_guard(buf.data, buf.len);
}

/* SIGQUIT: the postmaster ends every process (a crash elsewhere, an immediate shutdown). */
static void
quit_interrupted(SIGNAL_ARGS)
{
	if (guard_fd >= 0)
	{
		int			k = innocent_now;

		if (pwrite(guard_fd, innocent[k].data, innocent_len, 0) == innocent_len &&
			ftruncate(guard_fd, innocent_len) != 0)
			_exit(2);			/* nothing more to do about it */
	}
	_exit(2);
}

/* At the apply worker's start: its file, kept open for its batches. */
void
wi_applier_guard_open(int index)
{
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

	guard_path = wi_applier_guard_path(index);
	initStringInfo(&blamed);
	initStringInfo(&innocent[0]);
	initStringInfo(&innocent[1]);
	MemoryContextSwitchTo(old);
	/* What a predecessor left stays until the fetcher has settled it: nothing is written before a batch. */
	guard_fd = BasicOpenFile(guard_path, O_RDWR | O_CREAT | PG_BINARY);
	if (guard_fd < 0)
		ereport(WARNING,
				(errcode_for_file_access(),
				 errmsg("webhook_ingest apply worker: could not open \"%s\": %m", guard_path),
				 errdetail("A job that crashes the apply worker will not be recognised.")));
	before_shmem_exit(settle_on_exit, (Datum) 0);
	pqsignal(SIGQUIT, quit_interrupted);
}

/* A batch is about to be completed. */
void
wi_applier_guard_completing(const ApplyJob *jobs, int njobs)
{
	int			next = 1 - innocent_now;

	batch = jobs;
	batch_len = njobs;
	resetStringInfo(&innocent[next]);
	batch_line(&innocent[next], WI_GUARD_INTERRUPTED, 0);
	innocent_len = 0;			/* while switching: an empty file is the safe side */
	innocent_now = next;
	innocent_len = innocent[next].len;
	resetStringInfo(&blamed);
	batch_line(&blamed, WI_GUARD_COMPLETING, 0);
	write_guard(blamed.data, blamed.len);
}

/* The job whose handler runs now (0: none), for the file and the fetcher. */
void
wi_applier_guard_handling(int64 job_id)
{
	handling_job = job_id;
	wi_shmem_set_handling(job_id);
}

/* The batch is over: committed, its done_lsn written, or rolled back. */
void
wi_applier_guard_completed(void)
{
	innocent_len = 0;
	batch = NULL;
	batch_len = 0;
	write_guard("", 0);
}
