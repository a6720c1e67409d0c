/*
 * stats.h
 *		The per-source counts, latency histograms and failures ring behind
 *		recent_counts, latency and recent_failures (stats.c).
 *
 * IDENTIFICATION
 *		src/base/stats.h
 */
#ifndef WI_STATS_H
#define WI_STATS_H

#include "postgres.h"

#include "datatype/timestamp.h"

extern void wi_stats_define_gucs(void);
extern void wi_stats_shmem_request(void);
extern void wi_stats_shmem_startup(void);
extern void wi_stats_begin(void);
extern void wi_stats_end(void);
extern void wi_stats_done(const char *source, TimestampTz now, double done_us, double fetch_us);
extern void wi_stats_failed(const char *source, TimestampTz now, int64 job_id, const char *external_id,
							int attempt, int http_status, const char *error, double fetch_ms, bool dead);

#endif							/* WI_STATS_H */
