/*
 * unit.h: a minimal TAP-style harness for the engine's unit tests.
 *
 * CHECK(cond, name) prints "ok N - name" or "not ok N - name"; main()
 * returns unit_done(), which is non-zero when anything failed.  The suite
 * runner counts the "ok"/"not ok" lines.  Each line is flushed as it is
 * printed: a leak found at exit ends the process without flushing stdio,
 * and a log of the suite must still say which check failed.
 */
#ifndef REMORA_UNIT_H
#define REMORA_UNIT_H

#include <stdio.h>
#include <string.h>

#include "wait.h"

static int unit_run;
static int unit_failed;

#define CHECK(cond, ...)                                                       \
	do                                                                         \
	{                                                                          \
		int c_ = (cond) ? 1 : 0;                                               \
		unit_run++;                                                            \
		if (c_)                                                                \
			printf("ok %d - ", unit_run);                                      \
		else                                                                   \
		{                                                                      \
			unit_failed++;                                                     \
			printf("not ok %d - ", unit_run);                                  \
		}                                                                      \
		printf(__VA_ARGS__);                                                   \
		printf("%s\n", c_ ? "" : "  <-- FAILED");                              \
		fflush(stdout); /* LeakSanitizer ends a run with _exit */              \
	} while (0)

#define CHECK_STR(got, want, ...)                                              \
	do                                                                         \
	{                                                                          \
		const char *g_ = (got);                                                \
		const char *w_ = (want);                                               \
		int         ok_ = (g_ == NULL && w_ == NULL) ||                        \
				  (g_ != NULL && w_ != NULL && strcmp(g_, w_) == 0);           \
		CHECK(ok_, __VA_ARGS__);                                               \
		if (!ok_)                                                              \
			printf("#   got: %s\n#  want: %s\n", g_ ? g_ : "(null)",           \
				   w_ ? w_ : "(null)");                                        \
	} while (0)

static int
unit_done(void)
{
	printf("1..%d\n", unit_run);
	return unit_failed ? 1 : 0;
}

#endif
