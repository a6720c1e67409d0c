/*
 * verdict.c
 *		What a finished transfer means for its job: run the handler, run it
 *		with the object gone, retry later, or give up.  Fills in the reason
 *		for a failure.  Pure classification: no SQL, no HTTP.
 *
 *		What the network guard or the redirect policy refused (http.c records
 *		it in t->refused) ends the job at once: asking again gets the same
 *		answer until an operator changes the setting the message names.  So
 *		does a handler error that no retry can fix (wi_handler_error_final).
 *
 * IDENTIFICATION
 *		src/verdict.c
 */
#include "postgres.h"

#include "webhook_ingest.h"
#include "verdict.h"

WiVerdict
wi_judge(Transfer *t, StringInfo why)
{
	if (t->refused[0] != '\0')
	{
		appendStringInfoString(why, t->refused);
		return WI_V_DEAD;
	}
	if (t->too_big || t->result == CURLE_FILESIZE_EXCEEDED)
	{
		appendStringInfo(why, "response body over webhook_ingest.max_response_size (%zu bytes)",
						 t->max_body);
		return WI_V_DEAD;
	}
	if (t->result != CURLE_OK)
	{
		appendStringInfoString(why, curl_easy_strerror(t->result));
		if (t->errbuf[0] && strcmp(t->errbuf, curl_easy_strerror(t->result)) != 0)
			appendStringInfo(why, ": %s", t->errbuf);
		if (t->result == CURLE_UNSUPPORTED_PROTOCOL || t->result == CURLE_URL_MALFORMAT ||
			t->result == CURLE_TOO_MANY_REDIRECTS || t->result == CURLE_FILESIZE_EXCEEDED)
			return WI_V_DEAD;
		return WI_V_RETRY;
	}
	if (t->status >= 200 && t->status < 300)
		return WI_V_HANDLE;
	if (t->status == 404 || t->status == 410)
		return WI_V_GONE;
	appendStringInfo(why, "HTTP %ld", t->status);
	if (t->status == 408 || t->status == 429 || t->status >= 500)
		return WI_V_RETRY;
	return WI_V_DEAD;
}


/*
 * A handler error that running the handler again cannot fix: its code is
 * wrong (class 42, syntax error or access rule violation: an ambiguous
 * column, a missing table or function, a missing privilege) or uses what the
 * server does not support (class 0A).  Fixing it takes a change of the
 * handler, the schema or a grant, and then retry_dead().
 */
bool
wi_handler_error_final(int sqlerrcode)
{
	int			class = ERRCODE_TO_CATEGORY(sqlerrcode);

	return class == ERRCODE_SYNTAX_ERROR_OR_ACCESS_RULE_VIOLATION || class == ERRCODE_FEATURE_NOT_SUPPORTED;
}
