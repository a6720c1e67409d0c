/*
 * h2_pacing.h
 *		How many fetches of one https origin go to libcurl at once
 *		(h2_pacing.c).
 *
 * IDENTIFICATION
 *		src/net/h2_pacing.h
 */
#ifndef WI_H2_PACING_H
#define WI_H2_PACING_H

#include "http.h"

extern void wi_pacing_init(void);
extern WiOrigin *wi_pacing_origin(const char *origin, bool tls);
extern bool wi_pacing_admit(WiOrigin *o, bool *probe);
extern void wi_pacing_added(WiOrigin *o, bool probe);
extern void wi_pacing_hold(WiOrigin *o, Transfer *t);
extern void wi_pacing_unhold(WiOrigin *o, Transfer *t);
extern void wi_pacing_removed(WiOrigin *o, bool probe, long http_version);
extern void wi_pacing_socket_opened(WiOrigin *o, int fd);
extern void wi_pacing_request(WiOrigin *o, int fd, bool opened_here, bool *probe);
extern void wi_pacing_socket_closed(int fd);
extern void wi_pacing_release(void (*start) (Transfer *t, bool probe));
extern long wi_pacing_held_timeout_ms(void);
extern void wi_pacing_expire(void (*finish) (Transfer *t));

#endif							/* WI_H2_PACING_H */
