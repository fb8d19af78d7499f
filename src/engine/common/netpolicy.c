/*-------------------------------------------------------------------------
 *
 * netpolicy.c
 *	  CIDR lists and the outbound-source policy decision.
 *
 * Addresses are parsed with inet_pton only: the decimal, octal and hex
 * IPv4 spellings that inet_aton accepts are not addresses here (curl and
 * the resolver decide what they connect to; the policy sees the resulting
 * sockaddr).
 *
 *-------------------------------------------------------------------------
 */
#include "engine/common/netpolicy.h"
#include "engine/common/util.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* Ranges denied unless remora.allow_networks names them. */
static const char *const default_deny[] = {
	"0.0.0.0/8",       /* "this network", unspecified */
	"10.0.0.0/8",      /* private */
	"100.64.0.0/10",   /* carrier-grade NAT */
	"127.0.0.0/8",     /* loopback */
	"169.254.0.0/16",  /* link-local, cloud metadata */
	"172.16.0.0/12",   /* private */
	"192.0.0.0/24",    /* IETF protocol assignments */
	"192.0.2.0/24",    /* documentation */
	"192.168.0.0/16",  /* private */
	"198.18.0.0/15",   /* benchmarking */
	"198.51.100.0/24", /* documentation */
	"203.0.113.0/24",  /* documentation */
	"224.0.0.0/4",     /* multicast */
	"240.0.0.0/4",     /* reserved, broadcast */
	"::/128",          /* unspecified */
	"::1/128",         /* loopback */
	"64:ff9b::/96",    /* NAT64: reaches the IPv4 address it embeds */
	"64:ff9b:1::/48",  /* local-use NAT64 */
	"100::/64",        /* discard */
	"2001::/32",       /* Teredo: embeds an IPv4 address */
	"2002::/16",       /* 6to4: embeds an IPv4 address */
	"2001:db8::/32",   /* documentation */
	"fc00::/7",        /* unique local */
	"fe80::/10",       /* link-local */
	"fec0::/10",       /* site-local (deprecated) */
	"ff00::/8",        /* multicast */
};

static bool
cidr_parse(const char *text, RemoraCidr *out)
{
	char   buf[64];
	char  *slash;
	int    maxbits;
	size_t len = strlen(text);

	if (len == 0 || len >= sizeof(buf))
		return false;
	memcpy(buf, text, len + 1);
	slash = strchr(buf, '/');
	if (slash)
		*slash = '\0';

	memset(out, 0, sizeof(*out));
	if (inet_pton(AF_INET, buf, out->addr) == 1)
	{
		out->family = AF_INET;
		maxbits = 32;
	}
	else if (inet_pton(AF_INET6, buf, out->addr) == 1)
	{
		out->family = AF_INET6;
		maxbits = 128;
	}
	else
		return false;

	if (slash)
	{
		char *end;
		long  bits;

		if (slash[1] < '0' || slash[1] > '9')
			return false;
		bits = strtol(slash + 1, &end, 10);
		if (*end != '\0' || bits < 0 || bits > maxbits)
			return false;
		out->bits = (int) bits;
	}
	else
		out->bits = maxbits;

	/* clear host bits so that "10.1.2.3/8" means 10.0.0.0/8 */
	for (int i = 0; i < maxbits / 8; i++)
	{
		int keep = out->bits - i * 8;

		if (keep >= 8)
			continue;
		out->addr[i] &= keep <= 0 ? 0 : (unsigned char) (0xff << (8 - keep));
	}
	return true;
}

/*
 * Parse a comma- or space-separated list of CIDRs (a bare address is a
 * host route).  An empty list is valid.  *out is malloc'd (NULL if empty).
 */
