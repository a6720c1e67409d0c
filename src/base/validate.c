/*
 * validate.c
 *		Input checks: object and event ids (enqueue, url_for) and source
 *		definitions (add_source, alter_source).  Each failure is an ERROR with
 *		its own SQLSTATE and changes nothing.  A message quotes at most
 *		WI_ECHO_BYTES of an input (wi_clip).
 *
 * IDENTIFICATION
 *		src/base/validate.c
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/regproc.h"
#include "utils/syscache.h"

#include "webhook_ingest.h"
#include "validate.h"

PG_FUNCTION_INFO_V1(webhook_ingest_check_source);

#define WI_MAX_TIMEOUT_MS		3600000
#define WI_MAX_ATTEMPTS			1000
#define WI_PLACEHOLDER			"{external_id}"

/*
 * An input for an error message: at most WI_ECHO_BYTES bytes of it (whole
 * characters), then "..." if it was longer.  palloc'd.
 */
char *
wi_clip(const char *s, int len)
{
	return wi_clip_to(s, len, WI_ECHO_BYTES);
}

/* The same, at most max bytes (for what is stored rather than echoed). */
char *
wi_clip_to(const char *s, int len, int max)
{
	int			cut = pg_mbcliplen(s, len, max);

	return psprintf("%.*s%s", cut, s, cut < len ? "..." : "");
}

char *
wi_clip_text(text *t)
{
	return wi_clip(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
}

static char *
clip_cstring(const char *s)
{
	return wi_clip(s, (int) strlen(s));
}

void
wi_check_not_null(bool isnull, const char *what)
{
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", what)));
}

/*
 * An external_id or event_id: 1 to WI_MAX_ID_BYTES bytes, no control
 * characters (C0, DEL, and in UTF-8 the C1 range).
 */
void
wi_check_id(const char *what, const char *value, int len)
{
	bool		utf8 = (GetDatabaseEncoding() == PG_UTF8);

	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be empty", what)));
	if (len > WI_MAX_ID_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_STRING_DATA_RIGHT_TRUNCATION),
				 errmsg("%s is too long", what),
				 errdetail("It is %d bytes; the limit is %d bytes.", len, WI_MAX_ID_BYTES)));

	for (int i = 0; i < len; i++)
	{
		unsigned char c = (unsigned char) value[i];

		if (c < 0x20 || c == 0x7f ||
			(utf8 && c == 0xc2 && i + 1 < len &&
			 (unsigned char) value[i + 1] >= 0x80 && (unsigned char) value[i + 1] <= 0x9f))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s must not contain control characters", what),
					 errdetail("Byte %d is a control character.", i + 1)));
	}
}

/*
 * An external id names one object: it becomes one segment of the fetch's
 * path.  So no '/'- or '\\'-separated part of it may be "." or "..": an
 * upstream that decodes the segment before it resolves dot segments (nginx
 * does) would read "../../admin" as another resource of the same origin,
 * fetched with the source's headers.
 */
void
wi_check_external_id(const char *value, int len)
{
	int			start = 0;

	wi_check_id("external_id", value, len);
	for (int i = 0; i <= len; i++)
	{
		if (i < len && value[i] != '/' && value[i] != '\\')
			continue;
		if ((i - start == 1 && value[start] == '.') ||
			(i - start == 2 && value[start] == '.' && value[start + 1] == '.'))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("external_id must not have a \".\" or \"..\" path segment"),
					 errdetail("It becomes one segment of the fetch's path; an upstream could resolve it to another resource.")));
		start = i + 1;
	}
}

static void
check_source_name(const char *name)
{
	size_t		len = strlen(name);

	if (len == 0 || len > WI_MAX_SOURCE_NAME ||
		strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") != len)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_NAME),
				 errmsg("invalid source name \"%s\"", clip_cstring(name)),
				 errdetail("A source name is 1 to %d characters from A-Z, a-z, 0-9, \"_\", \".\" and \"-\".",
						   WI_MAX_SOURCE_NAME)));
}

/*
 * An http:// or https:// URL with a host and no white space or control
 * characters anywhere; what names it in the messages.  Returns where its
 * host ends (the first '/', '?' or '#' after it, or the end).
 */
const char *
wi_check_http_url(const char *url, const char *what)
{
	const char *authority;
	size_t		authority_len;

	if (pg_strncasecmp(url, "http://", 7) == 0)
		authority = url + 7;
	else if (pg_strncasecmp(url, "https://", 8) == 0)
		authority = url + 8;
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be an http or https URL", what),
				 errdetail("%s is \"%s\".", what, clip_cstring(url))));

	for (const char *p = url; *p; p++)
		if ((unsigned char) *p <= 0x20 || *p == 0x7f)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s must not contain white space or control characters", what)));

	authority_len = strcspn(authority, "/?#");
	if (authority_len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s has no host", what),
				 errdetail("%s is \"%s\".", what, clip_cstring(url))));
	return authority + authority_len;
}

