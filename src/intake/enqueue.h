/*
 * enqueue.h
 *		The steps every intake function shares (enqueue.c): enqueue() and
 *		receive() differ only in how they find the ids and the payload;
 *		reconciliation (reconcile.c) upserts through the same statement.
 *
 * IDENTIFICATION
 *		src/intake/enqueue.h
 */
#ifndef WI_ENQUEUE_H
#define WI_ENQUEUE_H

#include "postgres.h"

#include "fmgr.h"

/* The oldest schema version this library serves, beside its own (WI_VERSION). */
#define WI_OLDEST_SCHEMA	"0.9.0"

extern void wi_check_schema_window(void);
extern void wi_check_source_name(text *source);
extern text *wi_intake_source(FunctionCallInfo fcinfo, const char *function);
extern void wi_check_payload_size(Datum payload);
extern void wi_enqueue_admit(text *source);
extern Datum wi_enqueue_write(FunctionCallInfo fcinfo, text *source, text *external_id, Datum payload,
							  bool payload_null, text *event_id);
extern const char *wi_enqueue_unannounced(FunctionCallInfo fcinfo, text *source, text *external_id, int64 *job_id);

#endif							/* WI_ENQUEUE_H */
