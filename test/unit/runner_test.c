/*
 * runner_test.c: the runner's state machine (src/runner) over a host of
 * the test's own: a scripted fake of the SQL protocol that recognises each
 * statement by the remora.* function it calls, records it and answers with
 * rows, and a real engine whose sources are the minimal S3 store of
 * engine_fixtures.c (a transfer that succeeds), a listener that never
 * answers (one that runs until stopped), or an address the network policy
 * closes.  The runner's clock is the test's (remora_clock_ms below), so
 * that renewals, fences and the sweep come due when the test says.
 *
 * Attempt ids end with their job's number, so that each call is told
 * apart by job.
 */
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "engine_fixtures.h"
#include "runner/runner.h"
#include "unit.h"

#define MAX_JOBS  32
#define MAX_CALLS 2048
#define MAX_LOG   1024
#define LEASE_MS  30000

/* ------------------------------------------------------------ the clock */

static int64_t fake_now = 1000000;

/* The runner's clock (a weak definition in round.c) */
int64_t
remora_clock_ms(void)
{
	return fake_now;
}

static int64_t
real_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------- the fake host */

/* How the fake answers a job's renew, checkpoint or commit */
typedef enum Answer
{
	ANSWER_OK,
	ANSWER_REFUSED,
	ANSWER_CANCELLED, /* a renewal: refused, the job cancelled */
	ANSWER_EXEC_FAILS /* the statement fails (the next one) */
} Answer;

typedef struct Call
{
	char fn[32]; /* the remora.* function called */
	int  job;    /* of its attempt id, or 0 */
	int  items;  /* commit_many: how many */
	bool failed; /* the host answered failure */
	char p[4][512];
} Call;

typedef struct Slot
{
	int started;
	int ended;
} Slot;

typedef struct Claimable
{
	int         job;
	const char *spec; /* NULL: SQL NULL */
} Claimable;

static struct
{
	Call      calls[MAX_CALLS];
	int       ncalls;
	char     *log[MAX_LOG];
	int       nlog;
	Claimable queue[MAX_JOBS];
	int       queued, next_claim;
	bool      alive; /* the heartbeat's answer */
	int       fail_next_start;
	Answer    renew[MAX_JOBS], commit[MAX_JOBS];
	bool      fail_exec_fails[MAX_JOBS];
	int64_t   rate[MAX_JOBS]; /* rate_limits: 0 no row, -1 NULL, else it */
	bool      rate_fails;
	char      cleanup[256]; /* staging_to_clean's row: attempt id, or "" */
	Slot      slots[MAX_JOBS];
	int       incarnations; /* incarnation_begins */
	int       engines;
	int       running, most_running; /* attempts the host was told of */
	int       s3_port;
} h;

static char *
attempt_of(int job, char *buf)
{
	sprintf(buf, "00000000-0000-4000-8000-0000000000%02d", job);
	return buf;
}

/* The job of an attempt id the test made (it may go on: JSON), or 0 */
static int
job_of(const char *attempt)
{
	return attempt && strncmp(attempt, "00000000-0000-4000-8000-", 24) == 0
			   ? atoi(attempt + 24)
			   : 0;
}

/* "claim" of "... FROM remora.claim($1 ...": the first remora.* called */
static void
function_of(const char *sql, char *fn, size_t len)
{
	const char *p = strstr(sql, "remora.");
	size_t      n = 0;

	fn[0] = '\0';
	if (p == NULL)
		return;
	p += 7;
	while (n < len - 1 && (p[n] == '_' || (p[n] >= 'a' && p[n] <= 'z')))
		n++;
	memcpy(fn, p, n);
	fn[n] = '\0';
}

/* Rows of text, names then values row after row (out may be NULL) */
static void
answer(RemoraRows *out, int nrows, int ncols, const char *const *names,
	   const char *const *values)
{
	if (out == NULL)
		return;
	remora_rows_init(out, nrows, ncols);
	for (int c = 0; c < ncols; c++)
		remora_rows_set_name(out, c, names[c]);
	for (int r = 0; r < nrows; r++)
		for (int c = 0; c < ncols; c++)
			remora_rows_set(out, r, c, values[r * ncols + c]);
}

static const char *
tf(bool b)
{
	return b ? "t" : "f";
}

