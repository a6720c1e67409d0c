/*
 * crash_guard.c
 *		Poison jobs, on the fetcher's side: a handler that kills its apply
 *		worker (a segfault in a C function, an OOM kill, pg_terminate_backend
 *		of itself, running on past its hard deadline) must not be handed
 *		over forever, nor roll back every batch it shares.
 *
 *		Each apply worker writes the batch it completes to its guard file
 *		(applier_guard.c; format in apply_queue.h).  When an apply worker is
 *		gone - its queues detached, or at the fetcher's start for those that
 *		do not run (after a crash restart every process starts anew) - the
 *		fetcher settles what its file says, before it reclaims jobs left
 *		running:
 *
 *		- deadline: that job ran past its hard deadline: dead at once, not
 *		  retried (it would do it again), its last_error says so;
 *		- completing, one job: the culprit; the crash counts as its attempt
 *		  (count_crash), and it is completed alone from then on;
 *		- completing, several: all become suspects, and so do their
 *		  handlers: jobs of a suspect handler are completed one per batch
 *		  (a handler may crash only in company, after another job left state
 *		  behind), so that the next crash names its culprit;
 *		- interrupted: nobody is blamed (an administrator, a shutdown,
 *		  another process's crash);
 *		and in every case the done_lsn of jobs whose batch committed, and
 *		the jobs still running under a previous fetcher (an apply worker
 *		that outlived it) are taken back at once.
 *
 *		A suspect job leaves the list once its lone completion is over (done,
 *		dead or gone).  A suspect handler goes back to batches after
 *		WI_ALONE_CLEAN_COMPLETIONS lone completions without a crash, or at
 *		once when a crash names a culprit (which stays a suspect, its
 *		handler alone for as many again).  The list is kept in a file of
 *		its own (pg_stat_tmp, so it survives a crash restart) and shown by
 *		worker_status (alone_handlers).  If it overflows, every job is
 *		completed alone (never silently unguarded).
 *
 * IDENTIFICATION
 *		src/worker/crash_guard.c
 */
#include "postgres.h"

#include <fcntl.h>
#include <unistd.h>

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/regproc.h"

#include "webhook_ingest.h"
#include "apply_queue.h"
#include "crash_guard.h"
#include "http.h"
#include "job_store.h"
#include "settings.h"
#include "shmem.h"
#include "stats.h"
#include "worker_tx.h"

#define WI_MAX_SUSPECTS			1024
#define WI_MAX_ALONE_HANDLERS	64
#define WI_ALONE_CLEAN_COMPLETIONS	16
#define WI_MAX_LEFT_JOBS		4096	/* entries read from one guard file */

typedef struct AloneHandler
{
	Oid			handler;
	int			left;			/* lone completions to go */
	int			batch;			/* jobs of the batch whose crash made it a suspect; 0: a culprit's */
} AloneHandler;

static int64 suspects[WI_MAX_SUSPECTS];
static int	nsuspects = 0;
static AloneHandler alone[WI_MAX_ALONE_HANDLERS];
static int	nalone = 0;
static bool everything_alone = false;	/* a list overflowed: fail safe */
static bool changed = false;	/* since the list was last written and shown */

/* One entry of a guard file. */
typedef struct LeftJob
{
	int64		job_id;
	int			attempt;
	Oid			handler;
} LeftJob;

/* What an apply worker's guard file says. */
typedef struct LeftBehind
{
	LeftJob		deadline;		/* job_id 0: none */
	int			deadline_leash_ms;	/* the leash whose hard deadline it was; 0: handler_timeout's */
	LeftJob    *completing;
	int			ncompleting;
	LeftJob    *interrupted;
	int			ninterrupted;
} LeftBehind;

static char *
suspects_path(void)
{
	return psprintf("pg_stat_tmp/webhook_ingest.%u.suspects", MyDatabaseId);
}

