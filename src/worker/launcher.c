/*
 * launcher.c
 *		The launcher: a background worker with no database connection
 *		(shared catalogs only) that keeps, per database where the extension
 *		is installed, one worker (its fetcher, worker.c) and, once that is
 *		ready, webhook_ingest.apply_workers apply workers (applier.c).  It
 *		owns the slots of shmem.c: it reserves a database's slot before it
 *		registers its worker and frees it once every process of the database
 *		is gone.  It learns of databases from pg_database (connectable, not
 *		templates, passing webhook_ingest.database), of CREATE EXTENSION and
 *		CREATE DATABASE from a wake-up at their commit (utility.c), and of a
 *		process's exit from the postmaster (bgw_notify_pid).  A worker that
 *		finds no extension leaves cleanly, its apply workers are stopped, and
 *		none is started again until CREATE EXTENSION there.  A process that
 *		an administrator terminated, or an apply worker ended because a
 *		handler ran past its hard deadline, is restarted at once; one that
 *		crashed or failed is restarted with a back-off of its own (the
 *		others of its database keep running).  webhook_ingest.max_databases
 *		caps the databases; when max_worker_processes leaves too little
 *		room, each database gets its worker and a first apply worker before
 *		any gets a second.  A restarted launcher adopts the processes still
 *		running.
 *
 * IDENTIFICATION
 *		src/worker/launcher.c
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/fmgroids.h"
#include "utils/timestamp.h"
#include "utils/varlena.h"

#include "webhook_ingest.h"
#include "applier.h"
#include "launcher.h"
#include "settings.h"
#include "shmem.h"
#include "wait_event.h"
#include "worker.h"

PGDLLEXPORT void webhook_ingest_launcher_main(Datum arg);

/* How often pg_database is read again without a wake-up (ALTER DATABASE). */
#define WI_RESCAN_MS		10000
#define WI_BACKOFF_MIN_MS	1000
#define WI_BACKOFF_MAX_MS	60000
/* A worker that ran this long before it died starts its back-off afresh. */
#define WI_HEALTHY_MS		60000
/* Starts a look or a stop asks for: at most one a second per database (audit 0.10.0 third pass, 5). */
#define WI_LOOK_EVERY_MS	1000

typedef enum DbState
{
	DB_WANT,					/* should have a worker: start one when due */
	DB_RUNNING,					/* has a slot, and a worker (or one due to restart) */
	DB_STOPPING,				/* its processes are asked to stop; then after_stop */
	DB_IDLE						/* no extension there: until CREATE EXTENSION */
} DbState;

/* One process of a database: its worker, or an apply worker. */
typedef struct ProcEntry
{
	BackgroundWorkerHandle *handle; /* NULL: none, or one adopted at start */
	bool		running;		/* started or adopted, not yet reaped */
	TimestampTz next_start;
	TimestampTz started;
	int			failures;
} ProcEntry;

/* What the launcher knows of one database (its own memory). */
typedef struct DbEntry
{
	Oid			database;		/* hash key */
	NameData	name;
	DbState		state;
	DbState		after_stop;		/* DB_STOPPING: what it becomes once all is gone */
	ProcEntry	fetcher;
	ProcEntry	appliers[WI_MAX_APPLIERS];
	bool		seen;			/* in the latest read of pg_database */
	bool		recheck;		/* asked to look while a worker ran */
	bool		told_capped;
	TimestampTz looked_at;		/* when the last start a look or a stop asked for is (was) due */
} DbEntry;

/* Said once in a while: max_worker_processes left no room for an apply worker. */
static TimestampTz told_no_room = 0;

static HTAB *databases = NULL;

void
wi_register_launcher(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	/* Not on a standby: the postmaster starts it once recovery has ended. */
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 1;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "webhook_ingest");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "webhook_ingest_launcher_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "webhook_ingest launcher");
	snprintf(worker.bgw_type, BGW_MAXLEN, "webhook_ingest launcher");
	RegisterBackgroundWorker(&worker);
}

/* Does webhook_ingest.database (unset: every database) let this one in? */
static bool
database_wanted(const char *name)
{
	List	   *names;
	ListCell   *lc;
	bool		wanted = false;
	char	   *copy;

	if (wi_database == NULL || wi_database[0] == '\0')
		return true;
	copy = pstrdup(wi_database);
	if (!SplitGUCList(copy, ',', &names))
		return false;
	foreach(lc, names)
		if (strcmp((char *) lfirst(lc), name) == 0)
			wanted = true;
	list_free(names);
	pfree(copy);
	return wanted;
}

