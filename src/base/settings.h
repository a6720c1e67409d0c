/*
 * settings.h
 *		The variables the extension's settings set (settings.c) and the
 *		function that defines them.
 *
 * IDENTIFICATION
 *		src/base/settings.h
 */
#ifndef WI_SETTINGS_H
#define WI_SETTINGS_H

extern int	wi_dedup_window;
extern char *wi_database;
extern int	wi_max_databases;
extern bool wi_enabled;
extern int	wi_max_concurrent_requests;
extern int	wi_max_host_connections;
extern int	wi_max_streams_per_connection;
extern int	wi_max_response_size_kb;
extern int	wi_lease_timeout_s;
extern int	wi_poll_interval_ms;
extern int	wi_backoff_base_ms;
extern int	wi_backoff_max_ms;
extern int	wi_connect_timeout_ms;
extern int	wi_retention_s;
extern int	wi_handler_timeout_ms;
extern int	wi_lock_timeout_ms;
extern int	wi_max_payload_size_kb;
extern int	wi_apply_workers;
extern int	wi_apply_queue_size_kb;
extern int	wi_dead_payload_limit_kb;

extern void wi_settings_define(void);

#endif							/* WI_SETTINGS_H */
