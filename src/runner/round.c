/*-------------------------------------------------------------------------
 *
 * round.c
 *	  The runner's round, the same in both hosts: what a worker does each
 *	  time its engine has moved bytes, and when.
 *
 *	  engine      remora_engine_run: move bytes; no transaction is open
 *	  fence       abort attempts whose lease could not be renewed in time
 *	  incarnation recorded, or after a new session asked whether it goes
 *	              on (one ended meanwhile is replaced by a new one)
 *	  lookups     members of earlier attempts, an export's pages
 *	  renew       every third of the lease, or at once after a cancel: the
 *	              heartbeat (which brings the server's clock, that requests
 *	              are signed on), then every lease
 *	  finish      commit what succeeded, report what failed
 *	  checkpoint  at most once a second, every attempt with new progress
 *	  rates       once a second while attempts run, after every renewal
 *	              and after a claim that started some: the byte-rate caps
 *	              of all of them (remora.rate_limits), set on their tasks
 *	  settings    new ones take effect in a new engine once it is idle;
 *	              until then nothing new is claimed
 *	  claim       when there is room and a job was queued, every 5 s, at
 *	              once when an attempt ends after a full batch, and when
 *	              the next queued job becomes due: a claim that took fewer
 *	              jobs than it had room for, and a failure that queued its
 *	              job again, ask the server how long until then
 *	              (remora.next_due)
 *	  webhooks    record the tries that ended; once a second, claim the
 *	              webhooks due and start a try of each (webhooks.c)
 *	  sweep       delete the staging of attempts that can no longer
 *	              commit, and the objects of hard-deleted jobs, one at a
 *	              time
 *
 * The host waits for its engine's descriptor, its own events and the
 * deadline a round returns, then runs the next round.  It tells the round
 * whether statements can run (remora-worker's connection may be down; a
 * background worker's never is), and what it heard: a cancel, a submit.
 *
 *-------------------------------------------------------------------------
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "runner/attempts.h"
#include "runner/calls.h"
#include "runner/webhooks.h"
#include "runner/state.h"

#define CLAIM_POLL_MS 5000
/*
 * A claim planned for when a job becomes due comes this much later, at
 * most, by a jitter of each worker's own (so that idle workers do not all
 * claim at one instant), and never sooner than CLAIM_MIN_MS after the last.
 */
#define CLAIM_JITTER_MS 100
#define CLAIM_MIN_MS    50
#define CHECKPOINT_MS   1000
/*
 * A role's or the deployment's cap is shared by attempts on other workers
 * that start and end at any time: read it far more often than leases are
 * renewed, so that the sum holds within 10 % over any 10 s.
 */
#define RATES_MS 1000
#define SWEEP_MS 5000

static char    incarnation[REMORA_UUID_LEN];
static int     claim_jitter_ms; /* this incarnation's, below CLAIM_JITTER_MS */
static bool    recorded;        /* the incarnation is recorded */
static bool    start_unsure;    /* its start failed: recorded or not? */
static bool    renew_pending, claim_pending;
static bool    new_settings; /* a new engine once idle */
static bool    more_waiting; /* the last claim found no room, or filled it */
static int64_t next_renew, next_checkpoint, next_poll, next_sweep;
static int64_t next_rates;

/* the sweep in progress */
static RemoraTask *sweep_task;
static char        sweep_attempt[REMORA_UUID_LEN]; /* "" for a hard delete */
static int64_t     sweep_job;

/* ------------------------------------------------------------ settings */

static char *
dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

static void
config_free(RemoraRunnerConfig *c)
{
	free((char *) c->hub_url);
	free((char *) c->hf_token);
	free((char *) c->kind);
	free((char *) c->host_name);
	free((char *) c->label);
	memset(c, 0, sizeof(*c));
}

static void
config_copy(const RemoraRunnerConfig *from)
{
	RemoraRunnerConfig *c = &remora_runner.cfg;

	config_free(c);
	*c = *from;
	c->hub_url = dup_or_null(from->hub_url);
	c->hf_token = dup_or_null(from->hf_token);
	c->kind = dup_or_null(from->kind);
	c->host_name = dup_or_null(from->host_name);
	c->label = dup_or_null(from->label);
	if (c->concurrency < 1)
		c->concurrency = 1;
	if (c->concurrency > REMORA_RUNNER_MAX_ATTEMPTS)
		c->concurrency = REMORA_RUNNER_MAX_ATTEMPTS;
}

/*
 * New settings: renew at once (the lease may have changed), and, when
 * new_engine, take them into a new engine once the current one is idle.
 */
