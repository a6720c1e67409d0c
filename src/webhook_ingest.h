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

/* validate.c */
extern void wi_check_not_null(bool isnull, const char *what);
extern void wi_check_id(const char *what, const char *value, int len);

/* url.c */
extern char *wi_render_url(const char *url_template, const char *id, int idlen);

#endif							/* WEBHOOK_INGEST_H */
