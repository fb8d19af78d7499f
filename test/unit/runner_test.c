/*
 * runner_test.c: the runner's state machine (src/runner) over a host of
 * the test's own: a scripted fake of the SQL protocol that recognises each
 * statement by the remora.* function it calls, records it and answers with
 * rows, and a real engine whose sources are the minimal S3 store of
 * engine_fixtures.c (a transfer that succeeds), a listener that never
 * answers (one that runs until stopped), or an address the network policy
 * closes (runner_fixtures.h).  The runner's clock is the test's, so that
 * renewals, fences and the sweep come due when the test says.
 *
 * Attempt ids end with their job's number, so that each call is told
 * apart by job.
 */
#include "runner_fixtures.h"

/* ------------------------------------------------------------- tests */

static void
test_incarnation(FakeS3 *s3)
{
	RemoraRound down = {false, false, false, false};
	RemoraRound again = {true, true, false, false};
	char        first[40];
	int         mark;

	h.s3_port = s3->port;
	h.alive = true;
	remora_runner_init(&ops, NULL, &config);
	CHECK(h.incarnations == 1 && h.engines == 1 &&
			  strlen(remora_runner_incarnation()) == 36,
		  "init: an engine and a new incarnation");
	(void) remora_runner_round(&down);
	CHECK(h.ncalls == 0, "a round while disconnected runs no statement");

	snprintf(first, sizeof(first), "%s", remora_runner_incarnation());
	h.fail_next_start = 1;
	(void) round_with(false, false);
	CHECK(count("start_incarnation", -1) == 1 && count("claim", -1) == 0 &&
			  count("heartbeat", -1) == 0 &&
			  strcmp(last("start_incarnation", -1)->p[2], "worker") == 0,
		  "start_incarnation (as a worker) failed: nothing renewed nor "
		  "claimed that round");
	(void) round_with(false, false);
	CHECK(count("start_incarnation", -1) == 1 && count("heartbeat", -1) >= 1 &&
			  strcmp(last("heartbeat", -1)->p[0], first) == 0 &&
			  h.incarnations == 1 &&
			  strcmp(remora_runner_incarnation(), first) == 0,
		  "its answer may have been lost, the row recorded: next round the "
		  "heartbeat says it is, and no second start is tried (the same "
		  "uuid was a duplicate key at every try)");
	CHECK(count("claim", -1) == 1 &&
			  strcmp(last("claim", -1)->p[1], "2") == 0 &&
			  count("staging_to_clean", -1) == 1,
		  "then the heartbeat, a claim for the whole room (2), the sweep");
	mark = h.ncalls;
	(void) round_with(false, false);
	CHECK(h.ncalls == mark, "a round with nothing due runs no statement");

	snprintf(first, sizeof(first), "%s", remora_runner_incarnation());
	h.alive = false;
	(void) remora_runner_round(&again);
	h.alive = true;
	CHECK(h.incarnations == 2 &&
			  strcmp(first, remora_runner_incarnation()) != 0 &&
			  strcmp(last("heartbeat", -1)->p[0], first) == 0 &&
			  strcmp(last("start_incarnation", -1)->p[0],
					 remora_runner_incarnation()) == 0,
		  "a new session, the heartbeat says the incarnation was ended: a "
		  "new one is recorded");

	snprintf(first, sizeof(first), "%s", remora_runner_incarnation());
	h.alive = false;
	mark = h.ncalls;
	(void) round_with(true, false);
	h.alive = true;
	CHECK(h.incarnations == 3 &&
			  count_from(mark, "start_incarnation", -1) == 1 &&
			  strcmp(first, remora_runner_incarnation()) != 0,
		  "a renewal whose heartbeat says ended: a new incarnation too");
}