static void
forget_launcher(int code, Datum arg)
{
	SpinLockAcquire(&wi_shared->mutex);
	if (wi_shared->launcher_pid == MyProcPid)
	{
		wi_shared->launcher_pid = 0;
		wi_shared->launcher_latch = NULL;
	}
	SpinLockRelease(&wi_shared->mutex);
}

/* Free a slot; the caller holds the mutex. */
static void
free_slot(WiSlot *slot)
{
	slot->database = InvalidOid;
	slot->starting = false;
	slot->stop_requested = false;
	slot->fetcher_ready = false;
	slot->worker_pid = 0;
	slot->worker_latch = NULL;
	slot->state[0] = '\0';
	for (int i = 0; i < WI_MAX_APPLIERS; i++)
	{
		slot->appliers[i].starting = false;
		slot->appliers[i].pid = 0;
		slot->appliers[i].latch = NULL;
		slot->appliers[i].state[0] = '\0';
	}
}

static DbEntry *
entry_for(Oid database, bool *found)
{
	return (DbEntry *) hash_search(databases, &database, HASH_ENTER, found);
}

/*
 * Announce ourselves, and take over what a previous launcher left: workers
 * still running are adopted, slots whose worker never attached are freed.
 */
static void
announce_and_adopt(void)
{
	HASHCTL		ctl;
	int			adopted = 0;

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(Oid);
	ctl.entrysize = sizeof(DbEntry);
	databases = hash_create("webhook_ingest databases", 64, &ctl, HASH_ELEM | HASH_BLOBS);

	SpinLockAcquire(&wi_shared->mutex);
	wi_shared->launcher_pid = MyProcPid;
	wi_shared->launcher_latch = MyLatch;
	for (int i = 0; i < wi_shared->nslots; i++)
	{
		WiSlot	   *slot = &wi_shared->slots[i];
		bool		found;
		DbEntry    *e;

		if (!OidIsValid(slot->database))
			continue;
		/* Processes that never attached are not waited for: their database starts anew. */
		slot->starting = false;
		for (int k = 0; k < WI_MAX_APPLIERS; k++)
			slot->appliers[k].starting = false;
		if (!wi_slot_has_processes(slot))
		{
			free_slot(slot);
			continue;
		}
		e = entry_for(slot->database, &found);
		memset(e, 0, sizeof(DbEntry));
		e->database = slot->database;
		e->state = slot->stop_requested ? DB_STOPPING : DB_RUNNING;
		e->after_stop = DB_WANT;
		e->fetcher.running = slot->worker_pid != 0;
		e->fetcher.started = GetCurrentTimestamp();
		for (int k = 0; k < WI_MAX_APPLIERS; k++)
		{
			e->appliers[k].running = slot->appliers[k].pid != 0;
			e->appliers[k].started = e->fetcher.started;
		}
		e->seen = true;
		adopted++;
	}
	SpinLockRelease(&wi_shared->mutex);
	on_shmem_exit(forget_launcher, (Datum) 0);
	ereport(LOG,
			(errmsg("webhook_ingest launcher started, up to %d databases, %d workers adopted",
					wi_max_databases, adopted)));
}