/*
 * An http(s) URL (wi_check_http_url), then somewhere after the host the
 * placeholder {external_id}, and none in the fragment (after '#': never
 * sent, so every object would be fetched from one URL).
 */
static void
check_url_template(const char *url)
{
	const char *host_end = wi_check_http_url(url, "url_template");
	const char *placeholder;
	const char *fragment;

	placeholder = strstr(url, WI_PLACEHOLDER);
	if (placeholder == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("url_template must contain the placeholder {external_id}"),
				 errdetail("url_template is \"%s\".", clip_cstring(url))));
	if (placeholder < host_end)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the placeholder {external_id} must come after the host in url_template")));
	fragment = strchr(host_end, '#');
	if (fragment != NULL && strstr(fragment, WI_PLACEHOLDER) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the placeholder {external_id} must not be in the fragment of url_template"),
				 errdetail("The fragment (after \"#\") is not sent to the server; put the placeholder in the path or the query string.")));
}

/*
 * A handler is a plain function (external_id text, details jsonb, payload
 * jsonb) RETURNS void.
 */
static void
check_handler(Oid handler)
{
	HeapTuple	tuple;
	Form_pg_proc proc;
	bool		ok;

	tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(handler));
	if (!HeapTupleIsValid(tuple))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("handler function with OID %u does not exist", handler)));
	proc = (Form_pg_proc) GETSTRUCT(tuple);
	ok = proc->prokind == PROKIND_FUNCTION &&
		!proc->proretset &&
		proc->prorettype == VOIDOID &&
		proc->pronargs == 3 &&
		proc->proargtypes.values[0] == TEXTOID &&
		proc->proargtypes.values[1] == JSONBOID &&
		proc->proargtypes.values[2] == JSONBOID;
	ReleaseSysCache(tuple);

	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_FUNCTION_DEFINITION),
				 errmsg("handler %s has the wrong signature", format_procedure(handler)),
				 errdetail("A handler must be a function (external_id text, details jsonb, payload jsonb) RETURNS void.")));
}

/* RFC 9110 token characters, for header names. */
static bool
is_token(const char *s, int len)
{
	static const char tchar[] = "!#$%&'*+-.^_`|~0123456789"
		"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

	if (len == 0)
		return false;
	for (int i = 0; i < len; i++)
		if (s[i] == '\0' || strchr(tchar, s[i]) == NULL)
			return false;
	return true;
}

/*
 * headers: a JSON object whose keys are header names and whose values are
 * strings without CR, LF or NUL (no header injection).
 */
static void
check_headers(Jsonb *headers)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;

	if (!JB_ROOT_IS_OBJECT(headers))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("headers must be a JSON object of header names and string values")));

	it = JsonbIteratorInit(&headers->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
		{
			if (!is_token(v.val.string.val, v.val.string.len))
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("invalid header name \"%s\"", wi_clip(v.val.string.val, v.val.string.len))));
		}
		else if (tok == WJB_VALUE)
		{
			if (v.type != jbvString)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("header values must be JSON strings")));
			for (int i = 0; i < v.val.string.len; i++)
			{
				char		c = v.val.string.val[i];

				if (c == '\r' || c == '\n' || c == '\0')
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("header values must not contain CR, LF or NUL")));
			}
		}
	}
}

static void
check_range(const char *what, int value, int min, int max)
{
	if (value < min || value > max)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be between %d and %d", what, min, max),
				 errdetail("%s is %d.", what, value)));
}

/*
 * _check_source(name, url_template, handler, headers, timeout_ms,
 * max_attempts): the checks add_source
 * and alter_source run before they write.
 */
Datum
webhook_ingest_check_source(PG_FUNCTION_ARGS)
{
	wi_check_not_null(PG_ARGISNULL(0), "name");
	wi_check_not_null(PG_ARGISNULL(1), "url_template");

	check_source_name(text_to_cstring(PG_GETARG_TEXT_PP(0)));
	check_url_template(text_to_cstring(PG_GETARG_TEXT_PP(1)));
	if (!PG_ARGISNULL(2))
		check_handler(PG_GETARG_OID(2));
	if (!PG_ARGISNULL(3))
		check_headers(PG_GETARG_JSONB_P(3));
	wi_check_not_null(PG_ARGISNULL(4), "timeout_ms");
	check_range("timeout_ms", PG_GETARG_INT32(4), 1, WI_MAX_TIMEOUT_MS);
	wi_check_not_null(PG_ARGISNULL(5), "max_attempts");
	check_range("max_attempts", PG_GETARG_INT32(5), 1, WI_MAX_ATTEMPTS);

	PG_RETURN_VOID();
}
