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
 *		answer until an operator changes the setting the message names.  A
 *		list page of a reconciliation sweep is its sweep's to judge.
 *
 * IDENTIFICATION
 *		src/net/verdict.c
 */
#include "postgres.h"

#include "webhook_ingest.h"
#include "verdict.h"

/*
 * What went wrong with the transfer itself (no whole response to judge),
 * into why, and the verdict that calls for; false if nothing did.
 */
static bool
transfer_failed(Transfer *t, StringInfo why, WiApplyVerdict *verdict)
{
	*verdict = WI_APPLY_DEAD;
	if (t->refused[0] != '\0')
	{
		appendStringInfoString(why, t->refused);
		return true;
	}
	if (t->too_big || t->result == CURLE_FILESIZE_EXCEEDED)
	{
		appendStringInfo(why, "response body over %s (%zu bytes)",
						 t->page ? "the reconcile setting max_page_size" : "webhook_ingest.max_response_size",
						 t->max_body);
		return true;
	}
	if (t->result == CURLE_OK)
		return false;
	appendStringInfoString(why, curl_easy_strerror(t->result));
	if (t->errbuf[0] && strcmp(t->errbuf, curl_easy_strerror(t->result)) != 0)
		appendStringInfo(why, ": %s", t->errbuf);
	if (t->result != CURLE_UNSUPPORTED_PROTOCOL && t->result != CURLE_URL_MALFORMAT &&
		t->result != CURLE_TOO_MANY_REDIRECTS)
		*verdict = WI_APPLY_RETRY;
	return true;
}

/*
 * A list page of a sweep is judged by its sweep (_reconcile_page: a status
 * other than 2xx, a bad body): here it only says what went wrong with the
 * transfer, and every failure of a page is retried with its sweep's
 * back-off, never given up at once.
 */
WiApplyVerdict
wi_judge(Transfer *t, StringInfo why)
{
	WiApplyVerdict verdict;

	if (transfer_failed(t, why, &verdict))
		return t->page ? WI_APPLY_RETRY : verdict;
	if (t->page || (t->status >= 200 && t->status < 300))
		return WI_APPLY_HANDLE;
	if (t->status == 404 || t->status == 410)
		return WI_APPLY_GONE;
	appendStringInfo(why, "HTTP %ld", t->status);
	if (t->status == 408 || t->status == 429 || t->status >= 500)
		return WI_APPLY_RETRY;
	return WI_APPLY_DEAD;
}