bool
remora_cidr_list_parse(const char *text, RemoraCidr **out, int *n, char *errbuf,
					   size_t errlen)
{
	const char *p = text ? text : "";
	int         cap = 0;
	RemoraCidr *grown;

	*out = NULL;
	*n = 0;
	while (*p)
	{
		char   item[64];
		size_t len = strcspn(p, ", \t\n");

		if (len == 0)
		{
			p++;
			continue;
		}
		if (len >= sizeof(item))
		{
			remora_errbuf_set(errbuf, errlen, "network list entry is too long");
			goto fail;
		}
		memcpy(item, p, len);
		item[len] = '\0';
		grown = remora_array_grow(*out, *n, &cap, sizeof(**out));
		if (grown == NULL)
		{
			remora_errbuf_set(errbuf, errlen, "out of memory");
			goto fail;
		}
		*out = grown;
		if (!cidr_parse(item, &(*out)[*n]))
		{
			remora_errbuf_set(errbuf, errlen,
							  "\"%s\" is not an IP address or CIDR network",
							  item);
			goto fail;
		}
		(*n)++;
		p += len;
	}
	return true;

fail:
	free(*out);
	*out = NULL;
	*n = 0;
	return false;
}

/*
 * Parse a comma- or space-separated list of ports and ranges ("80,443,
 * 8000-8999").  An empty list is refused: no port at all is never meant.
 */
bool
remora_port_list_parse(const char *text, RemoraPortRange **out, int *n,
					   char *errbuf, size_t errlen)
{
	const char      *p = text ? text : "";
	int              cap = 0;
	RemoraPortRange *grown;

	*out = NULL;
	*n = 0;
	while (*p)
	{
		char *end;
		long  lo, hi;

		if (strchr(", \t\n", *p))
		{
			p++;
			continue;
		}
		if (*p < '0' || *p > '9')
			goto bad;
		lo = strtol(p, &end, 10);
		hi = lo;
		if (*end == '-')
		{
			if (end[1] < '0' || end[1] > '9')
				goto bad;
			hi = strtol(end + 1, &end, 10);
		}
		if (lo < 1 || hi > 65535 || lo > hi ||
			(*end && !strchr(", \t\n", *end)))
			goto bad;
		grown = remora_array_grow(*out, *n, &cap, sizeof(**out));
		if (grown == NULL)
		{
			remora_errbuf_set(errbuf, errlen, "out of memory");
			goto fail;
		}
		*out = grown;
		(*out)[*n].lo = (int) lo;
		(*out)[*n].hi = (int) hi;
		(*n)++;
		p = end;
	}
	if (*n == 0)
	{
		remora_errbuf_set(errbuf, errlen, "the port list is empty");
		goto fail;
	}
	return true;

bad:
	remora_errbuf_set(
		errbuf, errlen,
		"a port list holds ports 1-65535 and ranges such as 8000-8999");
fail:
	free(*out);
	*out = NULL;
	*n = 0;
	return false;
}

RemoraNetPolicy *
remora_netpolicy_new(const char *allow, const char *deny, const char *ports,
					 char *errbuf, size_t errlen)
{
	RemoraNetPolicy *p = calloc(1, sizeof(RemoraNetPolicy));

	if (p == NULL)
	{
		remora_errbuf_set(errbuf, errlen, "out of memory");
		return NULL;
	}
	if (!remora_cidr_list_parse(allow, &p->allow, &p->nallow, errbuf, errlen) ||
		!remora_cidr_list_parse(deny, &p->deny, &p->ndeny, errbuf, errlen) ||
		!remora_port_list_parse(ports && ports[0] ? ports
												  : REMORA_DEFAULT_PORTS,
								&p->ports, &p->nports, errbuf, errlen))
	{
		remora_netpolicy_free(p);
		return NULL;
	}
	return p;
}

bool
remora_netpolicy_port_allowed(const RemoraNetPolicy *policy, int port)
{
	for (int i = 0; i < policy->nports; i++)
		if (port >= policy->ports[i].lo && port <= policy->ports[i].hi)
			return true;
	return false;
}

void
remora_netpolicy_free(RemoraNetPolicy *policy)
{
	if (policy == NULL)
		return;
	free(policy->allow);
	free(policy->deny);
	free(policy->ports);
	free(policy->blocked);
	free(policy);
}