static void
answer_claim(int room, RemoraRows *out)
{
	static const char *names[5] = {"job_id", "attempt_id", "fencing_token",
								   "spec", "resume"};
	const char        *values[5 * MAX_JOBS];
	char               ids[MAX_JOBS][40], jobs[MAX_JOBS][16];
	int                n = 0;

	while (n < room && h.next_claim < h.queued)
	{
		const Claimable *c = &h.queue[h.next_claim++];

		snprintf(jobs[n], sizeof(jobs[n]), "%d", c->job);
		values[n * 5] = jobs[n];
		values[n * 5 + 1] = attempt_of(c->job, ids[n]);
		values[n * 5 + 2] = "7";
		values[n * 5 + 3] = c->spec;
		values[n * 5 + 4] = NULL;
		n++;
	}
	answer(out, n, 5, names, values);
}

static void
answer_commit_many(Call *c, const char *items, RemoraRows *out)
{
	static const char *names[1] = {"committed"};
	const char        *values[MAX_JOBS];
	const char        *p = items;

	while ((p = strstr(p, "{\"a\":\"")) != NULL && c->items < MAX_JOBS)
	{
		p += 6;
		values[c->items++] = tf(h.commit[job_of(p)] == ANSWER_OK);
	}
	answer(out, c->items, 1, names, values);
}

/* remora.rate_limits of "{id,id,...}": a row per attempt with a rate */
static void
answer_rates(const char *ids, RemoraRows *out)
{
	static const char *names[2] = {"attempt_id", "max_bytes_per_second"};
	const char        *values[2 * MAX_JOBS];
	char               att[MAX_JOBS][40], cap[MAX_JOBS][24];
	int                n = 0;

	for (const char *p = ids; (p = strstr(p, "00000000-")) != NULL; p += 36)
	{
		int job = job_of(p);

		if (job <= 0 || job >= MAX_JOBS || h.rate[job] == 0 || n >= MAX_JOBS)
			continue;
		attempt_of(job, att[n]);
		snprintf(cap[n], sizeof(cap[n]), "%" PRId64, h.rate[job]);
		values[2 * n] = att[n];
		values[2 * n + 1] = h.rate[job] > 0 ? cap[n] : NULL;
		n++;
	}
	answer(out, n, 2, names, values);
}

static bool
fake_exec(void *host, const char *what, const char *sql, int nparams,
		  const char *const *params, RemoraRows *out)
{
	static const char *renew_cols[2] = {"ok", "cancel_requested"};
	static const char *ok_col[1] = {"ok"};
	static const char *alive_col[1] = {"alive"};
	static const char *state_col[1] = {"state"};
	static const char *cleanup_cols[4] = {"attempt_id", "job_id", "bucket",
										  "prefix"};
	Call              *c = &h.calls[h.ncalls];
	const char        *v[4];

	(void) host;
	(void) what;
	if (h.ncalls < MAX_CALLS - 1)
		h.ncalls++;
	memset(c, 0, sizeof(*c));
	function_of(sql, c->fn, sizeof(c->fn));
	for (int i = 0; i < nparams && i < 4; i++)
		snprintf(c->p[i], sizeof(c->p[i]), "%s",
				 params[i] ? params[i] : "(null)");
	c->job = nparams > 0 ? job_of(params[0]) : 0;

	if (strcmp(c->fn, "start_incarnation") == 0 && h.fail_next_start > 0)
		c->failed = h.fail_next_start-- > 0;
	else if (strcmp(c->fn, "renew") == 0)
		c->failed = h.renew[c->job] == ANSWER_EXEC_FAILS;
	else if (strcmp(c->fn, "commit") == 0 &&
			 h.commit[c->job] == ANSWER_EXEC_FAILS)
	{
		c->failed = true;
		h.commit[c->job] = ANSWER_OK; /* once */
	}
	else if (strcmp(c->fn, "fail") == 0)
		c->failed = h.fail_exec_fails[c->job];
	else if (strcmp(c->fn, "rate_limits") == 0)
		c->failed = h.rate_fails;
	if (c->failed)
		return false;

	if (strcmp(c->fn, "heartbeat") == 0)
	{
		v[0] = tf(h.alive);
		answer(out, 1, 1, alive_col, v);
	}
	else if (strcmp(c->fn, "claim") == 0)
		answer_claim(atoi(params[1]), out);
	else if (strcmp(c->fn, "renew") == 0)
	{
		v[0] = tf(h.renew[c->job] == ANSWER_OK);
		v[1] = tf(h.renew[c->job] == ANSWER_CANCELLED);
		answer(out, 1, 2, renew_cols, v);
	}
	else if (strcmp(c->fn, "commit") == 0)
	{
		v[0] = tf(h.commit[c->job] == ANSWER_OK);
		answer(out, 1, 1, ok_col, v);
	}
	else if (strcmp(c->fn, "checkpoint") == 0)
	{
		v[0] = "t";
		answer(out, 1, 1, ok_col, v);
	}
	else if (strcmp(c->fn, "commit_many") == 0)
		answer_commit_many(c, params[0], out);
	else if (strcmp(c->fn, "rate_limits") == 0)
		answer_rates(params[0], out);
	else if (strcmp(c->fn, "fail") == 0)
	{
		v[0] = "queued";
		answer(out, 1, 1, state_col, v);
	}
	else if (strcmp(c->fn, "staging_to_clean") == 0 && h.cleanup[0])
	{
		v[0] = h.cleanup;
		v[1] = "1";
		v[2] = "bkt";
		v[3] = "stage/1/";
		answer(out, 1, 4, cleanup_cols, v);
		h.cleanup[0] = '\0';
	}
	/* anything else: no rows (source_endpoint_settings: none registered) */
	return true;
}

