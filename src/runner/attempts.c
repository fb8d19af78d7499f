/*-------------------------------------------------------------------------
 *
 * attempts.c
 *	  The attempts one worker incarnation runs: each from its claim to its
 *	  commit, its failure or its stop.  The one state machine of both
 *	  hosts (src/runner/README.md):
 *
 *	  claimed --start--> running --checkpoint--> running
 *	    |                  |--> succeeded --commit--> done
 *	    |                  |        (refused: lost its authority, or, still
 *	    |                  |         holding it, fails retryable)
 *	    |                  |--> failed --fail--> done
 *	    |                  |--> renewal or checkpoint refused, or the job
 *	    |                  |    cancelled: stopped (the sweep cleans up)
 *	    |                  |--> its lease could not be renewed in time:
 *	    |                  |    stopped (fenced, below)
 *	    |                  |--> asked to yield by a renewal: at its next
 *	    |                  |    recorded checkpoint, yielded (its job queued
 *	    |                  |    again, resuming from it; no budget spent)
 *	    |                  `--> stop of the worker: handed back (fail,
 *	    |                       retryable)
 *	    `--> spec unreadable, endpoint gone, engine refuses: failed at once
 *
 * Fencing on the worker's own clock: an attempt may go on (and commit)
 * only while the lease it last renewed surely runs.  Its fence is the
 * moment the last successful renewal (or the claim) was sent, plus the
 * lease, less a margin (a quarter of the lease, at least 500 ms); when the
 * fence passes without a renewal (the server unreachable, paused, or its
 * answers lost) the attempt is aborted before its lease could have
 * expired, so that it never commits afterwards.  Safety does not depend
 * on it: remora.commit refuses an attempt that lost its authority.
 *
 * A commit or fail call that failed is tried again in a later round,
 * further apart each time (CALL_BACKOFF_MS doubled, at most
 * CALL_BACKOFF_MAX_MS), for as long as the attempt holds its lease, but
 * given up once it has failed CALL_TRIES times over CALL_PATIENCE_MS;
 * then the attempt's lease lapses and the job is retried.  Patience, not
 * a count alone: a server whose disk is full refuses every write for as
 * long as its operator takes to free space, and a count spent in a
 * quarter of a second threw a finished transfer away (the next attempt
 * transfers again all after the last checkpoint: a small object, all of
 * it) while the attempt could still have committed it.
 * Members and references a checkpoint carries are kept until the
 * transaction that recorded them has committed, and offered again
 * otherwise, also with the commit.  Documents come from the codec
 * (encode.c, decode.c), statements from calls.c.
 *
 * Memory: malloc'd; an attempt and what it keeps live until forgotten.
 *
 *-------------------------------------------------------------------------
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/common/util.h"
#include "runner/codec.h"
#include "runner/attempt.h"
#include "runner/attempts.h"
#include "runner/state.h"

#define CALL_TRIES          5
#define CALL_PATIENCE_MS    (5 * 60 * 1000)
#define CALL_BACKOFF_MS     100
#define CALL_BACKOFF_MAX_MS 5000

typedef RemoraAttempt Attempt;

static Attempt *attempts[REMORA_RUNNER_MAX_ATTEMPTS];
static int      nattempts;
static bool     requeued; /* a failure this round queued its job again */

int
remora_attempts_count(void)
{
	return nattempts;
}

int64_t
remora_attempt_fence_after(int64_t sent_ms)
{
	int lease = remora_runner.cfg.lease_ms;
	int margin = lease / 4 > 500 ? lease / 4 : 500;

	return sent_ms + lease - margin;
}

static void
view_of(const Attempt *a, RemoraAttemptView *v)
{
	v->job_id = a->job_id;
	v->attempt_id = a->attempt_id;
	v->token = a->token;
	v->owner = a->owner;
	v->task = a->task;
	v->host_slot = a->host_slot;
}

/* The attempts that run, for the host's live progress and activity. */
int
remora_attempts_view(RemoraAttemptView *out, int max)
{
	int n = nattempts < max ? nattempts : max;

	for (int i = 0; i < n; i++)
		view_of(attempts[i], &out[i]);
	return n;
}

