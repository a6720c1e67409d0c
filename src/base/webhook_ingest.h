/*
 * webhook_ingest.h
 *		What every file of the extension may need: its name, schema and
 *		version, and the limits several files share.  Each file's functions
 *		are declared in its own header (settings.h, shmem.h, validate.h, ...).
 *
 * IDENTIFICATION
 *		src/base/webhook_ingest.h
 */
#ifndef WEBHOOK_INGEST_H
#define WEBHOOK_INGEST_H

#include "postgres.h"

#define WI_EXTENSION_NAME		"webhook_ingest"
#define WI_SCHEMA_NAME			"webhook_ingest"
/* The library's version: the Makefile's EXTVERSION (-DEXTVERSION="x.y.z"). */
#ifndef EXTVERSION
#error "EXTVERSION is not defined: build with the Makefile, which passes -DEXTVERSION"
#endif
#define WI_VERSION				EXTVERSION

/* Longest external_id or event_id accepted, in bytes. */
#define WI_MAX_ID_BYTES			1024

/* Longest source name, in bytes (sources.name's check), and a buffer that holds one. */
#define WI_MAX_SOURCE_NAME		63
#define WI_SOURCE_NAME_LEN		(WI_MAX_SOURCE_NAME + 1)

/* Most apply workers per database (webhook_ingest.apply_workers). */
#define WI_MAX_APPLIERS			32

/* Most bytes of an input an error message quotes (wi_clip). */
#define WI_ECHO_BYTES			100

/* Most bytes of a handler's error message kept in last_error and the log. */
#define WI_HANDLER_ERROR_BYTES	1000

#endif							/* WEBHOOK_INGEST_H */
