/*
 * source_cache.c
 *		Per-backend cache of the sources known to exist, with who may
 *		enqueue into each (enqueue_roles) and how receive() reads their
 *		requests (the intake settings), so neither function need look each
 *		one up.  Only positive answers are kept.  A statement trigger on
 *		webhook_ingest.sources turns every change there into a relcache
 *		invalidation of the table, and the callback here empties the cache.
 *		enqueue() asks for a fresh answer: pending invalidations are
 *		processed first, so a change committed by another session (a
 *		dropped source, new enqueue_roles) counts at once, even in a
 *		transaction that already holds its locks.
 *
 * IDENTIFICATION
 *		src/intake/source_cache.c
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "fmgr.h"
#include "utils/array.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "storage/lmgr.h"

#include "webhook_ingest.h"
#include "access.h"
#include "intake.h"
#include "source_cache.h"

PG_FUNCTION_INFO_V1(webhook_ingest_sources_changed);

/* What is known of one source; every pointer in one memory context. */
typedef struct SourceInfo
{
	WiSourceAccess access;
	WiSourceIntake intake;
} SourceInfo;

typedef struct SourceEntry
{
	char		name[WI_SOURCE_NAME_LEN];
	SourceInfo	info;			/* in cache_cxt */
} SourceEntry;

static MemoryContext cache_cxt = NULL;	/* the table and the role lists */
static HTAB *known_sources = NULL;
static uint64 invalidations = 0;	/* bumped by every invalidation seen */
static uint64 sources_generation = 1;	/* bumped by those that may concern sources */
static Oid	sources_relid = InvalidOid;	/* of the table the cache was read from */

static void
forget_sources(Datum arg, Oid relid)
{
	Oid			sources = sources_relid;

	invalidations++;
	if (OidIsValid(relid) && OidIsValid(sources) && relid != sources)
		return;
	sources_generation++;
	if (known_sources != NULL)
	{
		MemoryContextDelete(cache_cxt);
		cache_cxt = NULL;
		known_sources = NULL;
	}
}

static void
register_callback(void)
{
	static bool registered = false;

	if (!registered)
	{
		CacheRegisterRelcacheCallback(forget_sources, (Datum) 0);
		registered = true;
	}
}

/*
 * A number that changes with every invalidation that may concern sources
 * (its statement trigger sends one for each change): the worker reads the
 * sources' settings again only when it has.  In a transaction.
 */
uint64
wi_sources_generation(void)
{
	register_callback();
	if (!OidIsValid(sources_relid))
		sources_relid = get_relname_relid("sources", get_namespace_oid(WI_SCHEMA_NAME, false));
	return sources_generation;
}

static HTAB *
source_table(void)
{
	if (known_sources == NULL)
	{
		HASHCTL		ctl;

		cache_cxt = AllocSetContextCreate(CacheMemoryContext, "webhook_ingest sources",
										  ALLOCSET_SMALL_SIZES);
		ctl.keysize = WI_SOURCE_NAME_LEN;
		ctl.entrysize = sizeof(SourceEntry);
		ctl.hcxt = cache_cxt;
		known_sources = hash_create("webhook_ingest sources", 16, &ctl,
									HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	}
	return known_sources;
}

static bool
key_of(text *source, char *key)
{
	int			len = VARSIZE_ANY_EXHDR(source);

	if (len >= WI_SOURCE_NAME_LEN)
		return false;
	memset(key, 0, WI_SOURCE_NAME_LEN);
	memcpy(key, VARDATA_ANY(source), len);
	return true;
}

/* The varlena in a column, copied (detoasted) into the current context. */
static void *
copy_varlena(Datum value)
{
	return PG_DETOAST_DATUM_COPY(value);
}

/*
 * One column of a source's row into *info.  Columns are read by name: those
 * added by a later version are missing before its update, which means NULL
 * (or the default).
 */
static void
read_column(const char *name, Datum value, bool isnull, SourceInfo *info)
{
	if (strcmp(name, "enqueue_roles") == 0 && !isnull)
	{
		Datum	   *elems;
		int			nelems;

		deconstruct_array(DatumGetArrayTypeP(value), REGROLEOID, sizeof(Oid), true, TYPALIGN_INT,
						  &elems, NULL, &nelems);
		info->access.nroles = 0;
		info->access.roles = palloc(sizeof(Oid) * Max(nelems, 1));
		for (int j = 0; j < nelems; j++)
			info->access.roles[info->access.nroles++] = DatumGetObjectId(elems[j]);
	}
	else if (isnull)
		return;
	else if (strcmp(name, "id") == 0)
		info->access.source_id = DatumGetInt32(value);
	else if (strcmp(name, "signature_scheme") == 0)
		info->intake.signature_scheme = copy_varlena(value);
	else if (strcmp(name, "signing_secrets") == 0)
		info->intake.signing_secrets = copy_varlena(value);
	else if (strcmp(name, "signature_tolerance") == 0)
		info->intake.signature_tolerance = *DatumGetIntervalP(value);
	else if (strcmp(name, "external_id_path") == 0)
		info->intake.external_id_path = copy_varlena(value);
	else if (strcmp(name, "event_id_path") == 0)
		info->intake.event_id_path = copy_varlena(value);
}

/*
 * The source's row as of now (the latest snapshot, after the lock on jobs
 * the caller took): does it exist, and what it says, in the current memory
 * context.
 */
static bool
fetch_source(text *source, SourceInfo *info)
{
	Oid			nsp = get_namespace_oid(WI_SCHEMA_NAME, false);
	Oid			relid = get_relname_relid("sources", nsp);
	Oid			indexid = get_relname_relid("sources_pkey", nsp);
	Relation	rel;
	Snapshot	snapshot;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	bool		found;

	if (!OidIsValid(relid) || !OidIsValid(indexid))
		elog(ERROR, "relation webhook_ingest.sources is missing");
	rel = table_open(relid, AccessShareLock);
	sources_relid = relid;
	/* Taken after the open, which may process invalidations. */
	snapshot = GetLatestSnapshot();
	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_TEXTEQ, PointerGetDatum(source));
	scan = systable_beginscan(rel, indexid, true, snapshot, 1, &key);
	tuple = systable_getnext(scan);
	found = HeapTupleIsValid(tuple);
	memset(info, 0, sizeof(*info));
	info->access.nroles = -1;
	info->intake.signature_tolerance.time = 5 * 60 * USECS_PER_SEC;
	if (found)
	{
		TupleDesc	desc = RelationGetDescr(rel);

		for (int i = 0; i < desc->natts; i++)
		{
			Form_pg_attribute att = TupleDescAttr(desc, i);
			bool		isnull;
			Datum		value;

			if (att->attisdropped)
				continue;
			value = heap_getattr(tuple, i + 1, desc, &isnull);
			read_column(NameStr(att->attname), value, isnull, info);
		}
	}
	systable_endscan(scan);
	table_close(rel, NoLock);
	return found;
}

