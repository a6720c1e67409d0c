/*
 * crash_guard.c
 *		Poison jobs: a handler that kills the worker (a segfault in a C
 *		function, an OOM kill, pg_terminate_backend of itself) must not be
 *		reclaimed forever, nor roll back every batch it shares.
 *
 *		Before the worker completes a batch it writes the batch's job ids to
 *		a small file, and clears them once the batch is over; the file lives
 *		in pg_stat_tmp (not copied by base backups) and survives the
 *		worker's death and a postmaster crash-restart.  A new worker reads
 *		it: if the dead one was completing a single job, that job is the
 *		culprit and the crash counts as its attempt (wi_count_crash); if it
 *		was completing several, they all become suspects.  Suspects are
 *		completed one per transaction, each alone in the file, so a second
 *		crash names its culprit.  The suspects are kept in the same file, so
 *		they survive further restarts; a suspect leaves the list once its
 *		lone completion committed.
 *
 *		No fsync: the file guards against the worker's death, not the
 *		machine's.
 */
#include "postgres.h"

#include <fcntl.h>
#include <unistd.h>

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/fd.h"

#include "webhook_ingest.h"
#include "crash_guard.h"
#include "http.h"
#include "job_store.h"

#define WI_MAX_SUSPECTS		1024

static int	guard_fd = -1;
static int64 suspects[WI_MAX_SUSPECTS];
static int	nsuspects = 0;
static StringInfoData line;		/* reused: what goes into the file */

static char *
guard_path(void)
{
	return psprintf("pg_stat_tmp/webhook_ingest.%u.completing", MyDatabaseId);
}

static void
parse_ids(const char *s, List **ids)
{
	while (*s)
	{
		char	   *end;
		long long	v = strtoll(s, &end, 10);

		if (end == s)
			break;
		*ids = lappend(*ids, psprintf("%lld", v));
		s = end;
	}
}

/* "completing <ids>\nsuspects <ids>\n" */
static void
write_guard(List *completing)
{
	ListCell   *lc;

	if (guard_fd < 0)
		return;
	resetStringInfo(&line);
	appendStringInfoString(&line, "completing");
	foreach(lc, completing)
		appendStringInfo(&line, " %lld", (long long) ((Transfer *) lfirst(lc))->job_id);
	appendStringInfoString(&line, "\nsuspects");
	for (int i = 0; i < nsuspects; i++)
		appendStringInfo(&line, " %lld", (long long) suspects[i]);
	appendStringInfoChar(&line, '\n');
	if (pwrite(guard_fd, line.data, line.len, 0) != line.len || ftruncate(guard_fd, line.len) != 0)
		ereport(WARNING,
				(errcode_for_file_access(),
				 errmsg("webhook_ingest worker: could not write \"%s\": %m", guard_path())));
}

static void
add_suspect(int64 id)
{
	if (wi_crash_guard_is_suspect(id) || nsuspects >= WI_MAX_SUSPECTS)
		return;
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

/*
 * At the worker's start: read what the last worker left, count a crash
 * against its culprit, and keep the file open for this worker's batches.
 */
void
wi_crash_guard_start(void)
{
	char	   *path = guard_path();
	char		buf[65536];
	ssize_t		len;
	List	   *completing = NIL;
	List	   *left_suspects = NIL;
	ListCell   *lc;

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
	len = pread(guard_fd, buf, sizeof(buf) - 1, 0);
	buf[Max(len, 0)] = '\0';
	{
		char	   *suspects_line = strstr(buf, "\nsuspects");

		if (suspects_line)
		{
			*suspects_line = '\0';
			parse_ids(suspects_line + strlen("\nsuspects"), &left_suspects);
		}
		if (strncmp(buf, "completing", 10) == 0)
			parse_ids(buf + 10, &completing);
	}
	foreach(lc, left_suspects)
		add_suspect(strtoll((char *) lfirst(lc), NULL, 10));

	if (list_length(completing) == 1)
	{
		int64		culprit = strtoll((char *) linitial(completing), NULL, 10);

		if (wi_count_crash(culprit) > 0)
			ereport(LOG,
					(errmsg("webhook_ingest worker: the previous worker died while handling job %lld; that counts as an attempt",
							(long long) culprit)));
		add_suspect(culprit);
	}
	else if (completing != NIL)
	{
		foreach(lc, completing)
			add_suspect(strtoll((char *) lfirst(lc), NULL, 10));
		ereport(LOG,
				(errmsg("webhook_ingest worker: the previous worker died while completing %d jobs; each is completed alone until the culprit is known",
						list_length(completing))));
	}
	write_guard(NIL);
}

bool
wi_crash_guard_is_suspect(int64 job_id)
{
	for (int i = 0; i < nsuspects; i++)
		if (suspects[i] == job_id)
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