static bool
block_addresses(RemoraNetPolicy *policy, const char *host, int port)
{
	struct addrinfo  hints;
	struct addrinfo *res = NULL;
	bool             ok = true;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(host, NULL, &hints, &res) != 0)
		return true;
	for (const struct addrinfo *ai = res; ai && ok; ai = ai->ai_next)
	{
		RemoraBlocked *b;

		if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6)
			continue;
		b = realloc(policy->blocked,
					(policy->nblocked + 1) * sizeof(RemoraBlocked));
		if (b == NULL)
		{
			ok = false;
			break;
		}
		policy->blocked = b;
		b = &b[policy->nblocked++];
		memset(b, 0, sizeof(*b));
		b->family = ai->ai_family;
		b->port = port;
		if (ai->ai_family == AF_INET)
			memcpy(b->addr, &((struct sockaddr_in *) ai->ai_addr)->sin_addr, 4);
		else
			memcpy(b->addr, &((struct sockaddr_in6 *) ai->ai_addr)->sin6_addr,
				   16);
	}
	freeaddrinfo(res);
	return ok;
}

bool
remora_netpolicy_block(RemoraNetPolicy *policy, const char *origins,
					   char *errbuf, size_t errlen)
{
	char *copy = origins ? strdup(origins) : NULL;
	char *save = NULL;
	bool  ok = true;

	if (origins && copy == NULL)
	{
		remora_errbuf_set(errbuf, errlen, "out of memory");
		return false;
	}
	for (char *o = copy ? strtok_r(copy, ",", &save) : NULL; o && ok;
		 o = strtok_r(NULL, ",", &save))
	{
		char *colon = strrchr(o, ':');
		char *host = o;

		while (*host == ' ')
			host++;
		if (*host == '\0')
			continue;
		if (colon == NULL || atoi(colon + 1) <= 0)
		{
			remora_errbuf_set(errbuf, errlen,
							  "the origin \"%.100s\" has no port", host);
			ok = false;
			break;
		}
		*colon = '\0';
		if (host[0] == '[' && colon > host && colon[-1] == ']')
		{
			colon[-1] = '\0';
			host++;
		}
		if (!block_addresses(policy, host, atoi(colon + 1)))
		{
			remora_errbuf_set(errbuf, errlen, "out of memory");
			ok = false;
		}
	}
	free(copy);
	return ok;
}

/* Is (family, addr, port) one of Remora's own, which no source may reach? */
static bool
blocked(const RemoraNetPolicy *policy, int family, const unsigned char *addr,
		int port)
{
	static const unsigned char mapped[12] = {0, 0, 0, 0, 0,    0,
											 0, 0, 0, 0, 0xff, 0xff};

	/* an IPv4 address written as IPv6 (::ffff:a.b.c.d) is that address */
	if (family == AF_INET6 && memcmp(addr, mapped, 12) == 0)
	{
		family = AF_INET;
		addr += 12;
	}
	for (int i = 0; policy && i < policy->nblocked; i++)
	{
		const RemoraBlocked *b = &policy->blocked[i];

		if (b->family == family && b->port == port &&
			memcmp(b->addr, addr, family == AF_INET ? 4 : 16) == 0)
			return true;
	}
	return false;
}

static bool
cidr_contains(const RemoraCidr *c, int family, const unsigned char *addr)
{
	int full = c->bits / 8;
	int rest = c->bits % 8;

	if (c->family != family)
		return false;
	if (memcmp(c->addr, addr, full) != 0)
		return false;
	if (rest == 0)
		return true;
	return (addr[full] & (unsigned char) (0xff << (8 - rest))) == c->addr[full];
}

static bool
list_contains(const RemoraCidr *list, int n, int family,
			  const unsigned char *addr)
{
	for (int i = 0; i < n; i++)
		if (cidr_contains(&list[i], family, addr))
			return true;
	return false;
}

static bool
in_default_deny(int family, const unsigned char *addr)
{
	for (size_t i = 0; i < sizeof(default_deny) / sizeof(default_deny[0]); i++)
	{
		RemoraCidr c;

		if (cidr_parse(default_deny[i], &c) && cidr_contains(&c, family, addr))
			return true;
	}
	return false;
}

/*
 * Decide for one address given as family + raw bytes.  IPv4-mapped
 * (::ffff:a.b.c.d) and IPv4-compatible (::a.b.c.d) addresses are judged as
 * the IPv4 address they carry.
 */