void
remora_attempt_free(Attempt *a)
{
	remora_task_free(a->task);
	free(a->bucket);
	free(a->file_name);
	free(a->commit_doc);
	remora_docs_clear(&a->unsent);
	free(a);
}

static void
forget_attempt(int i)
{
	Attempt *a = attempts[i];

	attempts[i] = attempts[--nattempts];
	if (remora_runner.ops->attempt_ended)
		remora_runner.ops->attempt_ended(remora_runner.host, a->host_slot);
	remora_attempt_free(a);
}

static void
stop_attempt(int i, const char *why)
{
	remora_rlog("job %" PRId64 " attempt %s stopped: %s", attempts[i]->job_id,
				attempts[i]->attempt_id, why);
	remora_task_abort(attempts[i]->task, false);
	forget_attempt(i);
}

/* Members or references the engine hands out now, kept until recorded. */
static void
keep_docs(Attempt *a, const RemoraTaskCheckpoint *cp)
{
	for (int i = 0; a->kind == REMORA_WORK_EXPORT && i < cp->nrefs; i++)
		(void) remora_docs_add(&a->unsent, remora_codec_ref(&cp->refs[i]));
	for (int i = 0; a->kind == REMORA_WORK_SET && i < cp->nmembers; i++)
		(void) remora_docs_add(&a->unsent,
							   remora_codec_member(a->bucket, &cp->members[i]));
}

/* ------------------------------------------------------------ renewals */

static int
by_job(const void *x, const void *y)
{
	const Attempt *a = *(Attempt *const *) x;
	const Attempt *b = *(Attempt *const *) y;

	return a->job_id < b->job_id ? -1 : a->job_id > b->job_id;
}

static int
by_blocked_then_job(const void *x, const void *y)
{
	const Attempt *a = *(Attempt *const *) x;
	const Attempt *b = *(Attempt *const *) y;

	if (a->renew_blocked != b->renew_blocked)
		return a->renew_blocked ? 1 : -1;
	return by_job(x, y);
}

/*
 * Renew every lease, each in a transaction of its own (one that waits on a
 * row a user holds delays no other by more than lock_timeout); stop the
 * attempts that lost authority or were cancelled.  One whose renewal
 * failed keeps running until its fence.
 */
void
remora_attempts_renew(void)
{
	bool stop[REMORA_RUNNER_MAX_ATTEMPTS] = {0};
	bool cancelled[REMORA_RUNNER_MAX_ATTEMPTS] = {0};

	/* renewals whose last try failed go last: they delay no other */
	qsort(attempts, nattempts, sizeof(Attempt *), by_blocked_then_job);
	for (int i = 0; i < nattempts; i++)
	{
		Attempt *a = attempts[i];
		int64_t  sent = remora_clock_ms();
		bool     ok, yield;
		bool called = remora_call_renew(a->job_id, a->attempt_id, a->token, &ok,
										&cancelled[i], &yield);

		a->renew_blocked = !called;
		if (called && ok)
			a->fence_ms = remora_attempt_fence_after(sent);
		if (called && ok && yield && !a->yield_asked)
			remora_rlog("job %" PRId64 " attempt %s: asked to yield to another "
						"owner's jobs at its next checkpoint",
						a->job_id, a->attempt_id);
		a->yield_asked = a->yield_asked || (called && ok && yield);
		/* one whose result is ready is left to remora.commit */
		stop[i] = called && !ok &&
				  remora_task_state(a->task) != REMORA_TASK_SUCCEEDED;
	}
	for (int i = nattempts - 1; i >= 0; i--)
		if (stop[i])
			stop_attempt(i, cancelled[i] ? "the job was cancelled"
										 : "the attempt lost its lease");
	remora_attempts_apply_rates();
}

/*
 * Apply the byte-rate caps of the running attempts as the database has
 * them now (remora.rate_limits): once a second while attempts run, at
 * each renewal round, and once after a claim started some (round.c).  A cap
 * changes a running task's rate, never stops it; a call that fails changes
 * nothing, and an attempt the answer does not name keeps its cap.
 */
