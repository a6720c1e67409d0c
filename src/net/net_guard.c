/*
 * net_guard.c
 *		The network guard: which addresses the worker may connect to
 *		(webhook_ingest.denied_networks, webhook_ingest.allowed_networks),
 *		checked on the address curl actually connects to, for every
 *		connection and every redirect hop (http.c calls in from its libcurl
 *		callbacks); and the redirect policy setting
 *		(webhook_ingest.cross_origin_redirects), which http.c applies.
 *
 *		A list is parsed once, by the GUC check hook, into a malloc'd array
 *		that the assign hook installs (GUC "extra" data, freed by guc.c when
 *		replaced).  The lookups below only read it: no palloc, no ereport, so
 *		they are safe inside libcurl callbacks.  An IPv4-mapped IPv6 address
 *		(::ffff:a.b.c.d) is judged as the IPv4 address, in the lists and at
 *		connect time.
 *
 * IDENTIFICATION
 *		src/net/net_guard.c
 */
#include "postgres.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include "miscadmin.h"
#include "utils/guc.h"

#include "webhook_ingest.h"
#include "compat.h"
#include "net_guard.h"
#include "validate.h"

#define WI_DEFAULT_DENIED_NETWORKS \
	"169.254.0.0/16, fe80::/10, fd00:ec2::254/128, 100.100.100.200/32, " \
	"0.0.0.0/8, ::/128, 224.0.0.0/4, ff00::/8"

typedef struct WiNetwork
{
	int			family;			/* AF_INET or AF_INET6 */
	unsigned char bytes[16];	/* 4 used for AF_INET */
	int			bits;			/* prefix length */
	char		text[INET6_ADDRSTRLEN + 4]; /* canonical address/bits */
} WiNetwork;

typedef struct WiNetworkList
{
	int			count;
	WiNetwork	nets[FLEXIBLE_ARRAY_MEMBER];
} WiNetworkList;

static char *denied_networks_string = NULL;
static char *allowed_networks_string = NULL;
int			wi_cross_origin_redirects = WI_CROSS_ORIGIN_REFUSE;

/*
 * A list in postgresql.conf was invalid when the library was loaded: the
 * server would start with the default, so it does not start (as for a bad
 * value of a built-in setting).  On a reload a bad value is refused and the
 * previous one stays.
 */
static const char *invalid_name = NULL;
static char *invalid_value = NULL;

/* The parsed lists; NULL or empty: none. */
static const WiNetworkList *denied = NULL;
static const WiNetworkList *allowed = NULL;

static const struct config_enum_entry cross_origin_options[] = {
	{"refuse", WI_CROSS_ORIGIN_REFUSE, false},
	{"follow_without_headers", WI_CROSS_ORIGIN_FOLLOW_WITHOUT_HEADERS, false},
	{NULL, 0, false}
};

/* An ::ffff:a.b.c.d address becomes a.b.c.d. */
static void
unmap_v4(int *family, unsigned char *bytes)
{
	static const unsigned char prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

	if (*family == AF_INET6 && memcmp(bytes, prefix, sizeof(prefix)) == 0)
	{
		memmove(bytes, bytes + 12, 4);
		*family = AF_INET;
	}
}

static bool
in_network(const WiNetwork *net, int family, const unsigned char *addr)
{
	int			full = net->bits / 8;
	int			rest = net->bits % 8;

	if (net->family != family)
		return false;
	if (memcmp(net->bytes, addr, full) != 0)
		return false;
	if (rest == 0)
		return true;
	return ((net->bytes[full] ^ addr[full]) & (0xff << (8 - rest)) & 0xff) == 0;
}

static const WiNetwork *
find_network(const WiNetworkList *list, int family, const unsigned char *addr)
{
	if (list == NULL)
		return NULL;
	for (int i = 0; i < list->count; i++)
		if (in_network(&list->nets[i], family, addr))
			return &list->nets[i];
	return NULL;
}

