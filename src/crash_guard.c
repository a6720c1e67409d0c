/*
 * crash_guard.c
 *		Poison jobs: a handler that kills the worker (a segfault in a C
 *		function, an OOM kill, pg_terminate_backend of itself, running on
 *		past its hard deadline) must not be reclaimed forever, nor roll back
 *		every batch it shares.
 *
 *		Before the worker completes a batch it writes the batch's jobs (id
 *		and handler) to a small file, and clears them once the batch is over
 *		- or when the worker exits because the postmaster told it to (a
 *		fast or smart shutdown is nobody's fault).  The file lives in
 *		pg_stat_tmp (not copied by base backups) and survives the worker's
 *		death and a postmaster crash-restart.  A new worker reads it:
 *
 *		- if the dead one was completing a single job, that job is the
 *		  culprit and the crash counts as its attempt (wi_count_crash);
 *		- if it was completing several, they all become suspects, and so do
 *		  their handlers: jobs of a suspect handler are completed one per
 *		  transaction from then on (a handler may crash only in company,
 *		  after another job left state behind), so the next crash names its
 *		  culprit.
 *
 *		Suspects are kept in the same file and pruned at every start to the
 *		jobs still pending or running; one leaves the list once its lone
 *		completion is over and it is done, dead or gone.  If the list
 *		overflows, every job is completed alone (never silently unguarded).
 *
 *		No fsync: the file guards against the worker's death, not the
 *		machine's.
 *
 * IDENTIFICATION
 *		src/crash_guard.c
 */
#include "postgres.h"

#include <fcntl.h>
#include <unistd.h>

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "storage/ipc.h"

#include "webhook_ingest.h"
#include "crash_guard.h"
#include "handler_call.h"
#include "http.h"
#include "job_store.h"

#define WI_MAX_SUSPECTS			1024
#define WI_MAX_ALONE_HANDLERS	64

static int	guard_fd = -1;
static int64 suspects[WI_MAX_SUSPECTS];
static int	nsuspects = 0;
static Oid	alone_handlers[WI_MAX_ALONE_HANDLERS];
static int	nalone_handlers = 0;
static bool everything_alone = false;	/* a list overflowed: fail safe */
static StringInfoData line;		/* reused: what goes into the file */

/* Set from the SIGTERM handler: the postmaster asked the worker to exit. */
static volatile sig_atomic_t terminated_by_postmaster = false;

static char *
guard_path(void)
{
	return psprintf("pg_stat_tmp/webhook_ingest.%u.completing", MyDatabaseId);
}

/* "completing <id>:<handler> ...\nsuspects <id> ...\nalone <oid> ...\n[all\n]" */
static void
write_guard(List *completing)
{
	ListCell   *lc;

	if (guard_fd < 0)
		return;
	resetStringInfo(&line);
	appendStringInfoString(&line, "completing");
	foreach(lc, completing)
		appendStringInfo(&line, " %lld:%u", (long long) ((Transfer *) lfirst(lc))->job_id,
						 ((Transfer *) lfirst(lc))->handler);
	appendStringInfoString(&line, "\nsuspects");
	for (int i = 0; i < nsuspects; i++)
		appendStringInfo(&line, " %lld", (long long) suspects[i]);
	appendStringInfoString(&line, "\nalone");
	for (int i = 0; i < nalone_handlers; i++)
		appendStringInfo(&line, " %u", alone_handlers[i]);
	appendStringInfoString(&line, everything_alone ? "\nall\n" : "\n");
	if (pwrite(guard_fd, line.data, line.len, 0) != line.len || ftruncate(guard_fd, line.len) != 0)
		ereport(WARNING,
				(errcode_for_file_access(),
				 errmsg("webhook_ingest worker: could not write \"%s\": %m", guard_path())));
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
			return;
		}
}

static void
add_alone_handler(Oid handler)
{
	for (int i = 0; i < nalone_handlers; i++)
		if (alone_handlers[i] == handler)
			return;
	if (nalone_handlers >= WI_MAX_ALONE_HANDLERS)
		everything_alone = true;
	else
		alone_handlers[nalone_handlers++] = handler;
}