static void
test_claim_and_renew(FakeS3 *s3)
{
	int mark, mark_log;

	(void) s3;
	queue(1, http_job(1, silent_port, "/1"));
	queue(2, http_job(2, silent_port, "/2"));
	queue(3, http_job(3, silent_port, "/3"));
	mark = h.ncalls;
	(void) round_with(false, true);
	CHECK(count_from(mark, "claim", -1) == 1 &&
			  strcmp(last("claim", -1)->p[1], "2") == 0 &&
			  strcmp(last("claim", -1)->p[0], remora_runner_incarnation()) == 0,
		  "a job queued: one claim, for the room (2), by this incarnation");
	CHECK(remora_runner_count() == 2 && h.slots[1].started == 1 &&
			  h.slots[2].started == 1 && h.slots[3].started == 0,
		  "the claimed rows are running attempts");
	CHECK(last_view.owner == 10 && last_view.token == 7 &&
			  last_view.task != NULL,
		  "the host is told of each, with its owner, token and task");
	mark = h.ncalls;
	(void) round_with(false, true);
	CHECK(count_from(mark, "claim", -1) == 0 && remora_runner_count() == 2,
		  "no room left: no claim is sent");

	h.renew[1] = ANSWER_REFUSED;
	mark = h.ncalls;
	mark_log = h.nlog;
	(void) round_with(true, false);
	CHECK(count_from(mark, "heartbeat", -1) == 1 &&
			  count_from(mark, "renew", 1) == 1 &&
			  count_from(mark, "renew", 2) == 1,
		  "renew now: the heartbeat, then every lease");
	CHECK(h.slots[1].ended == 1 && h.slots[2].ended == 0 &&
			  logged_from(mark_log, "lost its lease"),
		  "a renewal refused stops just that attempt");
	CHECK(count_from(mark, "claim", -1) == 1 &&
			  strcmp(last("claim", -1)->p[1], "1") == 0 &&
			  h.slots[3].started == 1 && remora_runner_count() == 2,
		  "room after a full batch: claimed at once, for what is left (1)");

	/* asked to yield: it runs on until a checkpoint of it is recorded (this
	 * source sends nothing: none is), and is asked once */
	h.renew[2] = ANSWER_YIELD;
	mark_log = h.nlog;
	(void) round_with(true, false);
	(void) round_with(true, false);
	CHECK(h.slots[2].ended == 0 && count("yield", 2) == 0 &&
			  logged_from(mark_log, "asked to yield"),
		  "a renewal that asks to yield stops nothing before a checkpoint");

	h.renew[2] = ANSWER_CANCELLED;
	mark_log = h.nlog;
	(void) round_with(true, false);
	CHECK(h.slots[2].ended == 1 && h.slots[3].ended == 0 &&
			  logged_from(mark_log, "the job was cancelled"),
		  "a cancel stops the attempt");

	queue(4, http_job(4, silent_port, "/4"));
	(void) round_with(false, true);
	CHECK(remora_runner_count() == 2 && h.slots[4].started == 1 &&
			  h.most_running == 2,
		  "a new job fills the room again; never more than 2 at once");

	h.renew[3] = ANSWER_EXEC_FAILS;
	mark = h.ncalls;
	(void) round_with(true, false);
	CHECK(count_from(mark, "renew", 3) == 1 && h.slots[3].ended == 0 &&
			  remora_runner_count() == 2,
		  "a renewal that could not run stops nothing");
	h.renew[3] = ANSWER_OK;
	mark = h.ncalls;
	(void) round_with(true, false);
	CHECK(first_from(mark, "renew", 4) >= 0 &&
			  first_from(mark, "renew", 4) < first_from(mark, "renew", 3),
		  "and is renewed after the others next time");

	/* byte-rate caps: read after the renewals, applied when they change */
	h.rate[3] = 1000;
	mark = h.ncalls;
	mark_log = h.nlog;
	(void) round_with(true, false);
	CHECK(count_from(mark, "rate_limits", -1) == 1 &&
			  first_from(mark, "rate_limits", 0) >
				  first_from(mark, "renew", 3) &&
			  first_from(mark, "rate_limits", 0) > first_from(mark, "renew", 4),
		  "a renewal round: one call of rate_limits, after the renewals");
	CHECK(strstr(last("rate_limits", -1)->p[0], "0000000003") &&
			  strstr(last("rate_limits", -1)->p[0], "0000000004"),
		  "for every running attempt (%s)", last("rate_limits", -1)->p[0]);
	CHECK(logged_from(mark_log,
					  "job 3 attempt 00000000-0000-4000-8000-"
					  "000000000003: capped at 1000 bytes a second") &&
			  !logged_from(mark_log, "job 4"),
		  "the cap named is applied; an attempt not named keeps its own");
	mark_log = h.nlog;
	(void) round_with(true, false);
	CHECK(!logged_from(mark_log, "capped"), "an unchanged cap: nothing to do");
	h.rate[3] = 5;
	h.rate_fails = true;
	mark_log = h.nlog;
	(void) round_with(true, false);
	h.rate_fails = false;
	CHECK(!logged_from(mark_log, "capped") && remora_runner_count() == 2 &&
			  h.slots[3].ended == 0,
		  "a call that fails changes nothing, stops nothing");
	mark_log = h.nlog;
	(void) round_with(true, false);
	CHECK(logged_from(mark_log, "capped at 5 bytes a second"),
		  "a changed cap reaches the running attempt next round");
	h.rate[3] = -1;
	mark_log = h.nlog;
	(void) round_with(true, false);
	CHECK(logged_from(mark_log, "job 3 attempt 00000000-0000-4000-8000-"
								"000000000003: no byte-rate cap"),
		  "a cap lifted (NULL) is lifted");
	h.rate[3] = 0;
}

