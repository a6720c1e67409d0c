/*
 * url.c
 *		Builds the URL fetched for an object: the source's url_template with
 *		every {external_id} replaced by the id percent-encoded as one path
 *		segment (the expansion itself is url_template.c), and url_for(), the
 *		SQL function that shows it.
 *
 * IDENTIFICATION
 *		src/net/url.c
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"

#include "webhook_ingest.h"
#include "url.h"
#include "url_template.h"
#include "validate.h"

PG_FUNCTION_INFO_V1(webhook_ingest_url_for);

/*
 * Returns a palloc'd URL in the current memory context.
 */
char *
wi_render_url(const char *url_template, const char *id, int idlen)
{
	StringInfoData buf;

	initStringInfo(&buf);
	wi_expand_url_template(&buf, url_template, id, idlen);
	return buf.data;
}

/*
 * url_for(source, external_id): the URL the worker fetches for this object.
 */
Datum
webhook_ingest_url_for(PG_FUNCTION_ARGS)
{
	text	   *source = PG_GETARG_TEXT_PP(0);
	text	   *id = PG_GETARG_TEXT_PP(1);
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1];
	char	   *url_template = NULL;
	char	   *url;
	MemoryContext caller = CurrentMemoryContext;

	wi_check_external_id(VARDATA_ANY(id), VARSIZE_ANY_EXHDR(id));

	values[0] = PointerGetDatum(source);
	SPI_connect();
	if (SPI_execute_with_args("SELECT url_template FROM webhook_ingest.sources WHERE name OPERATOR(pg_catalog.=) $1",
							  1, argtypes, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read webhook_ingest.sources");
	if (SPI_processed == 1)
		url_template = MemoryContextStrdup(caller, SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1));
	SPI_finish();

	if (url_template == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("source \"%s\" does not exist", wi_clip(VARDATA_ANY(source), VARSIZE_ANY_EXHDR(source)))));

	url = wi_render_url(url_template, VARDATA_ANY(id), VARSIZE_ANY_EXHDR(id));
	pfree(url_template);
	PG_RETURN_TEXT_P(cstring_to_text(url));
}
