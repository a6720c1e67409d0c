/*
 * queue_write.c
 *		The fast path of enqueue(): writes the events and jobs rows through
 *		the table and index access methods, with the same speculative
 *		insertion protocol INSERT ... ON CONFLICT uses, but without planning
 *		or starting an executor per statement.
 *
 *		Used in READ COMMITTED on PostgreSQL 14 and later, and only while the
 *		tables hold exactly the columns this file knows; otherwise enqueue.c
 *		runs the same logic as SQL.  No user triggers, rules or constraints
 *		are expected on the extension's own tables (the one trigger on jobs,
 *		jobs_restored_running, never fires for a pending row).  Row security (0.3.0
 *		enables it on jobs, for app roles) does not apply to the user these
 *		writes run as, the tables' owner; if it ever did, SQL would be used.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "common/int.h"
#include "catalog/namespace.h"
#include "commands/sequence.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/execnodes.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "webhook_ingest.h"
#include "queue_write.h"

#if PG_VERSION_NUM >= 140000

/* Columns of webhook_ingest.jobs, in the order of the install and upgrade scripts. */
enum
{
	JOB_ID, JOB_SOURCE, JOB_EXTERNAL_ID, JOB_STATE, JOB_PAYLOAD, JOB_EVENTS,
	JOB_REFETCH, JOB_ATTEMPTS, JOB_LAST_ERROR, JOB_LAST_STATUS, JOB_CREATED_AT,
	JOB_UPDATED_AT, JOB_NEXT_ATTEMPT_AT, JOB_LEASE_UNTIL, JOB_WORKER_PID,
	JOB_FINISHED_AT, JOB_STARTED_AT, JOB_DONE_LSN, JOB_NATTS
};
static const Oid job_types[JOB_NATTS] = {
	INT8OID, TEXTOID, TEXTOID, InvalidOid /* the job_state enum */ , JSONBOID, INT4OID,
	BOOLOID, INT4OID, TEXTOID, INT4OID, TIMESTAMPTZOID,
	TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT4OID,
	TIMESTAMPTZOID, TIMESTAMPTZOID, PG_LSNOID
};
static const char *const job_columns[JOB_NATTS] = {
	"id", "source", "external_id", "state", "payload", "events",
	"refetch", "attempts", "last_error", "last_status", "created_at",
	"updated_at", "next_attempt_at", "lease_until", "worker_pid",
	"finished_at", "started_at", "done_lsn"
};

enum
{
	EVENT_SOURCE, EVENT_EVENT_ID, EVENT_RECEIVED_AT, EVENT_NATTS
};
static const char *const event_columns[EVENT_NATTS] = {"source", "event_id", "received_at"};
static const Oid event_types[EVENT_NATTS] = {TEXTOID, TEXTOID, TIMESTAMPTZOID};

/* One table being written: its relation, result info and a scratch slot. */
typedef struct WriteTarget
{
	Relation	rel;
	ResultRelInfo *rri;
	TupleTableSlot *slot;
} WriteTarget;

/*
 * OIDs of the extension's relations, looked up once per backend and
 * forgotten on any relcache invalidation that concerns them (DROP EXTENSION,
 * ALTER TABLE, ...).
 */
typedef struct QueueRelids
{
	bool		valid;
	Oid			sources;
	Oid			sources_pkey;
	Oid			jobs;
	Oid			jobs_active_object;
	Oid			jobs_id_seq;
	Oid			events;
	Oid			events_pkey;
	bool		direct_ok;		/* jobs and events are as queue_write.c writes them */
	bool		jobs_rls;		/* row security is enabled on jobs ... */
	bool		events_rls;		/* ... on events */
} QueueRelids;

static QueueRelids relids;

static void
forget_relids(Datum arg, Oid relid)
{
	if (!OidIsValid(relid) || relid == relids.sources || relid == relids.sources_pkey ||
		relid == relids.jobs || relid == relids.jobs_active_object ||
		relid == relids.jobs_id_seq || relid == relids.events || relid == relids.events_pkey)
		relids.valid = false;
}

static Oid
schema_relid(Oid nsp, const char *name)
{
	Oid			relid = get_relname_relid(name, nsp);

	if (!OidIsValid(relid))
		elog(ERROR, "relation webhook_ingest.%s is missing", name);
	return relid;
}

/*
 * The one trigger a direct write may pass by: jobs_restored_running (0.3.0),
 * BEFORE INSERT FOR EACH ROW WHEN the new row is running.  Direct writes
 * insert pending rows only, so it would never fire for them.
 */