/* 0.9.0's worker kept its batch and suspects here: settled like an apply worker's file, then removed. */
static char *
legacy_path(void)
{
	return psprintf("pg_stat_tmp/webhook_ingest.%u.completing", MyDatabaseId);
}

static bool
is_suspect(int64 id)
{
	for (int i = 0; i < nsuspects; i++)
		if (suspects[i] == id)
			return true;
	return false;
}

static void
add_suspect(int64 id)
{
	if (is_suspect(id))
		return;
	changed = true;
	if (nsuspects >= WI_MAX_SUSPECTS)
		everything_alone = true;
	else
		suspects[nsuspects++] = id;
}

static void
forget_suspect(int64 id)
{
	for (int i = 0; i < nsuspects; i++)
		if (suspects[i] == id)
		{
			suspects[i] = suspects[--nsuspects];
			changed = true;
			return;
		}
}

static AloneHandler *
alone_entry(Oid handler)
{
	for (int i = 0; i < nalone; i++)
		if (alone[i].handler == handler)
			return &alone[i];
	return NULL;
}

static void
add_alone_handler(Oid handler, int left, int batch)
{
	AloneHandler *a = alone_entry(handler);

	if (!OidIsValid(handler))
		return;
	changed = true;
	if (a == NULL && nalone >= WI_MAX_ALONE_HANDLERS)
	{
		everything_alone = true;
		return;
	}
	if (a == NULL)
		a = &alone[nalone++];
	a->handler = handler;
	a->left = left;
	a->batch = batch;
}

static void
remove_alone_handler(int i)
{
	alone[i] = alone[--nalone];
	changed = true;
}

/* ---- the list's file ---- */

/* "suspects <id> ...\nalone <oid>:<left>:<batch> ...\n[all\n]" */
static void
write_list(void)
{
	char	   *path = suspects_path();
	StringInfoData buf;
	int			fd;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "suspects");
	for (int i = 0; i < nsuspects; i++)
		appendStringInfo(&buf, " %lld", (long long) suspects[i]);
	appendStringInfoString(&buf, "\nalone");
	for (int i = 0; i < nalone; i++)
		appendStringInfo(&buf, " %u:%d:%d", alone[i].handler, alone[i].left, alone[i].batch);
	appendStringInfoString(&buf, everything_alone ? "\nall\n" : "\n");
	fd = BasicOpenFile(path, O_WRONLY | O_CREAT | O_TRUNC | PG_BINARY);
	if (fd < 0 || write(fd, buf.data, buf.len) != buf.len)
		ereport(WARNING,
				(errcode_for_file_access(),
				 errmsg("webhook_ingest worker: could not write \"%s\": %m", path)));
	if (fd >= 0)
		close(fd);
	pfree(buf.data);
}

/* A whole small file, or NULL when there is none. */
static char *
read_file(const char *path)
{
	int			fd = BasicOpenFile(path, O_RDONLY | PG_BINARY);
	char	   *buf;
	ssize_t		len;

	if (fd < 0)
		return NULL;
	buf = palloc(WI_MAX_LEFT_JOBS * 48 + 1);
	len = read(fd, buf, WI_MAX_LEFT_JOBS * 48);
	close(fd);
	buf[Max(len, 0)] = '\0';
	return buf;
}

