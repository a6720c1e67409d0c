/*
 * settings.c
 *		The extension's settings (GUCs): the variables they set and their
 *		definitions, each with its name, default, range, context, unit and
 *		description.  Settings with hooks or state of their own stay with
 *		the module that checks them (net_guard.c, egress.c, stats.c), which
 *		_PG_init has define them after these.
 *
 * IDENTIFICATION
 *		src/base/settings.c
 */
#include "postgres.h"

#include <limits.h>

#include "utils/guc.h"

#include "settings.h"
#include "webhook_ingest.h"

/* How long accepted event ids are remembered, in seconds. */
int			wi_dedup_window = 7 * 24 * 60 * 60;
int			wi_retention_s = 7 * 24 * 60 * 60;
char	   *wi_database = NULL;
int			wi_max_databases = 16;
bool		wi_enabled = true;
int			wi_max_concurrent_requests = 1024;
int			wi_max_host_connections = 1024;
int			wi_max_streams_per_connection = 100;
int			wi_max_response_size_kb = 1024;
int			wi_lease_timeout_s = 60;
int			wi_poll_interval_ms = 1000;
int			wi_backoff_base_ms = 1000;
int			wi_backoff_max_ms = 3600 * 1000;
int			wi_connect_timeout_ms = 5000;
int			wi_handler_timeout_ms = 2000;
int			wi_lock_timeout_ms = 50;
int			wi_max_payload_size_kb = 1024;
int			wi_apply_workers = 2;
int			wi_apply_queue_size_kb = 1024;
int			wi_dead_payload_limit_kb = 64 * 1024;