static bool
trigger_bypassable(const Trigger *trig)
{
	return strcmp(trig->tgname, "jobs_restored_running") == 0 &&
		trig->tgqual != NULL &&
		TRIGGER_FOR_ROW(trig->tgtype) && TRIGGER_FOR_BEFORE(trig->tgtype) &&
		TRIGGER_FOR_INSERT(trig->tgtype) && !TRIGGER_FOR_UPDATE(trig->tgtype) &&
		!TRIGGER_FOR_DELETE(trig->tgtype) && !TRIGGER_FOR_TRUNCATE(trig->tgtype);
}

static bool
triggers_fit(const TriggerDesc *trigdesc)
{
	if (trigdesc == NULL)
		return true;
	for (int i = 0; i < trigdesc->numtriggers; i++)
		if (!trigger_bypassable(&trigdesc->triggers[i]))
			return false;
	return true;
}

/*
 * True when the relation has exactly these columns, in this order and of
 * these types (InvalidOid: any enum), and nothing that a direct write would
 * bypass: triggers (but the one above), rules, check constraints.  Row
 * security is looked at for each write (rls_applies): it depends on the
 * writing user.
 */
static bool
table_fits(Oid relid, const char *const *names, const Oid *types, int n, bool *rls)
{
	Relation	rel = table_open(relid, AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);
	bool		fits;

	*rls = rel->rd_rel->relrowsecurity;
	fits = desc->natts == n && triggers_fit(rel->trigdesc) && rel->rd_rules == NULL &&
		(desc->constr == NULL || desc->constr->num_check == 0);
	for (int i = 0; fits && i < n; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		fits = !att->attisdropped && strcmp(NameStr(att->attname), names[i]) == 0 &&
			(OidIsValid(types[i]) ? att->atttypid == types[i] : type_is_enum(att->atttypid));
	}
	table_close(rel, AccessShareLock);
	return fits;
}

static const QueueRelids *
queue_relids(void)
{
	static bool registered = false;

	if (!registered)
	{
		CacheRegisterRelcacheCallback(forget_relids, (Datum) 0);
		registered = true;
	}
	/* Lookups may process invalidations: repeat until one pass stays valid. */
	while (!relids.valid)
	{
		Oid			nsp;

		relids.valid = true;
		nsp = get_namespace_oid(WI_SCHEMA_NAME, false);

		relids.sources = schema_relid(nsp, "sources");
		relids.sources_pkey = schema_relid(nsp, "sources_pkey");
		relids.jobs = schema_relid(nsp, "jobs");
		relids.jobs_active_object = schema_relid(nsp, "jobs_active_object");
		relids.jobs_id_seq = schema_relid(nsp, "jobs_id_seq");
		relids.events = schema_relid(nsp, "events");
		relids.events_pkey = schema_relid(nsp, "events_pkey");
		relids.direct_ok = table_fits(relids.jobs, job_columns, job_types, JOB_NATTS, &relids.jobs_rls);
		relids.direct_ok &= table_fits(relids.events, event_columns, event_types, EVENT_NATTS,
									   &relids.events_rls);
	}
	return &relids;
}

/* For invalidation callbacks: the OID of sources if known, else InvalidOid. */
Oid
wi_cached_sources_relid(void)
{
	return relids.valid ? relids.sources : InvalidOid;
}

/*
 * Take ROW EXCLUSIVE on jobs before any lookup takes its snapshot:
 * drop_source() holds SHARE on jobs while it deletes, so once we have the
 * lock a dropped source is gone from our snapshot too.  Taking the lock also
 * processes pending invalidations, so look the OIDs up again after it.
 */
void
wi_lock_jobs(void)
{
	Oid			jobs = queue_relids()->jobs;

	LockRelationOid(jobs, RowExclusiveLock);
	if (queue_relids()->jobs != jobs)
		LockRelationOid(queue_relids()->jobs, RowExclusiveLock);
}

/*
 * Would row security filter or check what the current user writes here?
 * Not for the table's owner (unless FORCE ROW LEVEL SECURITY), a superuser
 * or a BYPASSRLS role: enqueue() writes as the owner of the enqueue
 * function, normally the tables' owner.  Only then may a direct write,
 * which sees no policy, stand in for the SQL statements.
 */
static bool
rls_applies(bool enabled, Oid relid)
{
	return enabled && check_enable_rls(relid, InvalidOid, true) == RLS_ENABLED;
}

/* Called as the user the write runs as. */
bool
wi_direct_write_possible(void)
{
	const QueueRelids *r;

	if (IsolationUsesXactSnapshot())
		return false;
	r = queue_relids();
	return r->direct_ok && !rls_applies(r->jobs_rls, r->jobs) && !rls_applies(r->events_rls, r->events);
}