void
remora_runner_reconfigure(const RemoraRunnerConfig *cfg, bool new_engine)
{
	config_copy(cfg);
	next_renew = 0;
	new_settings = new_settings || new_engine;
}

/* ---------------------------------------------------------- incarnation */

static void
new_incarnation(void)
{
	unsigned char b[16];

	if (getrandom(b, sizeof(b), 0) != (ssize_t) sizeof(b))
	{
		/* no entropy yet: the clock and the pid, unique enough to record */
		int64_t t = remora_clock_ms();
		int32_t pid = (int32_t) getpid();

		memset(b, 0, sizeof(b));
		memcpy(b, &t, sizeof(t));
		memcpy(b + 10, &pid, sizeof(pid));
	}
	claim_jitter_ms = (b[0] | b[1] << 8) % CLAIM_JITTER_MS;
	b[6] = (b[6] & 0x0f) | 0x40;
	b[8] = (b[8] & 0x3f) | 0x80;
	snprintf(incarnation, sizeof(incarnation),
			 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
			 "%02x%02x%02x%02x%02x%02x",
			 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10],
			 b[11], b[12], b[13], b[14], b[15]);
	recorded = false;
	start_unsure = false;
	if (remora_runner.ops->incarnation_begins)
		remora_runner.ops->incarnation_begins(remora_runner.host, incarnation);
}

/*
 * The heartbeat, and the server's clock it brings: requests are signed on
 * the server's time (remora_engine_wall_time), so that a worker whose own
 * clock is off is not refused by a store that checks signing times.  The
 * offset is taken at the middle of the round trip, to the second.
 */
static int
heartbeat(void)
{
	struct timespec before, after;
	int64_t         server_ms = 0;
	int64_t         local_ms;
	int             hb;
	char            source[256];
	char            why[240];
	time_t          expires = 0;

	/* where the target's credentials come from, for remora_workers */
	if (remora_runner.engine == NULL)
		snprintf(source, sizeof(source), "none: no engine");
	else if (!remora_engine_credentials(remora_runner.engine, why, sizeof(why),
										&expires))
		snprintf(source, sizeof(source), "none: %.240s", why);
	else
		snprintf(source, sizeof(source), "%s", why);
	clock_gettime(CLOCK_REALTIME, &before);
	hb = remora_call_heartbeat(incarnation, source, (int64_t) expires,
							   &server_ms);
	clock_gettime(CLOCK_REALTIME, &after);
	if (hb < 0 || server_ms <= 0)
		return hb;
	local_ms = ((int64_t) before.tv_sec + after.tv_sec) * 500 +
			   ((int64_t) before.tv_nsec + after.tv_nsec) / 2000000;
	remora_engine_set_clock_offset((server_ms - local_ms) / 1000);
	return hb;
}

/*
 * Is an incarnation recorded, so that the worker may claim?  After a new
 * session the heartbeat tells whether it goes on; one ended meanwhile (by
 * an administrator, or after a crash of the server) is replaced.
 */
static bool
incarnation_ready(bool reconnected)
{
	const RemoraRunnerConfig *c = &remora_runner.cfg;

	if (reconnected && recorded)
	{
		int hb = heartbeat();

		if (hb < 0)
			return false;
		if (hb == 0)
		{
			remora_rlog("incarnation %s was ended meanwhile", incarnation);
			new_incarnation();
		}
	}
	if (recorded)
		return true;
	if (start_unsure)
	{
		/*
		 * A start whose answer was lost (a partition, a server that did
		 * not answer in time) may have recorded the row: the same uuid
		 * again would be refused as a duplicate at every try, and the
		 * worker never claim.  The heartbeat tells: recorded, it goes on;
		 * not (or ended since), a new one is recorded.
		 */
		int hb = heartbeat();

		if (hb < 0)
			return false;
		if (hb == 0)
			new_incarnation();
		else
			recorded = true;
		start_unsure = false;
	}
	if (!recorded)
		recorded = remora_call_start_incarnation(incarnation, c->kind,
												 c->host_name, c->label);
	if (recorded)
		remora_rlog("incarnation %s started (%s%s%s%s%s, concurrency %d)",
					incarnation, c->kind, c->host_name ? ", host " : "",
					c->host_name ? c->host_name : "",
					c->label ? ", label " : "", c->label ? c->label : "",
					c->concurrency);
	else
		start_unsure = true;
	return recorded;
}

