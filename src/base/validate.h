/*
 * validate.h
 *		Input checks and wi_clip, which keeps error messages to
 *		WI_ECHO_BYTES of an input (validate.c).
 *
 * IDENTIFICATION
 *		src/base/validate.h
 */
#ifndef WI_VALIDATE_H
#define WI_VALIDATE_H

#include "postgres.h"

extern void wi_check_not_null(bool isnull, const char *what);
extern char *wi_clip(const char *s, int len);
extern char *wi_clip_to(const char *s, int len, int max);
extern char *wi_clip_text(text *t);
extern void wi_check_id(const char *what, const char *value, int len);
extern void wi_check_external_id(const char *value, int len);
extern const char *wi_check_http_url(const char *url, const char *what);

#endif							/* WI_VALIDATE_H */