static void
test_fence(FakeS3 *s3)
{
	int64_t t = fake_now; /* jobs 3 and 4 renewed now */
	int     mark, mark_log;

	(void) s3;
	h.renew[3] = ANSWER_EXEC_FAILS;
	fake_now = t + LEASE_MS / 3 + 1;
	mark = h.ncalls;
	(void) round_with(false, false);
	CHECK(count_from(mark, "renew", 3) == 1 &&
			  count_from(mark, "renew", 4) == 1 && remora_runner_count() == 2,
		  "a third of the lease later: renewed; one that failed still runs");
	fake_now = t + LEASE_MS - LEASE_MS / 4 - 1;
	(void) round_with(false, false);
	CHECK(h.slots[3].ended == 0, "a moment before its fence it still runs");
	fake_now = t + LEASE_MS - LEASE_MS / 4;
	mark = h.ncalls;
	mark_log = h.nlog;
	(void) round_with(false, false);
	CHECK(h.slots[3].ended == 1 && h.slots[4].ended == 0 &&
			  logged_from(mark_log, "could not be renewed in time"),
		  "at its fence (lease less a quarter since its last renewal sent) "
		  "it is stopped; the other, renewed since, runs");
	CHECK(count_from(mark, "renew", 3) == 0,
		  "and no renewal is sent for it any more");
	h.renew[3] = ANSWER_OK;
}

static void
test_commit(FakeS3 *s3)
{
	RemoraRunnerConfig three = config;
	int                mark, mark_log;

	queue(5, http_job(5, s3->port, "/bkt/src/a.bin"));
	(void) round_with(false, true);
	ROUNDS_UNTIL(h.slots[5].ended > 0);
	CHECK(count("commit", 5) == 1 && count("fail", 5) == 0 &&
			  strcmp(last("commit", 5)->p[1], "7") == 0 &&
			  strstr(last("commit", 5)->p[2], "\"bkt\"") != NULL,
		  "a transfer that succeeded: one commit of its descriptor, with "
		  "its token");
	CHECK(h.slots[5].ended == 1 && remora_runner_count() == 1,
		  "and the attempt is forgotten");

	queue(6, http_job(6, s3->port, "/bkt/src/a.bin"));
	(void) round_with(false, true);
	CHECK(engine_until_succeeded(6, 0), "job 6 succeeded");
	h.commit[6] = ANSWER_EXEC_FAILS;
	mark = h.ncalls;
	(void) round_with(false, false);
	CHECK(count_from(mark, "commit", 6) == 1 && h.slots[6].ended == 0 &&
			  count("fail", 6) == 0,
		  "a commit that could not run: the attempt waits, nothing failed");
	(void) round_with(false, false);
	CHECK(count("commit", 6) == 1 && h.slots[6].ended == 0,
		  "not tried again at once");
	fake_now += 100;
	(void) round_with(false, false);
	CHECK(count("commit", 6) == 2 && h.slots[6].ended == 1,
		  "committed in a round after its backoff");

	queue(7, http_job(7, s3->port, "/bkt/src/a.bin"));
	(void) round_with(false, true);
	CHECK(engine_until_succeeded(7, 0), "job 7 succeeded");
	h.renew[7] = ANSWER_REFUSED;
	h.commit[7] = ANSWER_REFUSED;
	mark = h.ncalls;
	mark_log = h.nlog;
	(void) round_with(true, false);
	CHECK(count_from(mark, "commit", 7) == 1 &&
			  count_from(mark, "renew", 7) == 2 && count("fail", 7) == 0 &&
			  h.slots[7].ended == 1 &&
			  logged_from(mark_log, "no longer holds the job"),
		  "a result ready is left to remora.commit though its renewal was "
		  "refused; refused, it is forgotten, not failed");

	three.concurrency = 3;
	remora_runner_reconfigure(&three, false);
	queue(8, http_job(8, s3->port, "/bkt/src/a.bin"));
	queue(9, http_job(9, s3->port, "/bkt/src/a.bin"));
	(void) round_with(false, true);
	CHECK(remora_runner_count() == 3, "new settings: room for 3");
	CHECK(engine_until_succeeded(8, 9), "jobs 8 and 9 succeeded");
	h.commit[9] = ANSWER_REFUSED;
	mark = h.ncalls;
	(void) round_with(false, false);
	CHECK(count_from(mark, "commit_many", -1) == 1 &&
			  last("commit_many", -1)->items == 2 &&
			  count_from(mark, "commit", -1) == 0,
		  "two results in one round: one commit_many of both");
	CHECK(h.slots[8].ended == 1 && h.slots[9].ended == 1 &&
			  count("fail", 8) == 0,
		  "both forgotten, the one committed not failed");
	CHECK(count_from(mark, "renew", 9) == 1 && count("fail", 9) == 1 &&
			  failed_with(9, "internal", true),
		  "refused although it holds the job: failed, retryable, internal");
}

