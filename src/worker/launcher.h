/*
 * launcher.h
 *		The launcher (launcher.c): its registration in _PG_init, and which
 *		databases webhook_ingest.database names.
 *
 * IDENTIFICATION
 *		src/worker/launcher.h
 */
#ifndef WI_LAUNCHER_H
#define WI_LAUNCHER_H

#include "postgres.h"

extern void wi_register_launcher(void);

#endif							/* WI_LAUNCHER_H */