static bool
decide(const RemoraNetPolicy *policy, int family, const unsigned char *raw,
	   char *why, size_t whylen)
{
	unsigned char              addr[16];
	static const unsigned char mapped[12] = {0, 0, 0, 0, 0,    0,
											 0, 0, 0, 0, 0xff, 0xff};
	static const unsigned char zero[12] = {0};

	memcpy(addr, raw, family == AF_INET ? 4 : 16);
	if (family == AF_INET6 &&
		(memcmp(addr, mapped, 12) == 0 ||
		 (memcmp(addr, zero, 12) == 0 && (addr[12] | addr[13]) != 0)))
	{
		memmove(addr, addr + 12, 4);
		family = AF_INET;
	}

	if (policy && list_contains(policy->deny, policy->ndeny, family, addr))
	{
		remora_errbuf_set(why, whylen,
						  "the address is in remora.deny_networks");
		return false;
	}
	if (policy && list_contains(policy->allow, policy->nallow, family, addr))
		return true;
	if (in_default_deny(family, addr))
	{
		remora_errbuf_set(
			why, whylen,
			"the address is in a private, loopback, link-local or otherwise "
			"reserved range");
		return false;
	}
	return true;
}

bool
remora_netpolicy_allows(const RemoraNetPolicy *policy,
						const struct sockaddr *sa, char *why, size_t whylen)
{
	int port = sa->sa_family == AF_INET
				   ? ntohs(((const struct sockaddr_in *) sa)->sin_port)
			   : sa->sa_family == AF_INET6
				   ? ntohs(((const struct sockaddr_in6 *) sa)->sin6_port)
				   : 0;

	if (policy && policy->nports > 0 &&
		!remora_netpolicy_port_allowed(policy, port))
	{
		remora_errbuf_set(why, whylen, "port %d is not in remora.allow_ports",
						  port);
		return false;
	}
	if (sa->sa_family == AF_INET || sa->sa_family == AF_INET6)
	{
		const void *raw =
			sa->sa_family == AF_INET
				? (const void *) &((const struct sockaddr_in *) sa)->sin_addr
				: (const void *) &((const struct sockaddr_in6 *) sa)->sin6_addr;
		char reason[192];

		if (blocked(policy, sa->sa_family, raw, port))
		{
			remora_errbuf_set(why, whylen,
							  "the address and port are Remora's own target "
							  "store, a registered endpoint or a listener of "
							  "Remora's");
			return false;
		}
		if (decide(policy, sa->sa_family, raw, reason, sizeof(reason)))
			return true;
		/*
		 * The rule, not the address: a name's address is not the user's to
		 * learn (who resolves names inside the network); the caller logs it
		 * (remora_netpolicy_address).
		 */
		remora_errbuf_set(why, whylen, "%s", reason);
		return false;
	}
	remora_errbuf_set(why, whylen,
					  "only IPv4 and IPv6 connections are allowed");
	return false;
}

/* The address of sa as text (for the log), "" when it has none. */
void
remora_netpolicy_address(const struct sockaddr *sa, char *out, size_t outlen)
{
	const void *raw =
		sa->sa_family == AF_INET
			? (const void *) &((const struct sockaddr_in *) sa)->sin_addr
		: sa->sa_family == AF_INET6
			? (const void *) &((const struct sockaddr_in6 *) sa)->sin6_addr
			: NULL;

	if (outlen == 0)
		return;
	if (raw == NULL ||
		inet_ntop(sa->sa_family, raw, out, (socklen_t) outlen) == NULL)
		out[0] = '\0';
}

/*
 * The same decision for an address literal (IPv6 may be bracketed).  Not an
 * address literal: allowed here, to be judged when it resolves.
 */
bool
remora_netpolicy_allows_text(const RemoraNetPolicy *policy, const char *address,
							 char *why, size_t whylen)
{
	unsigned char raw[16];
	char          buf[64];
	size_t        len = strlen(address);

	if (len >= 2 && address[0] == '[' && address[len - 1] == ']')
	{
		address++;
		len -= 2;
	}
	if (len >= sizeof(buf))
		return true;
	memcpy(buf, address, len);
	buf[len] = '\0';
	/* drop an IPv6 zone id: fe80::1%eth0 */
	if (strchr(buf, '%'))
		*strchr(buf, '%') = '\0';
	if (inet_pton(AF_INET, buf, raw) == 1)
		return decide(policy, AF_INET, raw, why, whylen);
	if (inet_pton(AF_INET6, buf, raw) == 1)
		return decide(policy, AF_INET6, raw, why, whylen);
	return true;
}
