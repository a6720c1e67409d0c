/*
 * reconcile_values.c
 *		The values of reconciliation (issue 30) that SQL reads badly or must
 *		not read with an ERROR: pure functions of their arguments, no SPI.
 *
 *		_reconcile_version(value jsonb, kind text) bigint: a version as
 *		listed in a page or found in a fetched document, as one number to
 *		compare: kind 'timestamp' takes an ISO 8601 time with a zone (or a
 *		date, midnight UTC) or a JSON number of seconds since 1970, and
 *		gives microseconds since 1970-01-01 UTC; kind 'integer' takes an
 *		integer (a JSON number or a string of digits).  Anything else, or a
 *		value out of range, is NULL, never an ERROR: the input is the
 *		upstream's, and the parser is bounded (no allocation, no locale, no
 *		time zone files).
 *
 *		_reconcile_url(template, cursor, since, kind) text: a page's URL,
 *		{cursor} percent-encoded (as one path segment: url_template.c),
 *		{since} as an ISO 8601 UTC time to the second (kind 'timestamp') or
 *		the integer, {since_epoch} as whole seconds since 1970.
 *
 *		_check_reconcile_url(url, what, cursor boolean) void: a list URL
 *		template for add_source/alter_source: an http(s) URL (validate.c)
 *		whose placeholders are known, after the host, and not in the
 *		fragment; {cursor} in it if and only if cursor.
 *
 * IDENTIFICATION
 *		src/reconcile/reconcile_values.c
 */
#include "postgres.h"

#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "webhook_ingest.h"
#include "url_template.h"
#include "validate.h"

PG_FUNCTION_INFO_V1(webhook_ingest_reconcile_version);
PG_FUNCTION_INFO_V1(webhook_ingest_reconcile_url);
PG_FUNCTION_INFO_V1(webhook_ingest_check_reconcile_url);

#define USECS_PER_SEC_I64	INT64CONST(1000000)
/* Seconds that fit in a bigint of microseconds, with room: year 9999 is 2.5e11 s. */
#define MAX_SECONDS_DIGITS	12
#define MAX_INTEGER_DIGITS	18

typedef enum VersionKind
{
	KIND_TIMESTAMP,
	KIND_INTEGER
} VersionKind;

static VersionKind
version_kind(text *kind)
{
	char	   *k = text_to_cstring(kind);

	if (strcmp(k, "timestamp") == 0)
		return KIND_TIMESTAMP;
	if (strcmp(k, "integer") == 0)
		return KIND_INTEGER;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("version kind must be \"timestamp\" or \"integer\""),
			 errdetail("It is \"%s\".", wi_clip(k, (int) strlen(k)))));
	pg_unreachable();
}

/* Days from 1970-01-01 to y-m-d of the proleptic Gregorian calendar (H. Hinnant's days_from_civil). */
static int64
days_from_civil(int y, int m, int d)
{
	int			era;
	int			yoe;
	int			doy;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	return (int64) era * 146097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719468;
}

/* The inverse: y-m-d of a day number. */
static void
civil_from_days(int64 z, int *y, int *m, int *d)
{
	int64		era;
	int			doe;
	int			yoe;
	int			doy;
	int			mp;

	z += 719468;
	era = (z >= 0 ? z : z - 146096) / 146097;
	doe = (int) (z - era * 146097);
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	*d = doy - (153 * mp + 2) / 5 + 1;
	*m = mp < 10 ? mp + 3 : mp - 9;
	*y = (int) (yoe + era * 400 + (*m <= 2));
}

