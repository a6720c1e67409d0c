/*
 * handler_call.h
 *		Calling a source's handler as its owner (handler_call.c).
 *
 * IDENTIFICATION
 *		src/worker/handler_call.h
 */
#ifndef WI_HANDLER_CALL_H
#define WI_HANDLER_CALL_H

#include "postgres.h"

extern void wi_handler_remember_search_path(void);
extern void wi_call_handler(Oid handler, Datum *args, const bool *nulls);
extern bool wi_handler_was_refused(void);
extern void wi_handler_set_leash(int ms);
extern bool wi_handler_leash_hit(void);
extern int	wi_handler_call_leash(void);
extern bool wi_handler_timed_out(ErrorData *e, double elapsed_ms);
extern void wi_handler_end_job(void);
extern bool wi_handler_killed_worker(void);
extern bool wi_handler_error_final(int sqlerrcode);

#endif							/* WI_HANDLER_CALL_H */