static bool
allowed_address(int family, unsigned char *addr, char *why, size_t whylen)
{
	char		ip[INET6_ADDRSTRLEN];
	const WiNetwork *hit;

	unmap_v4(&family, addr);
	if (inet_ntop(family, addr, ip, sizeof(ip)) == NULL)
		strlcpy(ip, "?", sizeof(ip));
	if ((hit = find_network(denied, family, addr)) != NULL)
	{
		snprintf(why, whylen, "connection to %s refused by webhook_ingest.denied_networks (%s)", ip, hit->text);
		return false;
	}
	if (allowed != NULL && allowed->count > 0 && find_network(allowed, family, addr) == NULL)
	{
		snprintf(why, whylen, "connection to %s refused: not in webhook_ingest.allowed_networks", ip);
		return false;
	}
	return true;
}

bool
wi_net_allowed_sockaddr(const struct sockaddr *sa, char *why, size_t whylen)
{
	unsigned char addr[16];

	if (sa->sa_family == AF_INET)
	{
		memcpy(addr, &((const struct sockaddr_in *) sa)->sin_addr, 4);
		return allowed_address(AF_INET, addr, why, whylen);
	}
	if (sa->sa_family == AF_INET6)
	{
		memcpy(addr, &((const struct sockaddr_in6 *) sa)->sin6_addr, 16);
		return allowed_address(AF_INET6, addr, why, whylen);
	}
	snprintf(why, whylen, "connection over address family %d refused: only IPv4 and IPv6", (int) sa->sa_family);
	return false;
}

bool
wi_net_allowed_text(const char *ip, char *why, size_t whylen)
{
	unsigned char addr[16];

	if (inet_pton(AF_INET, ip, addr) == 1)
		return allowed_address(AF_INET, addr, why, whylen);
	if (inet_pton(AF_INET6, ip, addr) == 1)
		return allowed_address(AF_INET6, addr, why, whylen);
	snprintf(why, whylen, "connection to \"%.64s\" refused: not an IP address", ip);
	return false;
}

/*
 * One entry, address[/bits] (len bytes at s, trimmed), into *net.  Host bits
 * past the prefix are refused: "10.0.0.1/8" is more likely a typo than a
 * network.  On failure sets the GUC error detail and returns false.
 */
static bool
parse_network(const char *s, int len, WiNetwork *net)
{
	char		addr[INET6_ADDRSTRLEN + 1];
	const char *slash = memchr(s, '/', len);
	int			addr_len = slash ? (int) (slash - s) : len;
	int			max_bits;

	if (addr_len <= 0 || addr_len >= (int) sizeof(addr))
		goto bad;
	memcpy(addr, s, addr_len);
	addr[addr_len] = '\0';
	if (inet_pton(AF_INET, addr, net->bytes) == 1)
		net->family = AF_INET;
	else if (inet_pton(AF_INET6, addr, net->bytes) == 1)
		net->family = AF_INET6;
	else
		goto bad;
	max_bits = (net->family == AF_INET) ? 32 : 128;
	net->bits = max_bits;
	if (slash)
	{
		const char *p = slash + 1;
		int			digits = len - (int) (p - s);

		if (digits < 1 || digits > 3 || (int) strspn(p, "0123456789") < digits)
			goto bad;
		net->bits = 0;
		for (int i = 0; i < digits; i++)
			net->bits = net->bits * 10 + (p[i] - '0');
		if (net->bits > max_bits)
			goto bad;
	}
	if (net->family == AF_INET6 && net->bits >= 96)
	{
		int			family = AF_INET6;

		unmap_v4(&family, net->bytes);
		if (family == AF_INET)
		{
			net->family = AF_INET;
			net->bits -= 96;
		}
	}
	for (int bit = net->bits; bit < (net->family == AF_INET ? 32 : 128); bit++)
		if (net->bytes[bit / 8] & (0x80 >> (bit % 8)))
		{
			GUC_check_errdetail("\"%s\" has bits set to the right of its prefix length.", wi_clip(s, len));
			return false;
		}
	inet_ntop(net->family, net->bytes, net->text, sizeof(net->text));
	snprintf(net->text + strlen(net->text), sizeof(net->text) - strlen(net->text), "/%d", net->bits);
	return true;

bad:
	GUC_check_errdetail("\"%s\" is not a network in CIDR notation (an IPv4 or IPv6 address, optionally /prefix length).",
						wi_clip(s, len));
	return false;
}

