/*
 * intake.c
 *		The rules for a source's intake settings (sources_guard calls
 *		_check_intake for every row written): a known signature scheme, at
 *		least one usable secret for it and no NULL among them, no secrets
 *		without a scheme, a tolerance of zero or more.  At most
 *		WI_MAX_SIGNING_SECRETS secrets of at most WI_MAX_SECRET_BYTES each:
 *		receive() computes one HMAC of the body per secret for any request
 *		whose signature header is well-formed, forged or not, and copies the
 *		secrets at every call.  The paths, when the caller passes them, name
 *		no jsonpath variable.  Messages never quote a secret.
 *
 * IDENTIFICATION
 *		src/intake/intake.c
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonpath.h"
#include "utils/timestamp.h"

#include "webhook_ingest.h"
#include "intake.h"
#include "signature_sql.h"

PG_FUNCTION_INFO_V1(webhook_ingest_check_intake);

/* A rotation needs two; a Standard Webhooks key of 1024 bytes is 1374 characters as whsec_ base64. */
#define WI_MAX_SIGNING_SECRETS	16
#define WI_MAX_SECRET_BYTES		4096

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
	if (n > WI_MAX_SIGNING_SECRETS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("too many signing_secrets"),
				 errdetail("There are %d; the limit is %d.", n, WI_MAX_SIGNING_SECRETS)));
	for (int i = 0; i < n; i++)
	{
		text	   *secret;

		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("signing_secrets must not contain NULL")));
		secret = DatumGetTextPP(elems[i]);
		if (VARSIZE_ANY_EXHDR(secret) > WI_MAX_SECRET_BYTES)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("signing secret %d is too long", i + 1),
					 errdetail("It is %d bytes; the limit is %d bytes.", (int) VARSIZE_ANY_EXHDR(secret),
							   WI_MAX_SECRET_BYTES)));
		wi_check_secret_usable(scheme, VARDATA_ANY(secret), VARSIZE_ANY_EXHDR(secret));
	}
}

/* Whether a jsonpath item, or any after or inside it, is a variable ($name). */
static bool
has_variable(JsonPathItem *v)
{
	JsonPathItem arg;
	JsonPathItem to;

	check_stack_depth();
	switch (v->type)
	{
		case jpiVariable:
			return true;
		case jpiAnd:
		case jpiOr:
		case jpiEqual:
		case jpiNotEqual:
		case jpiLess:
		case jpiGreater:
		case jpiLessOrEqual:
		case jpiGreaterOrEqual:
		case jpiAdd:
		case jpiSub:
		case jpiMul:
		case jpiDiv:
		case jpiMod:
		case jpiStartsWith:
			jspGetLeftArg(v, &arg);
			if (has_variable(&arg))
				return true;
			jspGetRightArg(v, &arg);
			if (has_variable(&arg))
				return true;
			break;
		case jpiNot:
		case jpiIsUnknown:
		case jpiExists:
		case jpiPlus:
		case jpiMinus:
		case jpiFilter:
			jspGetArg(v, &arg);
			if (has_variable(&arg))
				return true;
			break;
		case jpiDatetime:
			if (v->content.arg != 0)
			{
				jspGetArg(v, &arg);
				if (has_variable(&arg))
					return true;
			}
			break;
		case jpiLikeRegex:
			jspInitByBuffer(&arg, v->base, v->content.like_regex.expr);
			if (has_variable(&arg))
				return true;
			break;
		case jpiIndexArray:
			for (int i = 0; i < v->content.array.nelems; i++)
				if ((jspGetArraySubscript(v, &arg, &to, i) && has_variable(&to)) || has_variable(&arg))
					return true;
			break;
		default:
			break;
	}
	return jspGetNext(v, &arg) && has_variable(&arg);
}

/*
 * A path receive() evaluates, with no variables: one that names a variable
 * would fail every call (42704), so it is refused when set.
 */
static void
check_path(JsonPath *path, const char *setting)
{
	JsonPathItem root;

	jspInit(&root, path);
	if (has_variable(&root))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not refer to a jsonpath variable", setting),
				 errhint("receive() evaluates the path without variables: write the value into the path.")));
}

/*
 * _check_intake(signature_scheme text, signing_secrets text[],
 * signature_tolerance interval [, external_id_path jsonpath,
 * event_id_path jsonpath]) returns void.  The paths are checked when the
 * SQL declaration passes them.
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
	if (PG_NARGS() >= 5 && !PG_ARGISNULL(3))
		check_path(PG_GETARG_JSONPATH_P(3), "external_id_path");
	if (PG_NARGS() >= 5 && !PG_ARGISNULL(4))
		check_path(PG_GETARG_JSONPATH_P(4), "event_id_path");
	PG_RETURN_VOID();
}