/* The words after a line's label: "<label> a b c\n". */
static char *
line_after(char *buf, const char *label)
{
	char	   *p = buf;
	size_t		len = strlen(label);

	while (p && *p)
	{
		if (strncmp(p, label, len) == 0 && (p[len] == ' ' || p[len] == '\n' || p[len] == '\0'))
		{
			char	   *end = strchr(p, '\n');

			if (end)
				*end = '\0';
			return p + len;
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return NULL;
}

/* The file as the last worker left it. */
typedef struct LeftBehind
{
	int64	   *completing;
	Oid		   *completing_handlers;
	int			ncompleting;
} LeftBehind;

static void
read_guard(LeftBehind *left)
{
	char	   *buf = palloc0(65536 * 4);
	ssize_t		len = pread(guard_fd, buf, 65536 * 4 - 1, 0);
	char	   *words;
	char	   *copy;

	buf[Max(len, 0)] = '\0';
	left->completing = palloc(sizeof(int64) * 4096);
	left->completing_handlers = palloc(sizeof(Oid) * 4096);
	left->ncompleting = 0;

	copy = pstrdup(buf);
	if ((words = line_after(copy, "completing")) != NULL)
		for (char *tok = strtok(words, " "); tok && left->ncompleting < 4096; tok = strtok(NULL, " "))
		{
			char	   *colon = strchr(tok, ':');

			left->completing[left->ncompleting] = strtoll(tok, NULL, 10);
			left->completing_handlers[left->ncompleting++] = colon ? (Oid) strtoul(colon + 1, NULL, 10) : InvalidOid;
		}
	copy = pstrdup(buf);
	if ((words = line_after(copy, "suspects")) != NULL)
		for (char *tok = strtok(words, " "); tok; tok = strtok(NULL, " "))
			add_suspect(strtoll(tok, NULL, 10));
	copy = pstrdup(buf);
	if ((words = line_after(copy, "alone")) != NULL)
		for (char *tok = strtok(words, " "); tok; tok = strtok(NULL, " "))
			add_alone_handler((Oid) strtoul(tok, NULL, 10));
	copy = pstrdup(buf);
	everything_alone |= (line_after(copy, "all") != NULL);
}

/* Suspects that are no longer pending or running need no guarding. */
static void
prune_suspects(void)
{
	int			n = nsuspects;
	int64	   *active = palloc(sizeof(int64) * Max(n, 1));

	if (n == 0)
		return;
	n = wi_active_jobs(suspects, nsuspects, false, active);
	memcpy(suspects, active, sizeof(int64) * n);
	nsuspects = n;
	if (everything_alone && nsuspects < WI_MAX_SUSPECTS / 2 && nalone_handlers < WI_MAX_ALONE_HANDLERS)
		everything_alone = false;
}

/* On exit: a shutdown the postmaster asked for is not a crash of the batch's job. */
static void
clear_on_orderly_exit(int code, Datum arg)
{
	if (terminated_by_postmaster && !wi_handler_killed_worker())
		write_guard(NIL);
	if (wi_handler_killed_worker())
		ereport(LOG,
				(errmsg("webhook_ingest worker: exiting: a handler ran on after webhook_ingest.handler_timeout cancelled it"),
				 errdetail("The job counts this as an attempt when the worker starts again.")));
}

/* From the SIGTERM handler: the postmaster sent it. */
void
wi_crash_guard_postmaster_terminated(void)
{
	terminated_by_postmaster = true;
}

/*
 * At the worker's start: read what the last worker left, count a crash
 * against its culprit, and keep the file open for this worker's batches.
 */
void
wi_crash_guard_start(void)
{
	char	   *path = guard_path();
	LeftBehind	left;

	initStringInfo(&line);
	guard_fd = BasicOpenFile(path, O_RDWR | O_CREAT | PG_BINARY);
	if (guard_fd < 0)
	{
		ereport(WARNING,
				(errcode_for_file_access(),
				 errmsg("webhook_ingest worker: could not open \"%s\": %m", path),
				 errdetail("A job that crashes the worker will not be recognised.")));
		return;
	}
	before_shmem_exit(clear_on_orderly_exit, (Datum) 0);
	read_guard(&left);

	if (left.ncompleting == 1)
	{
		if (wi_count_crash(left.completing[0]) > 0)
			ereport(LOG,
					(errmsg("webhook_ingest worker: the previous worker died while handling job %lld; that counts as an attempt",
							(long long) left.completing[0])));
		add_suspect(left.completing[0]);
	}
	else if (left.ncompleting > 1)
	{
		for (int i = 0; i < left.ncompleting; i++)
		{
			add_suspect(left.completing[i]);
			if (OidIsValid(left.completing_handlers[i]))
				add_alone_handler(left.completing_handlers[i]);
		}
		ereport(LOG,
				(errmsg("webhook_ingest worker: the previous worker died while completing %d jobs; each is completed alone until the culprit is known",
						left.ncompleting),
				 errdetail("Jobs of their handlers are completed one per transaction from now on.")));
	}
	prune_suspects();
	write_guard(NIL);
}

/* Is this transfer to be completed in a transaction of its own? */
bool
wi_crash_guard_must_go_alone(Transfer *t)
{
	if (everything_alone || is_suspect(t->job_id))
		return true;
	for (int i = 0; i < nalone_handlers; i++)
		if (alone_handlers[i] == t->handler && OidIsValid(t->handler))
			return true;
	return false;
}

/* A batch is about to be completed. */
void
wi_crash_guard_completing(List *batch)
{
	write_guard(batch);
}

/*
 * The batch is over (committed or given up).  A suspect in it that is done,
 * dead or no longer ours is cleared; one that failed and will be retried
 * stays a suspect, completed alone again.
 */
void
wi_crash_guard_completed(List *batch)
{
	ListCell   *lc;

	foreach(lc, batch)
	{
		Transfer   *t = (Transfer *) lfirst(lc);

		if (t->outcome != WI_OUTCOME_DEFERRED && t->outcome != WI_OUTCOME_RETRY)
			forget_suspect(t->job_id);
	}
	write_guard(NIL);
}