/* The words after a line's label: "<label> a b c\n", or NULL. */
static char *
words_after(const char *buf, const char *label)
{
	size_t		len = strlen(label);
	const char *p = buf;

	while (p && *p)
	{
		if (strncmp(p, label, len) == 0 && (p[len] == ' ' || p[len] == '\n' || p[len] == '\0'))
		{
			const char *end = strchr(p, '\n');

			return pnstrdup(p + len, end ? end - (p + len) : strlen(p + len));
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return NULL;
}

static void
read_list(void)
{
	char	   *buf = read_file(suspects_path());
	char	   *words;

	if (buf == NULL)
		return;
	if ((words = words_after(buf, "suspects")) != NULL)
		for (char *tok = strtok(words, " "); tok; tok = strtok(NULL, " "))
			add_suspect(strtoll(tok, NULL, 10));
	if ((words = words_after(buf, "alone")) != NULL)
		for (char *tok = strtok(words, " "); tok; tok = strtok(NULL, " "))
		{
			unsigned int handler = 0;
			int			left = WI_ALONE_CLEAN_COMPLETIONS;
			int			batch = 0;

			if (sscanf(tok, "%u:%d:%d", &handler, &left, &batch) >= 1)
				add_alone_handler((Oid) handler, Max(Min(left, WI_ALONE_CLEAN_COMPLETIONS), 1), batch);
		}
	everything_alone |= (words_after(buf, "all") != NULL);
}

/* Suspects that are no longer pending or running need no guarding. */
static void
prune_suspects(void)
{
	int64	   *active = palloc(sizeof(int64) * Max(nsuspects, 1));

	if (nsuspects == 0)
		return;
	nsuspects = wi_active_jobs(suspects, nsuspects, false, active);
	memcpy(suspects, active, sizeof(int64) * nsuspects);
	if (everything_alone && nsuspects < WI_MAX_SUSPECTS / 2 && nalone < WI_MAX_ALONE_HANDLERS / 2)
		everything_alone = false;
}

/* ---- settling what a gone apply worker left ---- */

/* "<id>:<attempt>:<handler> ..." (0.9.0's file: "<id>:<handler>"), at most max entries. */
static LeftJob *
parse_jobs(char *words, int *n)
{
	LeftJob    *jobs = palloc0(sizeof(LeftJob) * WI_MAX_LEFT_JOBS);

	*n = 0;
	for (char *tok = words ? strtok(words, " ") : NULL; tok && *n < WI_MAX_LEFT_JOBS; tok = strtok(NULL, " "))
	{
		long long	id = 0;
		int			attempt = 0;
		unsigned int handler = 0;
		int			fields = sscanf(tok, "%lld:%d:%u", &id, &attempt, &handler);

		if (fields == 2)		/* 0.9.0: id:handler */
		{
			handler = (unsigned int) attempt;
			attempt = 0;
		}
		if (fields >= 1 && id > 0)
			jobs[(*n)++] = (LeftJob) {id, attempt, (Oid) handler};
	}
	return jobs;
}

static bool
read_left_behind(const char *path, LeftBehind *left)
{
	char	   *buf = read_file(path);
	char	   *words;
	int			n = 0;

	memset(left, 0, sizeof(*left));
	if (buf == NULL || buf[0] == '\0')
		return false;
	if ((words = words_after(buf, WI_GUARD_DEADLINE)) != NULL)
	{
		int			leash = 0;
		LeftJob    *d;

		(void) sscanf(words, " %*[0-9]:%*[0-9]:%*[0-9]:%d", &leash);
		d = parse_jobs(words, &n);
		if (n > 0)
			left->deadline = d[0];
		left->deadline_leash_ms = Max(leash, 0);
	}
	left->completing = parse_jobs(words_after(buf, WI_GUARD_COMPLETING), &left->ncompleting);
	left->interrupted = parse_jobs(words_after(buf, WI_GUARD_INTERRUPTED), &left->ninterrupted);
	return left->deadline.job_id != 0 || left->ncompleting > 0 || left->ninterrupted > 0;
}

/*
 * A job that crashed its apply worker while completed alone: the crash
 * counts as an attempt, and after max_attempts the job is dead.  Returns 1
 * if the job was still running and is now pending or dead.
 */
static int
count_crash(int64 job_id)
{
	static SPIPlanPtr plan = NULL;
	Oid			types[1] = {INT8OID};
	Datum		args[1] = {Int64GetDatum(job_id)};

	return wi_run_alone("webhook_ingest: counting a crash against its job", &plan,
						"WITH culprit AS ("
						"  SELECT c.id FROM webhook_ingest.queue c WHERE c.id = $1 AND c.state = 'running'"
						"   FOR NO KEY UPDATE SKIP LOCKED)"
						" UPDATE webhook_ingest.queue j SET"
						"  state = CASE WHEN j.attempts >= s.max_attempts THEN 'dead' ELSE 'pending' END"
						"          ::webhook_ingest.job_state,"
						"  finished_at = CASE WHEN j.attempts >= s.max_attempts THEN now() END,"
						"  next_attempt_at = now(), refetch = false, lease_until = NULL, worker_pid = NULL,"
						"  updated_at = now(),"
						"  last_error = format('attempt %s/%s: the apply worker died while handling it%s', j.attempts,"
						"                      s.max_attempts, CASE WHEN j.attempts < s.max_attempts"
						"                      THEN '; retrying alone' ELSE '' END)"
						"  FROM culprit, webhook_ingest.sources s"
						" WHERE j.id = culprit.id AND s.name = j.source",
						1, types, args);
}

/*
 * A job whose handler ran past its hard deadline: dead at once, with why,
 * and in recent_failures.
 */
typedef struct DeadlineJob
{
	const LeftJob *job;
	const char *why;
	bool		ended;
} DeadlineJob;

static void
end_deadline_job(void *arg)
{
	DeadlineJob *d = (DeadlineJob *) arg;
	static SPIPlanPtr plan = NULL;
	Oid			types[3] = {INT8OID, INT4OID, TEXTOID};
	Datum		args[3] = {Int64GetDatum(d->job->job_id), Int32GetDatum(d->job->attempt),
	CStringGetTextDatum(d->why)};

	if (wi_run_replanned(&plan,
						 "UPDATE webhook_ingest.queue SET state = 'dead', finished_at = now(), refetch = false,"
						 "  lease_until = NULL, worker_pid = NULL, updated_at = now(), last_error = $3"
						 " WHERE id = $1 AND state = 'running' AND attempts = $2"
						 " RETURNING source, external_id",
						 3, types, args, NULL) != SPI_OK_UPDATE_RETURNING)
		elog(ERROR, "could not end a job that ran past its hard deadline");
	d->ended = SPI_processed == 1;
	if (!d->ended)
		return;					/* no longer running under that attempt */
	wi_stats_begin();
	wi_stats_failed(SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1), GetCurrentTimestamp(),
					d->job->job_id, SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2),
					d->job->attempt, 0, d->why, 0, true);
	wi_stats_end();
}

