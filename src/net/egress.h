/*
 * egress.h
 *		Which proxy a fetch goes through (egress.c).
 *
 * IDENTIFICATION
 *		src/net/egress.h
 */
#ifndef WI_EGRESS_H
#define WI_EGRESS_H

extern char *wi_proxy;
extern char *wi_no_proxy;

extern const char *wi_proxy_for(const char *source_proxy);

extern void wi_egress_define_gucs(void);

#endif							/* WI_EGRESS_H */
