/*
 * receive.c
 *		webhook_ingest.receive(source, headers, body): an app's webhook
 *		endpoint in one call.  It passes the request as it came (headers as a
 *		JSON object, the raw body) and gets enqueue()'s answer:
 *
 *		1. admit the caller, as enqueue does (enqueue.h);
 *		2. verify the sender's signature with the source's scheme and secrets
 *		   (signature.c): a failure is SQLSTATE 28000, nothing written (a
 *		   body over max_payload_size is refused first, before any HMAC);
 *		3. parse the body as JSON: the payload (max_payload_size applies);
 *		4. the object id from the source's external_id_path, the event id
 *		   from event_id_path or else the scheme's delivery id (for Standard
 *		   Webhooks the very id the signature covers);
 *		5. write, as enqueue does (enqueue.h): the same outcomes, the same
 *		   race guarantees.
 *
 *		Messages never quote a secret, and quote the request only clipped;
 *		none logs the statement, which may hold the whole request.
 *
 * IDENTIFICATION
 *		src/intake/receive.c
 */
#include "postgres.h"

#include "common/jsonapi.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/jsonpath.h"
#include "utils/memutils.h"

#include "webhook_ingest.h"
#include "compat.h"
#include "enqueue.h"
#include "intake.h"
#include "settings.h"
#include "signature.h"
#include "signature_sql.h"
#include "source_cache.h"
#include "validate.h"

PG_FUNCTION_INFO_V1(webhook_ingest_receive);

/*
 * Where Stripe and Slack put a delivery's own id: the body's top-level key
 * (the other schemes' is a header: wi_sig_delivery_id).
 */
static const char *const body_id_keys[] = {
	[WI_SIG_STANDARD_WEBHOOKS] = NULL,
	[WI_SIG_STRIPE] = "id",
	[WI_SIG_GITHUB] = NULL,
	[WI_SIG_SHOPIFY] = NULL,
	[WI_SIG_SLACK] = "event_id",
};

/* The source is set up for receive(): a scheme and an external_id_path. */
static void
check_configured(text *source, const WiSourceIntake *intake)
{
	const char *missing = intake->signature_scheme == NULL ? "signature_scheme" :
		intake->external_id_path == NULL ? "external_id_path" : NULL;

	if (missing != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("source \"%s\" has no %s", wi_clip_text(source), missing),
				 errdetail("receive() needs a source's signature_scheme, signing_secrets and external_id_path."),
				 errhint("Set them with webhook_ingest.alter_source(), or call webhook_ingest.enqueue().")));
}

/*
 * Before the signature: max_payload_size applies to the body as text (and
 * to its jsonb after parsing), so a longer body can never pass; refusing it
 * first spares every secret's HMAC over it.
 */
static void
check_body_size(text *body)
{
	int			len = VARSIZE_ANY_EXHDR(body);

	if ((Size) len > (Size) wi_max_payload_size_kb * 1024)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("body of %d bytes exceeds webhook_ingest.max_payload_size (%d kB)",
						len, wi_max_payload_size_kb),
				 errhint("Raise webhook_ingest.max_payload_size.")));
}

/* Step 2: the signature, before the body is even parsed. */
static void
check_signature(text *source, WiSigScheme scheme, const WiSourceIntake *intake,
				const WiHeader *headers, int nheaders, text *body)
{
	WiSigStatus status = wi_check_signature(scheme, headers, nheaders, (struct varlena *) body,
											intake->signing_secrets, &intake->signature_tolerance);

	if (status == WI_SIG_OK)
		return;
	if (status == WI_SIG_BAD_SECRET)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("source \"%s\" has no usable signing secret", wi_clip_text(source)),
				 errhint("Set signing_secrets with webhook_ingest.alter_source().")));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION),
			 errmsg("webhook signature verification failed for source \"%s\"", wi_clip_text(source)),
			 errdetail("%s", wi_sig_status_detail(status)),
			 errhint("Scheme \"%s\": check the sender's signing secret and the headers passed.",
					 wi_sig_scheme_name(scheme))));
}

/*
 * Step 3: the body as jsonb (its size was checked before the signature).
 * Its syntax is checked by the JSON parser alone first, so that the message
 * quotes a clipped token rather than jsonb_in's whole one.
 */
static Jsonb *
parse_body(text *body)
{
	int			len = VARSIZE_ANY_EXHDR(body);
	char	   *json = text_to_cstring(body);
	JsonLexContext *lex;
	JsonParseErrorType error;

	/* With the escapes decoded, as jsonb_in will: \u0000 is refused here too. */
	lex = wi_json_lex_cstring(json, len, GetDatabaseEncoding(), true);
	error = pg_parse_json(lex, &nullSemAction);
	if (error != JSON_SUCCESS)
	{
		char	   *detail = json_errdetail(error, lex);

		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("webhook body is not valid JSON"),
				 errdetail("%s", wi_clip(detail, strlen(detail)))));
	}
	return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(json)));
}

/* The first item a jsonpath finds in doc (silently: no structural errors), or NULL. */
static Jsonb *
path_first(Jsonb *doc, JsonPath *path)
{
	static Jsonb *no_vars = NULL;
	LOCAL_FCINFO(call, 4);
	Datum		result;

	if (no_vars == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		no_vars = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum("{}")));
		MemoryContextSwitchTo(old);
	}
	InitFunctionCallInfoData(*call, NULL, 4, InvalidOid, NULL, NULL);
	call->args[0].value = JsonbPGetDatum(doc);
	call->args[1].value = PointerGetDatum(path);
	call->args[2].value = JsonbPGetDatum(no_vars);
	call->args[3].value = BoolGetDatum(true);
	for (int i = 0; i < 4; i++)
		call->args[i].isnull = false;
	result = jsonb_path_query_first(call);
	return call->isnull ? NULL : DatumGetJsonbP(result);
}

