/*
 * webhook_ingest.h
 *		Declarations shared by the files of the webhook_ingest extension.
 *
 * IDENTIFICATION
 *		src/webhook_ingest.h
 */
#ifndef WEBHOOK_INGEST_H
#define WEBHOOK_INGEST_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "storage/condition_variable.h"
#include "storage/dsm.h"

#include "compat.h"

#define WI_EXTENSION_NAME		"webhook_ingest"
#define WI_SCHEMA_NAME			"webhook_ingest"
/* The library's version: the Makefile's EXTVERSION (-DEXTVERSION="x.y.z"). */
#ifndef EXTVERSION
#error "EXTVERSION is not defined: build with the Makefile, which passes -DEXTVERSION"
#endif
#define WI_VERSION				EXTVERSION

/* Longest external_id or event_id accepted, in bytes. */
#define WI_MAX_ID_BYTES			1024

/* Most apply workers per database (webhook_ingest.apply_workers). */
#define WI_MAX_APPLIERS			32

/*
 * What a process has done since it started (worker_status): the fetcher
 * counts claims and transfers, and the outcomes its apply workers report;
 * an apply worker counts the jobs it completed.
 */
typedef struct WiCounters
{
	int64		claimed;		/* jobs claimed */
	int64		fetched;		/* transfers finished, whatever the outcome */
	int64		applied;		/* jobs completed by an apply worker, whatever the outcome */
	int64		handler_us;		/* time spent in handlers (and storing documents) */
	int64		succeeded;		/* jobs done (handler committed) */
	int64		retried;		/* failed attempts with a retry scheduled */
	int64		dead;			/* jobs that ended dead */
	int64		handler_errors; /* handler calls that raised an error */
	int64		bytes;			/* response body bytes received */
	int64		connections_opened; /* connections (sockets) opened */
	int64		tls_connections_opened; /* of which for https */
	char		last_error[256];
	TimestampTz last_error_at;
} WiCounters;

/* Why a worker or an apply worker exited, for the launcher (shmem.c). */
typedef enum WiExitReason
{
	WI_EXIT_UNEXPECTED = 0,		/* a crash or FATAL: restart with a back-off */
	WI_EXIT_NO_EXTENSION,		/* not installed here: wait until CREATE EXTENSION */
	WI_EXIT_STOPPED,			/* asked to stop */
	WI_EXIT_TERMINATED,			/* SIGTERM from another backend (pg_terminate_backend): restart at once */
	WI_EXIT_DEADLINE			/* an apply worker whose handler ran past its hard deadline: restart at once */
} WiExitReason;

/* shmem.c */
extern void wi_shmem_init(void);
extern bool wi_shmem_register_worker(void);
extern bool wi_shmem_stop_requested(void);
extern void wi_shmem_set_exit_reason(WiExitReason reason, const char *state);
extern void wi_shmem_wake_launcher(Oid database);
extern void wi_shmem_publish(const char *state, int in_flight, int applying, const WiCounters *counters);
extern bool wi_shmem_register_applier(int index);
extern WiExitReason wi_shmem_exit_reason(void);
extern void wi_shmem_set_fetcher_ready(bool ready);
extern void wi_shmem_publish_queues(dsm_handle queues);
extern uint32 wi_shmem_applier(int index, dsm_handle *queues, pid_t *pid, WiExitReason *reason,
							   int64 *handling_job);
extern void wi_shmem_set_handling(int64 job_id);
extern void wi_shmem_publish_applier(const char *state, int in_batch, const WiCounters *counters);
extern void wi_shmem_publish_alone(const char *text);
extern void wi_shmem_publish_horizon(TimestampTz history_until, TimestampTz kept_until);
extern void wi_shmem_horizon(TimestampTz *history_until, TimestampTz *kept_until);
extern void wi_shmem_wake_launcher_installed(Oid database);
extern void wi_shmem_publish_sources(void);
extern void wi_wake_worker_at_commit(void);
extern ConditionVariable *wi_shmem_job_cv(int64 job_id);
extern void wi_shmem_jobs_finished(const int64 *job_ids, int n);
extern void wi_shmem_all_jobs_finished(void);

/* wait_event.c: what each sleep reports (a name of its own from 17 on). */
typedef enum WiWaitEvent
{
	WI_WAIT_WORKER_MAIN,		/* the worker's loop: latch, sockets, timers */
	WI_WAIT_WORKER_EXTENSION_UPDATE,	/* for ALTER EXTENSION UPDATE */
	WI_WAIT_WORKER_DISABLED,	/* webhook_ingest.enabled = off */
	WI_WAIT_WORKER_ERROR_BACKOFF,	/* a second after an error */
	WI_WAIT_LAUNCHER_MAIN,		/* the launcher's loop */
	WI_WAIT_FOR_JOB,			/* wait_for_job() */
	WI_WAIT_REPLAYED,			/* wait_replayed() */
	WI_WAIT_STOP_WORKER,		/* DROP/RENAME DATABASE, CREATE DATABASE from it, DROP EXTENSION */
	WI_WAIT_APPLIER_MAIN,		/* an apply worker waiting for a batch */
	WI_WAIT_EVENT_COUNT
}			WiWaitEvent;
#if WI_HAVE_NAMED_WAIT_EVENTS
extern uint32 wi_wait_event(WiWaitEvent event);
#else
#define wi_wait_event(event) PG_WAIT_EXTENSION
#endif

/* stats.c */
extern void wi_stats_define_gucs(void);
extern Size wi_stats_shmem_size(void);
extern void wi_stats_shmem_request(void);
extern void wi_stats_shmem_startup(void);
extern void wi_stats_begin(void);
extern void wi_stats_end(void);
extern void wi_stats_done(const char *source, TimestampTz now, double done_us, double fetch_us);
extern void wi_stats_failed(const char *source, TimestampTz now, int64 job_id, const char *external_id,
							int attempt, int http_status, const char *error, double fetch_ms, bool dead);

/* worker.c */
struct BackgroundWorker;
extern void wi_worker_describe(struct BackgroundWorker *worker, Oid database);
extern void wi_worker_stop_if_asked(void);

/* launcher.c */
extern void wi_register_launcher(void);
extern bool wi_database_wanted(const char *name);

/* utility.c */
extern void wi_utility_hook_install(void);

/* Most bytes of an input an error message quotes (wi_clip). */
#define WI_ECHO_BYTES			100

/* Most bytes of a handler's error message kept in last_error and the log. */
#define WI_HANDLER_ERROR_BYTES	1000

/* validate.c */
extern void wi_check_not_null(bool isnull, const char *what);
extern char *wi_clip(const char *s, int len);
extern char *wi_clip_to(const char *s, int len, int max);
extern char *wi_clip_text(text *t);
extern void wi_check_id(const char *what, const char *value, int len);
extern void wi_check_external_id(const char *value, int len);
extern const char *wi_check_http_url(const char *url, const char *what);

/* spi_plans.c */
struct _SPI_plan;
extern struct _SPI_plan *wi_prepare_once(struct _SPI_plan **plan, const char *sql, int nargs, Oid *argtypes,
										 bool replan);

/* net_guard.c */
extern void wi_net_guard_define_gucs(void);

/* egress.c */
extern void wi_egress_define_gucs(void);

/* log_redact.c */
extern void wi_log_redact_install(void);

/* job_history.c */
extern void wi_packed_jobs_planner_install(void);

/* url.c */
extern char *wi_render_url(const char *url_template, const char *id, int idlen);

#endif							/* WEBHOOK_INGEST_H */