/* Read pg_database: which databases may have a worker. */
static void
read_databases(void)
{
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tup;
	HASH_SEQ_STATUS seq;
	DbEntry    *e;

	hash_seq_init(&seq, databases);
	while ((e = hash_seq_search(&seq)) != NULL)
		e->seen = false;

	StartTransactionCommand();
	(void) GetTransactionSnapshot();
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while (HeapTupleIsValid(tup = heap_getnext(scan, ForwardScanDirection)))
	{
		Form_pg_database db = (Form_pg_database) GETSTRUCT(tup);
		bool		found;

		if (!db->datallowconn || db->datistemplate || !database_wanted(NameStr(db->datname)))
			continue;
		e = entry_for(db->oid, &found);
		if (!found)
		{
			memset(e, 0, sizeof(DbEntry));
			e->database = db->oid;
			e->state = DB_WANT;
		}
		e->name = db->datname;
		e->seen = true;
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	CommitTransactionCommand();
}

/*
 * A look (a change of IS_TEMPLATE or ALLOW_CONNECTIONS, a rename, CREATE
 * EXTENSION) or a stop asks for a worker again: however often a database's
 * owner commits such a change, at most one start a second.  CREATE EXTENSION
 * (superusers only) clears the wait first: its database gets its worker at
 * once.
 */
static void
want_again(DbEntry *e)
{
	e->state = DB_WANT;
	e->fetcher.next_start = Max(e->fetcher.next_start, TimestampTzPlusMilliseconds(e->looked_at, WI_LOOK_EVERY_MS));
	e->looked_at = Max(e->fetcher.next_start, GetCurrentTimestamp());
}

static void
clear_wait(DbEntry *e)
{
	if (e->state == DB_WANT && e->fetcher.failures == 0)
		e->fetcher.next_start = 0;	/* (not a crash's back-off) */
	e->looked_at = 0;
}

/* Databases someone asked us to look at: an idle one gets a worker again. */
static void
take_looks(void)
{
	Oid			look[WI_MAX_LOOK];
	Oid			installed[WI_MAX_LOOK];
	int			n;
	int			ninstalled;
	bool		all;

	SpinLockAcquire(&wi_shared->mutex);
	n = wi_shared->nlook;
	memcpy(look, wi_shared->look, sizeof(Oid) * n);
	ninstalled = wi_shared->ninstalled;
	memcpy(installed, wi_shared->installed, sizeof(Oid) * ninstalled);
	all = wi_shared->look_all;
	wi_shared->nlook = 0;
	wi_shared->ninstalled = 0;
	wi_shared->look_all = false;
	SpinLockRelease(&wi_shared->mutex);

	for (int i = 0; i < ninstalled; i++)
	{
		DbEntry    *e = hash_search(databases, &installed[i], HASH_FIND, NULL);

		if (e)
			clear_wait(e);
	}

	for (int i = 0; i < n; i++)
	{
		DbEntry    *e = hash_search(databases, &look[i], HASH_FIND, NULL);

		if (e && e->state == DB_IDLE)
			want_again(e);
		else if (e && e->state == DB_RUNNING)
			e->recheck = true;	/* it may have looked before the commit */
	}
	if (all)
	{
		HASH_SEQ_STATUS seq;
		DbEntry    *e;

		hash_seq_init(&seq, databases);
		while ((e = hash_seq_search(&seq)) != NULL)
		{
			if (e->state == DB_IDLE)
				want_again(e);
			e->recheck = true;
		}
	}
}

static bool
is_blocked(Oid database)
{
	for (int i = 0; i < wi_shared->nblocks; i++)
		if (wi_shared->blocked[i] == database)
			return true;
	return false;
}

static int
backoff_ms(int failures)
{
	int			ms = WI_BACKOFF_MIN_MS;

	for (int i = 1; i < failures && ms < WI_BACKOFF_MAX_MS; i++)
		ms *= 2;
	return Min(ms, WI_BACKOFF_MAX_MS);
}

/* Is a process still there?  By its handle, or (adopted) by its pid in the slot. */
static bool
alive(const ProcEntry *p, pid_t slot_pid)
{
	pid_t		pid;

	if (p->handle)
		return GetBackgroundWorkerPid(p->handle, &pid) != BGWH_STOPPED;
	return slot_pid != 0;
}

/*
 * When a process that exited for this reason starts again: at once after an
 * administrator's SIGTERM, a clean stop or a handler's hard deadline (the
 * job is dead: it will not do it again); after a crash or a failure, with a
 * back-off that doubles, starting afresh after WI_HEALTHY_MS of health.
 */
static void
schedule_restart(ProcEntry *p, WiExitReason reason, const char *what, const char *dbname)
{
	TimestampTz now = GetCurrentTimestamp();

	if (p->handle)
		pfree(p->handle);
	p->handle = NULL;
	p->running = false;
	if (reason != WI_EXIT_UNEXPECTED)
	{
		p->next_start = now;
		if (reason == WI_EXIT_TERMINATED || reason == WI_EXIT_DEADLINE)
			ereport(LOG,
					(errmsg("webhook_ingest launcher: the %s of database \"%s\" was %s, restarting it now", what, dbname,
							reason == WI_EXIT_TERMINATED ? "terminated" : "ended at a handler's hard deadline")));
		return;
	}
	if (TimestampDifferenceExceeds(p->started, now, WI_HEALTHY_MS))
		p->failures = 0;
	p->failures++;
	p->next_start = TimestampTzPlusMilliseconds(now, backoff_ms(p->failures));
	ereport(LOG,
			(errmsg("webhook_ingest launcher: the %s of database \"%s\" exited unexpectedly, restarting it in %d ms",
					what, dbname, backoff_ms(p->failures))));
}

/* Ask every process of a slot to stop; the caller holds the mutex. */
static void
ask_slot_to_stop(WiSlot *slot)
{
	slot->stop_requested = true;
	if (slot->worker_latch)
		SetLatch(slot->worker_latch);
	for (int k = 0; k < WI_MAX_APPLIERS; k++)
		if (slot->appliers[k].latch)
			SetLatch(slot->appliers[k].latch);
}

/* What the worker's exit means for its database. */
static void
after_fetcher_exit(DbEntry *e, WiExitReason reason, bool stop_requested)
{
	if (stop_requested || reason == WI_EXIT_STOPPED || reason == WI_EXIT_NO_EXTENSION || !e->seen)
	{
		WiSlot	   *slot;

		/* for good: its apply workers stop too, and the slot goes once they have */
		e->state = DB_STOPPING;
		e->after_stop = (reason == WI_EXIT_NO_EXTENSION && !e->recheck && !stop_requested) ? DB_IDLE : DB_WANT;
		if (e->fetcher.handle)
			pfree(e->fetcher.handle);
		e->fetcher.handle = NULL;
		e->fetcher.running = false;
		SpinLockAcquire(&wi_shared->mutex);
		if ((slot = wi_slot_of(e->database)) != NULL)
			ask_slot_to_stop(slot);
		SpinLockRelease(&wi_shared->mutex);
		return;
	}
	schedule_restart(&e->fetcher, reason, "worker", NameStr(e->name));
}

/* The apply workers of a database that exited since the last look. */
static void
reap_appliers(DbEntry *e)
{
	for (int k = 0; k < WI_MAX_APPLIERS; k++)
	{
		ProcEntry  *p = &e->appliers[k];
		WiSlot	   *slot;
		WiExitReason reason = WI_EXIT_UNEXPECTED;
		char		what[32];
		bool		gone;

		if (!p->running)
			continue;
		SpinLockAcquire(&wi_shared->mutex);
		slot = wi_slot_of(e->database);
		gone = !alive(p, slot ? slot->appliers[k].pid : 0);
		if (gone && slot)
		{
			reason = slot->appliers[k].exit_reason;
			slot->appliers[k].starting = false;
		}
		SpinLockRelease(&wi_shared->mutex);
		if (!gone)
			continue;
		snprintf(what, sizeof(what), "apply worker %d", k);
		schedule_restart(p, reason == WI_EXIT_STOPPED ? WI_EXIT_STOPPED : reason, what, NameStr(e->name));
	}
}

/* Is any process of the database still there (or starting)? */
static bool
any_running(const DbEntry *e)
{
	if (e->fetcher.running)
		return true;
	for (int k = 0; k < WI_MAX_APPLIERS; k++)
		if (e->appliers[k].running)
			return true;
	return false;
}

/*
 * Are this database's processes still there?  Handles the worker's exit
 * (restart, or stop them all), the apply workers' (restart each), and frees
 * the slot once every process is gone from a database that stops.
 */
static void
reap(DbEntry *e)
{
	WiSlot	   *slot;
	WiExitReason reason = WI_EXIT_UNEXPECTED;
	bool		stop_requested = false;
	bool		fetcher_gone = false;

	SpinLockAcquire(&wi_shared->mutex);
	slot = wi_slot_of(e->database);
	if (slot && !e->seen)
		ask_slot_to_stop(slot);	/* dropped, now a template, or filtered out */
	if (e->fetcher.running && !alive(&e->fetcher, slot ? slot->worker_pid : 0))
	{
		fetcher_gone = true;
		if (slot)
		{
			reason = slot->exit_reason;
			stop_requested = slot->stop_requested;
			slot->starting = false;
		}
	}
	SpinLockRelease(&wi_shared->mutex);
	if (fetcher_gone)
	{
		after_fetcher_exit(e, reason, stop_requested);
		ConditionVariableBroadcast(&wi_shared->slot_changed);
	}
	reap_appliers(e);
	if (e->state == DB_STOPPING && !any_running(e))
	{
		SpinLockAcquire(&wi_shared->mutex);
		slot = wi_slot_of(e->database);
		if (slot)
			free_slot(slot);
		SpinLockRelease(&wi_shared->mutex);
		ConditionVariableBroadcast(&wi_shared->slot_changed);
		if (e->after_stop == DB_WANT)
			want_again(e);
		else
			e->state = DB_IDLE;
	}
}

/* Reserve a slot for a database; false when none is free or it is blocked. */
static bool
reserve_slot(Oid database, bool *capped)
{
	WiSlot	   *free = NULL;

	*capped = false;
	SpinLockAcquire(&wi_shared->mutex);
	if (!is_blocked(database))
	{
		for (int i = 0; i < wi_shared->nslots && free == NULL; i++)
			if (!OidIsValid(wi_shared->slots[i].database))
				free = &wi_shared->slots[i];
		if (free)
		{
			free_slot(free);
			free->database = database;
			free->starting = true;
			free->exit_reason = WI_EXIT_UNEXPECTED;
			free->started_at = 0;
			memset(&free->counters, 0, sizeof(WiCounters));
			free->in_flight = 0;
			free->applying = 0;
			free->history_until = DT_NOBEGIN;
			free->kept_until = DT_NOBEGIN;
			for (int k = 0; k < WI_MAX_APPLIERS; k++)
			{
				memset(&free->appliers[k], 0, sizeof(WiApplierSlot));
				free->appliers[k].queues = DSM_HANDLE_INVALID;
			}
			strlcpy(free->state, "starting", sizeof(free->state));
		}
		else
			*capped = true;
	}
	SpinLockRelease(&wi_shared->mutex);
	return free != NULL;
}

static void
release_slot(Oid database)
{
	WiSlot	   *slot;

	SpinLockAcquire(&wi_shared->mutex);
	slot = wi_slot_of(database);
	if (slot)
		free_slot(slot);
	SpinLockRelease(&wi_shared->mutex);
	ConditionVariableBroadcast(&wi_shared->slot_changed);
}

/*
 * Does the database exist, as of now?  pg_database is read without its index
 * (a handful of rows): the launcher is connected to no database, and before
 * 14 a process that is has no relcache entries for the shared catalogs'
 * indexes, so the syscache lookup there is a FATAL ("cannot read pg_class
 * without having selected a database").
 */
static bool
database_exists(Oid database)
{
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData key;
	bool		exists;

	StartTransactionCommand();
	rel = table_open(DatabaseRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_database_oid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(database));
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 1, &key);
	exists = HeapTupleIsValid(systable_getnext(scan));
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	CommitTransactionCommand();
	return exists;
}