static void
open_target(WriteTarget *t, Oid relid, EState *estate)
{
	t->rel = table_open(relid, RowExclusiveLock);
	t->rri = makeNode(ResultRelInfo);
	/* Range table index 0: there is no range table, and no column privileges to check. */
	InitResultRelInfo(t->rri, t->rel, 0, NULL, 0);
	ExecOpenIndices(t->rri, true);
	t->slot = ExecInitExtraTupleSlot(estate, RelationGetDescr(t->rel), &TTSOpsVirtual);
}

static void
close_target(WriteTarget *t)
{
	ExecCloseIndices(t->rri);
	table_close(t->rel, NoLock);
}

EState *
wi_write_begin(void)
{
	EState	   *estate = CreateExecutorState();

	/* Let this call see what earlier calls in the same statement wrote. */
	CommandCounterIncrement();
	estate->es_output_cid = GetCurrentCommandId(true);
	estate->es_snapshot = GetActiveSnapshot();
	return estate;
}

void
wi_write_end(EState *estate)
{
	ExecResetTupleTable(estate->es_tupleTable, false);
	FreeExecutorState(estate);
}

static List *
insert_indexes(WriteTarget *t, TupleTableSlot *slot, EState *estate, bool update,
			   bool noDupErr, bool *conflict, List *arbiters, bool only_summarizing)
{
#if PG_VERSION_NUM >= 160000
	return ExecInsertIndexTuples(t->rri, slot, estate, update, noDupErr, conflict, arbiters,
								 only_summarizing);
#else
	return ExecInsertIndexTuples(t->rri, slot, estate, update, noDupErr, conflict, arbiters);
#endif
}

/*
 * Insert the tuple in t->slot unless an arbiter index already holds its key
 * ("checked": the caller has just looked and found none).
 * Returns true if inserted, false if another row (committed, or ours) has
 * the key; in that case *conflict_tid points at it.  Waits for a concurrent
 * inserter of the same key to finish, as ON CONFLICT does.
 */
static bool
insert_unless_conflict(WriteTarget *t, EState *estate, List *arbiters, ItemPointer conflict_tid,
					   bool checked)
{
	for (;;)
	{
		uint32		token;
		bool		conflict = false;
		List	   *recheck;

		CHECK_FOR_INTERRUPTS();
		if (!checked && !ExecCheckIndexConstraints(t->rri, t->slot, estate, conflict_tid, arbiters))
			return false;
		checked = false;

		token = SpeculativeInsertionLockAcquire(GetCurrentTransactionId());
		table_tuple_insert_speculative(t->rel, t->slot, estate->es_output_cid, 0, NULL, token);
		recheck = insert_indexes(t, t->slot, estate, false, true, &conflict, arbiters, false);
		table_tuple_complete_speculative(t->rel, t->slot, token, !conflict);
		SpeculativeInsertionLockRelease(GetCurrentTransactionId());
		list_free(recheck);
		if (!conflict)
			return true;
		/* Lost a race with a concurrent inserter: look again. */
	}
}

/*
 * One probe of a unique index: does a row with these keys exist?  Optionally
 * returns an int8 column of it.  The snapshot is the caller's fresh one.
 */
static bool
probe(Oid relid, Oid indexid, ScanKeyData *keys, int nkeys, AttrNumber int8_attno, int64 *int8_value)
{
	Relation	rel = table_open(relid, AccessShareLock);
	/* Taken after the open, which may process invalidations. */
	Snapshot	snapshot = GetLatestSnapshot();
	SysScanDesc scan;
	HeapTuple	tuple;
	bool		found;

	scan = systable_beginscan(rel, indexid, true, snapshot, nkeys, keys);
	tuple = systable_getnext(scan);
	found = HeapTupleIsValid(tuple);
	if (found && int8_value != NULL)
	{
		bool		isnull;

		*int8_value = DatumGetInt64(heap_getattr(tuple, int8_attno, RelationGetDescr(rel), &isnull));
	}
	systable_endscan(scan);
	table_close(rel, NoLock);
	return found;
}

/*
 * The id of the object's pending or running job, if it has one.
 */
bool
wi_active_job(text *source, text *external_id, int64 *job_id)
{
	ScanKeyData keys[2];

	/* Without the partial index a heap scan would find finished jobs too. */
	if (IgnoreSystemIndexes)
		return false;

	ScanKeyInit(&keys[0], JOB_SOURCE + 1, BTEqualStrategyNumber, F_TEXTEQ, PointerGetDatum(source));
	ScanKeyInit(&keys[1], JOB_EXTERNAL_ID + 1, BTEqualStrategyNumber, F_TEXTEQ, PointerGetDatum(external_id));
	return probe(queue_relids()->jobs, queue_relids()->jobs_active_object, keys, 2, JOB_ID + 1, job_id);
}

