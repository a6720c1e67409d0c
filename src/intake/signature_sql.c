/*
 * signature_sql.c
 *		The backend side of signature verification (the checks themselves
 *		are in signature.c, pure C): request headers from jsonb, secrets from
 *		text[], the tolerance from an interval, the clock, and the
 *		SQL-callable webhook_ingest.verify_signature(scheme, secret, headers,
 *		body, tolerance).
 *
 * IDENTIFICATION
 *		src/intake/signature_sql.c
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "signature.h"
#include "webhook_ingest.h"
#include "signature_sql.h"
#include "validate.h"

PG_FUNCTION_INFO_V1(webhook_ingest_verify_signature);

/*
 * The value of a header given as a JSON array: its strings joined with ", ".
 * false if it is empty or holds anything but strings.
 */
static bool
joined_array(JsonbContainer *array, const char **value, size_t *len)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	StringInfoData buf;
	int			n = 0;

	if (!JsonContainerIsArray(array))
		return false;
	initStringInfo(&buf);
	it = JsonbIteratorInit(array);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok != WJB_ELEM)
			continue;
		if (v.type != jbvString)
		{
			pfree(buf.data);
			return false;
		}
		if (n++ > 0)
			appendStringInfoString(&buf, ", ");
		appendBinaryStringInfo(&buf, v.val.string.val, v.val.string.len);
	}
	*value = buf.data;
	*len = buf.len;
	return n > 0;
}

/* A header's value from its JSON value; false to skip the header. */
static bool
header_value_of(JsonbValue *v, const char **value, size_t *len)
{
	if (v->type == jbvString)
	{
		*value = v->val.string.val;
		*len = v->val.string.len;
		return true;
	}
	if (v->type == jbvBinary)
		return joined_array(v->val.binary.data, value, len);
	return false;
}

WiHeader *
wi_headers_from_jsonb(Jsonb *headers, int *nheaders)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	WiHeader   *result;
	const char *name = NULL;
	size_t		name_len = 0;
	int			n = 0;

	if (!JB_ROOT_IS_OBJECT(headers))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("headers must be a JSON object"),
				 errhint("Pass the request's headers as {\"Header-Name\": \"value\", ...}.")));
	result = palloc0(sizeof(WiHeader) * Max(JB_ROOT_COUNT(headers), 1));
	it = JsonbIteratorInit(&headers->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
		{
			name = v.val.string.val;
			name_len = v.val.string.len;
		}
		else if (tok == WJB_VALUE && header_value_of(&v, &result[n].value, &result[n].value_len))
		{
			result[n].name = name;
			result[n].name_len = name_len;
			n++;
		}
	}
	*nheaders = n;
	return result;
}

int64
wi_tolerance_seconds(const Interval *tolerance)
{
	int64		seconds = tolerance->time / USECS_PER_SEC
		+ (int64) tolerance->day * SECS_PER_DAY
		+ (int64) (tolerance->month / MONTHS_PER_YEAR) * (int64) (DAYS_PER_YEAR * SECS_PER_DAY)
		+ (int64) (tolerance->month % MONTHS_PER_YEAR) * DAYS_PER_MONTH * SECS_PER_DAY;

	if (seconds < 0 || (seconds == 0 && tolerance->time < 0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("signature tolerance must not be negative")));
	return seconds;
}

/* Now, in seconds since 1970. */
static int64
now_unix(void)
{
	return GetCurrentTimestamp() / USECS_PER_SEC
		+ (int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY;
}

WiSigStatus
wi_check_signature(WiSigScheme scheme, const WiHeader *headers, int nheaders, struct varlena *body,
				   ArrayType *secrets, const Interval *tolerance)
{
	int64		tolerance_s = wi_tolerance_seconds(tolerance);
	struct varlena *b = pg_detoast_datum_packed(body);
	Datum	   *elems;
	bool	   *nulls;
	int			nelems;
	const char **s;
	size_t	   *lens;
	int			n = 0;

	if (ARR_ELEMTYPE(secrets) != TEXTOID)
		elog(ERROR, "signing secrets must be text[]");
	deconstruct_array(secrets, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &nelems);
	s = palloc(sizeof(char *) * Max(nelems, 1));
	lens = palloc(sizeof(size_t) * Max(nelems, 1));
	for (int i = 0; i < nelems; i++)
	{
		text	   *t;

		if (nulls[i])
			continue;
		t = DatumGetTextPP(elems[i]);
		s[n] = VARDATA_ANY(t);
		lens[n] = VARSIZE_ANY_EXHDR(t);
		n++;
	}
	return wi_sig_verify(scheme, headers, nheaders, VARDATA_ANY(b), VARSIZE_ANY_EXHDR(b),
						 s, lens, n, now_unix(), tolerance_s);
}

/* The scheme named by a text; unknown: ERROR 22023. */
WiSigScheme
wi_scheme_of(text *name)
{
	WiSigScheme scheme;

	if (!wi_sig_scheme_from_name(VARDATA_ANY(name), VARSIZE_ANY_EXHDR(name), &scheme))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown signature scheme \"%s\"", wi_clip_text(name)),
				 errhint("The schemes are %s.", wi_sig_scheme_list())));
	return scheme;
}

/* A secret the scheme cannot sign with: ERROR 22023, which never quotes it. */
void
wi_check_secret_usable(WiSigScheme scheme, const char *secret, size_t len)
{
	if (!wi_sig_secret_valid(scheme, secret, len))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unusable signing secret for signature scheme \"%s\"", wi_sig_scheme_name(scheme)),
				 scheme == WI_SIG_STANDARD_WEBHOOKS ?
				 errdetail("A standard-webhooks secret is the base64 of 1 to %d bytes, optionally after \"whsec_\".",
						   WI_SIG_MAX_KEY_BYTES) :
				 errdetail("The secret is empty.")));
}

/*
 * verify_signature(scheme, secret, headers, body, tolerance): true when
 * the request carries a valid signature by secret, signed within tolerance
 * of now where the scheme signs a timestamp.  A NULL scheme, secret or
 * tolerance is an error (22004), as are an unknown scheme, an unusable
 * secret and a negative tolerance (22023); NULL headers or body: false.
 */
Datum
webhook_ingest_verify_signature(PG_FUNCTION_ARGS)
{
	WiSigScheme scheme;
	text	   *secret;
	const char *secret_data;
	size_t		secret_len;
	int64		tolerance_s;
	int			nheaders;
	WiHeader   *headers;
	text	   *body;

	wi_check_not_null(PG_ARGISNULL(0), "scheme");
	scheme = wi_scheme_of(PG_GETARG_TEXT_PP(0));
	wi_check_not_null(PG_ARGISNULL(1), "secret");
	wi_check_not_null(PG_ARGISNULL(4), "tolerance");
	tolerance_s = wi_tolerance_seconds(PG_GETARG_INTERVAL_P(4));
	secret = PG_GETARG_TEXT_PP(1);
	secret_data = VARDATA_ANY(secret);
	secret_len = VARSIZE_ANY_EXHDR(secret);
	wi_check_secret_usable(scheme, secret_data, secret_len);
	if (PG_ARGISNULL(2) || PG_ARGISNULL(3))
		PG_RETURN_BOOL(false);
	headers = wi_headers_from_jsonb(PG_GETARG_JSONB_P(2), &nheaders);
	body = PG_GETARG_TEXT_PP(3);
	PG_RETURN_BOOL(wi_sig_verify(scheme, headers, nheaders, VARDATA_ANY(body), VARSIZE_ANY_EXHDR(body),
								 &secret_data, &secret_len, 1, now_unix(), tolerance_s) == WI_SIG_OK);
}