/* Rounds a second apart for seconds s; the commits of job sent meanwhile */
static int
seconds_of_rounds(int s, int job)
{
	int mark = h.ncalls;

	for (int i = 0; i < s; i++)
	{
		fake_now += 1000;
		(void) round_with(false, false);
	}
	return count_from(mark, "commit", job);
}

/*
 * A server that refuses every write (its disk full) for minutes: a
 * finished transfer waits to be committed, its lease renewed, its commit
 * tried again further apart; it is given up only after five minutes.
 */
static void
test_commit_patience(FakeS3 *s3)
{
	int mark_log, sent;

	queue(15, http_job(15, s3->port, "/bkt/src/a.bin"));
	(void) round_with(false, true);
	CHECK(engine_until_succeeded(15, 0), "job 15 succeeded");
	h.commit_exec_fails[15] = true;
	sent = seconds_of_rounds(120, 15);
	CHECK(h.slots[15].ended == 0 && count("fail", 15) == 0 &&
			  count("renew", 15) >= 10,
		  "commits failing for two minutes: the attempt keeps its result "
		  "and its lease");
	CHECK(sent >= 10 && sent <= 40,
		  "its commit tried again, at most every 5 s once backed off");
	h.commit_exec_fails[15] = false;
	(void) seconds_of_rounds(6, 15);
	CHECK(h.slots[15].ended == 1 && count("fail", 15) == 0 &&
			  h.calls[first_from(0, "commit", 15)].failed &&
			  !last("commit", 15)->failed,
		  "once the server takes writes again, it is committed");

	queue(16, http_job(16, s3->port, "/bkt/src/a.bin"));
	(void) round_with(false, true);
	CHECK(engine_until_succeeded(16, 0), "job 16 succeeded");
	h.commit_exec_fails[16] = true;
	mark_log = h.nlog;
	(void) seconds_of_rounds(290, 16);
	CHECK(h.slots[16].ended == 0, "still held after 290 s");
	(void) seconds_of_rounds(20, 16);
	CHECK(h.slots[16].ended == 1 && count("fail", 16) == 0 &&
			  logged_from(mark_log, "giving the attempt up"),
		  "after five minutes it is given up, left to its lease");
	h.commit_exec_fails[16] = false;
}

static void
test_refusals(FakeS3 *s3)
{
	int mark;

	(void) s3;
	queue(10, "{\"source\":");
	queue(11, NULL);
	mark = h.ncalls;
	(void) round_with(false, true);
	CHECK(count_from(mark, "fail", 10) == 1 &&
			  failed_with(10, "internal", true) &&
			  strstr(last("fail", 10)->p[2], "could not be read") != NULL,
		  "a spec the codec refuses: failed at once, internal, retryable");
	CHECK(count_from(mark, "fail", 11) == 1 &&
			  strstr(last("fail", 11)->p[2], "handed out none") != NULL,
		  "a claim without a spec: failed likewise");
	CHECK(h.slots[10].started == 0 && h.slots[11].started == 0 &&
			  remora_runner_count() == 1,
		  "neither ever started");

	queue(12, "{\"source\":{\"kind\":\"s3_prefix\",\"uri\":\"s3://src/p/\","
			  "\"bucket\":\"src\",\"key\":\"p/\"},\"bucket\":\"bkt\","
			  "\"options\":{\"endpoint\":\"gone\"},"
			  "\"staging_prefix\":\"stage/12/\"}");
	mark = h.ncalls;
	(void) round_with(false, true);
	CHECK(count_from(mark, "source_endpoint_settings", -1) == 1 &&
			  strcmp(last("source_endpoint_settings", -1)->p[0], "gone") == 0 &&
			  failed_with(12, "source", false) && h.slots[12].started == 0,
		  "a source endpoint no longer registered: failed, source, final");

	h.fail_exec_fails[13] = true;
	queue(13, http_job(13, 0, "http://10.1.2.3/x"));
	(void) round_with(false, true);
	for (int i = 0; i < 100 && count("fail", 13) < 2; i++)
	{
		fake_now += 100; /* past the backoff of the failed call */
		turn_round();
	}
	CHECK(count("fail", 13) >= 2 && h.slots[13].started == 1 &&
			  h.slots[13].ended == 0,
		  "a failure that could not be reported is reported again");
	h.fail_exec_fails[13] = false;
	for (int i = 0; i < 100 && h.slots[13].ended == 0; i++)
	{
		fake_now += 100;
		turn_round();
	}
	CHECK(h.slots[13].ended == 1 && failed_with(13, "policy", false),
		  "a source the network policy closes: failed, policy, final");
}

