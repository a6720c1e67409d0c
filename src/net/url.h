/*
 * url.h
 *		url_for(): a source's URL for one id (url.c, over url_template.c).
 *
 * IDENTIFICATION
 *		src/net/url.h
 */
#ifndef WI_URL_H
#define WI_URL_H

#include "postgres.h"

extern char *wi_render_url(const char *url_template, const char *id, int idlen);

#endif							/* WI_URL_H */
