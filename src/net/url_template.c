/*
 * url_template.c
 *		The pure part of building a fetch URL: a source's url_template with
 *		every {external_id} replaced by the id percent-encoded as one path
 *		segment.  RFC 3986 unreserved characters stay; every other byte of
 *		the id becomes %XX, so '/', '?', '#' and '%' cannot leave the segment,
 *		and an id of "." or ".." is encoded whole so it is never a dot-segment.
 *		No SQL, no ereport: only StringInfo, so the same file builds in the
 *		backend and, with -DFRONTEND against libpgcommon, in the fuzz target
 *		(test/fuzz).
 *
 * IDENTIFICATION
 *		src/net/url_template.c
 */
#ifdef FRONTEND
#include "postgres_fe.h"
#else
#include "postgres.h"
#endif

#include "url_template.h"

#define WI_PLACEHOLDER		"{external_id}"

static bool
is_unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		(c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~';
}

/* Appends idlen bytes of id (NULs included) to buf as one path segment. */
void
wi_append_path_segment(StringInfo buf, const char *id, int idlen)
{
	static const char hex[] = "0123456789ABCDEF";
	bool		dots_only = (idlen == 1 && id[0] == '.') ||
		(idlen == 2 && id[0] == '.' && id[1] == '.');

	for (int i = 0; i < idlen; i++)
	{
		unsigned char c = (unsigned char) id[i];

		if (is_unreserved(c) && !dots_only)
			appendStringInfoChar(buf, (char) c);
		else
		{
			appendStringInfoChar(buf, '%');
			appendStringInfoChar(buf, hex[c >> 4]);
			appendStringInfoChar(buf, hex[c & 0x0f]);
		}
	}
}

/* Appends url_template to buf with each WI_PLACEHOLDER expanded. */
void
wi_expand_url_template(StringInfo buf, const char *url_template, const char *id, int idlen)
{
	const char *p = url_template;
	const char *hit;

	while ((hit = strstr(p, WI_PLACEHOLDER)) != NULL)
	{
		appendBinaryStringInfo(buf, p, hit - p);
		wi_append_path_segment(buf, id, idlen);
		p = hit + strlen(WI_PLACEHOLDER);
	}
	appendStringInfoString(buf, p);
}