static void
kill_deadline_job(const LeftJob *job, int leash_ms)
{
	char	   *why = leash_ms > 0 ?
		psprintf("attempt %d: the handler ran past its hard deadline (the %d ms leash of a batch other sources "
				 "wait for, and %d ms more), ignoring its cancel; its apply worker was ended; not retried",
				 job->attempt, leash_ms, WI_HARD_DEADLINE_GRACE_MS(leash_ms)) :
		psprintf("attempt %d: the handler ran past its hard deadline (webhook_ingest.handler_timeout, "
				 "%d ms, and %d ms more), ignoring its cancel; its apply worker was ended; not retried",
				 job->attempt, wi_handler_timeout_ms, WI_HARD_DEADLINE_GRACE_MS(wi_handler_timeout_ms));
	DeadlineJob d = {job, why, false};
	int64		id = job->job_id;

	if (!wi_in_tx("webhook_ingest: ending a job that ran past its hard deadline", end_deadline_job, &d) || !d.ended)
		return;
	ereport(LOG,
			(errmsg("webhook_ingest worker: job %lld is dead: its handler ran past its hard deadline",
					(long long) id),
			 errdetail("%s", why)));
	wi_shmem_jobs_finished(&id, 1);
}

/* Done jobs of the batches an apply worker left get their done_lsn. */
static void
fill_done_lsn(const LeftBehind *left)
{
	static SPIPlanPtr plan = NULL;
	int64	   *ids = palloc(sizeof(int64) * (left->ncompleting + left->ninterrupted + 1));
	int			n = 0;
	Oid			types[1] = {INT8ARRAYOID};
	Datum		args[1];

	for (int i = 0; i < left->ncompleting; i++)
		ids[n++] = left->completing[i].job_id;
	for (int i = 0; i < left->ninterrupted; i++)
		ids[n++] = left->interrupted[i].job_id;
	if (n == 0)
		return;
	args[0] = wi_id_array(ids, n);
	if (wi_run_alone("webhook_ingest: filling in done_lsn of a stopped apply worker's batch", &plan,
					 "INSERT INTO webhook_ingest.done_batches (finished_at, done_lsn)"
					 " SELECT DISTINCT h.finished_at, pg_current_wal_lsn() FROM webhook_ingest.job_history h"
					 "  WHERE h.id = ANY ($1)"
					 " ON CONFLICT (finished_at) DO NOTHING",
					 1, types, args) > 0)
		wi_shmem_jobs_finished(ids, n);
}

