/*-------------------------------------------------------------------------
 *
 * forwarded.c
 *	  Who the client of a request is: the TCP peer, or, behind a proxy the
 *	  deployment trusts, the address that proxy says it forwarded for.
 *
 * remora.http_trusted_proxies lists the networks (CIDR) of the proxies in
 * front of the server; it is empty by default, and then the header
 * X-Forwarded-For is never read: anyone can send one.  When the TCP peer is
 * in the list, the header is read from the right.  Each proxy appends the
 * address it received the request from, so the right-most entries are
 * written by trusted proxies, and everything left of the first entry that
 * is not one of them was written by whoever sent the request, who may have
 * put anything there.  The client is therefore the right-most entry that
 * is not itself a trusted proxy.  An entry that is not an IP address ends
 * the walk: the trusted hop that wrote it is taken as the client (a
 * stricter throttle for everyone behind it, never an address made up by
 * the sender).  With every entry trusted, the left-most is the client.
 *
 * The client address keys the sign-in throttle (signin_throttle.c).  It is
 * always an address printed by inet_ntop (IPv4-mapped IPv6 addresses as
 * IPv4), so that one client has one key however its address was written.
 *
 * The list may change on a configuration reload while requests are being
 * served: it is replaced whole under a mutex and read under it.
 *
 * Plain C, no PostgreSQL (see http.h).
 *
 *-------------------------------------------------------------------------
 */
#include "http/http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/common/netpolicy.h"

static pthread_mutex_t trusted_lock = PTHREAD_MUTEX_INITIALIZER;
static RemoraCidr     *trusted = NULL;
static int             ntrusted = 0;

/*
 * Replace the list of trusted proxies by the CIDR list in text (empty: no
 * proxy is trusted).  False, with the reason in err and the list as it
 * was, if text is not a valid list.
 */
bool
remora_http_set_trusted_proxies(const char *text, char *err, size_t errlen)
{
	RemoraCidr *list, *old;
	int         n;

	if (!remora_cidr_list_parse(text, &list, &n, err, errlen))
		return false;
	pthread_mutex_lock(&trusted_lock);
	old = trusted;
	trusted = list;
	ntrusted = n;
	pthread_mutex_unlock(&trusted_lock);
	free(old);
	return true;
}

/* An address as family and bytes, IPv4-mapped IPv6 reduced to IPv4. */
typedef struct Addr
{
	int           family;
	unsigned char raw[16];
} Addr;

static void
unmap(Addr *a)
{
	static const unsigned char mapped[12] = {0, 0, 0, 0, 0,    0,
											 0, 0, 0, 0, 0xff, 0xff};

	if (a->family == AF_INET6 && memcmp(a->raw, mapped, 12) == 0)
	{
		memmove(a->raw, a->raw + 12, 4);
		a->family = AF_INET;
	}
}

static bool
from_sockaddr(const struct sockaddr *sa, Addr *a)
{
	memset(a, 0, sizeof(*a));
	if (sa == NULL)
		return false;
	if (sa->sa_family == AF_INET)
	{
		a->family = AF_INET;
		memcpy(a->raw, &((const struct sockaddr_in *) sa)->sin_addr, 4);
	}
	else if (sa->sa_family == AF_INET6)
	{
		a->family = AF_INET6;
		memcpy(a->raw, &((const struct sockaddr_in6 *) sa)->sin6_addr, 16);
	}
	else
		return false;
	unmap(a);
	return true;
}

/*
 * One entry of X-Forwarded-For: an address, bracketed or not, with or
 * without a port ("192.0.2.1", "192.0.2.1:4711", "2001:db8::1",
 * "[2001:db8::1]:4711").  False if it is none of those.
 */
static bool
from_text(const char *s, size_t len, Addr *a)
{
	char        buf[64];
	const char *colon;

	memset(a, 0, sizeof(*a));
	while (len > 0 && (*s == ' ' || *s == '\t'))
		s++, len--;
	while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t'))
		len--;
	if (len > 0 && s[0] == '[')
	{
		const char *close = memchr(s, ']', len);

		if (close == NULL)
			return false;
		s++;
		len = close - s;
	}
	else if ((colon = memchr(s, ':', len)) != NULL &&
			 memchr(colon + 1, ':', len - (colon + 1 - s)) == NULL)
		len = colon - s; /* IPv4 with a port: one colon only */
	if (len == 0 || len >= sizeof(buf))
		return false;
	memcpy(buf, s, len);
	buf[len] = '\0';
	if (inet_pton(AF_INET, buf, a->raw) == 1)
		a->family = AF_INET;
	else if (inet_pton(AF_INET6, buf, a->raw) == 1)
		a->family = AF_INET6;
	else
		return false;
	unmap(a);
	return true;
}

static bool
cidr_contains(const RemoraCidr *c, const Addr *a)
{
	int full = c->bits / 8;
	int rest = c->bits % 8;

	if (c->family != a->family || memcmp(c->addr, a->raw, full) != 0)
		return false;
	return rest == 0 || (a->raw[full] & (unsigned char) (0xff << (8 - rest))) ==
							c->addr[full];
}

/* Is a in the list?  trusted_lock held. */
static bool
is_trusted(const Addr *a)
{
	for (int i = 0; i < ntrusted; i++)
		if (cidr_contains(&trusted[i], a))
			return true;
	return false;
}

static void
print(const Addr *a, char *out, size_t outlen)
{
	if (a->family == 0 || inet_ntop(a->family, a->raw, out, outlen) == NULL)
		snprintf(out, outlen, "%s", "");
}

/*
 * The client's address, printed into out: the peer's, or when the peer is
 * a trusted proxy, the one its X-Forwarded-For names (forwarded: every
 * X-Forwarded-For header of the request in order, joined by commas; NULL
 * when there is none).  Empty when the peer is not an IP address.
 */
void
remora_http_client_address(const struct sockaddr *peer, const char *forwarded,
						   char *out, size_t outlen)
{
	Addr client;

	if (!from_sockaddr(peer, &client))
	{
		print(&client, out, outlen);
		return;
	}
	pthread_mutex_lock(&trusted_lock);
	if (forwarded && is_trusted(&client))
	{
		size_t end = strlen(forwarded);

		/* from the right: each trusted hop vouches for the entry before it */
		for (;;)
		{
			size_t start = end;
			Addr   hop;

			while (start > 0 && forwarded[start - 1] != ',')
				start--;
			if (!from_text(forwarded + start, end - start, &hop))
			{
				/* an empty entry between commas is no hop; junk ends it */
				const char *p = forwarded + start;

				while (p < forwarded + end && (*p == ' ' || *p == '\t'))
					p++;
				if (p != forwarded + end)
					break;
			}
			else
			{
				client = hop;
				if (!is_trusted(&hop))
					break;
			}
			if (start == 0)
				break;
			end = start - 1;
		}
	}
	pthread_mutex_unlock(&trusted_lock);
	print(&client, out, outlen);
}
