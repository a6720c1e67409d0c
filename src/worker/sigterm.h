/*
 * sigterm.h
 *		Who ended a worker or an apply worker with SIGTERM (sigterm.c).
 *
 * IDENTIFICATION
 *		src/worker/sigterm.h
 */
#ifndef WI_SIGTERM_H
#define WI_SIGTERM_H

#include "postgres.h"

extern void wi_catch_sigterm(void);
extern pid_t wi_sigterm_sender(void);

#endif							/* WI_SIGTERM_H */
