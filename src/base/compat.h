/*
 * compat.h
 *		What differs between the supported PostgreSQL majors (15, 17 and 18:
 *		make check-majors compiles every file against each): every
 *		PG_VERSION_NUM test of the extension is here, behind a macro the
 *		call sites use.  Include it after postgres.h.
 *
 * IDENTIFICATION
 *		src/base/compat.h
 */
#ifndef WI_COMPAT_H
#define WI_COMPAT_H

#if PG_VERSION_NUM < 150000
#error "webhook_ingest needs PostgreSQL 15 or later"
#endif

/* From 16, postgres.h no longer brings the varlena macros (VARDATA, ...). */
#if PG_VERSION_NUM >= 160000
#include "varatt.h"
#endif

/* Privilege and ownership checks: object_aclcheck/object_ownercheck from 16. */
#if PG_VERSION_NUM >= 160000
#define wi_proc_aclcheck(proc, role, mode) object_aclcheck(ProcedureRelationId, (proc), (role), (mode))
#define wi_database_ownercheck(db, role) object_ownercheck(DatabaseRelationId, (db), (role))
#define wi_extension_ownercheck(ext, role) object_ownercheck(ExtensionRelationId, (ext), (role))
#else
#define wi_proc_aclcheck(proc, role, mode) pg_proc_aclcheck((proc), (role), (mode))
#define wi_database_ownercheck(db, role) pg_database_ownercheck((db), (role))
#define wi_extension_ownercheck(ext, role) pg_extension_ownercheck((ext), (role))
#endif

/*
 * A check hook's extra is freed by the GUC machinery: with free() before 16,
 * with guc_free() (pfree in GUC's memory context) from 16 on, so it must come
 * from guc_malloc() there.
 */
#if PG_VERSION_NUM >= 160000
#define wi_guc_extra_alloc(size) guc_malloc(LOG, (size))
#define wi_guc_extra_free(ptr) guc_free(ptr)
#else
#define wi_guc_extra_alloc(size) malloc(size)
#define wi_guc_extra_free(ptr) free(ptr)
#endif

/* A JSON lexer over a string: from 17 it takes the context to fill (NULL: a new one). */
#if PG_VERSION_NUM >= 170000
#define wi_json_lex_cstring(json, len, encoding, need_escapes) \
	makeJsonLexContextCstringLen(NULL, (json), (len), (encoding), (need_escapes))
#else
#define wi_json_lex_cstring(json, len, encoding, need_escapes) \
	makeJsonLexContextCstringLen((json), (len), (encoding), (need_escapes))
#endif

/*
 * A wait event set for the process's life: from 17 it belongs to a resource
 * owner (NULL: none), before to a memory context.
 */
#if PG_VERSION_NUM >= 170000
#define wi_process_wait_event_set(nevents) CreateWaitEventSet(NULL, (nevents))
#else
#define wi_process_wait_event_set(nevents) CreateWaitEventSet(TopMemoryContext, (nevents))
#endif

/* Wait events with names of their own (WaitEventExtensionNew) from 17 (wait_event.c). */
#define WI_HAVE_NAMED_WAIT_EVENTS (PG_VERSION_NUM >= 170000)

/* A materialized set-returning call's set-up (funcapi.h). */
#define wi_init_srf(fcinfo) InitMaterializedSRF((fcinfo), 0)

#endif							/* WI_COMPAT_H */