/* A database's worker registered; the slot (reserved) is marked starting. */
static bool
register_fetcher(DbEntry *e)
{
	BackgroundWorker worker;

	wi_worker_describe(&worker, e->database);
	if (!RegisterDynamicBackgroundWorker(&worker, &e->fetcher.handle))
	{
		e->fetcher.handle = NULL;
		e->fetcher.failures++;
		e->fetcher.next_start = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), backoff_ms(e->fetcher.failures));
		ereport(LOG,
				(errmsg("webhook_ingest launcher: could not start a worker for database \"%s\"",
						NameStr(e->name)),
				 errhint("Raise max_worker_processes: it counts the launcher and, per database, the worker and its webhook_ingest.apply_workers apply workers.")));
		return false;
	}
	e->fetcher.running = true;
	e->fetcher.started = GetCurrentTimestamp();
	ereport(DEBUG1, (errmsg("webhook_ingest launcher: started a worker for database \"%s\"", NameStr(e->name))));
	return true;
}

/* Start a database's worker if it is due; returns false if capped. */
static bool
start(DbEntry *e)
{
	bool		capped = false;

	if (e->fetcher.next_start > GetCurrentTimestamp())
		return true;
	if (!reserve_slot(e->database, &capped))
		return !capped;
	/*
	 * The database may have been dropped since pg_database was read.  Checked
	 * after the slot is reserved (and marked starting): a DROP DATABASE that
	 * comes later waits for this worker and stops it; one that came earlier
	 * and committed is seen here - so no worker ever connects to a database
	 * that is gone (a FATAL).
	 */
	if (!database_exists(e->database))
	{
		release_slot(e->database);
		e->seen = false;
		e->state = DB_IDLE;	/* forgotten on the next pass */
		return true;
	}
	e->told_capped = false;
	if (!register_fetcher(e))
	{
		release_slot(e->database);
		return true;
	}
	e->state = DB_RUNNING;
	e->recheck = false;
	return true;
}

