/*
 * wait_event.c
 *		The wait events the extension's processes report while they sleep.
 *		From PostgreSQL 17 on, each wait has a name of its own
 *		(WaitEventExtensionNew), so pg_stat_activity.wait_event says what is
 *		waited for: WebhookIngestWorkerMain, WebhookIngestApplierMain,
 *		WebhookIngestLauncherMain,
 *		WebhookIngestWaitForJob, ...  (wait_event_type Extension).  The
 *		names live in shared memory: each is registered on first use in a
 *		process (not in _PG_init, which runs before shared memory exists) and
 *		its id kept for the process's life.  Below 17, wi_wait_event() is
 *		PG_WAIT_EXTENSION (wait_event.h): wait event Extension.
 *
 * IDENTIFICATION
 *		src/base/wait_event.c
 */
#include "postgres.h"

#include "webhook_ingest.h"
#include "compat.h"
#include "wait_event.h"

#if WI_HAVE_NAMED_WAIT_EVENTS

#include "utils/wait_event.h"

/* In WiWaitEvent's order. */
static const char *const wait_event_names[WI_WAIT_EVENT_COUNT] = {
	[WI_WAIT_WORKER_MAIN] = "WebhookIngestWorkerMain",
	[WI_WAIT_WORKER_EXTENSION_UPDATE] = "WebhookIngestWorkerExtensionUpdate",
	[WI_WAIT_WORKER_DISABLED] = "WebhookIngestWorkerDisabled",
	[WI_WAIT_WORKER_ERROR_BACKOFF] = "WebhookIngestWorkerErrorBackoff",
	[WI_WAIT_LAUNCHER_MAIN] = "WebhookIngestLauncherMain",
	[WI_WAIT_FOR_JOB] = "WebhookIngestWaitForJob",
	[WI_WAIT_REPLAYED] = "WebhookIngestWaitReplayed",
	[WI_WAIT_STOP_WORKER] = "WebhookIngestStopWorker",
	[WI_WAIT_APPLIER_MAIN] = "WebhookIngestApplierMain",
};

uint32
wi_wait_event(WiWaitEvent event)
{
	static uint32 ids[WI_WAIT_EVENT_COUNT];

	Assert(event < WI_WAIT_EVENT_COUNT);
	/* An id is PG_WAIT_EXTENSION | n, never 0. */
	if (ids[event] == 0)
		ids[event] = WaitEventExtensionNew(wait_event_names[event]);
	return ids[event];
}

#endif
