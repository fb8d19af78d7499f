/*-------------------------------------------------------------------------
 *
 * netpolicy.h
 *	  The outbound-source policy: which addresses a user-supplied location
 *	  may connect to.
 *
 * Decision order for one address, after IPv4-mapped and IPv4-compatible
 * IPv6 forms are reduced to IPv4:
 *	  1. in the deny list (remora.deny_networks)   -> denied
 *	  2. in the allow list (remora.allow_networks) -> allowed
 *	  3. in the built-in sensitive ranges          -> denied
 *	  4. anything else                             -> allowed
 *
 * Destination ports must be in the port list (remora.allow_ports; by
 * default 80, 443 and the unprivileged ports).
 *
 * Plain C, no PostgreSQL.  The policy is checked on the address actually
 * connected to, so it cannot be escaped by DNS or redirects.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_NETPOLICY_H
#define REMORA_NETPOLICY_H

#include <stdbool.h>
#include <stddef.h>

struct sockaddr;

typedef struct RemoraCidr
{
	int           family;   /* AF_INET or AF_INET6 */
	unsigned char addr[16]; /* network address, host bits cleared */
	int           bits;     /* prefix length */
} RemoraCidr;

typedef struct RemoraPortRange
{
	int lo;
	int hi;
} RemoraPortRange;

/* An address and port no source may reach (remora_netpolicy_block) */
typedef struct RemoraBlocked
{
	int           family;
	unsigned char addr[16];
	int           port;
} RemoraBlocked;

typedef struct RemoraNetPolicy
{
	RemoraCidr      *allow;
	int              nallow;
	RemoraCidr      *deny;
	int              ndeny;
	RemoraPortRange *ports; /* allowed destination ports */
	int              nports;
	RemoraBlocked   *blocked; /* Remora's own store and listeners */
	int              nblocked;
} RemoraNetPolicy;

#define REMORA_DEFAULT_PORTS "80,443,1024-65535"

extern bool remora_cidr_list_parse(const char *text, RemoraCidr **out, int *n,
								   char *errbuf, size_t errlen);
extern bool remora_port_list_parse(const char *text, RemoraPortRange **out,
								   int *n, char *errbuf, size_t errlen);
extern RemoraNetPolicy *remora_netpolicy_new(const char *allow,
											 const char *deny,
											 const char *ports, char *errbuf,
											 size_t errlen);
extern bool remora_netpolicy_port_allowed(const RemoraNetPolicy *policy,
										  int                    port);
extern void remora_netpolicy_free(RemoraNetPolicy *policy);
/*
 * Refuse every source connection to the addresses (as resolved now) and
 * ports of origins, "host:port" separated by commas ([v6]:port for IPv6),
 * whatever the networks allowed: Remora's own store, endpoints and
 * listeners (doc/security.md).  A name that does not resolve blocks
 * nothing.  False, with errbuf, only when out of memory or for an origin
 * without a port.
 */
extern bool remora_netpolicy_block(RemoraNetPolicy *policy, const char *origins,
								   char *errbuf, size_t errlen);
/*
 * Is a connection to sa allowed?  When not, why names the rule (never the
 * address: remora_netpolicy_address gives that, for the log).
 */
extern bool remora_netpolicy_allows(const RemoraNetPolicy *policy,
									const struct sockaddr *sa, char *why,
									size_t whylen);
extern void remora_netpolicy_address(const struct sockaddr *sa, char *out,
									 size_t outlen);
extern bool remora_netpolicy_allows_text(const RemoraNetPolicy *policy,
										 const char *address, char *why,
										 size_t whylen);

#endif /* REMORA_NETPOLICY_H */