WriteResult
wi_remember_event(EState *estate, text *source, text *event_id)
{
	WriteTarget t;
	ItemPointerData conflict_tid;
	WriteResult result;

	open_target(&t, queue_relids()->events, estate);
	{
		Datum	   *values = t.slot->tts_values;
		bool	   *isnull = t.slot->tts_isnull;

		ExecClearTuple(t.slot);
		values[EVENT_SOURCE] = PointerGetDatum(source);
		values[EVENT_EVENT_ID] = PointerGetDatum(event_id);
		values[EVENT_RECEIVED_AT] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
		memset(isnull, false, sizeof(bool) * EVENT_NATTS);
		ExecStoreVirtualTuple(t.slot);

		result = insert_unless_conflict(&t, estate, NIL, &conflict_tid, false) ? WRITE_INSERTED : WRITE_EXISTED;
	}
	close_target(&t);
	return result;
}

static Datum
enum_value(Oid enumtype, const char *label)
{
	return DirectFunctionCall2(enum_in, CStringGetDatum(label), ObjectIdGetDatum(enumtype));
}

/*
 * The object's active job absorbs this webhook: lock the row, then count the
 * webhook, keep the newest payload, and flag a running job for one more
 * fetch.  Returns false if the row changed under us (finished, or updated by
 * someone else), and the caller starts over.
 */
static bool
absorb_into_job(WriteTarget *t, EState *estate, ItemPointer tid, Datum payload, bool payload_null,
				Datum running, int64 *job_id, bool *was_running)
{
	TupleTableSlot *existing = table_slot_create(t->rel, &estate->es_tupleTable);
	TM_FailureData tmfd;
	TM_Result	res;
	LockTupleMode lockmode;
	Datum	   *values = t->slot->tts_values;
	bool	   *isnull = t->slot->tts_isnull;
	TimestampTz now = GetCurrentTransactionStartTimestamp();
#if PG_VERSION_NUM >= 160000
	TU_UpdateIndexes update_indexes;
#else
	bool		update_indexes;
#endif

	res = table_tuple_lock(t->rel, tid, estate->es_snapshot, existing, estate->es_output_cid,
						   LockTupleNoKeyExclusive, LockWaitBlock, 0, &tmfd);
	switch (res)
	{
		case TM_Ok:
			break;
		case TM_Updated:
		case TM_Deleted:
			/* Someone changed it since we found it: look again. */
			ExecClearTuple(existing);
			return false;
		default:
			elog(ERROR, "unexpected result %d locking a job row", (int) res);
	}

	slot_getallattrs(existing);
	ExecClearTuple(t->slot);
	memcpy(values, existing->tts_values, sizeof(Datum) * JOB_NATTS);
	memcpy(isnull, existing->tts_isnull, sizeof(bool) * JOB_NATTS);
	*job_id = DatumGetInt64(values[JOB_ID]);
	*was_running = (DatumGetObjectId(values[JOB_STATE]) == DatumGetObjectId(running));
	if (!payload_null)
	{
		values[JOB_PAYLOAD] = payload;
		isnull[JOB_PAYLOAD] = false;
	}
	{
		int32		events;

		if (pg_add_s32_overflow(DatumGetInt32(values[JOB_EVENTS]), 1, &events))
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("job %lld has absorbed too many webhooks", (long long) *job_id)));
		values[JOB_EVENTS] = Int32GetDatum(events);
	}
	values[JOB_REFETCH] = BoolGetDatum(DatumGetBool(values[JOB_REFETCH]) || *was_running);
	values[JOB_UPDATED_AT] = TimestampTzGetDatum(now);
	ExecStoreVirtualTuple(t->slot);

	res = table_tuple_update(t->rel, tid, t->slot, estate->es_output_cid, estate->es_snapshot,
							 InvalidSnapshot, true, &tmfd, &lockmode, &update_indexes);
	if (res != TM_Ok)
		elog(ERROR, "could not update a locked job row: result %d", (int) res);
#if PG_VERSION_NUM >= 160000
	if (update_indexes != TU_None)
		list_free(insert_indexes(t, t->slot, estate, true, false, NULL, NIL,
								 update_indexes == TU_Summarizing));
#else
	if (update_indexes)
		list_free(insert_indexes(t, t->slot, estate, true, false, NULL, NIL, false));
