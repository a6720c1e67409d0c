/*
 * utility.c
 *		The ProcessUtility hook: what a backend's commands mean for the
 *		workers.  Before DROP DATABASE, ALTER DATABASE ... RENAME, CREATE
 *		DATABASE ... TEMPLATE and DROP EXTENSION webhook_ingest, the
 *		database concerned is blocked (the launcher starts no worker there)
 *		and its worker and apply workers asked to stop and waited for (each
 *		stops between batches), so that dropdb() finds
 *		no other session; the block ends with the transaction.  At the
 *		commit of CREATE EXTENSION, CREATE DATABASE and an ALTER DATABASE of
 *		IS_TEMPLATE or ALLOW_CONNECTIONS the launcher is woken to look at the
 *		database (at most once a second per database: launcher.c); at the
 *		commit of ALTER EXTENSION the database's worker is.
 *
 * IDENTIFICATION
 *		src/worker/utility.c
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "catalog/pg_extension.h"
#include "commands/dbcommands.h"
#include "commands/extension.h"
#include "commands/defrem.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "pgstat.h"
#include "storage/condition_variable.h"
#include "storage/latch.h"
#include "storage/procarray.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "webhook_ingest.h"
#include "compat.h"
#include "shmem.h"
#include "utility.h"
#include "wait_event.h"

/* Longest wait for a worker to stop before the command goes on anyway. */
#define WI_STOP_WAIT_MS		10000
#define WI_MAX_PENDING		8

static ProcessUtility_hook_type prev_process_utility = NULL;
static bool xact_callback_registered = false;

/* This backend's blocks, and databases to show the launcher, at xact end. */
static Oid	my_blocks[WI_MAX_PENDING];
static int	nmy_blocks = 0;
static Oid	looks_at_commit[WI_MAX_PENDING];
static bool installed_at_commit[WI_MAX_PENDING];	/* the look follows CREATE EXTENSION */
static int	nlooks_at_commit = 0;

static void
unblock_all(void)
{
	SpinLockAcquire(&wi_shared->mutex);
	for (int b = 0; b < nmy_blocks; b++)
	{
		for (int i = 0; i < wi_shared->nblocks; i++)
		{
			if (wi_shared->blocked[i] != my_blocks[b])
				continue;
			wi_shared->blocked[i] = wi_shared->blocked[--wi_shared->nblocks];
			break;
		}
	}
	SpinLockRelease(&wi_shared->mutex);
	for (int b = 0; b < nmy_blocks; b++)
		wi_shmem_wake_launcher(my_blocks[b]);
	nmy_blocks = 0;
}

static void
at_end_of_xact(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			for (int i = 0; i < nlooks_at_commit; i++)
				(installed_at_commit[i] ? wi_shmem_wake_launcher_installed :
				 wi_shmem_wake_launcher) (looks_at_commit[i]);
			nlooks_at_commit = 0;
			unblock_all();
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			nlooks_at_commit = 0;
			unblock_all();
			break;
		default:
			break;
	}
}

static void
need_xact_callback(void)
{
	if (!xact_callback_registered)
	{
		RegisterXactCallback(at_end_of_xact, NULL);
		xact_callback_registered = true;
	}
}

static void
look_at_commit(Oid database, bool installed)
{
	need_xact_callback();
	if (nlooks_at_commit < WI_MAX_PENDING)
	{
		installed_at_commit[nlooks_at_commit] = installed;
		looks_at_commit[nlooks_at_commit++] = database;
	}
	else
		wi_shmem_wake_launcher(InvalidOid);
}

static void
block(Oid database)
{
	bool		ok = false;

	need_xact_callback();
	if (nmy_blocks < WI_MAX_PENDING)
	{
		SpinLockAcquire(&wi_shared->mutex);
		if (wi_shared->nblocks < WI_MAX_BLOCKS)
		{
			wi_shared->blocked[wi_shared->nblocks++] = database;
			ok = true;
		}
		SpinLockRelease(&wi_shared->mutex);
	}
	/* Never run the command unprotected: the launcher could start a worker into it. */
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many databases are being dropped, renamed or copied at once"),
				 errhint("Retry when the other commands have ended.")));
	my_blocks[nmy_blocks++] = database;
}