void
remora_attempts_apply_rates(void)
{
	const char *ids[REMORA_RUNNER_MAX_ATTEMPTS];
	int64_t     caps[REMORA_RUNNER_MAX_ATTEMPTS];
	bool        known[REMORA_RUNNER_MAX_ATTEMPTS];

	if (nattempts == 0)
		return;
	for (int i = 0; i < nattempts; i++)
		ids[i] = attempts[i]->attempt_id;
	if (!remora_call_rate_limits(nattempts, ids, caps, known))
		return;
	for (int i = 0; i < nattempts; i++)
	{
		Attempt *a = attempts[i];

		if (!known[i] || caps[i] == a->max_rate)
			continue;
		remora_task_set_max_rate(a->task, caps[i]);
		a->max_rate = caps[i];
		if (caps[i] > 0)
			remora_rlog("job %" PRId64 " attempt %s: capped at %" PRId64
						" bytes a second",
						a->job_id, a->attempt_id, caps[i]);
		else
			remora_rlog("job %" PRId64 " attempt %s: no byte-rate cap",
						a->job_id, a->attempt_id);
	}
}

/* Abort the attempts whose lease may be about to lapse (see the header). */
void
remora_attempts_fence(void)
{
	int64_t now = remora_clock_ms();

	for (int i = nattempts - 1; i >= 0; i--)
		if (now >= attempts[i]->fence_ms)
			stop_attempt(i, "its lease could not be renewed in time; it "
							"will not commit");
}

/* When the next fence passes (INT64_MAX with no attempt). */
int64_t
remora_attempts_next_fence_ms(void)
{
	int64_t next = INT64_MAX;

	for (int i = 0; i < nattempts; i++)
		if (attempts[i]->fence_ms < next)
			next = attempts[i]->fence_ms;
	return next;
}

/* --------------------------------------------------------- checkpoints */

/* The checkpoint of an attempt with new progress, or NULL. */
static char *
checkpoint_doc(Attempt *a)
{
	RemoraTaskCheckpoint cp;
	const char          *why = NULL;
	const char          *restarted;
	bool                 is_export = a->kind == REMORA_WORK_EXPORT;

	if (!remora_task_checkpoint(a->task, &cp))
		return a->unsent.n == 0 ? NULL
			   : is_export
				   ? remora_codec_export_checkpoint(NULL, &a->unsent)
				   : remora_codec_checkpoint(NULL, true, NULL, &a->unsent);
	if (a->kind != REMORA_WORK_OBJECT)
	{
		/* until the transaction commits, they count as unsent */
		keep_docs(a, &cp);
		return is_export ? remora_codec_export_checkpoint(&cp, &a->unsent)
						 : remora_codec_checkpoint(&cp, true, NULL, &a->unsent);
	}
	/* why it restarted from zero, said once */
	if (!a->restart_reported && a->forced_restart)
		why = a->forced_restart;
	else if (!a->restart_reported && remora_task_restarted(a->task, &restarted))
		why = restarted;
	a->restart_reported = a->restart_reported || why != NULL;
	return remora_codec_checkpoint(&cp, false, why, NULL);
}

/*
 * Checkpoint attempts[from..to) that have new progress, in one batch (one
 * transaction where the host has them, each call failing alone); what a
 * call carried counts as recorded only once the batch committed.  Sets
 * refused[i] for a checkpoint the protocol refused (the attempt must
 * stop).  Returns how many were sent.
 */
static int
checkpoint_batch(int from, int to, bool *refused, bool *recorded)
{
	char   *docs[REMORA_RUNNER_MAX_ATTEMPTS] = {0};
	bool    sent[REMORA_RUNNER_MAX_ATTEMPTS] = {0};
	int     batch = 0;
	bool    committed;
	int64_t started;
	int     nrefused = 0;

	for (int i = from; i < to; i++)
		batch += (docs[i] = checkpoint_doc(attempts[i])) != NULL;
	if (batch == 0)
		return 0;
	started = remora_clock_ms();
	if (remora_runner.ops->batch_begin)
		remora_runner.ops->batch_begin(remora_runner.host, "checkpointing");
	for (int i = from; i < to; i++)
	{
		Attempt *a = attempts[i];
		bool     ok = true;

		if (docs[i] == NULL)
			continue;
		sent[i] = remora_call_checkpoint(a->job_id, a->attempt_id, a->token,
										 docs[i], &ok);
		refused[i] = sent[i] && !ok;
	}
	committed = remora_runner.ops->batch_end == NULL ||
				remora_runner.ops->batch_end(remora_runner.host);
	for (int i = from; i < to; i++)
	{
		free(docs[i]);
		if (!committed)
			refused[i] = false; /* nothing was decided: tried again */
		else if (sent[i])
			remora_docs_clear(&attempts[i]->unsent);
		if (recorded)
			recorded[i] = committed && sent[i] && !refused[i];
		nrefused += refused[i];
	}
	if (remora_runner.ops->checkpoints_done)
		remora_runner.ops->checkpoints_done(remora_runner.host, batch, nrefused,
											(remora_clock_ms() - started) *
												1000);
	return batch;
}

