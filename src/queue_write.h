/*
 * queue_write.h
 *		The direct (no-SQL) write path of enqueue(), see queue_write.c.
 */
#ifndef WI_QUEUE_WRITE_H
#define WI_QUEUE_WRITE_H

#include "postgres.h"


typedef enum WriteResult
{
	WRITE_INSERTED,				/* a new row */
	WRITE_EXISTED				/* the key was there: duplicate / absorbed */
} WriteResult;

extern bool wi_direct_write_possible(void);
extern void wi_lock_jobs(void);
extern Oid	wi_cached_sources_relid(void);
struct EState;
extern struct EState *wi_write_begin(void);
extern void wi_write_end(struct EState *estate);
extern WriteResult wi_remember_event(struct EState *estate, text *source, text *event_id);
extern WriteResult wi_upsert_job(struct EState *estate, text *source, text *external_id, Datum payload, bool payload_null,
								 int64 *job_id, bool *was_running);
extern bool wi_active_job(text *source, text *external_id, int64 *job_id);

#endif							/* WI_QUEUE_WRITE_H */