/*
 * An id found in the body: a string, or a number (as JSON writes it).
 * NULL if nothing (or JSON null) is there; an object, array or boolean is
 * an error.
 */
static text *
id_of_value(Jsonb *found, text *source, const char *setting)
{
	JsonbValue	v;
	bool		scalar;

	if (found == NULL)
		return NULL;
	scalar = JsonbExtractScalar(&found->root, &v);
	if (!scalar || v.type == jbvBool)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s of source \"%s\" finds no string or number in the webhook body",
						setting, wi_clip_text(source)),
				 errdetail("It finds %s.", scalar ? "a boolean" : "an object or an array")));
	if (v.type == jbvString)
		return cstring_to_text_with_len(v.val.string.val, v.val.string.len);
	if (v.type == jbvNumeric)
		return cstring_to_text(DatumGetCString(DirectFunctionCall1(numeric_out,
																   NumericGetDatum(v.val.numeric))));
	return NULL;				/* JSON null */
}

/* Step 4a: the object id, which receive() cannot do without. */
static text *
external_id_of(text *source, const WiSourceIntake *intake, Jsonb *payload)
{
	text	   *id = id_of_value(path_first(payload, intake->external_id_path), source, "external_id_path");

	if (id == NULL)
	{
		char	   *path = DatumGetCString(DirectFunctionCall1(jsonpath_out,
															   PointerGetDatum(intake->external_id_path)));

		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("external_id_path of source \"%s\" finds nothing in the webhook body",
						wi_clip_text(source)),
				 errhint("The path is %s.", wi_clip(path, strlen(path)))));
	}
	wi_check_external_id(VARDATA_ANY(id), VARSIZE_ANY_EXHDR(id));
	return id;
}

/*
 * Step 4b: the event id, by which redeliveries are duplicates: where
 * event_id_path says (it must find one), else the scheme's delivery id if
 * the request has one, else none (the webhook is only coalesced).
 */
static text *
event_id_of(text *source, WiSigScheme scheme, const WiSourceIntake *intake,
			const WiHeader *headers, int nheaders, Jsonb *payload)
{
	const char *body_key = body_id_keys[scheme];
	text	   *id = NULL;

	if (intake->event_id_path != NULL)
	{
		id = id_of_value(path_first(payload, intake->event_id_path), source, "event_id_path");
		if (id == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("event_id_path of source \"%s\" finds nothing in the webhook body",
							wi_clip_text(source))));
	}
	else if (body_key != NULL)
	{
		JsonbValue *v = JB_ROOT_IS_OBJECT(payload) ?
			getKeyJsonValueFromContainer(&payload->root, body_key, strlen(body_key), NULL) : NULL;

		if (v != NULL && v->type == jbvString)
			id = cstring_to_text_with_len(v->val.string.val, v->val.string.len);
	}
	else
	{
		const char *value;
		size_t		len;

		if (wi_sig_delivery_id(scheme, headers, nheaders, &value, &len))
			id = cstring_to_text_with_len(value, (int) len);
	}
	if (id != NULL)
		wi_check_id("event_id", VARDATA_ANY(id), VARSIZE_ANY_EXHDR(id));
	return id;
}

/*
 * While receive() runs, no message it raises (its own or any function's it
 * calls) logs the statement: the statement may hold the whole request, and
 * anyone who can reach the app's endpoint can make receive() fail.  With
 * the default log_min_error_statement and a client that interpolates
 * parameters, every forged or oversized request would put its headers and
 * body in the server log.  The message itself still names the source and
 * what failed.
 */
static void
hide_statement(void *arg)
{
	errhidestmt(true);
}

Datum
webhook_ingest_receive(PG_FUNCTION_ARGS)
{
	ErrorContextCallback hide = {.callback = hide_statement, .previous = error_context_stack};
	Datum		result;
	text	   *source;
	Jsonb	   *headers_jsonb;
	WiHeader   *headers;
	int			nheaders;
	text	   *body;
	WiSourceIntake intake;
	WiSigScheme scheme;
	Jsonb	   *payload;
	text	   *external_id;
	text	   *event_id;

	error_context_stack = &hide;
	PreventCommandIfReadOnly("webhook_ingest.receive()");
	PreventCommandIfParallelMode("webhook_ingest.receive()");
	wi_check_not_null(PG_ARGISNULL(0), "source");
	wi_check_not_null(PG_ARGISNULL(1), "headers");
	wi_check_not_null(PG_ARGISNULL(2), "body");
	source = PG_GETARG_TEXT_PP(0);
	headers_jsonb = PG_GETARG_JSONB_P(1);
	body = PG_GETARG_TEXT_PP(2);
	wi_check_source_name(source);

	wi_enqueue_admit(source);
	if (!wi_source_intake(source, &intake))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("source vanished after it was admitted")));
	check_configured(source, &intake);
	scheme = wi_scheme_of(intake.signature_scheme);
	check_body_size(body);
	headers = wi_headers_from_jsonb(headers_jsonb, &nheaders);
	check_signature(source, scheme, &intake, headers, nheaders, body);

	payload = parse_body(body);
	wi_check_payload_size(JsonbPGetDatum(payload));
	external_id = external_id_of(source, &intake, payload);
	event_id = event_id_of(source, scheme, &intake, headers, nheaders, payload);
	result = wi_enqueue_write(fcinfo, source, external_id, JsonbPGetDatum(payload), false, event_id);
	error_context_stack = hide.previous;
	return result;
}