/*
 * An attempt asked to yield whose checkpoint was just recorded: its task
 * stops (its staging kept for the next attempt) and its job goes back to
 * the queue (remora.yield); one whose call failed is left to its lease.
 */
static void
yield_attempt(int i)
{
	Attempt *a = attempts[i];
	char    *state;

	remora_task_abort(a->task, false);
	state = remora_call_yield(a->job_id, a->attempt_id, a->token);
	remora_rlog("job %" PRId64 " attempt %s yielded%s%s", a->job_id,
				a->attempt_id,
				state ? ": the job is now " : " (failed: its lease lapses)",
				state ? state : "");
	free(state);
	forget_attempt(i);
}

/*
 * Record validated progress of every attempt that has new, and yield those
 * asked to once theirs is recorded.  Job rows are locked in job id order
 * everywhere, as remora.reconcile does.
 */
void
remora_attempts_checkpoint(void)
{
	bool refused[REMORA_RUNNER_MAX_ATTEMPTS] = {0};
	bool recorded[REMORA_RUNNER_MAX_ATTEMPTS] = {0};

	qsort(attempts, nattempts, sizeof(Attempt *), by_job);
	if (checkpoint_batch(0, nattempts, refused, recorded) == 0)
		return;
	for (int i = nattempts - 1; i >= 0; i--)
		if (refused[i])
			stop_attempt(i, "its checkpoint was refused");
		else if (recorded[i] && attempts[i]->yield_asked &&
				 remora_task_state(attempts[i]->task) == REMORA_TASK_RUNNING)
			yield_attempt(i);
}

/*
 * An export that failed: record the answers it holds before its failure,
 * so that a verify or a retry knows them.  One that cannot be recorded is
 * observed again by the verify.
 */
static void
export_flush(int i)
{
	bool refused[REMORA_RUNNER_MAX_ATTEMPTS] = {0};

	(void) checkpoint_batch(i, i + 1, refused, NULL);
}

/* ------------------------------------------------------------- finish */

/* The wait before the next try after the n-th failed call (n >= 1) */
static int64_t
call_backoff_ms(int n)
{
	int64_t backoff = CALL_BACKOFF_MS;

	while (--n > 0 && backoff < CALL_BACKOFF_MAX_MS)
		backoff *= 2;
	return backoff < CALL_BACKOFF_MAX_MS ? backoff : CALL_BACKOFF_MAX_MS;
}

/*
 * A commit or fail call of a failed: true to give the attempt up, false
 * to try again once its backoff has passed.
 */
static bool
give_up_calls(Attempt *a, const char *what)
{
	int64_t now = remora_clock_ms();

	if (a->call_failures++ == 0)
		a->first_call_failure_ms = now;
	if (a->call_failures < CALL_TRIES ||
		now - a->first_call_failure_ms < CALL_PATIENCE_MS)
	{
		a->next_call_ms = now + call_backoff_ms(a->call_failures);
		return false;
	}
	remora_rlog("job %" PRId64 " attempt %s: %s failed %d times, giving the "
				"attempt up; its lease lapses and the job is retried",
				a->job_id, a->attempt_id, what, a->call_failures);
	return true;
}

typedef enum Outcome
{
	DONE,
	REFUSED,
	AGAIN
} Outcome;

/*
 * The descriptor of a result, built once and kept (the engine hands out a
 * set's last members only once), or NULL when it cannot be built yet.
 */