static bool parse_networks(const char *p, void **extra);

/* The GUC check hooks: comma-separated networks, or nothing. */
static bool
check_networks(const char *name, char **newval, void **extra, GucSource source)
{
	if (parse_networks(*newval ? *newval : "", extra))
		return true;
	if (source == PGC_S_FILE && process_shared_preload_libraries_in_progress && invalid_name == NULL)
	{
		invalid_name = name;
		invalid_value = strdup(*newval ? *newval : "");
	}
	return false;
}

static bool
check_denied(char **newval, void **extra, GucSource source)
{
	return check_networks("webhook_ingest.denied_networks", newval, extra, source);
}

static bool
check_allowed(char **newval, void **extra, GucSource source)
{
	return check_networks("webhook_ingest.allowed_networks", newval, extra, source);
}

static bool
parse_networks(const char *p, void **extra)
{
	int			max = 1;
	WiNetworkList *list;

	for (const char *c = p; *c; c++)
		max += (*c == ',');
	list = wi_guc_extra_alloc(offsetof(WiNetworkList, nets) + sizeof(WiNetwork) * max);
	if (list == NULL)
	{
		GUC_check_errcode(ERRCODE_OUT_OF_MEMORY);
		return false;
	}
	list->count = 0;
	if (p[strspn(p, " \t")] != '\0')
	{
		for (;;)
		{
			const char *end = p + strcspn(p, ",");
			const char *s = p;
			const char *e = end;

			while (s < e && (*s == ' ' || *s == '\t'))
				s++;
			while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
				e--;
			if (s == e)
			{
				GUC_check_errdetail("The list has an empty entry.");
				wi_guc_extra_free(list);
				return false;
			}
			if (!parse_network(s, (int) (e - s), &list->nets[list->count]))
			{
				wi_guc_extra_free(list);
				return false;
			}
			list->count++;
			if (*end == '\0')
				break;
			p = end + 1;
		}
	}
	*extra = list;
	return true;
}

static void
assign_denied(const char *newval, void *extra)
{
	denied = (const WiNetworkList *) extra;
}

static void
assign_allowed(const char *newval, void *extra)
{
	allowed = (const WiNetworkList *) extra;
}

void
wi_net_guard_define_gucs(void)
{
	DefineCustomStringVariable("webhook_ingest.denied_networks",
							   "Networks the worker never connects to (comma-separated CIDRs).",
							   "Checked on every address the worker connects to, redirects included, after DNS. "
							   "Default: " WI_DEFAULT_DENIED_NETWORKS
							   " (link-local and cloud metadata, unspecified, multicast). Setting it replaces the default.",
							   &denied_networks_string,
							   WI_DEFAULT_DENIED_NETWORKS,
							   PGC_SIGHUP, 0,
							   check_denied, assign_denied, NULL);
	DefineCustomStringVariable("webhook_ingest.allowed_networks",
							   "Networks the worker may connect to (comma-separated CIDRs); empty: any not denied.",
							   "Default: empty. When set, a connection outside these networks is refused; "
							   "webhook_ingest.denied_networks still wins.",
							   &allowed_networks_string,
							   "",
							   PGC_SIGHUP, 0,
							   check_allowed, assign_allowed, NULL);
	DefineCustomEnumVariable("webhook_ingest.cross_origin_redirects",
							 "What the worker does with a redirect to another origin (scheme, host, port).",
							 "Default: refuse (the job ends dead). follow_without_headers: follow it without the "
							 "source's headers. A redirect from https to http is always refused.",
							 &wi_cross_origin_redirects,
							 WI_CROSS_ORIGIN_REFUSE,
							 cross_origin_options,
							 PGC_SIGHUP, 0,
							 NULL, NULL, NULL);
	if (invalid_name != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for parameter \"%s\": \"%s\"", invalid_name,
						invalid_value ? wi_clip(invalid_value, (int) strlen(invalid_value)) : ""),
				 errdetail("A bad network list would leave the server with the default; it does not start."),
				 errhint("Correct it in postgresql.conf (or postgresql.auto.conf); the warning above says what is wrong.")));
}
