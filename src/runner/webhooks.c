/*-------------------------------------------------------------------------
 *
 * webhooks.c
 *	  The webhooks a worker delivers, the same in both hosts
 *	  (doc/user-guide.md, "Webhooks").
 *
 * Once a second, while there is room, the round claims the webhooks due
 * (remora.webhooks_due: each with its job owner's secret and how long its
 * receiver has, round-robin between owners)
 * and starts one try of each on the engine (remora_webhook_post); each
 * try that ended is recorded (remora.webhook_tried), which says when it is
 * due again.  A try's result that could not be recorded is kept and
 * recorded in a later round; a try cut short by a stop is not recorded,
 * and its claim lapses: the webhook is tried again, under the same
 * webhook-id (at least once).  Nothing here touches a job.
 *
 * Memory: malloc'd, the secrets wiped when a try is freed.
 *
 *-------------------------------------------------------------------------
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "runner/calls.h"
#include "runner/state.h"
#include "runner/webhooks.h"

#define WEBHOOKS_MAX     8    /* tries in flight at once */
#define WEBHOOKS_POLL_MS 1000 /* how often to look for due ones */

typedef struct Try
{
	RemoraWebhookRow row;
	RemoraWebhook   *post;  /* NULL once ended */
	bool             ended; /* the result below waits to be recorded */
	long             status;
	bool             retry;
	char             error[256];
} Try;

static Try     tries[WEBHOOKS_MAX];
static int     ntries;
static int64_t next_poll;

static void
try_free(int i)
{
	remora_webhook_free(tries[i].post);
	remora_webhook_row_free(&tries[i].row);
	tries[i] = tries[--ntries];
	memset(&tries[ntries], 0, sizeof(Try));
}

/* Move the engine's answers into the tries that ended. */
static void
collect(void)
{
	for (int i = 0; i < ntries; i++)
	{
		Try        *t = &tries[i];
		const char *error;

		if (t->post == NULL ||
			!remora_webhook_ended(t->post, &t->status, &t->retry, &error))
			continue;
		snprintf(t->error, sizeof(t->error), "%s", error);
		remora_webhook_free(t->post);
		t->post = NULL;
		t->ended = true;
	}
}

/* Record the tries that ended; keep those whose call failed. */
static void
record(void)
{
	for (int i = 0; i < ntries; i++)
	{
		Try *t = &tries[i];

		if (!t->ended ||
			!remora_call_webhook_tried(t->row.job_id, t->row.id, t->row.attempt,
									   t->status, t->error, t->retry))
			continue;
		if (t->status < 200 || t->status > 299)
			remora_rlog("job %" PRId64 ": webhook %s try %d: %s%s",
						t->row.job_id, t->row.id, t->row.attempt, t->error,
						t->retry ? ", to be tried again" : "");
		try_free(i--);
	}
}

/* Claim what is due and start a try of each. */
static void
start(RemoraEngine *engine, const char *incarnation)
{
	RemoraWebhookRow rows[WEBHOOKS_MAX];
	int n = remora_call_webhooks_due(incarnation, WEBHOOKS_MAX - ntries, rows);

	for (int i = 0; i < n; i++)
	{
		Try *t = &tries[ntries++];
		char err[256];

		memset(t, 0, sizeof(*t));
		t->row = rows[i];
		t->post = remora_webhook_post(
			engine, t->row.url, t->row.id, t->row.key, sizeof(t->row.key),
			(long long) remora_engine_wall_time(), t->row.body,
			t->row.timeout_ms, err, sizeof(err));
		if (t->post == NULL)
		{
			/* not sent: recorded as a try that failed, not repeated */
			t->ended = true;
			snprintf(t->error, sizeof(t->error), "%s", err);
		}
	}
}

/*
 * A round's webhooks: collect what ended, record it when up, and, when up
 * and may_start, claim and start due ones once a second while there is
 * room.
 */
void
remora_webhooks_round(RemoraEngine *engine, const char *incarnation, bool up,
					  bool may_start)
{
	int64_t now = remora_clock_ms();

	collect();
	if (!up)
		return;
	record();
	if (may_start && now >= next_poll && ntries < WEBHOOKS_MAX)
	{
		next_poll = now + WEBHOOKS_POLL_MS;
		start(engine, incarnation);
	}
}

/* Tries on the engine now (a new engine waits until none is). */
int
remora_webhooks_in_flight(void)
{
	int n = 0;

	for (int i = 0; i < ntries; i++)
		n += tries[i].post != NULL;
	return n;
}

/* When the next look for due webhooks is. */
int64_t
remora_webhooks_next_ms(void)
{
	return next_poll;
}

/* The worker stops: drop every try (claims lapse; they are tried again). */
void
remora_webhooks_stop(void)
{
	while (ntries > 0)
		try_free(ntries - 1);
}
