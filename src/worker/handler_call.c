/*
 * handler_call.c
 *		Calling a source's handler the way PostgreSQL runs code on another
 *		role's behalf (autovacuum's index expressions, pg_cron's jobs): as the
 *		role that owns the function, in a security-restricted operation, with
 *		a GUC nest level of its own that is rolled back afterwards, under
 *		webhook_ingest.handler_timeout.  The function is found by OID and
 *		called through fmgr at every call, so a rename, a replaced body or a
 *		new owner takes effect at once; its owner and that owner's EXECUTE
 *		right are checked at every call too.  In a leashed batch
 *		(apply_queue.h) a handler still running after the leash is cancelled
 *		and its call fails, whatever it does then.  The caller runs this
 *		inside a subtransaction and releases the session's advisory locks
 *		and sequence state after it (wi_handler_end_job).
 *
 * IDENTIFICATION
 *		src/worker/handler_call.c
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_proc.h"
#include "commands/sequence.h"
#include "commands/trigger.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "storage/lock.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/portal.h"
#include "utils/regproc.h"
#include "utils/syscache.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

#include "webhook_ingest.h"
#include "apply_queue.h"
#include "compat.h"
#include "handler_call.h"
#include "settings.h"

/* search_path handlers start with: the database's, as the worker found it. */
static char *handler_search_path = NULL;

/* The last call could not be made at all (see wi_handler_was_refused). */
static bool refused = false;

/*
 * The hard deadline: a handler that swallows handler_timeout's cancel (an
 * EXCEPTION WHEN query_canceled block) and runs on is stopped the only way
 * PL code cannot catch - its apply worker exits, and the job is dead
 * (crash_guard.c); the launcher starts another apply worker at once.  It
 * comes handler_timeout plus a grace (WI_HARD_DEADLINE_GRACE_MS, apply_queue.h:
 * as long again, at most 1 s) after the call started.
 */
static TimeoutId hard_deadline = MAX_TIMEOUTS;
static volatile sig_atomic_t hard_deadline_hit = false;

/*
 * The leash of a batch of quick sources (WI_APPLY_LEASH_MS, apply_queue.h;
 * 0: none): a handler still running then is cancelled as handler_timeout
 * would, and whatever it does next (fails, or catches the cancel and
 * returns) its call fails and is rolled back; the caller hands the job back
 * as too slow for the batch (wi_handler_leash_hit), not as a failed attempt.
 */
static TimeoutId leash_timeout = MAX_TIMEOUTS;
static int	leash_ms = 0;
static int	call_leash_ms = 0;		/* the leash of the call in progress or last made; 0: none */
static volatile sig_atomic_t leash_hit = false;

static void
hard_deadline_reached(void)
{
	hard_deadline_hit = true;
	ProcDiePending = true;
	InterruptPending = true;
	SetLatch(MyLatch);
}

static void
leash_reached(void)
{
	leash_hit = true;
	QueryCancelPending = true;
	InterruptPending = true;
	SetLatch(MyLatch);
}

/* The leash of the handlers of the batch about to be completed (0: none). */
void
wi_handler_set_leash(int ms)
{
	leash_ms = ms;
}

/* Did the last call run past its batch's leash (its failure is not the job's)? */
bool
wi_handler_leash_hit(void)
{
	return leash_hit;
}

/*
 * The leash of the call in progress (0: none): its hard deadline is that
 * leash and as long again, not handler_timeout's (a handler that ignores the
 * leash's cancel would ignore handler_timeout's as well).
 */
int
wi_handler_call_leash(void)
{
	return call_leash_ms;
}

/* Did a handler run past its hard deadline (the apply worker is exiting for it)? */
bool
wi_handler_killed_worker(void)
{
	return hard_deadline_hit;
}

/*
 * Remember the search_path this database gives a new session, before the
 * worker narrows its own to pg_catalog.
 */
void
wi_handler_remember_search_path(void)
{
	handler_search_path = MemoryContextStrdup(TopMemoryContext,
											  GetConfigOption("search_path", false, false));
	hard_deadline = RegisterTimeout(USER_TIMEOUT, hard_deadline_reached);
	leash_timeout = RegisterTimeout(USER_TIMEOUT, leash_reached);
}

/*
 * The role the handler runs as: its owner, who must still exist and may
 * still execute it.  Raises an error (and says the job cannot succeed as
 * things stand) otherwise.
 */
static Oid
handler_owner(Oid handler)
{
	HeapTuple	tuple;
	Oid			owner;

	tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(handler));
	if (!HeapTupleIsValid(tuple))
	{
		refused = true;
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("handler function with OID %u does not exist", handler),
				 errhint("Set another handler with webhook_ingest.alter_source().")));
	}
	owner = ((Form_pg_proc) GETSTRUCT(tuple))->proowner;
	ReleaseSysCache(tuple);

	if (!SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(owner)))
	{
		refused = true;
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("the owner of handler %s no longer exists", format_procedure(handler))));
	}
	if (wi_proc_aclcheck(handler, owner, ACL_EXECUTE) != ACLCHECK_OK)
	{
		refused = true;
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("role \"%s\" may not execute handler %s", GetUserNameFromId(owner, false),
						format_procedure(handler)),
				 errdetail("Handlers run as the role that owns the function.")));
	}
	return owner;
}