/* Blame what a crash in a batch left ("completing"). */
static void
blame(const LeftBehind *left)
{
	if (left->ncompleting == 1)
	{
		const LeftJob *culprit = &left->completing[0];

		if (count_crash(culprit->job_id) > 0)
			ereport(LOG,
					(errmsg("webhook_ingest worker: an apply worker died while handling job %lld alone; that counts as an attempt",
							(long long) culprit->job_id)));
		/* The culprit is known: the other suspects are innocent, its handler stays alone a while. */
		nsuspects = 0;
		for (int i = nalone - 1; i >= 0; i--)
			if (alone[i].handler != culprit->handler)
				remove_alone_handler(i);
		add_suspect(culprit->job_id);
		add_alone_handler(culprit->handler, WI_ALONE_CLEAN_COMPLETIONS, 0);
		changed = true;
		return;
	}
	for (int i = 0; i < left->ncompleting; i++)
	{
		add_suspect(left->completing[i].job_id);
		add_alone_handler(left->completing[i].handler, WI_ALONE_CLEAN_COMPLETIONS, left->ncompleting);
	}
	ereport(LOG,
			(errmsg("webhook_ingest worker: an apply worker died while completing %d jobs; each is completed alone until the culprit is known",
					left->ncompleting),
			 errdetail("Jobs of their handlers are completed one per batch for the next %d of them.",
					   WI_ALONE_CLEAN_COMPLETIONS)));
}

/*
 * Settle one guard file; returns the job that ran past its hard deadline (0:
 * none).  Suspects a crash made dead (or that were done meanwhile) leave the
 * list at once.
 */
/* Jobs of the file a previous worker claimed, still running: due again now (wi_reclaim_left). */
static void
reclaim_left(const LeftBehind *left)
{
	int64	   *ids = palloc(sizeof(int64) * (left->ncompleting + left->ninterrupted + 1));
	int			n = 0;

	for (int i = 0; i < left->ncompleting; i++)
		ids[n++] = left->completing[i].job_id;
	for (int i = 0; i < left->ninterrupted; i++)
		ids[n++] = left->interrupted[i].job_id;
	n = wi_reclaim_left(ids, n);
	if (n > 0)
		ereport(LOG,
				(errmsg("webhook_ingest worker: reclaimed %d jobs a previous worker had handed to an apply worker that is gone", n)));
	pfree(ids);
}

static int64
settle_file(const char *path)
{
	LeftBehind	left;

	if (!read_left_behind(path, &left))
		return 0;
	fill_done_lsn(&left);
	if (left.deadline.job_id != 0)
		kill_deadline_job(&left.deadline, left.deadline_leash_ms);
	if (left.ncompleting > 0)
	{
		blame(&left);
		prune_suspects();
	}
	reclaim_left(&left);
	return left.deadline.job_id;
}

