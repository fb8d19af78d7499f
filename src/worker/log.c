/*-------------------------------------------------------------------------
 *
 * log.c
 *	  remora-worker's log.
 *
 * Every event is one line on standard error, with a UTC time stamp and
 * the process id; lines about an attempt name its job and attempt ids
 * ("job 12 attempt 5c1e...: ...").  A line never holds a secret: the
 * messages come from the engine (which keeps secrets and query strings
 * out of them) and from libpq (whose messages name hosts, never
 * passwords).
 *
 *-------------------------------------------------------------------------
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "worker/log.h"

void
remora_wlog(const char *fmt, ...)
{
	struct timespec ts;
	struct tm       tm;
	char            stamp[32];
	char            line[2048];
	va_list         ap;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* one event, one line */
	for (char *p = line; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	fprintf(stderr, "%s.%03ldZ remora-worker[%d]: %s\n", stamp,
			ts.tv_nsec / 1000000, (int) getpid(), line);
	fflush(stderr);
}