static void
fake_log(void *host, const char *line)
{
	(void) host;
	if (getenv("RUNNER_TEST_VERBOSE"))
		printf("# %s\n", line);
	if (h.nlog < MAX_LOG)
		h.log[h.nlog++] = strdup(line);
}

static RemoraEngine *
fake_new_engine(void *host)
{
	RemoraEngineConfig cfg;
	char               endpoint[64], err[256];

	(void) host;
	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%d", h.s3_port);
	engine_config(&cfg, endpoint, true);
	cfg.allow_networks = "127.0.0.0/8";
	cfg.connect_timeout_ms = 10000;
	cfg.stall_timeout_ms = 120000;
	h.engines++;
	return remora_engine_new(&cfg, err, sizeof(err));
}

static void
fake_incarnation_begins(void *host, const char *incarnation)
{
	(void) host;
	(void) incarnation;
	h.incarnations++;
}

static RemoraAttemptView last_view;

static void *
fake_attempt_started(void *host, const RemoraAttemptView *a)
{
	(void) host;
	last_view = *a;
	h.slots[a->job_id].started++;
	if (++h.running > h.most_running)
		h.most_running = h.running;
	return &h.slots[a->job_id];
}

static void
fake_attempt_ended(void *host, void *slot)
{
	(void) host;
	((Slot *) slot)->ended++;
	h.running--;
}

static const RemoraHostOps ops = {fake_exec,
								  NULL,
								  NULL,
								  fake_log,
								  fake_new_engine,
								  fake_incarnation_begins,
								  fake_attempt_started,
								  fake_attempt_ended,
								  NULL};

/* ----------------------------------------------------------- helpers */

/* Calls of fn (for job, or any with -1) at or after index from */
static int
count_from(int from, const char *fn, int job)
{
	int n = 0;

	for (int i = from; i < h.ncalls; i++)
		n += strcmp(h.calls[i].fn, fn) == 0 &&
			 (job < 0 || h.calls[i].job == job);
	return n;
}

static int
count(const char *fn, int job)
{
	return count_from(0, fn, job);
}

/* The last call of fn for job (or any), or NULL */
static const Call *
last(const char *fn, int job)
{
	for (int i = h.ncalls - 1; i >= 0; i--)
		if (strcmp(h.calls[i].fn, fn) == 0 &&
			(job < 0 || h.calls[i].job == job))
			return &h.calls[i];
	return NULL;
}

static bool
logged_from(int from, const char *part)
{
	for (int i = from; i < h.nlog; i++)
		if (strstr(h.log[i], part))
			return true;
	return false;
}

static void
queue(int job, const char *spec)
{
	h.queue[h.queued].job = job;
	h.queue[h.queued++].spec = spec;
}

static char specs[MAX_JOBS][512];

/* An http job from url (on 127.0.0.1:port, when port is not 0) */
static const char *
http_job(int job, int port, const char *path)
{
	char url[256];

	if (port)
		snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, path);
	else
		snprintf(url, sizeof(url), "%s", path);
	snprintf(specs[job], sizeof(specs[job]),
			 "{\"source\":{\"kind\":\"http\",\"uri\":\"%s\",\"file_name\":"
			 "\"f%d.bin\"},\"bucket\":\"bkt\",\"options\":{},\"owner\":10,"
			 "\"attempt_no\":1,\"staging_prefix\":\"stage/%d/\"}",
			 url, job, job);
	return specs[job];
}

static int64_t
round_with(bool renew_now, bool claim_now)
{
	RemoraRound r = {true, false, renew_now, claim_now};

	return remora_runner_round(&r);
}

/* Wait on the engine as a host does (at most 20 ms), then one round */
static void
turn_round(void)
{
	struct pollfd p = {remora_engine_fd(remora_runner_engine()), POLLIN, 0};

	poll(&p, 1, 20);
	(void) round_with(false, false);
}