/* A running database's worker exited and is due again: into the slot its apply workers still use. */
static void
restart_fetcher(DbEntry *e)
{
	WiSlot	   *slot;
	bool		blocked;

	if (e->fetcher.running || e->fetcher.next_start > GetCurrentTimestamp())
		return;
	SpinLockAcquire(&wi_shared->mutex);
	slot = wi_slot_of(e->database);
	blocked = slot == NULL || slot->stop_requested || is_blocked(e->database);
	if (!blocked)
	{
		slot->starting = true;
		slot->exit_reason = WI_EXIT_UNEXPECTED;
		strlcpy(slot->state, "starting", sizeof(slot->state));
	}
	SpinLockRelease(&wi_shared->mutex);
	if (!blocked && !register_fetcher(e))
	{
		SpinLockAcquire(&wi_shared->mutex);
		if ((slot = wi_slot_of(e->database)) != NULL)
			slot->starting = false;
		SpinLockRelease(&wi_shared->mutex);
	}
}

/*
 * Start apply worker k of a running database if it is due and its worker is
 * ready; false when max_worker_processes leaves no room (the pass stops
 * starting apply workers then).
 */
static bool
start_applier(DbEntry *e, int k)
{
	ProcEntry  *p = &e->appliers[k];
	BackgroundWorker worker;
	WiSlot	   *slot;
	bool		ready;
	TimestampTz now = GetCurrentTimestamp();

	if (e->state != DB_RUNNING || p->running || p->next_start > now)
		return true;
	SpinLockAcquire(&wi_shared->mutex);
	slot = wi_slot_of(e->database);
	ready = slot != NULL && slot->fetcher_ready && !slot->stop_requested && slot->appliers[k].pid == 0;
	if (ready)
	{
		slot->appliers[k].starting = true;
		slot->appliers[k].exit_reason = WI_EXIT_UNEXPECTED;
		strlcpy(slot->appliers[k].state, "starting", sizeof(slot->appliers[k].state));
	}
	SpinLockRelease(&wi_shared->mutex);
	if (!ready)
		return true;
	wi_applier_describe(&worker, e->database, k);
	if (!RegisterDynamicBackgroundWorker(&worker, &p->handle))
	{
		p->handle = NULL;
		p->next_start = TimestampTzPlusMilliseconds(now, WI_BACKOFF_MIN_MS);
		SpinLockAcquire(&wi_shared->mutex);
		slot->appliers[k].starting = false;
		strlcpy(slot->appliers[k].state, "no room: max_worker_processes", sizeof(slot->appliers[k].state));
		SpinLockRelease(&wi_shared->mutex);
		if (TimestampDifferenceExceeds(told_no_room, now, WI_RESCAN_MS * 6))
		{
			ereport(LOG,
					(errmsg("webhook_ingest launcher: could not start apply worker %d for database \"%s\"",
							k, NameStr(e->name)),
					 errdetail("Its jobs wait for the apply workers that run; with none, nothing completes."),
					 errhint("Raise max_worker_processes: it counts the launcher and, per database, the worker and its webhook_ingest.apply_workers (%d) apply workers.",
							 wi_apply_workers)));
			told_no_room = now;
		}
		return false;
	}
	p->running = true;
	p->started = now;
	return true;
}