static const char *
commit_doc(Attempt *a, const RemoraTaskResult *r)
{
	RemoraTaskCheckpoint cp;

	if (a->commit_doc)
		return a->commit_doc;
	if (a->kind != REMORA_WORK_OBJECT && remora_task_checkpoint(a->task, &cp))
		keep_docs(a, &cp);
	switch (a->kind)
	{
		case REMORA_WORK_EXPORT:
			a->commit_doc = remora_codec_export_descriptor(r, &a->unsent);
			break;
		case REMORA_WORK_SET:
			a->commit_doc = remora_codec_set_descriptor(r, &a->unsent);
			break;
		case REMORA_WORK_OBJECT:
			a->commit_doc =
				remora_codec_object_descriptor(r, a->bucket, a->file_name);
			break;
	}
	if (a->commit_doc)
		remora_docs_clear(&a->unsent);
	return a->commit_doc;
}

static Outcome
report_success(Attempt *a)
{
	bool ok;

	if (commit_doc(a, remora_task_result(a->task)) == NULL)
		return AGAIN;
	if (!remora_call_commit(a->job_id, a->attempt_id, a->token, a->commit_doc,
							&ok))
		return AGAIN;
	return ok ? DONE : REFUSED;
}

/* May this attempt call commit or fail now (its backoff past)? */
static bool
may_call(const Attempt *a)
{
	return remora_clock_ms() >= a->next_call_ms;
}

/* May this attempt commit now?  (Past its fence it is stopped.) */
static bool
may_commit(const Attempt *a)
{
	return remora_task_state(a->task) == REMORA_TASK_SUCCEEDED &&
		   remora_clock_ms() < a->fence_ms && may_call(a);
}

/*
 * Commit the results of the attempts that succeeded and may still commit
 * (committing[i]; outcome[i] for attempts[i]): several in one call and one
 * transaction (remora.commit_many, which decides each item as remora.commit
 * would), so that a round in which many small jobs finish pays for one
 * commit; if that call fails, each alone.
 */
static void
commit_succeeded(const bool *committing, Outcome *outcome)
{
	const char *ids[REMORA_RUNNER_MAX_ATTEMPTS];
	int64_t     tokens[REMORA_RUNNER_MAX_ATTEMPTS];
	const char *docs[REMORA_RUNNER_MAX_ATTEMPTS];
	bool        ok[REMORA_RUNNER_MAX_ATTEMPTS];
	int         which[REMORA_RUNNER_MAX_ATTEMPTS];
	int         n = 0;

	for (int i = 0; i < nattempts; i++)
	{
		Attempt *a = attempts[i];

		outcome[i] = AGAIN;
		if (!committing[i] ||
			commit_doc(a, remora_task_result(a->task)) == NULL)
			continue;
		ids[n] = a->attempt_id;
		tokens[n] = a->token;
		docs[n] = a->commit_doc;
		which[n++] = i;
	}
	if (n > 1 && remora_call_commit_many(n, ids, tokens, docs, ok))
	{
		for (int k = 0; k < n; k++)
			outcome[which[k]] = ok[k] ? DONE : REFUSED;
		return;
	}
	for (int k = 0; k < n; k++)
		outcome[which[k]] = report_success(attempts[which[k]]);
}

/*
 * A commit refused: said, and, when the attempt still holds the job (its
 * result did not match what it recorded), failed, retryable.
 */
static void
commit_refused(Attempt *a)
{
	bool  ok = false, cancelled, yield;
	char *doc, *state;

	if (!remora_call_renew(a->job_id, a->attempt_id, a->token, &ok, &cancelled,
						   &yield) ||
		!ok)
	{
		remora_rlog("job %" PRId64 " attempt %s: commit refused; it no longer "
					"holds the job, its staging objects will be removed",
					a->job_id, a->attempt_id);
		return;
	}
	remora_rlog("job %" PRId64 " attempt %s: commit refused although it holds "
				"the job; it fails, retryable",
				a->job_id, a->attempt_id);
	doc = remora_codec_error(REMORA_ERR_INTERNAL,
							 "the commit of the result was refused although "
							 "the attempt holds the job",
							 0, 0, NULL, -1);
	state = remora_call_fail(a->job_id, a->attempt_id, a->token, doc, true);
	free(doc);
	free(state);
}

