/*
 * log_redact.h
 *		The emit_log_hook that keeps private keys out of the server log
 *		(log_redact.c).
 *
 * IDENTIFICATION
 *		src/base/log_redact.h
 */
#ifndef WI_LOG_REDACT_H
#define WI_LOG_REDACT_H

#include "postgres.h"

extern void wi_log_redact_install(void);

#endif							/* WI_LOG_REDACT_H */
