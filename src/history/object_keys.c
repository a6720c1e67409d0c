/*
 * object_keys.c
 *		The keys that find an object's packed jobs (issue 28).  A row of
 *		job_history_packed holds the jobs of one block of 128 ids; the GIN
 *		index job_history_packed_object finds the rows that may hold an
 *		external id, and a check array in the row tells most of the other
 *		rows apart before their external ids are read.
 *
 *		An external id's key is the first four bytes of its SHA-256: making
 *		ids that share one key takes about 2^32 tries per id (an unseeded
 *		hash such as hashtext would let a sender flood one object's bucket).
 *		The index holds, for each job of a row, a bucket of that key: its
 *		top `bits` bits, tagged with bits (bits << 24 | bucket).  The packer
 *		picks bits per row from how many jobs the row's partition is
 *		expected to hold (_object_bits), so that a bucket holds a few dozen
 *		jobs whatever the rate and the partition's width: fewer buckets
 *		would make each lookup read more rows, more would make the index
 *		pay an entry (~70 B) for a handful of jobs.  A lookup asks for the
 *		id's bucket at every level (_object_probe), and for level 0, which
 *		rows not keyed yet (packed before 0.10.0, until the storage round
 *		has keyed them) carry: it never misses a row.  The check array
 *		(object_checks, the low 16 bits of each job's key, in id order)
 *		passes about one row in 500 of those that share a bucket.
 *
 * IDENTIFICATION
 *		src/history/object_keys.c
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "common/cryptohash.h"
#include "common/sha2.h"
#include "fmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "webhook_ingest.h"
#include "object_keys.h"

PG_FUNCTION_INFO_V1(webhook_ingest_object_keys);
PG_FUNCTION_INFO_V1(webhook_ingest_object_checks);

/* The levels a row may be keyed at: an even number of bits from 4 to 24. */
#define WI_OBJECT_MIN_BITS	4
#define WI_OBJECT_MAX_BITS	24
#define WI_OBJECT_UNKEYED	0	/* the one key of a row not keyed yet */

/*
 * SHA-256, one digest after another: PostgreSQL's (OpenSSL's where built
 * with it) through pg_cryptohash.
 */
typedef pg_cryptohash_ctx *Sha256;

static Sha256
sha256_begin(void)
{
	return pg_cryptohash_create(PG_SHA256);
}

static void
sha256_digest(Sha256 ctx, const uint8 *data, size_t len, uint8 *digest)
{
	if (pg_cryptohash_init(ctx) < 0 || pg_cryptohash_update(ctx, data, len) < 0 ||
		pg_cryptohash_final(ctx, digest, PG_SHA256_DIGEST_LENGTH) < 0)
		elog(ERROR, "could not compute the key of an external id");
}

static void
sha256_end(Sha256 ctx)
{
	pg_cryptohash_free(ctx);
}

/* The first four bytes of the SHA-256 of an external id. */
static uint32
object_key(Sha256 ctx, text *id)
{
	uint8		digest[PG_SHA256_DIGEST_LENGTH];

	sha256_digest(ctx, (const uint8 *) VARDATA_ANY(id), VARSIZE_ANY_EXHDR(id), digest);
	return ((uint32) digest[0] << 24) | ((uint32) digest[1] << 16) | ((uint32) digest[2] << 8) | digest[3];
}

static int32
bucket(uint32 key, int bits)
{
	return (int32) (((uint32) bits << 24) | (key >> (32 - bits)));
}

/*
 * The keys of the non-NULL elements of an array of external ids, into
 * keys (palloc'd, *n of them).
 */
static uint32 *
keys_of(ArrayType *ids, int *n)
{
	Datum	   *elems;
	bool	   *nulls;
	int			nelems;
	uint32	   *keys;
	Sha256		ctx = sha256_begin();

	deconstruct_array(ids, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &nelems);
	keys = palloc(sizeof(uint32) * Max(nelems, 1));
	*n = 0;
	for (int i = 0; i < nelems; i++)
		if (!nulls[i])
			keys[(*n)++] = object_key(ctx, DatumGetTextPP(elems[i]));
	sha256_end(ctx);
	return keys;
}

