/*
 * source_cache.c
 *		Per-backend cache of the source names known to exist, so enqueue()
 *		need not look each one up.  Only positive answers are kept.  A
 *		statement trigger on webhook_ingest.sources turns every change there
 *		into a relcache invalidation of the table, and the callback here
 *		empties the cache; enqueue() takes its lock on jobs, which processes
 *		pending invalidations, before it asks.
 */
#include "postgres.h"

#include "commands/trigger.h"
#include "fmgr.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "webhook_ingest.h"
#include "queue_write.h"

PG_FUNCTION_INFO_V1(webhook_ingest_sources_changed);

#define SOURCE_KEY_LEN	64		/* source names are at most 63 bytes */

typedef struct SourceEntry
{
	char		name[SOURCE_KEY_LEN];
} SourceEntry;

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
		hash_destroy(known_sources);
		known_sources = NULL;
	}
}

static HTAB *
source_table(void)
{
	if (known_sources == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = SOURCE_KEY_LEN;
		ctl.entrysize = sizeof(SourceEntry);
		ctl.hcxt = CacheMemoryContext;
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
 * Does the source exist?  Asks the table (wi_source_exists) on a miss.
 */
bool
wi_source_known(text *source)
{
	static bool registered = false;
	char		key[SOURCE_KEY_LEN];
	uint64		before;

	if (!key_of(source, key))
		return wi_source_exists(source);
	if (!registered)
	{
		CacheRegisterRelcacheCallback(forget_sources, (Datum) 0);
		registered = true;
	}
	if (hash_search(source_table(), key, HASH_FIND, NULL) != NULL)
		return true;
	/*
	 * The lookup may process invalidations, and so drop the table (fetch it
	 * anew) or make its answer stale (then do not keep it).
	 */
	before = invalidations;
	if (!wi_source_exists(source))
		return false;
	if (invalidations == before)
		hash_search(source_table(), key, HASH_ENTER, NULL);
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