static bool
is_leap(int y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

/* n digits at *p as a number into *out; advances *p.  False if they are not all digits. */
static bool
take_digits(const char **p, const char *end, int n, int *out)
{
	int			v = 0;

	if (end - *p < n)
		return false;
	for (int i = 0; i < n; i++)
	{
		if ((*p)[i] < '0' || (*p)[i] > '9')
			return false;
		v = v * 10 + ((*p)[i] - '0');
	}
	*p += n;
	*out = v;
	return true;
}

static bool
take_char(const char **p, const char *end, const char *one_of)
{
	if (*p < end && **p != '\0' && strchr(one_of, **p) != NULL)
	{
		(*p)++;
		return true;
	}
	return false;
}

/*
 * The zone of an ISO 8601 time: Z, or +hh, +hhmm, +hh:mm (or -); its offset
 * east of UTC in seconds.  False if there is none or it is malformed.
 */
static bool
take_zone(const char **p, const char *end, int *offset_s)
{
	int			sign;
	int			hh;
	int			mm = 0;

	if (take_char(p, end, "Zz"))
	{
		*offset_s = 0;
		return true;
	}
	if (*p >= end || (**p != '+' && **p != '-'))
		return false;
	sign = **p == '-' ? -1 : 1;
	(*p)++;
	if (!take_digits(p, end, 2, &hh) || hh > 23)
		return false;
	if (*p < end && (take_char(p, end, ":") || (**p >= '0' && **p <= '9')))
	{
		if (!take_digits(p, end, 2, &mm) || mm > 59)
			return false;
	}
	*offset_s = sign * (hh * 3600 + mm * 60);
	return true;
}

/*
 * YYYY-MM-DD, or YYYY-MM-DD(T| )hh:mm[:ss[.f]] and a zone (fraction to
 * the microsecond, more digits cut off), into microseconds since 1970.
 */
static bool
parse_iso8601(const char *s, int len, int64 *out)
{
	const char *p = s;
	const char *end = s + len;
	int			y,
				mo,
				d,
				h = 0,
				mi = 0,
				sec = 0,
				offset_s = 0;
	int64		frac_us = 0;
	static const int dim[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

	if (!take_digits(&p, end, 4, &y) || !take_char(&p, end, "-") ||
		!take_digits(&p, end, 2, &mo) || !take_char(&p, end, "-") || !take_digits(&p, end, 2, &d))
		return false;
	if (y < 1 || mo < 1 || mo > 12 || d < 1 || d > dim[mo - 1] + (mo == 2 && is_leap(y)))
		return false;
	if (p < end)
	{
		if (!take_char(&p, end, "Tt ") || !take_digits(&p, end, 2, &h) || !take_char(&p, end, ":") ||
			!take_digits(&p, end, 2, &mi) || h > 23 || mi > 59)
			return false;
		if (take_char(&p, end, ":"))
		{
			if (!take_digits(&p, end, 2, &sec) || sec > 60)
				return false;
			if (take_char(&p, end, ".,"))
			{
				int			digits = 0;

				while (p < end && *p >= '0' && *p <= '9')
				{
					if (digits++ < 6)
						frac_us = frac_us * 10 + (*p - '0');
					p++;
				}
				if (digits == 0)
					return false;
				for (; digits < 6; digits++)
					frac_us *= 10;
			}
		}
		if (!take_zone(&p, end, &offset_s) || p != end)
			return false;
	}
	*out = ((days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec) - offset_s) * USECS_PER_SEC_I64 +
		frac_us;
	return true;
}

/*
 * A plain decimal ([-]digits[.digits], as numeric_out and JSON numbers
 * without an exponent write it) scaled by 10^scale_digits, the fraction
 * past that cut off; at most max_int_digits before the point.  With
 * integral, a fraction other than zeros is refused.
 */
static bool
parse_decimal(const char *s, int len, int scale_digits, int max_int_digits, bool integral, int64 *out)
{
	const char *p = s;
	const char *end = s + len;
	bool		negative = take_char(&p, end, "-");
	int64		v = 0;
	int			digits = 0;

	while (p < end && *p >= '0' && *p <= '9')
	{
		if (++digits > max_int_digits)
			return false;
		v = v * 10 + (*p++ - '0');
	}
	if (digits == 0)
		return false;
	for (int i = 0; i < scale_digits; i++)
		v *= 10;
	if (take_char(&p, end, "."))
	{
		int64		scale = 1;

		for (int i = 0; i < scale_digits; i++)
			scale *= 10;
		for (; p < end && *p >= '0' && *p <= '9'; p++)
		{
			if (integral && *p != '0')
				return false;
			scale /= 10;
			v += (*p - '0') * scale;
		}
	}
	if (p != end)
		return false;
	*out = negative ? -v : v;
	return true;
}

static bool
version_of(JsonbValue *v, VersionKind kind, int64 *out)
{
	if (v->type == jbvString && kind == KIND_TIMESTAMP)
		return parse_iso8601(v->val.string.val, v->val.string.len, out);
	if (v->type == jbvString)
		return parse_decimal(v->val.string.val, v->val.string.len, 0, MAX_INTEGER_DIGITS, true, out);
	if (v->type == jbvNumeric)
	{
		char	   *digits = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v->val.numeric)));

		if (kind == KIND_TIMESTAMP)
			return parse_decimal(digits, (int) strlen(digits), 6, MAX_SECONDS_DIGITS, false, out);
		return parse_decimal(digits, (int) strlen(digits), 0, MAX_INTEGER_DIGITS, true, out);
	}
	return false;
}

