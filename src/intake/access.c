/*
 * access.c
 *		Per-source app access and the identity enqueue() and wait_for_job()
 *		act under.
 *
 *		Neither function is SECURITY DEFINER: inside one, GetUserId() is the
 *		definer, and the caller - whose enqueue_roles membership decides -
 *		is gone.  Instead each runs as its caller, checks the caller, and
 *		only then switches to the function's owner (the extension's owner,
 *		who owns the queue tables) for the statements that need it, the way
 *		fmgr_security_definer() would, and switches back.  An error on the
 *		way needs no PG_TRY: (sub)transaction abort restores the user.
 *
 *		A source's enqueue_roles (regrole[], NULL: any member of
 *		webhook_ingest_enqueue) admits a caller that has the privileges of
 *		one of those roles (has_privs_of_role: membership with INHERIT, or
 *		superuser).  The same test is the row security policy through which
 *		an app role reads webhook_ingest.jobs (_may_enqueue).
 *
 * IDENTIFICATION
 *		src/intake/access.c
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_proc.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/syscache.h"

#include "webhook_ingest.h"
#include "access.h"
#include "source_cache.h"
#include "validate.h"

PG_FUNCTION_INFO_V1(webhook_ingest_may_enqueue);
PG_FUNCTION_INFO_V1(webhook_ingest_clip);

bool
wi_source_admits(const WiSourceAccess *access, Oid user)
{
	if (access->nroles < 0 || superuser_arg(user))
		return true;
	for (int i = 0; i < access->nroles; i++)
		if (has_privs_of_role(user, access->roles[i]))
			return true;
	return false;
}

/*
 * enqueue(): the source exists (as of now, not of the caller's snapshot)
 * and admits the caller; else an error before anything is written.
 * Returns its number (sources.id).
 */
int32
wi_check_may_enqueue(text *source, Oid caller)
{
	WiSourceAccess access;

	if (!wi_source_lookup(source, true, &access))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("source \"%s\" does not exist", wi_clip_text(source)),
				 errhint("Register it with webhook_ingest.add_source().")));
	if (!wi_source_admits(&access, caller))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to enqueue into source \"%s\"", wi_clip_text(source)),
				 errdetail("Role \"%s\" has the privileges of none of the source's enqueue_roles.",
						   GetUserNameFromId(caller, false))));
	return access.source_id;
}

/*
 * Switch to the owner of the running function, as a SECURITY DEFINER
 * function would have from the start.
 */
void
wi_become_owner(FunctionCallInfo fcinfo, WiSavedUser *saved)
{
	HeapTuple	tuple;
	Oid			owner;

	tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(fcinfo->flinfo->fn_oid));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for function %u", fcinfo->flinfo->fn_oid);
	owner = ((Form_pg_proc) GETSTRUCT(tuple))->proowner;
	ReleaseSysCache(tuple);

	GetUserIdAndSecContext(&saved->userid, &saved->sec_context);
	SetUserIdAndSecContext(owner, saved->sec_context | SECURITY_LOCAL_USERID_CHANGE);
}

void
wi_restore_user(const WiSavedUser *saved)
{
	SetUserIdAndSecContext(saved->userid, saved->sec_context);
}

/*
 * _may_enqueue(source text) returns boolean: may the current user enqueue
 * into this source?  The row security policy of app roles on jobs.  Answers
 * from the source cache as of the query's start (the lock the query took on
 * jobs processed pending invalidations).
 */
Datum
webhook_ingest_may_enqueue(PG_FUNCTION_ARGS)
{
	WiSourceAccess access;

	if (!wi_source_lookup(PG_GETARG_TEXT_PP(0), false, &access))
		PG_RETURN_BOOL(false);
	PG_RETURN_BOOL(wi_source_admits(&access, GetUserId()));
}

/*
 * _clip(text) returns text: wi_clip() for the SQL functions' messages.
 */
Datum
webhook_ingest_clip(PG_FUNCTION_ARGS)
{
	PG_RETURN_TEXT_P(cstring_to_text(wi_clip_text(PG_GETARG_TEXT_PP(0))));
}