static void *
copy_in(const void *from, Size size, MemoryContext cxt)
{
	void	   *to;

	if (from == NULL)
		return NULL;
	to = MemoryContextAlloc(cxt, size);
	memcpy(to, from, size);
	return to;
}

/* A copy of *from in cxt. */
static void
copy_info(SourceInfo *to, const SourceInfo *from, MemoryContext cxt)
{
	const WiSourceIntake *in = &from->intake;

	*to = *from;
	to->access.roles = NULL;
	if (from->access.nroles >= 0)
		to->access.roles = copy_in(from->access.roles, sizeof(Oid) * Max(from->access.nroles, 1), cxt);
	to->intake.signature_scheme = copy_in(in->signature_scheme,
										  in->signature_scheme ? VARSIZE(in->signature_scheme) : 0, cxt);
	to->intake.signing_secrets = copy_in(in->signing_secrets,
										 in->signing_secrets ? VARSIZE(in->signing_secrets) : 0, cxt);
	to->intake.external_id_path = copy_in(in->external_id_path,
										  in->external_id_path ? VARSIZE(in->external_id_path) : 0, cxt);
	to->intake.event_id_path = copy_in(in->event_id_path,
									   in->event_id_path ? VARSIZE(in->event_id_path) : 0, cxt);
}

/*
 * What is known of the source, or NULL if it does not exist.  Asks the table
 * on a miss.  fresh: process pending invalidations first (enqueue, receive);
 * otherwise answer as of the last time they were processed (a row security
 * policy, consistent for the whole query).  The answer is the cache's (or,
 * for a name too long to be a key, the current context's): copy what is
 * needed before anything else can process invalidations.
 */
static const SourceInfo *
lookup(text *source, bool fresh)
{
	char		key[WI_SOURCE_NAME_LEN];
	uint64		before;
	SourceEntry *entry;
	SourceInfo *fetched = palloc(sizeof(SourceInfo));

	register_callback();
	if (fresh)
		AcceptInvalidationMessages();
	if (!key_of(source, key))
		return fetch_source(source, fetched) ? fetched : NULL;
	entry = hash_search(source_table(), key, HASH_FIND, NULL);
	if (entry != NULL)
		return &entry->info;

	/*
	 * The lookup may process invalidations, and so drop the table (fetch it
	 * anew) or make its answer stale (then do not keep it).
	 */
	before = invalidations;
	if (!fetch_source(source, fetched))
		return NULL;
	if (invalidations != before)
		return fetched;
	entry = hash_search(source_table(), key, HASH_ENTER, NULL);
	copy_info(&entry->info, fetched, cache_cxt);
	return &entry->info;
}

/*
 * Does the source exist, and who may enqueue into it?  *access is the
 * caller's copy.
 */
bool
wi_source_lookup(text *source, bool fresh, WiSourceAccess *access)
{
	const SourceInfo *info = lookup(source, fresh);

	if (info == NULL)
		return false;
	*access = info->access;
	if (info->access.nroles >= 0)
		access->roles = copy_in(info->access.roles, sizeof(Oid) * Max(info->access.nroles, 1),
								CurrentMemoryContext);
	return true;
}

/*
 * The source's intake settings, as of the last lookup (receive() made a
 * fresh one a moment ago); false if it does not exist.  *intake is the
 * caller's copy.
 */
bool
wi_source_intake(text *source, WiSourceIntake *intake)
{
	const SourceInfo *info = lookup(source, false);
	SourceInfo	copy;

	if (info == NULL)
		return false;
	copy_info(&copy, info, CurrentMemoryContext);
	*intake = copy.intake;
	return true;
}

/*
 * Statement trigger on webhook_ingest.sources: tell every backend.
 */
Datum
webhook_ingest_sources_changed(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		elog(ERROR, "webhook_ingest_sources_changed: not called by trigger manager");
	CacheInvalidateRelcache(trigdata->tg_relation);
	/* source_tls_keys: a change of a key is one of its source */
	if (strcmp(RelationGetRelationName(trigdata->tg_relation), "sources") != 0)
		CacheInvalidateRelcacheByRelid(get_relname_relid("sources", RelationGetNamespace(trigdata->tg_relation)));
	return PointerGetDatum(NULL);
}
