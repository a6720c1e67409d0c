/*
 * source_cache.c
 *		Per-backend cache of the sources known to exist, with who may
 *		enqueue into each (enqueue_roles), so enqueue() need not look each
 *		one up.  Only positive answers are kept.  A statement trigger on
 *		webhook_ingest.sources turns every change there into a relcache
 *		invalidation of the table, and the callback here empties the cache.
 *		enqueue() asks for a fresh answer: pending invalidations are
 *		processed first, so a change committed by another session (a
 *		dropped source, new enqueue_roles) counts at once, even in a
 *		transaction that already holds its locks.
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
#include "storage/lmgr.h"

#include "webhook_ingest.h"
#include "access.h"
#include "queue_write.h"

PG_FUNCTION_INFO_V1(webhook_ingest_sources_changed);

#define SOURCE_KEY_LEN	64		/* source names are at most 63 bytes */

typedef struct SourceEntry
{
	char		name[SOURCE_KEY_LEN];
	WiSourceAccess access;		/* its role list in cache_cxt */
} SourceEntry;

static MemoryContext cache_cxt = NULL;	/* the table and the role lists */
static HTAB *known_sources = NULL;
static uint64 invalidations = 0;	/* bumped by every invalidation seen */

static void
forget_sources(Datum arg, Oid relid)
{
	Oid			sources = wi_cached_sources_relid();

	invalidations++;
	if (known_sources != NULL &&
		(!OidIsValid(relid) || !OidIsValid(sources) || relid == sources))
	{
		MemoryContextDelete(cache_cxt);
		cache_cxt = NULL;
		known_sources = NULL;
	}
}

static HTAB *
source_table(void)
{
	if (known_sources == NULL)
	{
		HASHCTL		ctl;

		cache_cxt = AllocSetContextCreate(CacheMemoryContext, "webhook_ingest sources",
										  ALLOCSET_SMALL_SIZES);
		ctl.keysize = SOURCE_KEY_LEN;
		ctl.entrysize = sizeof(SourceEntry);
		ctl.hcxt = cache_cxt;
#if PG_VERSION_NUM >= 140000
		known_sources = hash_create("webhook_ingest sources", 16, &ctl,
									HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
#else
		known_sources = hash_create("webhook_ingest sources", 16, &ctl, HASH_ELEM | HASH_CONTEXT);
#endif
	}
	return known_sources;
}

static bool
key_of(text *source, char *key)
{
	int			len = VARSIZE_ANY_EXHDR(source);

	if (len >= SOURCE_KEY_LEN)
		return false;
	memset(key, 0, SOURCE_KEY_LEN);
	memcpy(key, VARDATA_ANY(source), len);
	return true;
}

/*
 * The source's row as of now (the latest snapshot, after the lock on jobs
 * the caller took): does it exist, and its enqueue_roles (read by name: the
 * column is missing before 0.3.0, which means NULL).
 */
static bool
fetch_source(text *source, WiSourceAccess *access)
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
	/* Taken after the open, which may process invalidations. */
	snapshot = GetLatestSnapshot();
	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_TEXTEQ, PointerGetDatum(source));
	scan = systable_beginscan(rel, indexid, true, snapshot, 1, &key);
	tuple = systable_getnext(scan);
	found = HeapTupleIsValid(tuple);
	access->nroles = -1;
	access->roles = NULL;
	if (found)
	{
		TupleDesc	desc = RelationGetDescr(rel);

		for (int i = 0; i < desc->natts; i++)
		{
			Form_pg_attribute att = TupleDescAttr(desc, i);
			bool		isnull;
			Datum		value;
			Datum	   *elems;
			int			nelems;

			if (att->attisdropped || strcmp(NameStr(att->attname), "enqueue_roles") != 0)
				continue;
			value = heap_getattr(tuple, i + 1, desc, &isnull);
			if (isnull)
				break;
			deconstruct_array(DatumGetArrayTypeP(value), REGROLEOID, sizeof(Oid), true, TYPALIGN_INT,
							  &elems, NULL, &nelems);
			access->nroles = 0;
			access->roles = palloc(sizeof(Oid) * Max(nelems, 1));
			for (int j = 0; j < nelems; j++)
				access->roles[access->nroles++] = DatumGetObjectId(elems[j]);
			break;
		}
	}
	systable_endscan(scan);
	table_close(rel, NoLock);
	return found;
}

static void
copy_access(WiSourceAccess *to, int nroles, const Oid *roles, MemoryContext cxt)
{
	to->nroles = nroles;
	to->roles = NULL;
	if (nroles >= 0)
	{
		to->roles = MemoryContextAlloc(cxt, sizeof(Oid) * Max(nroles, 1));
		memcpy(to->roles, roles, sizeof(Oid) * nroles);
	}
}

/*
 * Does the source exist, and who may enqueue into it?  Asks the table on a
 * miss.  fresh: process pending invalidations first (enqueue); otherwise
 * answer as of the last time they were processed (a row security policy,
 * consistent for the whole query).  *access is the caller's copy.
 */
bool
wi_source_lookup(text *source, bool fresh, WiSourceAccess *access)
{
	static bool registered = false;
	char		key[SOURCE_KEY_LEN];
	uint64		before;
	SourceEntry *entry;
	WiSourceAccess fetched;

	if (!registered)
	{
		CacheRegisterRelcacheCallback(forget_sources, (Datum) 0);
		registered = true;
	}
	if (fresh)
		AcceptInvalidationMessages();
	if (!key_of(source, key))
		return fetch_source(source, access);
	entry = hash_search(source_table(), key, HASH_FIND, NULL);
	if (entry != NULL)
	{
		copy_access(access, entry->access.nroles, entry->access.roles, CurrentMemoryContext);
		return true;
	}
	/*
	 * The lookup may process invalidations, and so drop the table (fetch it
	 * anew) or make its answer stale (then do not keep it).
	 */
	before = invalidations;
	if (!fetch_source(source, &fetched))
		return false;
	*access = fetched;
	if (invalidations == before)
	{
		entry = hash_search(source_table(), key, HASH_ENTER, NULL);
		copy_access(&entry->access, fetched.nroles, fetched.roles, cache_cxt);
	}
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
	return PointerGetDatum(NULL);
}