/* Pids of a database's processes (its worker and apply workers), for wait_for_procs_exit. */
typedef struct DbPids
{
	int			n;
	pid_t		pids[1 + WI_MAX_APPLIERS];
} DbPids;

/* Ask the database's processes to stop; true while one (or its start) is there. */
static bool
ask_to_stop(Oid database, DbPids *pids)
{
	WiSlot	   *slot;
	Latch	   *latches[1 + WI_MAX_APPLIERS];
	int			nlatches = 0;
	bool		busy = false;

	SpinLockAcquire(&wi_shared->mutex);
	slot = wi_slot_of(database);
	if (slot && wi_slot_has_processes(slot))
	{
		slot->stop_requested = true;
		pids->n = 0;
		if (slot->worker_latch)
			latches[nlatches++] = slot->worker_latch;
		if (slot->worker_pid != 0)
			pids->pids[pids->n++] = slot->worker_pid;
		for (int i = 0; i < WI_MAX_APPLIERS; i++)
		{
			if (slot->appliers[i].latch)
				latches[nlatches++] = slot->appliers[i].latch;
			if (slot->appliers[i].pid != 0)
				pids->pids[pids->n++] = slot->appliers[i].pid;
		}
		busy = true;
	}
	SpinLockRelease(&wi_shared->mutex);
	for (int i = 0; i < nlatches; i++)
		SetLatch(latches[i]);
	return busy;
}

/*
 * The processes have left their slot; wait the few milliseconds until they
 * have left the proc array too, which is what dropdb() counts.
 */
static void
wait_for_procs_exit(const DbPids *pids, TimestampTz deadline)
{
	for (int i = 0; i < pids->n; i++)
		while (BackendPidGetProc(pids->pids[i]) != NULL && GetCurrentTimestamp() < deadline)
		{
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 2,
							 wi_wait_event(WI_WAIT_STOP_WORKER));
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
}

/* Block the database and wait until its worker and apply workers are gone. */
static void
stop_worker_of(Oid database)
{
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), WI_STOP_WAIT_MS);
	DbPids		pids = {0};
	/* Registered (17+) before the sleep is prepared: it may take a lock. */
	uint32		wait_event = wi_wait_event(WI_WAIT_STOP_WORKER);

	block(database);
	ConditionVariablePrepareToSleep(&wi_shared->slot_changed);
	while (ask_to_stop(database, &pids))
	{
		if (GetCurrentTimestamp() >= deadline)
		{
			ereport(WARNING,
					(errcode(ERRCODE_OBJECT_IN_USE),
					 errmsg("the webhook_ingest worker of database %u did not stop within %d ms",
							database, WI_STOP_WAIT_MS)));
			break;
		}
		(void) ConditionVariableTimedSleep(&wi_shared->slot_changed, 100, wait_event);
		CHECK_FOR_INTERRUPTS();
	}
	ConditionVariableCancelSleep();
	wait_for_procs_exit(&pids, deadline);
}

static bool
names_webhook_ingest(List *objects)
{
	ListCell   *lc;

	foreach(lc, objects)
		if (strcmp(strVal(lfirst(lc)), WI_EXTENSION_NAME) == 0)
			return true;
	return false;
}

static const char *
template_of(CreatedbStmt *stmt)
{
	ListCell   *lc;

	foreach(lc, stmt->options)
	{
		DefElem    *opt = lfirst(lc);

		if (strcmp(opt->defname, "template") == 0 && opt->arg != NULL)
			return defGetString(opt);
	}
	return "template1";
}

/*
 * Would the command pass its own privilege check?  Only then is a worker
 * stopped for it: otherwise any role could stop any database's worker by
 * running (and catching the error of) a command it may not run.  The
 * command itself checks again, as always.
 */
