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
 *		are expected on the extension's own tables.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "commands/sequence.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/execnodes.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "webhook_ingest.h"
#include "queue_write.h"

#if PG_VERSION_NUM >= 140000

/* Columns of webhook_ingest.jobs, in the order of the install script. */
enum
{
	JOB_ID, JOB_SOURCE, JOB_EXTERNAL_ID, JOB_STATE, JOB_PAYLOAD, JOB_EVENTS,
	JOB_REFETCH, JOB_ATTEMPTS, JOB_LAST_ERROR, JOB_LAST_STATUS, JOB_CREATED_AT,
	JOB_UPDATED_AT, JOB_NEXT_ATTEMPT_AT, JOB_LEASE_UNTIL, JOB_WORKER_PID,
	JOB_FINISHED_AT, JOB_NATTS
};
static const char *const job_columns[JOB_NATTS] = {
	"id", "source", "external_id", "state", "payload", "events",
	"refetch", "attempts", "last_error", "last_status", "created_at",
	"updated_at", "next_attempt_at", "lease_until", "worker_pid",
	"finished_at"
};

enum
{
	EVENT_SOURCE, EVENT_EVENT_ID, EVENT_RECEIVED_AT, EVENT_NATTS
};
static const char *const event_columns[EVENT_NATTS] = {"source", "event_id", "received_at"};

/* One table being written: its relation, result info and a scratch slot. */
typedef struct WriteTarget
{
	Relation	rel;
	ResultRelInfo *rri;
	TupleTableSlot *slot;
} WriteTarget;

static Oid
schema_relid(const char *name)
{
	Oid			relid = get_relname_relid(name, get_namespace_oid(WI_SCHEMA_NAME, false));

	if (!OidIsValid(relid))
		elog(ERROR, "relation webhook_ingest.%s is missing", name);
	return relid;
}

/*
 * True when the relation has exactly the named columns in this order, so
 * a tuple built here fills every column.
 */
static bool
columns_match(Relation rel, const char *const *names, int n)
{
	TupleDesc	desc = RelationGetDescr(rel);

	if (desc->natts != n)
		return false;
	for (int i = 0; i < n; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attisdropped || strcmp(NameStr(att->attname), names[i]) != 0)
			return false;
	}
	return true;
}

bool
wi_direct_write_possible(void)
{
	return !IsolationUsesXactSnapshot();
}

static void
open_target(WriteTarget *t, const char *name, EState *estate)
{
	t->rel = table_open(schema_relid(name), RowExclusiveLock);
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

static EState *
begin_write(void)
{
	EState	   *estate = CreateExecutorState();

	/* Let this call see what earlier calls in the same statement wrote. */
	CommandCounterIncrement();
	estate->es_output_cid = GetCurrentCommandId(true);
	estate->es_snapshot = GetActiveSnapshot();
	return estate;
}

static void
end_write(EState *estate)
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

bool
wi_source_exists(text *source)
{
	Relation	rel = table_open(schema_relid("sources"), AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	bool		found;

	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_TEXTEQ, PointerGetDatum(source));
	/* A fresh snapshot: the caller holds its lock on jobs by now. */
	scan = systable_beginscan(rel, schema_relid("sources_pkey"), true, GetLatestSnapshot(), 1, &key);
	found = HeapTupleIsValid(systable_getnext(scan));
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return found;
}

/*
 * The id of the object's pending or running job, if it has one.
 */
bool
wi_active_job(text *source, text *external_id, int64 *job_id)
{
	Relation	rel = table_open(schema_relid("jobs"), AccessShareLock);
	ScanKeyData keys[2];
	SysScanDesc scan;
	HeapTuple	tuple;
	bool		found = false;

	if (!columns_match(rel, job_columns, JOB_NATTS))
		elog(ERROR, "unexpected columns in webhook_ingest.jobs");
	ScanKeyInit(&keys[0], JOB_SOURCE + 1, BTEqualStrategyNumber, F_TEXTEQ, PointerGetDatum(source));
	ScanKeyInit(&keys[1], JOB_EXTERNAL_ID + 1, BTEqualStrategyNumber, F_TEXTEQ, PointerGetDatum(external_id));
	scan = systable_beginscan(rel, schema_relid("jobs_active_object"), true, GetLatestSnapshot(), 2, keys);
	if (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		bool		isnull;

		*job_id = DatumGetInt64(heap_getattr(tuple, JOB_ID + 1, RelationGetDescr(rel), &isnull));
		found = true;
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return found;
}

WriteResult
wi_remember_event(text *source, text *event_id)
{
	EState	   *estate = begin_write();
	WriteTarget t;
	ItemPointerData conflict_tid;
	WriteResult result;

	open_target(&t, "events", estate);
	if (!columns_match(t.rel, event_columns, EVENT_NATTS))
		result = WRITE_NOT_POSSIBLE;
	else
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
	end_write(estate);
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
	values[JOB_EVENTS] = Int32GetDatum(DatumGetInt32(values[JOB_EVENTS]) + 1);
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
wi_upsert_job(text *source, text *external_id, Datum payload, bool payload_null,
			  int64 *job_id, bool *was_running)
{
	EState	   *estate = begin_write();
	WriteTarget t;
	WriteResult result;
	List	   *arbiters;
	Oid			state_type;
	Datum		pending;
	Datum		running;

	open_target(&t, "jobs", estate);
	if (!columns_match(t.rel, job_columns, JOB_NATTS))
	{
		close_target(&t);
		end_write(estate);
		return WRITE_NOT_POSSIBLE;
	}
	arbiters = list_make1_oid(schema_relid("jobs_active_object"));
	state_type = TupleDescAttr(RelationGetDescr(t.rel), JOB_STATE)->atttypid;
	pending = enum_value(state_type, "pending");
	running = enum_value(state_type, "running");

	for (;;)
	{
		Datum	   *values = t.slot->tts_values;
		bool	   *isnull = t.slot->tts_isnull;
		TimestampTz now = GetCurrentTransactionStartTimestamp();
		ItemPointerData conflict_tid;

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

		*job_id = nextval_internal(schema_relid("jobs_id_seq"), false);
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
	end_write(estate);
	return result;
}

#else							/* PG_VERSION_NUM < 140000 */

bool
wi_direct_write_possible(void)
{
	return false;
}

bool
wi_source_exists(text *source)
{
	elog(ERROR, "direct queue writes need PostgreSQL 14 or later");
	return false;
}

bool
wi_active_job(text *source, text *external_id, int64 *job_id)
{
	elog(ERROR, "direct queue writes need PostgreSQL 14 or later");
	return false;
}

WriteResult
wi_remember_event(text *source, text *event_id)
{
	return WRITE_NOT_POSSIBLE;
}

WriteResult
wi_upsert_job(text *source, text *external_id, Datum payload, bool payload_null,
			  int64 *job_id, bool *was_running)
{
	return WRITE_NOT_POSSIBLE;
}

#endif
