/*
 * intake.c
 *		The rules for a source's intake settings (sources_guard calls
 *		_check_intake for every row written): a known signature scheme, at
 *		least one usable secret for it and no NULL among them, no secrets
 *		without a scheme, a tolerance of zero or more.  Messages never quote
 *		a secret.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "webhook_ingest.h"
#include "intake.h"

PG_FUNCTION_INFO_V1(webhook_ingest_check_intake);

static void
check_secrets(WiSigScheme scheme, ArrayType *secrets)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n;

	if (ARR_NDIM(secrets) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("signing_secrets must be a one-dimensional array")));
	deconstruct_array(secrets, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("signing_secrets must not be empty")));
	for (int i = 0; i < n; i++)
	{
		text	   *secret;

		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("signing_secrets must not contain NULL")));
		secret = DatumGetTextPP(elems[i]);
		wi_check_secret_usable(scheme, VARDATA_ANY(secret), VARSIZE_ANY_EXHDR(secret));
	}
}

/*
 * _check_intake(signature_scheme text, signing_secrets text[],
 * signature_tolerance interval) returns void.
 */
Datum
webhook_ingest_check_intake(PG_FUNCTION_ARGS)
{
	bool		has_scheme = !PG_ARGISNULL(0);
	bool		has_secrets = !PG_ARGISNULL(1);

	if (has_scheme && !has_secrets)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("signature_scheme needs signing_secrets"),
				 errhint("Pass the sender's signing secret (several during a rotation) as signing_secrets.")));
	if (has_secrets && !has_scheme)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("signing_secrets needs a signature_scheme")));
	if (has_scheme)
		check_secrets(wi_scheme_of(PG_GETARG_TEXT_PP(0)), PG_GETARG_ARRAYTYPE_P(1));
	if (!PG_ARGISNULL(2))
		(void) wi_tolerance_seconds(PG_GETARG_INTERVAL_P(2));
	PG_RETURN_VOID();
}