static bool
may_run(Node *parsetree, Oid database)
{
	switch (nodeTag(parsetree))
	{
		case T_DropdbStmt:
		case T_RenameStmt:
			return wi_database_ownercheck(database, GetUserId());
		case T_CreatedbStmt:
			{
				HeapTuple	tup;
				bool		is_template = false;

				if (!have_createdb_privilege())
					return false;
				tup = SearchSysCache1(DATABASEOID, ObjectIdGetDatum(database));
				if (HeapTupleIsValid(tup))
				{
					is_template = ((Form_pg_database) GETSTRUCT(tup))->datistemplate;
					ReleaseSysCache(tup);
				}
				return is_template || wi_database_ownercheck(database, GetUserId());
			}
		case T_DropStmt:
			{
				Oid			ext = get_extension_oid(WI_EXTENSION_NAME, true);

				return OidIsValid(ext) && wi_extension_ownercheck(ext, GetUserId());
			}
		default:
			return false;
	}
}

/* The database a command needs without a worker, or InvalidOid. */
static Oid
database_to_stop(Node *parsetree)
{
	switch (nodeTag(parsetree))
	{
		case T_DropdbStmt:
			return get_database_oid(((DropdbStmt *) parsetree)->dbname, true);
		case T_RenameStmt:
			if (((RenameStmt *) parsetree)->renameType == OBJECT_DATABASE)
				return get_database_oid(((RenameStmt *) parsetree)->subname, true);
			return InvalidOid;
		case T_CreatedbStmt:
			return get_database_oid(template_of((CreatedbStmt *) parsetree), true);
		case T_DropStmt:
			if (((DropStmt *) parsetree)->removeType == OBJECT_EXTENSION &&
				names_webhook_ingest(((DropStmt *) parsetree)->objects))
				return MyDatabaseId;
			return InvalidOid;
		default:
			return InvalidOid;
	}
}

/* Does ALTER DATABASE change an option the launcher reads? */
static bool
changes_who_is_served(AlterDatabaseStmt *stmt)
{
	ListCell   *lc;

	foreach(lc, stmt->options)
	{
		const char *option = ((DefElem *) lfirst(lc))->defname;

		if (strcmp(option, "is_template") == 0 || strcmp(option, "allow_connections") == 0)
			return true;
	}
	return false;
}

/* After the command: what to wake at commit. */
static void
wake_after(Node *parsetree)
{
	switch (nodeTag(parsetree))
	{
		case T_CreateExtensionStmt:
			if (strcmp(((CreateExtensionStmt *) parsetree)->extname, WI_EXTENSION_NAME) == 0)
				look_at_commit(MyDatabaseId, true);
			break;
		case T_AlterExtensionStmt:
			if (strcmp(((AlterExtensionStmt *) parsetree)->extname, WI_EXTENSION_NAME) == 0)
				wi_wake_worker_at_commit();
			break;
		case T_AlterDatabaseStmt:
			/*
			 * IS_TEMPLATE, ALLOW_CONNECTIONS: the launcher reads pg_database
			 * again.  No other option decides whether a database has a worker,
			 * and a database's owner may change them in a loop (audit 0.10.0
			 * third pass, 5: a look of a database without the extension is a
			 * worker started to find that out).
			 */
			if (changes_who_is_served((AlterDatabaseStmt *) parsetree))
				look_at_commit(get_database_oid(((AlterDatabaseStmt *) parsetree)->dbname, true), false);
			break;
		case T_CreatedbStmt:
			{
				Oid			created = get_database_oid(((CreatedbStmt *) parsetree)->dbname, true);

				if (OidIsValid(created))
					look_at_commit(created, false);
				break;
			}
		default:
			break;
	}
}

static void
wi_process_utility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
				   ProcessUtilityContext context, ParamListInfo params,
				   QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *parsetree = pstmt->utilityStmt;
	Oid			stop = database_to_stop(parsetree);

	if (OidIsValid(stop) && may_run(parsetree, stop))
		stop_worker_of(stop);
	if (prev_process_utility)
		prev_process_utility(pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc);
	wake_after(parsetree);
}

void
wi_utility_hook_install(void)
{
	prev_process_utility = ProcessUtility_hook;
	ProcessUtility_hook = wi_process_utility;
}
