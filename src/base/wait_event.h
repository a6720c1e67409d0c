/*
 * wait_event.h
 *		What each sleep of the extension reports as its wait event (wait_event.c):
 *		a name of its own from 17 on, PG_WAIT_EXTENSION before.
 *
 * IDENTIFICATION
 *		src/base/wait_event.h
 */
#ifndef WI_WAIT_EVENT_H
#define WI_WAIT_EVENT_H

#include "postgres.h"

#include "utils/wait_event.h"

#include "compat.h"

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

#endif							/* WI_WAIT_EVENT_H */