/*
 * Apply worker index is gone, or is about to be handed its first batch:
 * settle what its file says a predecessor left, and clear it; returns the
 * job whose handler ran past its hard deadline, if any.  (An apply
 * worker writes its file only while it completes a batch, and gets none
 * before the fetcher has attached to its queues, so what the file holds at
 * either moment is a predecessor's.)
 */
int64
wi_crash_guard_settle(int index)
{
	char	   *path = wi_applier_guard_path(index);
	int64		deadline_job = settle_file(path);
	int			fd;

	fd = BasicOpenFile(path, O_WRONLY | O_TRUNC | PG_BINARY);
	if (fd >= 0)
		close(fd);
	if (changed)
		write_list();
	return deadline_job;
}

/*
 * At the fetcher's start, before it reclaims jobs left running: the list of
 * suspects, and what the apply worker files say of those that do not run
 * (their batches' jobs are among those left running).
 */
void
wi_crash_guard_start(const bool *applier_runs)
{
	read_list();
	settle_file(legacy_path());
	(void) unlink(legacy_path());
	for (int i = 0; i < WI_MAX_APPLIERS; i++)
		if (!applier_runs[i])
			wi_crash_guard_settle(i);
	prune_suspects();
	changed = true;				/* written and shown at the first wi_crash_guard_publish() */
}

/* Is this result to be completed in a batch of its own? */
bool
wi_crash_guard_must_go_alone(Transfer *t)
{
	if (everything_alone || is_suspect(t->job_id))
		return true;
	return OidIsValid(t->handler) && alone_entry(t->handler) != NULL;
}

/*
 * A result completed in a batch of its own is over (outcome: a WiOutcome).
 * A suspect that is done, dead or no longer ours is cleared; one that failed
 * and will be retried stays a suspect.  Its handler has one lone completion
 * fewer to go.
 */
void
wi_crash_guard_completed_alone(int64 job_id, Oid handler, int outcome)
{
	AloneHandler *a = OidIsValid(handler) ? alone_entry(handler) : NULL;

	if (outcome == WI_OUTCOME_LOCKED || outcome == WI_OUTCOME_NOT_STARTED || outcome == WI_OUTCOME_ERROR ||
		outcome == WI_OUTCOME_TOO_SLOW)
		return;
	if (outcome != WI_OUTCOME_RETRY)
		forget_suspect(job_id);
	if (a != NULL && --a->left <= 0)
		remove_alone_handler((int) (a - alone));
	if (everything_alone && nsuspects < WI_MAX_SUSPECTS / 2 && nalone < WI_MAX_ALONE_HANDLERS / 2)
	{
		everything_alone = false;
		changed = true;
	}
	if (changed)
		write_list();
}

/* worker_status's alone_handlers: which handlers are completed alone, and why (a transaction for the names). */
static void
describe(void *arg)
{
	StringInfo	buf = (StringInfo) arg;

	if (everything_alone)
		appendStringInfoString(buf, "every job (the list of suspects overflowed); ");
	for (int i = 0; i < nalone; i++)
	{
		char	   *name = format_procedure_qualified(alone[i].handler);

		if (alone[i].batch > 0)
			appendStringInfo(buf, "%s%s: suspect after an apply worker died completing %d jobs, %d lone completions to go",
							 i > 0 ? "; " : "", name, alone[i].batch, alone[i].left);
		else
			appendStringInfo(buf, "%s%s: its job crashed an apply worker, %d lone completions to go",
							 i > 0 ? "; " : "", name, alone[i].left);
	}
}

/* Show the list in worker_status, if it changed since last shown. */
void
wi_crash_guard_publish(void)
{
	StringInfoData buf;

	if (!changed)
		return;
	write_list();
	initStringInfo(&buf);
	if (!wi_in_tx("webhook_ingest: naming suspect handlers", describe, &buf))
		return;					/* a lock timeout: next time */
	changed = false;
	wi_shmem_publish_alone(buf.data);
	pfree(buf.data);
}