/* Report attempts[i]'s failure; false to try again next round. */
static bool
report_failure(int i)
{
	Attempt               *a = attempts[i];
	const RemoraTaskError *e = remora_task_error(a->task);
	char                  *doc, *state;

	if (a->kind == REMORA_WORK_EXPORT)
		export_flush(i);
	doc = remora_codec_task_error(e);
	state =
		remora_call_fail(a->job_id, a->attempt_id, a->token, doc, e->retryable);
	free(doc);
	if (state == NULL)
		return give_up_calls(a, "reporting its failure");
	remora_rlog("job %" PRId64 " attempt %s failed: %s (class %s, %s; the job "
				"is now %s)",
				a->job_id, a->attempt_id, e->message, e->class,
				e->retryable ? "retryable" : "not retryable", state);
	requeued = requeued || strcmp(state, "retrying") == 0;
	free(state);
	return true;
}

/*
 * Commit what succeeded, report what failed; true when a failure queued
 * its job again, to be retried after a backoff.
 */
bool
remora_attempts_finish(void)
{
	Outcome outcome[REMORA_RUNNER_MAX_ATTEMPTS];
	bool    committing[REMORA_RUNNER_MAX_ATTEMPTS];

	requeued = false;
	for (int i = 0; i < nattempts; i++)
		committing[i] = may_commit(attempts[i]);
	commit_succeeded(committing, outcome);
	/* backwards: forgetting attempts[i] moves the last one into its place */
	for (int i = nattempts - 1; i >= 0; i--)
	{
		Attempt        *a = attempts[i];
		RemoraTaskState st = remora_task_state(a->task);

		if (st == REMORA_TASK_SUCCEEDED)
		{
			if (!committing[i])
				continue; /* its fence stops it, or its backoff runs */
			if (outcome[i] == DONE)
				remora_rlog("job %" PRId64 " attempt %s committed its result",
							a->job_id, a->attempt_id);
			else if (outcome[i] == REFUSED)
				commit_refused(a);
			else if (!give_up_calls(a, "committing its result"))
				continue;
			forget_attempt(i);
		}
		else if (st == REMORA_TASK_FAILED && may_call(a) && report_failure(i))
			forget_attempt(i);
	}
	return requeued;
}

/* ---------------------------------------------------------------- start */

/*
 * Answer the lookups the engine queued in its last run: the members an
 * earlier attempt of each asking set completed, for a replacement to
 * reuse, and the next page of each asking export's members.  One that
 * fails is handed back unanswered: a set's members are then transferred
 * again, an export fails (retryable).
 */
void
remora_attempts_answer_lookups(void)
{
	RemoraLookup *l;

	while ((l = remora_engine_lookup_next(remora_runner.engine)) != NULL)
	{
		Attempt *a = l->host_arg;
		bool     ok;

		if (l->kind == REMORA_LOOKUP_EXPORT_PAGE)
			ok = remora_call_export_members(a->job_id, a->attempt_id, a->token,
											l);
		else
			ok = remora_call_lookup(a->job_id, a->attempt_id, l->paths, l->n,
									l->out);
		remora_engine_lookup_done(remora_runner.engine, l, ok);
	}
}

/* A started attempt joins the table (start.c). */
void
remora_attempts_add(Attempt *a)
{
	attempts[nattempts++] = a;
	if (remora_runner.ops->attempt_started)
	{
		RemoraAttemptView v;

		view_of(a, &v);
		a->host_slot =
			remora_runner.ops->attempt_started(remora_runner.host, &v);
	}
}

/*
 * The worker stops: hand every attempt back at once rather than let leases
 * lapse; one that cannot be handed back is left to its lease.
 */
void
remora_attempts_hand_back(void)
{
	for (int i = nattempts - 1; i >= 0; i--)
	{
		Attempt *a = attempts[i];
		char *doc = remora_codec_error("worker", "the worker was stopped", 0, 0,
									   NULL, 0);
		char *state;

		remora_task_abort(a->task, false);
		state = remora_call_fail(a->job_id, a->attempt_id, a->token, doc, true);
		remora_rlog("job %" PRId64 " attempt %s handed back%s%s", a->job_id,
					a->attempt_id,
					state ? ": the job is now " : " (failed: its lease lapses)",
					state ? state : "");
		free(doc);
		free(state);
		forget_attempt(i);
	}
}