#endif
	ExecClearTuple(existing);
	return true;
}

WriteResult
wi_upsert_job(EState *estate, text *source, text *external_id, Datum payload, bool payload_null,
			  int64 *job_id, bool *was_running)
{
	WriteTarget t;
	WriteResult result;
	List	   *arbiters;
	Oid			state_type;
	Datum		pending;
	Datum		running;

	open_target(&t, queue_relids()->jobs, estate);
	arbiters = list_make1_oid(queue_relids()->jobs_active_object);
	state_type = TupleDescAttr(RelationGetDescr(t.rel), JOB_STATE)->atttypid;
	pending = enum_value(state_type, "pending");
	running = enum_value(state_type, "running");

	for (;;)
	{
		Datum	   *values = t.slot->tts_values;
		bool	   *isnull = t.slot->tts_isnull;
		TimestampTz now = GetCurrentTransactionStartTimestamp();
		ItemPointerData conflict_tid;

		CHECK_FOR_INTERRUPTS();
		ExecClearTuple(t.slot);
		memset(isnull, true, sizeof(bool) * JOB_NATTS);
		values[JOB_ID] = Int64GetDatum(0);	/* set below, once we know we insert */
		isnull[JOB_ID] = false;
		values[JOB_SOURCE] = PointerGetDatum(source);
		isnull[JOB_SOURCE] = false;
		values[JOB_EXTERNAL_ID] = PointerGetDatum(external_id);
		isnull[JOB_EXTERNAL_ID] = false;
		values[JOB_STATE] = pending;
		isnull[JOB_STATE] = false;
		values[JOB_PAYLOAD] = payload;
		isnull[JOB_PAYLOAD] = payload_null;
		values[JOB_EVENTS] = Int32GetDatum(1);
		isnull[JOB_EVENTS] = false;
		values[JOB_REFETCH] = BoolGetDatum(false);
		isnull[JOB_REFETCH] = false;
		values[JOB_ATTEMPTS] = Int32GetDatum(0);
		isnull[JOB_ATTEMPTS] = false;
		values[JOB_CREATED_AT] = values[JOB_UPDATED_AT] = values[JOB_NEXT_ATTEMPT_AT] =
			TimestampTzGetDatum(now);
		isnull[JOB_CREATED_AT] = isnull[JOB_UPDATED_AT] = isnull[JOB_NEXT_ATTEMPT_AT] = false;
		ExecStoreVirtualTuple(t.slot);

		/* Cheap look first, so a coalesced webhook does not burn a job id. */
		if (!ExecCheckIndexConstraints(t.rri, t.slot, estate, &conflict_tid, arbiters))
		{
			if (absorb_into_job(&t, estate, &conflict_tid, payload, payload_null, running,
								job_id, was_running))
			{
				result = WRITE_EXISTED;
				break;
			}
			continue;
		}

		*job_id = nextval_internal(queue_relids()->jobs_id_seq, false);
		t.slot->tts_values[JOB_ID] = Int64GetDatum(*job_id);
		if (insert_unless_conflict(&t, estate, arbiters, &conflict_tid, true))
		{
			*was_running = false;
			result = WRITE_INSERTED;
			break;
		}
		if (absorb_into_job(&t, estate, &conflict_tid, payload, payload_null, running,
							job_id, was_running))
		{
			result = WRITE_EXISTED;
			break;
		}
	}

	list_free(arbiters);
	close_target(&t);
	return result;
}

#else							/* PG_VERSION_NUM < 140000 */

Oid
wi_cached_sources_relid(void)
{
	return InvalidOid;
}

bool
wi_direct_write_possible(void)
{
	return false;
}

void
wi_lock_jobs(void)
{
	LockRelationOid(get_relname_relid("jobs", get_namespace_oid(WI_SCHEMA_NAME, false)),
					RowExclusiveLock);
}

bool
wi_active_job(text *source, text *external_id, int64 *job_id)
{
	elog(ERROR, "direct queue writes need PostgreSQL 14 or later");
	return false;
}

EState *
wi_write_begin(void)
{
	return NULL;
}

void
wi_write_end(EState *estate)
{
}

WriteResult
wi_remember_event(EState *estate, text *source, text *event_id)
{
	elog(ERROR, "direct queue writes need PostgreSQL 14 or later");
	return WRITE_EXISTED;
}

WriteResult
wi_upsert_job(EState *estate, text *source, text *external_id, Datum payload, bool payload_null,
			  int64 *job_id, bool *was_running)
{
	elog(ERROR, "direct queue writes need PostgreSQL 14 or later");
	return WRITE_EXISTED;
}

#endif