/* The heartbeat, then every lease. */
static bool
renew(void)
{
	if (heartbeat() == 0)
	{
		/* its leases lapse, its attempts stop; claim anew */
		remora_rlog("incarnation %s was ended: its attempts stop", incarnation);
		new_incarnation();
		if (!incarnation_ready(false))
			return false;
	}
	remora_attempts_renew();
	return true;
}

/* ---------------------------------------------------------------- claim */

static int64_t
min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

/*
 * Claim again when the next queued job becomes due (a retry's backoff),
 * not at the next poll: the server says how long until then, on its own
 * clock (this worker's may be off; the wait is measured on ours).  Jobs
 * due already that the claim left (an owner at its max_running, leases at
 * their limit, rows other claims held) wait for the poll, or for an
 * attempt to end.
 */
static void
plan_next_claim(void)
{
	int64_t ms = remora_call_next_due(incarnation);

	if (ms <= 0)
		return;
	ms += claim_jitter_ms;
	if (ms < CLAIM_MIN_MS)
		ms = CLAIM_MIN_MS;
	next_poll = min64(next_poll, remora_clock_ms() + ms);
}

static void
claim(void)
{
	int room = remora_runner.cfg.concurrency - remora_attempts_count();
	RemoraClaimRow rows[REMORA_RUNNER_MAX_ATTEMPTS];
	int64_t        sent = remora_clock_ms();
	int            n;

	if (room <= 0)
	{
		more_waiting = true; /* claim again once there is room */
		return;
	}
	n = remora_call_claim(incarnation, room, rows);
	for (int i = 0; i < n; i++)
	{
		remora_attempts_start(&rows[i], sent);
		free(rows[i].spec);
		free(rows[i].resume);
	}
	/* the new attempts' caps, counting them among their owners' */
	if (n > 0)
		remora_attempts_apply_rates();
	/* a full batch: there may be more */
	more_waiting = n == room;
	if (n >= 0 && n < room)
		plan_next_claim();
}

/* ---------------------------------------------------------------- sweep */

/* The sweep in progress ended: say so and record it. */
static void
sweep_ended(void)
{
	RemoraTaskState st = remora_task_state(sweep_task);
	bool            ok = st == REMORA_TASK_SUCCEEDED;

	if (!ok)
		remora_rlog("job %" PRId64 ": could not delete %s: %s; tried again "
					"later",
					sweep_job,
					sweep_attempt[0] ? "staging objects" : "its objects",
					remora_task_error(sweep_task)->message);
	else
		remora_rlog("job %" PRId64 ": %s%s deleted", sweep_job,
					sweep_attempt[0] ? "staging of attempt " : "its objects",
					sweep_attempt);
	remora_call_cleanup_done(sweep_attempt, sweep_job, ok);
	remora_task_free(sweep_task);
	sweep_task = NULL;
}

/*
 * Delete the objects of one hard-deleted job, or the staging of one attempt
 * that can no longer commit, if there is any.  A cleanup that fails is
 * recorded, and tried again after a backoff.
 */
static void
sweep(bool start)
{
	char *bucket = NULL, *prefix = NULL;
	char  err[256];

	if (sweep_task && remora_task_state(sweep_task) == REMORA_TASK_RUNNING)
		return;
	if (sweep_task)
		sweep_ended();
	if (!start ||
		!remora_call_next_cleanup(sweep_attempt, &sweep_job, &bucket, &prefix))
		return;
	sweep_task = remora_cleanup_start(remora_runner.engine, bucket, prefix, err,
									  sizeof(err));
	if (sweep_task == NULL)
		remora_rlog("job %" PRId64 ": could not start a cleanup: %s", sweep_job,
					err);
	free(bucket);
	free(prefix);
}

/* ---------------------------------------------------------------- round */

void
remora_runner_init(const RemoraHostOps *ops, void *host,
				   const RemoraRunnerConfig *cfg)
{
	remora_runner.ops = ops;
	remora_runner.host = host;
	config_copy(cfg);
	remora_runner.engine = ops->new_engine(host);
	new_incarnation();
}

/*
 * New settings into a new engine, once the current one is idle.  The new
 * one is made before the old one goes: a host whose new_engine does not
 * return (a background worker's ERROR, abandoning the round) leaves the
 * old engine in place, and the next round tries again.
 */
static void
take_new_settings(void)
{
	RemoraEngine *e;

	if (!new_settings || remora_attempts_count() > 0 || sweep_task != NULL ||
		remora_webhooks_in_flight() > 0)
		return;
	e = remora_runner.ops->new_engine(remora_runner.host);
	remora_engine_free(remora_runner.engine);
	remora_runner.engine = e;
	new_settings = false;
	remora_rlog("new settings in effect, incarnation %s", incarnation);
}