static void
invoke(Oid handler, Datum *args, const bool *nulls)
{
	FmgrInfo	flinfo;
	PgStat_FunctionCallUsage usage;

	LOCAL_FCINFO(fcinfo, 3);

	fmgr_info(handler, &flinfo);
	InitFunctionCallInfoData(*fcinfo, &flinfo, 3, InvalidOid, NULL, NULL);
	for (int i = 0; i < 3; i++)
	{
		fcinfo->args[i].value = args[i];
		fcinfo->args[i].isnull = nulls[i];
	}
	pgstat_init_function_usage(fcinfo, &usage);
	(void) FunctionCallInvoke(fcinfo);
	pgstat_end_function_usage(&usage, true);
}

/*
 * SET CONSTRAINTS ALL IMMEDIATE, for the handler and after it.  A deferred
 * trigger cannot be queued in a security-restricted operation ("cannot fire
 * deferred trigger"), so a constraint that is DEFERRABLE INITIALLY DEFERRED
 * (every foreign key Django makes) would fail every write of a handler:
 * checked at once instead, it holds or fails inside the handler's own
 * subtransaction.  And a SET CONSTRAINTS the handler ran does not reach the
 * next job.
 */
static void
all_constraints_immediate(void)
{
	ConstraintsSetStmt all_immediate;

	memset(&all_immediate, 0, sizeof(all_immediate));
	all_immediate.type = T_ConstraintsSetStmt;
	all_immediate.constraints = NIL;
	all_immediate.deferred = false;
	AfterTriggerSetState(&all_immediate);
}

/*
 * What a handler leaves in its transaction besides settings, undone before
 * the next job's: SET CONSTRAINTS and the cursors it left open.
 */
static void
reset_transaction_state(void)
{
	all_constraints_immediate();
	PortalHashTableDeleteAll();
}

/*
 * Call handler(external_id, details, payload) as its owner.  Errors
 * propagate to the caller's subtransaction, whose abort restores the user
 * and the settings.
 */
void
wi_call_handler(Oid handler, Datum *args, const bool *nulls)
{
	Oid			save_user;
	int			save_sec_context;
	int			nest_level;
	Oid			owner;
	TimestampTz started;

	refused = false;
	leash_hit = false;
	owner = handler_owner(handler);

	GetUserIdAndSecContext(&save_user, &save_sec_context);
	SetUserIdAndSecContext(owner, save_sec_context | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	nest_level = NewGUCNestLevel();
	(void) set_config_option("search_path", handler_search_path, PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	all_constraints_immediate();
	started = GetCurrentTimestamp();
	call_leash_ms = (leash_ms > 0 && leash_ms < wi_handler_timeout_ms) ? leash_ms : 0;
	enable_timeout_after(STATEMENT_TIMEOUT, wi_handler_timeout_ms);
	if (call_leash_ms > 0)
		enable_timeout_after(leash_timeout, call_leash_ms);
	enable_timeout_after(hard_deadline, call_leash_ms > 0 ? call_leash_ms + WI_HARD_DEADLINE_GRACE_MS(call_leash_ms) :
						 wi_handler_timeout_ms + WI_HARD_DEADLINE_GRACE_MS(wi_handler_timeout_ms));
	PG_TRY();
	{
		invoke(handler, args, nulls);
	}
	PG_FINALLY();
	{
		disable_timeout(STATEMENT_TIMEOUT, false);
		disable_timeout(leash_timeout, false);
		disable_timeout(hard_deadline, false);
	}
	PG_END_TRY();

	/* A cancel the timer raised just as the handler returned is moot now. */
	if (get_timeout_indicator(STATEMENT_TIMEOUT, true) || leash_hit)
		QueryCancelPending = false;
	/* Past the leash, even a handler that caught its cancel has its work rolled back. */
	if (leash_hit)
		ereport(ERROR,
				(errcode(ERRCODE_QUERY_CANCELED),
				 errmsg("handler ran past the %d ms leash of a batch other sources wait for", call_leash_ms)));
	/* One that caught the cancel and returned late still failed: roll it back. */
	if (TimestampDifferenceExceeds(started, GetCurrentTimestamp(), wi_handler_timeout_ms))
		ereport(ERROR,
				(errcode(ERRCODE_QUERY_CANCELED),
				 errmsg("handler ran past webhook_ingest.handler_timeout")));
	reset_transaction_state();

	/* Every setting the handler changed, even for the session, is undone. */
	AtEOXact_GUC(false, nest_level);
	SetUserIdAndSecContext(save_user, save_sec_context);
}

/*
 * Did the last wi_call_handler fail before calling anything (the function
 * gone, its owner gone, or no EXECUTE)?  No retry will fix that.
 */
bool
wi_handler_was_refused(void)
{
	return refused;
}

/*
 * Is this error the handler_timeout?  (The executor reports it as a
 * statement timeout.)
 */
bool
wi_handler_timed_out(ErrorData *e, double elapsed_ms)
{
	return e->sqlerrcode == ERRCODE_QUERY_CANCELED && elapsed_ms >= wi_handler_timeout_ms;
}

/*
 * After each job: session-level advisory locks a handler took do not
 * outlive it, nor what its nextval() calls left in the session (lastval()
 * would give the next job - another source's handler, another role - the
 * value, or the name, of this one's sequence: DISCARD SEQUENCES), and the
 * next job starts with no refusal on record.
 */
void
wi_handler_end_job(void)
{
	LockReleaseSession(USER_LOCKMETHOD);
	ResetSequenceCaches();
	refused = false;
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
