/*
 * log_redact.c
 *		Keeps private keys out of the server log.  A tls_client_key given to
 *		add_source or alter_source as a literal is part of the statement's
 *		text, which PostgreSQL logs beside an error (log_min_error_statement)
 *		or for log_statement; this emit_log_hook drops the statement from
 *		such a message, and replaces a message that would itself quote a key
 *		(log_statement = 'all', a syntax error near it).  Nothing else is
 *		changed, and the hook is cheap: it looks only at messages that go to
 *		the server log, for the one marker every PEM key carries.  It looks
 *		at the detail meant for the log only too (errdetail_log): a
 *		deadlock's quotes the statements of every process in the cycle,
 *		another session's alter_source among them.
 *
 *		A key refused because it does not parse may lack the marker (its
 *		base64 body alone): tls_check.c hides the statement from those
 *		errors itself (errhidestmt).
 *
 *		A key passed as a bind parameter is never logged by PostgreSQL
 *		(log_parameter_max_length_on_error is 0 by default), which is the
 *		better way; this covers the literal.
 *
 * IDENTIFICATION
 *		src/base/log_redact.c
 */
#include "postgres.h"

#include "tcop/tcopprot.h"
#include "utils/elog.h"

#include "webhook_ingest.h"
#include "log_redact.h"

/* "-----BEGIN PRIVATE KEY-----", "... RSA PRIVATE KEY-----", "... ENCRYPTED PRIVATE KEY-----" */
#define KEY_MARKER	"PRIVATE KEY-----"

static emit_log_hook_type prev_emit_log_hook = NULL;

static bool
holds_key(const char *s)
{
	return s != NULL && strstr(s, KEY_MARKER) != NULL;
}

static void
redact_keys(ErrorData *edata)
{
	if (edata->output_to_server)
	{
		if (holds_key(debug_query_string))
			edata->hide_stmt = true;
		if (holds_key(edata->message))
			edata->message = pstrdup("(a message that quoted a private key, not logged: webhook_ingest)");
		if (holds_key(edata->detail))
			edata->detail = NULL;
		/* the server log's own detail: a deadlock's quotes every statement in the cycle */
		if (holds_key(edata->detail_log))
			edata->detail_log = NULL;
		if (holds_key(edata->context))
			edata->context = NULL;
		if (holds_key(edata->internalquery))
			edata->internalquery = NULL;
	}
	if (prev_emit_log_hook)
		prev_emit_log_hook(edata);
}

/* From _PG_init. */
void
wi_log_redact_install(void)
{
	prev_emit_log_hook = emit_log_hook;
	emit_log_hook = redact_keys;
}
