/*
 * ledger_key.c
 *		The dedup ledger's hash: the hash operator class of its exclusion
 *		constraint (event_ledger_once) hashes each key with SipHash-2-4
 *		(siphash.c) under a key of 128 random bits made at CREATE EXTENSION
 *		(the one row of webhook_ingest.ledger_key, which no role but the
 *		extension's owner may read).  PostgreSQL's own text hash is unseeded:
 *		anyone could make event ids that share one hash code, and each insert
 *		then compared its id with every one of them (audit 0.10.0 third pass,
 *		item 1).  Under a secret key, ids that share a code are as rare as
 *		chance makes them; every candidate the index returns is still checked
 *		against the full id, so dedup stays exact.
 *
 *		The key is read once per backend, straight from the table (the index
 *		machinery calls the hash function as whoever writes or reads the
 *		ledger, without a grant), and read again after the table changes (a
 *		DROP and CREATE EXTENSION in the same session).  It must never change
 *		while the index holds codes made with it: a restore makes a new key
 *		and builds the index with it; pg_upgrade and physical replicas carry
 *		the table's file.
 *
 * IDENTIFICATION
 *		src/intake/ledger_key.c
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/namespace.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "webhook_ingest.h"
#include "siphash.h"

PG_FUNCTION_INFO_V1(webhook_ingest_ledger_hash);

#define LEDGER_KEY_TABLE	"ledger_key"
#define LEDGER_KEY_ATTNUM	2	/* ledger_key.key */

static unsigned char ledger_key[WI_SIPHASH_KEY_BYTES];
static Oid	ledger_key_relid = InvalidOid;	/* InvalidOid: not read (again) yet */
static bool callback_registered = false;

static void
forget_key(Datum arg, Oid relid)
{
	if (!OidIsValid(relid) || relid == ledger_key_relid)
		ledger_key_relid = InvalidOid;
}

/* The key, from the one row of webhook_ingest.ledger_key. */
static void
read_key(void)
{
	Oid			relid = get_relname_relid(LEDGER_KEY_TABLE, get_namespace_oid(WI_SCHEMA_NAME, false));
	Relation	rel;
	Snapshot	snapshot;
	TableScanDesc scan;
	HeapTuple	tuple;
	bool		isnull = true;
	bytea	   *key = NULL;

	if (!callback_registered)
	{
		CacheRegisterRelcacheCallback(forget_key, (Datum) 0);
		callback_registered = true;
	}
	if (!OidIsValid(relid))
		elog(ERROR, "webhook_ingest.%s is missing", LEDGER_KEY_TABLE);
	rel = table_open(relid, AccessShareLock);
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	scan = table_beginscan(rel, snapshot, 0, NULL);
	tuple = heap_getnext(scan, ForwardScanDirection);
	if (HeapTupleIsValid(tuple))
	{
		Datum		d = heap_getattr(tuple, LEDGER_KEY_ATTNUM, RelationGetDescr(rel), &isnull);

		if (!isnull)
			key = DatumGetByteaPP(d);
	}
	if (key == NULL || VARSIZE_ANY_EXHDR(key) != WI_SIPHASH_KEY_BYTES)
		elog(ERROR, "webhook_ingest.%s holds no key of %d bytes", LEDGER_KEY_TABLE, WI_SIPHASH_KEY_BYTES);
	memcpy(ledger_key, VARDATA_ANY(key), WI_SIPHASH_KEY_BYTES);
	table_endscan(scan);
	UnregisterSnapshot(snapshot);
	table_close(rel, AccessShareLock);
	ledger_key_relid = relid;
}

/*
 * _ledger_hash(text) returns integer: support function 1 of the hash
 * operator class webhook_ingest.ledger_ops, for text compared with "=" under
 * a deterministic collation (the ledger's keys are "C").
 */
Datum
webhook_ingest_ledger_hash(PG_FUNCTION_ARGS)
{
	text	   *t = PG_GETARG_TEXT_PP(0);
	Oid			collation = PG_GET_COLLATION();

	if (OidIsValid(collation) && !get_collation_isdeterministic(collation))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("webhook_ingest.ledger_ops does not support nondeterministic collations")));
	if (!OidIsValid(ledger_key_relid))
		read_key();
	PG_RETURN_INT32((int32) wi_siphash24(ledger_key, (const unsigned char *) VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t)));
}