/* Rounds until cond holds, for at most 20 s */
#define ROUNDS_UNTIL(cond)                                                     \
	do                                                                         \
	{                                                                          \
		int64_t end_ = real_ms() + 20000;                                      \
		while (!(cond) && real_ms() < end_)                                    \
			turn_round();                                                      \
	} while (0)

/* The state of job's attempt, or -1 when the runner holds none */
static int
state_of(int job)
{
	RemoraAttemptView v[REMORA_RUNNER_MAX_ATTEMPTS];
	int               n = remora_runner_attempts(v, REMORA_RUNNER_MAX_ATTEMPTS);

	for (int i = 0; i < n; i++)
		if (v[i].job_id == job)
			return (int) remora_task_state(v[i].task);
	return -1;
}

/*
 * Run the engine alone (no round: nothing is committed meanwhile) until
 * the attempts of jobs a and b (0: none) succeeded, for at most 20 s.
 */
static bool
engine_until_succeeded(int a, int b)
{
	RemoraEngine *e = remora_runner_engine();
	int64_t       end = real_ms() + 20000;

	while (real_ms() < end && (state_of(a) != REMORA_TASK_SUCCEEDED ||
							   (b && state_of(b) != REMORA_TASK_SUCCEEDED)))
		turn_at_most(e, 20);
	return state_of(a) == REMORA_TASK_SUCCEEDED &&
		   (!b || state_of(b) == REMORA_TASK_SUCCEEDED);
}

/* A listener that never accepts: a source that never answers */
static int
silent_listener(int *port)
{
	struct sockaddr_in a;
	socklen_t          alen = sizeof(a);
	int                fd = socket(AF_INET, SOCK_STREAM, 0);

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *) &a, sizeof(a)) != 0 ||
		listen(fd, 64) != 0 ||
		getsockname(fd, (struct sockaddr *) &a, &alen) != 0)
		return -1;
	*port = ntohs(a.sin_port);
	return fd;
}

static int silent_port;

/* The first call of fn for job at or after from, or -1 */
static int
first_from(int from, const char *fn, int job)
{
	for (int i = from; i < h.ncalls; i++)
		if (strcmp(h.calls[i].fn, fn) == 0 && h.calls[i].job == job)
			return i;
	return -1;
}

static bool
failed_with(int job, const char *class, bool retryable)
{
	const Call *c = last("fail", job);
	char        want[64];

	snprintf(want, sizeof(want), "\"class\":\"%s\"", class);
	if (c && strstr(c->p[2], want) && strcmp(c->p[3], tf(retryable)) == 0)
		return true;
	printf("#   fail of job %d: %s (retryable %s)\n", job, c ? c->p[2] : "none",
		   c ? c->p[3] : "-");
	return false;
}

static RemoraRunnerConfig config = {
	LEASE_MS, 2, 1, "https://hub.invalid", NULL, "worker", "h1", NULL};

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

	h.fail_next_start = 1;
	(void) round_with(false, false);
	CHECK(count("start_incarnation", -1) == 1 && count("claim", -1) == 0 &&
			  count("heartbeat", -1) == 0,
		  "start_incarnation failed: nothing renewed nor claimed that round");
	(void) round_with(false, false);
	CHECK(count("start_incarnation", -1) == 2 &&
			  strcmp(last("start_incarnation", -1)->p[0],
					 remora_runner_incarnation()) == 0 &&
			  strcmp(last("start_incarnation", -1)->p[2], "worker") == 0,
		  "tried again next round: the incarnation recorded, as a worker");
	CHECK(count("heartbeat", -1) == 1 && count("claim", -1) == 1 &&
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
	CHECK(count("commit", 6) == 2 && h.slots[6].ended == 1,
		  "committed the next round");

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
	ROUNDS_UNTIL(count("fail", 13) >= 2);
	CHECK(count("fail", 13) >= 2 && h.slots[13].started == 1 &&
			  h.slots[13].ended == 0,
		  "a failure that could not be reported is reported again");
	h.fail_exec_fails[13] = false;
	ROUNDS_UNTIL(h.slots[13].ended > 0);
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
		test_incarnation, test_claim_and_renew, test_fence, test_commit,
		test_refusals,    test_sweep,           test_stop};
	int fd = silent_listener(&silent_port);

	if (fd < 0 || !fake_s3_run(tests, sizeof(tests) / sizeof(tests[0])))
		CHECK(false, "the test's servers started");
	if (fd >= 0)
		close(fd);
	for (int i = 0; i < h.nlog; i++)
		free(h.log[i]);
	return unit_done();
}
