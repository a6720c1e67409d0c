/*
 * url_template.h
 *		A source's url_template with {external_id} expanded (url_template.c).
 *
 * IDENTIFICATION
 *		src/net/url_template.h
 */
#ifndef WI_URL_TEMPLATE_H
#define WI_URL_TEMPLATE_H

#include "lib/stringinfo.h"

extern void wi_append_path_segment(StringInfo buf, const char *id, int idlen);
extern void wi_expand_url_template(StringInfo buf, const char *url_template, const char *id, int idlen);

#endif							/* WI_URL_TEMPLATE_H */
