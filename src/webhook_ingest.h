/*
 * webhook_ingest.h
 *		Declarations shared by the files of the webhook_ingest extension.
 */
#ifndef WEBHOOK_INGEST_H
#define WEBHOOK_INGEST_H

#include "postgres.h"

#define WI_EXTENSION_NAME		"webhook_ingest"
#define WI_SCHEMA_NAME			"webhook_ingest"
#define WI_VERSION				"0.1.0"

/* Longest external_id or event_id accepted, in bytes. */
#define WI_MAX_ID_BYTES			1024

/* GUC variables (webhook_ingest.c) */
extern int	wi_dedup_window;
extern char *wi_database;
extern bool wi_enabled;
extern int	wi_max_concurrent_requests;
extern int	wi_max_host_connections;
extern int	wi_max_response_size_kb;
extern int	wi_lease_timeout_s;
extern int	wi_poll_interval_ms;
extern int	wi_backoff_base_ms;
extern int	wi_backoff_max_ms;
extern int	wi_connect_timeout_ms;

/* shmem.c */
extern void wi_shmem_init(void);
extern void wi_shmem_register_worker(void);
extern void wi_wake_worker_at_commit(void);

/* worker.c */
extern void wi_register_worker(void);

/* validate.c */
extern void wi_check_not_null(bool isnull, const char *what);
extern void wi_check_id(const char *what, const char *value, int len);

/* url.c */
extern char *wi_render_url(const char *url_template, const char *id, int idlen);

#endif							/* WEBHOOK_INGEST_H */