static void
test_sweep(FakeS3 *s3)
{
	char    id[40];
	int     mark;
	int64_t end;

	(void) s3;
	attempt_of(1, h.cleanup);
	(void) round_with(false, false);
	fake_now += 5000; /* the sweep is due at the latest now */
	mark = h.ncalls;
	(void) round_with(false, false);
	CHECK(count_from(mark, "staging_to_clean", -1) == 1 &&
			  remora_runner_sweep_job() == 1,
		  "the sweep, due: the staging of job 1's lost attempt is deleted");
	end = real_ms() + 20000;
	while (count("staging_cleaned", -1) == 0 && real_ms() < end)
	{
		fake_now += 100;
		turn_round();
	}
	CHECK(count("staging_cleaned", -1) == 1 &&
			  strcmp(last("staging_cleaned", -1)->p[0], attempt_of(1, id)) ==
				  0 &&
			  remora_runner_sweep_job() == -1,
		  "its end is recorded, for that attempt");
	mark = h.ncalls;
	fake_now += 4999;
	(void) round_with(false, false);
	CHECK(count_from(mark, "staging_to_clean", -1) == 0,
		  "the next sweep is not due before 5 s");
	fake_now += 1;
	(void) round_with(false, false);
	CHECK(count_from(mark, "staging_to_clean", -1) == 1, "then it is");
}

static void
test_stop(FakeS3 *s3)
{
	char inc[40];
	int  mark, mark_log;
	int  ends, early = 0;
	bool once = true;

	(void) s3;
	queue(14, http_job(14, silent_port, "/14"));
	(void) round_with(false, true);
	CHECK(remora_runner_count() == 2 && state_of(4) == REMORA_TASK_RUNNING &&
			  state_of(14) == REMORA_TASK_RUNNING,
		  "jobs 4 and 14 run");
	h.fail_exec_fails[14] = true;
	snprintf(inc, sizeof(inc), "%s", remora_runner_incarnation());
	mark = h.ncalls;
	mark_log = h.nlog;
	remora_runner_stop();
	CHECK(count_from(mark, "fail", 4) == 1 && failed_with(4, "worker", true),
		  "stop: a running attempt is handed back, failed, retryable");
	CHECK(count_from(mark, "fail", 14) == 1 && h.slots[14].ended == 1 &&
			  h.slots[4].ended == 1 && remora_runner_count() == 0 &&
			  logged_from(mark_log, "its lease lapses"),
		  "one whose failure could not be reported is left to its lease");
	ends = first_from(mark, "end_incarnation", 0);
	CHECK(count_from(mark, "end_incarnation", -1) == 1 && ends > 0 &&
			  ends > first_from(mark, "fail", 4) &&
			  strcmp(h.calls[ends].p[0], inc) == 0,
		  "then the incarnation is ended");

	for (int j = 1; j <= 3; j++)
		early += count("commit", j) + count("checkpoint", j) +
				 count("fail", j) + count("commit_many", j);
	CHECK(early == 0, "attempts stopped by a refusal or their fence sent no "
					  "commit, checkpoint or failure afterwards");
	for (int j = 0; j < MAX_JOBS; j++)
		once = once && h.slots[j].ended == h.slots[j].started;
	CHECK(once && h.most_running <= 3,
		  "every attempt started ended once; never more than the room");
}

int
main(void)
{
	static void (*const tests[])(FakeS3 *) = {
		test_incarnation,     test_claim_and_renew, test_fence, test_commit,
		test_commit_patience, test_refusals,        test_sweep, test_stop};
	int fd = silent_listener(&silent_port);

	if (fd < 0 || !fake_s3_run(tests, sizeof(tests) / sizeof(tests[0])))
		CHECK(false, "the test's servers started");
	if (fd >= 0)
		close(fd);
	for (int i = 0; i < h.nlog; i++)
		free(h.log[i]);
	return unit_done();
}