/* What is kept and for how long: accepted event ids, finished jobs, dead payloads. */
static void
define_keeping_settings(void)
{
	DefineCustomIntVariable("webhook_ingest.dedup_window",
							"How long accepted event ids are remembered.",
							"A webhook whose event id the source delivered within this window is a duplicate.",
							&wi_dedup_window,
							7 * 24 * 60 * 60,
							60,
							INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("webhook_ingest.retention",
							"How long done and cancelled jobs are kept.",
							"The worker deletes older ones in small batches; -1 keeps them forever. Dead jobs are kept until retried or deleted.",
							&wi_retention_s,
							7 * 24 * 60 * 60,
							-1,
							INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("webhook_ingest.dead_payload_limit",
							"Most payload bytes one source's dead jobs keep.",
							"A job that dies while its source's dead jobs keep this much loses its payload "
							"(its row stays, last_error says so); -1: no limit. An object keeps one dead job, its newest.",
							&wi_dead_payload_limit_kb,
							64 * 1024, -1, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_KB,
							NULL, NULL, NULL);
}

/* Which databases get a worker, its apply workers and their queues. */
static void
define_process_settings(void)
{
	DefineCustomStringVariable("webhook_ingest.database",
							   "Databases that get a worker: a name or a comma-separated list.",
							   "Empty (the default): every database where the extension is installed.",
							   &wi_database,
							   "",
							   PGC_SIGHUP,
							   GUC_LIST_INPUT,
							   NULL, NULL, NULL);
	DefineCustomIntVariable("webhook_ingest.max_databases",
							"Most databases with a worker at once.",
							"Each database has a worker and webhook_ingest.apply_workers apply workers, each a background worker "
							"process: max_worker_processes must leave room for them and the launcher.",
							&wi_max_databases,
							16, 1, 1024,
							PGC_POSTMASTER, 0,
							NULL, NULL, NULL);
	DefineCustomBoolVariable("webhook_ingest.enabled",
							 "Whether the worker claims and fetches jobs.",
							 "Off: the worker starts no new fetch and takes back no lease; enqueue is unaffected.",
							 &wi_enabled,
							 true,
							 PGC_SIGHUP, 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("webhook_ingest.apply_workers",
							"Apply workers per database: processes that run the handlers of what the worker fetched.",
							"Each is a background worker process: max_worker_processes must leave room for the launcher and, "
							"per database, the worker and its apply workers. A reload may lower it; raising it past what "
							"max_worker_processes leaves needs a restart with a higher max_worker_processes.",
							&wi_apply_workers,
							2, 1, WI_MAX_APPLIERS,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("webhook_ingest.apply_queue_size",
							"Size of each apply worker's hand-off queue in shared memory.",
							"A batch larger than the queue streams through it; a larger queue lets the worker hand a batch "
							"over without waiting. Applies to apply workers started after a change.",
							&wi_apply_queue_size_kb,
							1024, 64, 1024 * 1024,
							PGC_SIGHUP, GUC_UNIT_KB,
							NULL, NULL, NULL);
}

/* How the worker fetches: concurrency, connections, sizes, leases, timers. */
static void
define_fetch_settings(void)
{
	DefineCustomIntVariable("webhook_ingest.max_concurrent_requests",
							"Most fetches the worker keeps in flight at once.",
							"Also capped by the worker's open file limit.",
							&wi_max_concurrent_requests,
							1024, 1, 100000,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("webhook_ingest.max_host_connections",
							"Most connections the worker opens to one host.",
							NULL,
							&wi_max_host_connections,
							1024, 1, 100000,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("webhook_ingest.max_streams_per_connection",
							"Most HTTP/2 streams (fetches) the worker runs at once on one connection.",
							"The server's own limit (SETTINGS_MAX_CONCURRENT_STREAMS) holds too; more fetches "
							"to the host open another connection, up to max_host_connections.",
							&wi_max_streams_per_connection,
							100, 1, 10000,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("webhook_ingest.max_response_size",
							"Largest response body the worker accepts.",
							"A larger body fails the job without retry; it is cut off while it is read.",
							&wi_max_response_size_kb,
							1024, 1, 1024 * 1024,
							PGC_SIGHUP, GUC_UNIT_KB,
							NULL, NULL, NULL);
	DefineCustomIntVariable("webhook_ingest.lease_timeout",
							"How long a claimed job is leased to the worker at least.",
							"The lease is at least the source's timeout plus 10 s.",
							&wi_lease_timeout_s,
							60, 1, 24 * 3600,
							PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("webhook_ingest.poll_interval",
							"How often the worker looks for due jobs without being woken.",
							NULL,
							&wi_poll_interval_ms,
							1000, 10, 3600 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("webhook_ingest.backoff_base",
							"Delay before the first retry; it doubles with each attempt.",
							NULL,
							&wi_backoff_base_ms,
							1000, 1, 3600 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("webhook_ingest.backoff_max",
							"Longest delay between retries.",
							NULL,
							&wi_backoff_max_ms,
							3600 * 1000, 1, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("webhook_ingest.connect_timeout",
							"How long the worker waits for a connection to the upstream.",
							NULL,
							&wi_connect_timeout_ms,
							5000, 1, 3600 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
}

/* Handlers and intake: how long a handler or a lock wait may take, the largest payload. */
static void
define_handler_settings(void)
{
	DefineCustomIntVariable("webhook_ingest.handler_timeout",
							"Longest time one handler call may take.",
							"A handler still running then is cancelled and the attempt fails; one that ignores the cancel for "
							"as long again (at most 1 s more) has its apply worker ended and its job is dead.",
							&wi_handler_timeout_ms,
							2000, 1, 60 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("webhook_ingest.lock_timeout",
							"Longest time the worker waits for a lock that another session holds.",
							"A job whose row is locked is completed on a later turn; housekeeping skips locked rows.",
							&wi_lock_timeout_ms,
							50, 1, 10 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("webhook_ingest.max_payload_size",
							"Largest payload enqueue() accepts.",
							"A larger payload is refused with SQLSTATE 54000 and nothing is written.",
							&wi_max_payload_size_kb,
							1024, 1, 1024 * 1024,
							PGC_SUSET, GUC_UNIT_KB,
							NULL, NULL, NULL);
}

/*
 * Defines the settings above (_PG_init, which then has net_guard.c, egress.c
 * and stats.c define theirs and reserves the prefix).
 */
void
wi_settings_define(void)
{
	define_keeping_settings();
	define_process_settings();
	define_fetch_settings();
	define_handler_settings();
}