static ArrayType *
int4_array(int32 *values, int n)
{
	Datum	   *elems = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		elems[i] = Int32GetDatum(values[i]);
	return construct_array(elems, n, INT4OID, sizeof(int32), true, TYPALIGN_INT);
}

/*
 * _object_keys(external_ids text[], bits smallint) -> integer[]: what the
 * GIN index holds for a packed row, its jobs' buckets at bits (duplicates
 * are the index's to fold); {0} for a row not keyed yet (bits NULL), whose
 * external ids are then not even read.
 */
Datum
webhook_ingest_object_keys(PG_FUNCTION_ARGS)
{
	int32		unkeyed = WI_OBJECT_UNKEYED;
	int			bits;
	uint32	   *keys;
	int32	   *buckets;
	int			n;

	if (PG_ARGISNULL(1) || PG_ARGISNULL(0))
		PG_RETURN_ARRAYTYPE_P(int4_array(&unkeyed, 1));
	bits = PG_GETARG_INT16(1);
	/* (a lookup asks for these levels only) */
	if (bits < WI_OBJECT_MIN_BITS || bits > WI_OBJECT_MAX_BITS || bits % 2 != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("object key bits must be an even number from %d to %d, not %d", WI_OBJECT_MIN_BITS,
						WI_OBJECT_MAX_BITS, bits)));
	keys = keys_of(PG_GETARG_ARRAYTYPE_P(0), &n);
	buckets = palloc(sizeof(int32) * Max(n, 1));
	for (int i = 0; i < n; i++)
		buckets[i] = bucket(keys[i], bits);
	PG_RETURN_ARRAYTYPE_P(int4_array(buckets, n));
}

/*
 * _object_checks(external_ids text[]) -> smallint[]: the low 16 bits of
 * each element's key, in the array's order (NULL for a NULL element).
 */
Datum
webhook_ingest_object_checks(PG_FUNCTION_ARGS)
{
	ArrayType  *ids = PG_GETARG_ARRAYTYPE_P(0);
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	int			dims[1];
	int			lbs[1] = {1};
	Sha256		ctx = sha256_begin();

	deconstruct_array(ids, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	for (int i = 0; i < n; i++)
		if (!nulls[i])
			elems[i] = Int16GetDatum((int16) (object_key(ctx, DatumGetTextPP(elems[i])) & 0xFFFF));
	sha256_end(ctx);
	dims[0] = n;
	PG_RETURN_ARRAYTYPE_P(construct_md_array(elems, nulls, n > 0 ? 1 : 0, dims, lbs, INT2OID, sizeof(int16),
											 true, TYPALIGN_SHORT));
}

/*
 * What a lookup of these external ids asks the index and the check
 * arrays: each id's bucket at every level and the unkeyed rows' key, and
 * each id's check.
 */
void
wi_object_probe(ArrayType *ids, Datum *probe, Datum *checks)
{
	int			n;
	uint32	   *keys = keys_of(ids, &n);
	int			levels = (WI_OBJECT_MAX_BITS - WI_OBJECT_MIN_BITS) / 2 + 1;
	int32	   *buckets = palloc(sizeof(int32) * (n * levels + 1));
	Datum	   *elems = palloc(sizeof(Datum) * Max(n, 1));
	int			nb = 0;

	buckets[nb++] = WI_OBJECT_UNKEYED;
	for (int i = 0; i < n; i++)
	{
		for (int bits = WI_OBJECT_MIN_BITS; bits <= WI_OBJECT_MAX_BITS; bits += 2)
			buckets[nb++] = bucket(keys[i], bits);
		elems[i] = Int16GetDatum((int16) (keys[i] & 0xFFFF));
	}
	*probe = PointerGetDatum(int4_array(buckets, nb));
	*checks = PointerGetDatum(construct_array(elems, n, INT2OID, sizeof(int16), true, TYPALIGN_SHORT));
}
