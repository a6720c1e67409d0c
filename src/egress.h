/*
 * egress.h
 *		Which proxy a fetch goes through (egress.c).
 */
#ifndef WI_EGRESS_H
#define WI_EGRESS_H

extern char *wi_proxy;
extern char *wi_no_proxy;

extern const char *wi_proxy_for(const char *source_proxy);

#endif							/* WI_EGRESS_H */
