/*
 * worker_tx.h
 *		The worker's transactions and prepared statements (worker_tx.c).
 *
 * IDENTIFICATION
 *		src/worker/worker_tx.h
 */
#ifndef WI_WORKER_TX_H
#define WI_WORKER_TX_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "executor/spi.h"

extern void wi_begin_tx(void);
extern void wi_end_tx(void);
extern Datum wi_id_array(const int64 *ids, int n);
extern Datum wi_text_array(const char **values, int n);
extern Datum wi_timestamptz_array(const TimestampTz *values, int n);
extern Datum wi_int4_array(const int *values, int n);
extern int	wi_run_cached(SPIPlanPtr *plan, const char *sql, int nargs, Oid *types, Datum *args,
						  const char *nulls, bool read_only);
extern int	wi_run_replanned(SPIPlanPtr *plan, const char *sql, int nargs, Oid *types, Datum *args,
							 const char *nulls);
typedef void (*WiTxBody) (void *arg);
extern bool wi_in_tx(const char *activity, WiTxBody body, void *arg);
extern int	wi_run_alone(const char *activity, SPIPlanPtr *plan, const char *sql, int nargs, Oid *types,
						 Datum *args);

#endif							/* WI_WORKER_TX_H */
