/*
 * verdict.c
 *		What a finished transfer means for its job: run the handler, run it
 *		with the object gone, retry later, or give up.  Fills in the reason
 *		for a failure.  Pure classification: no SQL, no HTTP.  The fetcher
 *		judges each transfer as it finishes and hands the verdict over with
 *		the result (apply_queue.h).
 *
 *		What the network guard or the redirect policy refused (http.c records
 *		it in t->refused) ends the job at once: asking again gets the same
 *		answer until an operator changes the setting the message names.
 *
 * IDENTIFICATION
 *		src/verdict.c
 */
#include "postgres.h"

#include "webhook_ingest.h"
#include "verdict.h"

WiApplyVerdict
wi_judge(Transfer *t, StringInfo why)
{
	if (t->refused[0] != '\0')
	{
		appendStringInfoString(why, t->refused);
		return WI_APPLY_DEAD;
	}
	if (t->too_big || t->result == CURLE_FILESIZE_EXCEEDED)
	{
		appendStringInfo(why, "response body over webhook_ingest.max_response_size (%zu bytes)",
						 t->max_body);
		return WI_APPLY_DEAD;
	}
	if (t->result != CURLE_OK)
	{
		appendStringInfoString(why, curl_easy_strerror(t->result));
		if (t->errbuf[0] && strcmp(t->errbuf, curl_easy_strerror(t->result)) != 0)
			appendStringInfo(why, ": %s", t->errbuf);
		if (t->result == CURLE_UNSUPPORTED_PROTOCOL || t->result == CURLE_URL_MALFORMAT ||
			t->result == CURLE_TOO_MANY_REDIRECTS || t->result == CURLE_FILESIZE_EXCEEDED)
			return WI_APPLY_DEAD;
		return WI_APPLY_RETRY;
	}
	if (t->status >= 200 && t->status < 300)
		return WI_APPLY_HANDLE;
	if (t->status == 404 || t->status == 410)
		return WI_APPLY_GONE;
	appendStringInfo(why, "HTTP %ld", t->status);
	if (t->status == 408 || t->status == 429 || t->status >= 500)
		return WI_APPLY_RETRY;
	return WI_APPLY_DEAD;
}