/* When the next thing is due, on the clock of remora_clock_ms. */
static int64_t
next_due(bool up)
{
	int64_t now = remora_clock_ms();
	int64_t deadline = now + 1000;
	long    engine_timeout = remora_engine_timeout_ms(remora_runner.engine);

	if (up)
	{
		deadline = min64(deadline, next_renew);
		deadline = min64(deadline, next_poll);
		deadline = min64(deadline, next_sweep);
		deadline = min64(deadline, remora_webhooks_next_ms());
		if (claim_pending ||
			(more_waiting &&
			 remora_attempts_count() < remora_runner.cfg.concurrency))
			deadline = now;
		if (remora_attempts_count() > 0)
		{
			deadline = min64(deadline, next_checkpoint);
			deadline = min64(deadline, next_rates);
		}
	}
	deadline = min64(deadline, remora_attempts_next_fence_ms());
	if (engine_timeout >= 0)
		deadline = min64(deadline, now + engine_timeout);
	return deadline;
}

/*
 * One round (see the header); returns when the next one is due, on the
 * clock of remora_clock_ms.
 */
int64_t
remora_runner_round(const RemoraRound *in)
{
	int64_t now;
	bool    up;

	renew_pending = renew_pending || in->renew_now;
	claim_pending = claim_pending || in->claim_now;
	remora_engine_run(remora_runner.engine);
	remora_attempts_fence();
	up = in->connected && incarnation_ready(in->reconnected);
	/* unanswered while disconnected: those members move again */
	remora_attempts_answer_lookups();
	now = remora_clock_ms();
	if (up && (renew_pending || now >= next_renew))
	{
		renew_pending = false;
		next_renew = now + remora_runner.cfg.lease_ms / 3;
		next_rates = now + RATES_MS; /* renew() reads them */
		up = renew();
	}
	/* a job queued again to retry: claim, and learn when it is due */
	if (up && remora_attempts_finish())
		claim_pending = true;
	now = remora_clock_ms();
	if (up && now >= next_checkpoint)
	{
		remora_attempts_checkpoint();
		next_checkpoint = now + CHECKPOINT_MS;
	}
	if (up && now >= next_rates && remora_attempts_count() > 0)
	{
		remora_attempts_apply_rates();
		next_rates = now + RATES_MS;
	}
	/* webhooks of jobs that ended; none started while settings wait */
	remora_webhooks_round(remora_runner.engine, incarnation, up, !new_settings);
	take_new_settings();
	if (up && !new_settings &&
		(claim_pending || now >= next_poll ||
		 (more_waiting &&
		  remora_attempts_count() < remora_runner.cfg.concurrency)))
	{
		claim_pending = false;
		next_poll = now + CLAIM_POLL_MS;
		claim();
	}
	/*
	 * While new settings wait for an idle engine, a cleanup that ends is
	 * still recorded (or the engine would never be idle), but no new one
	 * starts.
	 */
	if (up && now >= next_sweep && (!new_settings || sweep_task))
	{
		sweep(!new_settings);
		next_sweep = now + (sweep_task ? 100 : SWEEP_MS);
	}
	return next_due(up);
}

/*
 * The worker stops: hand the attempts back, end the incarnation, free the
 * engine.  The host sets a short lock_timeout first: an attempt whose job
 * row someone holds is left to its lease rather than hold up the stop.
 */
void
remora_runner_stop(void)
{
	remora_attempts_hand_back();
	remora_webhooks_stop();
	if (sweep_task)
		remora_task_free(sweep_task);
	sweep_task = NULL;
	if (recorded)
		remora_call_end_incarnation(incarnation);
	recorded = false;
	remora_engine_free(remora_runner.engine);
	remora_runner.engine = NULL;
	remora_rlog("stopped, incarnation %s", incarnation);
	config_free(&remora_runner.cfg);
}

/* ------------------------------------------------------------ for hosts */

RemoraEngine *
remora_runner_engine(void)
{
	return remora_runner.engine;
}

const char *
remora_runner_incarnation(void)
{
	return incarnation;
}

int
remora_runner_count(void)
{
	return remora_attempts_count();
}

int
remora_runner_attempts(RemoraAttemptView *out, int max)
{
	return remora_attempts_view(out, max);
}

/* The job whose objects the sweep deletes now, or -1. */
int64_t
remora_runner_sweep_job(void)
{
	return sweep_task ? sweep_job : -1;
}
