/*
 * access.h
 *		Who may enqueue into a source (enqueue_roles), as the source cache
 *		(source_cache.h) reads it, and acting as a function's owner after
 *		checking the caller (access.c).
 *
 * IDENTIFICATION
 *		src/intake/access.h
 */
#ifndef WI_ACCESS_H
#define WI_ACCESS_H

#include "postgres.h"

#include "fmgr.h"

/* What a source says about who may enqueue into it. */
typedef struct WiSourceAccess
{
	int			nroles;			/* -1: enqueue_roles is NULL, any enqueuer */
	Oid		   *roles;			/* palloc'd in the caller's memory context */
	int32		source_id;		/* sources.id (0 before 0.6.0 numbered them) */
} WiSourceAccess;

/* access.c */
extern bool wi_source_admits(const WiSourceAccess *access, Oid user);
extern int32 wi_check_may_enqueue(text *source, Oid caller);

typedef struct WiSavedUser
{
	Oid			userid;
	int			sec_context;
} WiSavedUser;
extern void wi_become_owner(FunctionCallInfo fcinfo, WiSavedUser *saved);
extern void wi_restore_user(const WiSavedUser *saved);

#endif							/* WI_ACCESS_H */