Datum
webhook_ingest_reconcile_version(PG_FUNCTION_ARGS)
{
	Jsonb	   *value = PG_GETARG_JSONB_P(0);
	VersionKind kind = version_kind(PG_GETARG_TEXT_PP(1));
	JsonbValue	v;
	int64		version;

	if (!JsonbExtractScalar(&value->root, &v) || !version_of(&v, kind, &version))
		PG_RETURN_NULL();
	PG_RETURN_INT64(version);
}

/* floor(a / b) for b > 0. */
static int64
floor_div(int64 a, int64 b)
{
	return a >= 0 ? a / b : -((-a + b - 1) / b);
}

static void
append_since(StringInfo buf, bool isnull, int64 since, VersionKind kind, bool epoch)
{
	int64		seconds = isnull ? 0 : (kind == KIND_TIMESTAMP ? floor_div(since, USECS_PER_SEC_I64) : since);
	int64		secs_of_day;
	int			y,
				m,
				d;

	if (epoch || kind == KIND_INTEGER)
	{
		appendStringInfo(buf, INT64_FORMAT, seconds);
		return;
	}
	civil_from_days(floor_div(seconds, 86400), &y, &m, &d);
	secs_of_day = seconds - floor_div(seconds, 86400) * 86400;
	appendStringInfo(buf, "%04d-%02d-%02dT%02d:%02d:%02dZ", y, m, d, (int) (secs_of_day / 3600),
					 (int) (secs_of_day / 60 % 60), (int) (secs_of_day % 60));
}

static const char *const placeholders[] = {"{cursor}", "{since}", "{since_epoch}"};

/* The placeholder at p (index into placeholders), or -1. */
static int
placeholder_at(const char *p)
{
	for (int i = 0; i < lengthof(placeholders); i++)
		if (strncmp(p, placeholders[i], strlen(placeholders[i])) == 0)
			return i;
	return -1;
}

Datum
webhook_ingest_reconcile_url(PG_FUNCTION_ARGS)
{
	char	   *template;
	text	   *cursor = PG_ARGISNULL(1) ? NULL : PG_GETARG_TEXT_PP(1);
	VersionKind kind;
	StringInfoData buf;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(3))
		PG_RETURN_NULL();
	template = text_to_cstring(PG_GETARG_TEXT_PP(0));
	kind = version_kind(PG_GETARG_TEXT_PP(3));
	initStringInfo(&buf);
	for (const char *p = template; *p;)
	{
		int			which = *p == '{' ? placeholder_at(p) : -1;

		if (which < 0)
		{
			appendStringInfoChar(&buf, *p++);
			continue;
		}
		if (which == 0 && cursor != NULL)
			wi_append_path_segment(&buf, VARDATA_ANY(cursor), VARSIZE_ANY_EXHDR(cursor));
		else if (which > 0)
			append_since(&buf, PG_ARGISNULL(2), PG_ARGISNULL(2) ? 0 : PG_GETARG_INT64(2), kind, which == 2);
		p += strlen(placeholders[which]);
	}
	PG_RETURN_TEXT_P(cstring_to_text(buf.data));
}

Datum
webhook_ingest_check_reconcile_url(PG_FUNCTION_ARGS)
{
	char	   *url;
	char	   *what;
	bool		cursor;
	const char *host_end;
	const char *fragment;
	bool		has_cursor = false;

	wi_check_not_null(PG_ARGISNULL(1), "what");
	what = text_to_cstring(PG_GETARG_TEXT_PP(1));
	wi_check_not_null(PG_ARGISNULL(0), what);
	url = text_to_cstring(PG_GETARG_TEXT_PP(0));
	cursor = !PG_ARGISNULL(2) && PG_GETARG_BOOL(2);
	host_end = wi_check_http_url(url, what);
	fragment = strchr(host_end, '#');
	for (const char *p = strchr(url, '{'); p != NULL; p = strchr(p + 1, '{'))
	{
		int			which = placeholder_at(p);

		if (which == 0 && !cursor)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s must not contain the placeholder {cursor}", what),
					 errdetail("The first page of a sweep has no cursor; next_url has it.")));
		if (which < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s has an unknown placeholder at \"%s\"", what, wi_clip(p, (int) strlen(p))),
					 errdetail("%s may contain %s.", what,
							   cursor ? "{cursor}, {since} and {since_epoch}" : "{since} and {since_epoch}")));
		if (p < host_end || (fragment != NULL && p > fragment))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("the placeholders of %s must be in its path or query string", what)));
		has_cursor |= which == 0;
	}
	if (cursor && !has_cursor)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must contain the placeholder {cursor}", what),
				 errdetail("%s is \"%s\".", what, wi_clip(url, (int) strlen(url)))));
	PG_RETURN_VOID();
}