/* When the next start of one of the database's processes is due (DT_NOEND: none waits). */
static TimestampTz
next_due(const DbEntry *e)
{
	TimestampTz due = DT_NOEND;

	if ((e->state == DB_WANT || e->state == DB_RUNNING) && !e->fetcher.running)
		due = e->fetcher.next_start;
	if (e->state == DB_RUNNING)
		for (int k = 0; k < wi_apply_workers; k++)
			if (!e->appliers[k].running)
				due = Min(due, e->appliers[k].next_start);
	return due;
}

static void
tell_capped(DbEntry *e)
{
	if (e->told_capped)
		return;
	e->told_capped = true;
	ereport(LOG,
			(errmsg("webhook_ingest launcher: no worker for database \"%s\": webhook_ingest.max_databases (%d) reached",
					NameStr(e->name), wi_max_databases),
			 errdetail("Jobs enqueued in that database wait until another database's worker stops."),
			 errhint("Raise webhook_ingest.max_databases (and max_worker_processes) and restart the server.")));
}

/*
 * Apply workers due: first apply worker 0 of every database, then 1, and so
 * on, so that too few max_worker_processes leave no database without one.
 */
static void
start_appliers(DbEntry **running, int n)
{
	for (int k = 0; k < wi_apply_workers; k++)
		for (int i = 0; i < n; i++)
			if (!start_applier(running[i], k))
				return;
}

