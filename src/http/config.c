/*-------------------------------------------------------------------------
 *
 * config.c
 *	  What every thread of the remora HTTP server reads: its settings
 *	  (remora_http_config) and whether it is stopping.
 *
 * The worker (src/pg/httpd.c) fills remora_http_config before any thread
 * starts (remora_http_parse_listen for the address); its atomics may
 * change while the server runs, on a configuration reload.  The stop
 * signal is set by remora_http_stop (server.c) before the threads are
 * joined: a thread that waits (an event stream between two looks, a
 * request waiting for a pooled connection) asks remora_http_stopping, or
 * sleeps with remora_http_sleep, which returns early once it is set.
 *
 * The lowest file of the folder: it calls no other.
 *
 *-------------------------------------------------------------------------
 */
#include "http/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

RemoraHttpConfig remora_http_config;

static atomic_bool     stopping = false;
static pthread_mutex_t stop_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t  stop_cond = PTHREAD_COND_INITIALIZER;

/* --- the listening address ---------------------------------------------- */

/*
 * Parse remora.http_listen ("host:port", "[v6]:port"); the host must be an
 * address or a name that resolves.  *loopback: every address it stands for
 * is a loopback address (127.0.0.0/8, ::1).
 */
bool
remora_http_parse_listen(const char *listen, RemoraHttpConfig *cfg,
						 bool *loopback, char *err, size_t errlen)
{
	char            host[256];
	const char     *colon, *port;
	struct addrinfo hints, *res = NULL;
	int             rc;
	char           *end;
	long            portno;

	*loopback = false;
	if (listen[0] == '[')
	{
		const char *close = strchr(listen, ']');

		if (close == NULL || close[1] != ':' ||
			(size_t) (close - listen - 1) >= sizeof(host))
		{
			snprintf(err, errlen, "expected \"[address]:port\"");
			return false;
		}
		memcpy(host, listen + 1, close - listen - 1);
		host[close - listen - 1] = '\0';
		port = close + 2;
	}
	else
	{
		colon = strrchr(listen, ':');
		if (colon == NULL || (size_t) (colon - listen) >= sizeof(host))
		{
			snprintf(err, errlen, "expected \"host:port\"");
			return false;
		}
		memcpy(host, listen, colon - listen);
		host[colon - listen] = '\0';
		port = colon + 1;
	}
	portno = strtol(port, &end, 10);
	if (*port == '\0' || *end != '\0' || portno < 1 || portno > 65535)
	{
		snprintf(err, errlen, "invalid port \"%s\"", port);
		return false;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE;
	rc = getaddrinfo(host[0] && strcmp(host, "*") != 0 ? host : NULL, port,
					 &hints, &res);
	if (rc != 0 || res == NULL)
	{
		snprintf(err, errlen, "could not resolve \"%s\": %s", host,
				 gai_strerror(rc));
		return false;
	}
	memcpy(&cfg->addr, res->ai_addr, res->ai_addrlen);
	cfg->addrlen = res->ai_addrlen;
	*loopback = true;
	for (struct addrinfo *a = res; a; a = a->ai_next)
	{
		if (a->ai_family == AF_INET)
		{
			const struct sockaddr_in *in =
				(const struct sockaddr_in *) a->ai_addr;

			if ((ntohl(in->sin_addr.s_addr) >> 24) != 127)
				*loopback = false;
		}
		else if (a->ai_family == AF_INET6)
		{
			const struct sockaddr_in6 *in6 =
				(const struct sockaddr_in6 *) a->ai_addr;

			if (!IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr))
				*loopback = false;
		}
		else
			*loopback = false;
	}
	freeaddrinfo(res);
	return true;
}

/* --- the stop signal ----------------------------------------------------- */

/* Set or clear the stop signal; setting it wakes every remora_http_sleep. */
void
remora_http_set_stopping(bool stop)
{
	pthread_mutex_lock(&stop_lock);
	atomic_store(&stopping, stop);
	if (stop)
		pthread_cond_broadcast(&stop_cond);
	pthread_mutex_unlock(&stop_lock);
}

bool
remora_http_stopping(void)
{
	return atomic_load(&stopping);
}

/* Sleep ms milliseconds, or less if the server is stopping. */
void
remora_http_sleep(int ms)
{
	struct timespec deadline;

	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += ms / 1000;
	deadline.tv_nsec += (long) (ms % 1000) * 1000000L;
	if (deadline.tv_nsec >= 1000000000L)
	{
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&stop_lock);
	while (!atomic_load(&stopping))
		if (pthread_cond_timedwait(&stop_cond, &stop_lock, &deadline) ==
			ETIMEDOUT)
			break;
	pthread_mutex_unlock(&stop_lock);
}