/* One pass over the databases: reap, forget, start; publish who is capped. */
static long
tend_databases(void)
{
	HASH_SEQ_STATUS seq;
	DbEntry    *e;
	Oid			capped[WI_MAX_CAPPED];
	int			ncapped = 0;
	long		timeout = WI_RESCAN_MS;
	TimestampTz now = GetCurrentTimestamp();
	long		size = hash_get_num_entries(databases) + 1;
	DbEntry   **due = palloc(sizeof(DbEntry *) * size);
	DbEntry   **running = palloc(sizeof(DbEntry *) * size);
	int			ndue = 0;
	int			nrunning = 0;

	hash_seq_init(&seq, databases);
	while ((e = hash_seq_search(&seq)) != NULL)
	{
		if (e->state == DB_RUNNING || e->state == DB_STOPPING)
			reap(e);
		/* (kept a second after a look or a stop: a database that comes back is not a new one to start at once) */
		if (e->state != DB_RUNNING && e->state != DB_STOPPING && !e->seen &&
			TimestampDifferenceExceeds(e->looked_at, now, WI_LOOK_EVERY_MS))
		{
			(void) hash_search(databases, &e->database, HASH_REMOVE, NULL);
			continue;
		}
		if (e->state == DB_WANT && e->seen)
			due[ndue++] = e;
		else if (e->state == DB_RUNNING)
			running[nrunning++] = e;
	}
	/* Started after the scan: start() runs a transaction, which must not span a hash scan. */
	for (int i = 0; i < ndue; i++)
	{
		if (!start(due[i]))
		{
			tell_capped(due[i]);
			if (ncapped < WI_MAX_CAPPED)
				capped[ncapped++] = due[i]->database;
		}
	}
	for (int i = 0; i < nrunning; i++)
		restart_fetcher(running[i]);
	start_appliers(running, nrunning);
	for (int i = 0; i < ndue; i++)
		running[nrunning++] = due[i];
	for (int i = 0; i < nrunning; i++)
	{
		TimestampTz at = next_due(running[i]);

		if (at != DT_NOEND && at > now)
			timeout = Min(timeout, (long) ((at - now) / 1000) + 1);
	}
	pfree(due);
	pfree(running);
	SpinLockAcquire(&wi_shared->mutex);
	wi_shared->ncapped = ncapped;
	memcpy(wi_shared->capped, capped, sizeof(Oid) * ncapped);
	SpinLockRelease(&wi_shared->mutex);
	return timeout;
}

static void
wait_for_news(long timeout_ms)
{
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, timeout_ms,
					 wi_wait_event(WI_WAIT_LAUNCHER_MAIN));
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
	if (ShutdownRequestPending)
		proc_exit(0);
	if (ConfigReloadPending)
	{
		ConfigReloadPending = false;
		ProcessConfigFile(PGC_SIGHUP);
	}
}

void
webhook_ingest_launcher_main(Datum arg)
{
	MemoryContext pass_cxt;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname("webhook_ingest launcher");
	announce_and_adopt();

	pass_cxt = AllocSetContextCreate(TopMemoryContext, "webhook_ingest launcher pass", ALLOCSET_DEFAULT_SIZES);
	for (;;)
	{
		long		timeout;

		MemoryContextReset(pass_cxt);
		MemoryContextSwitchTo(pass_cxt);
		take_looks();
		read_databases();
		MemoryContextSwitchTo(TopMemoryContext);
		timeout = tend_databases();
		MemoryContextSwitchTo(pass_cxt);
		wait_for_news(timeout);
	}
}
