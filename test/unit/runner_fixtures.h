/*
 * runner_fixtures.h: the host of runner_test.c: the test's clock, a
 * scripted fake of the SQL protocol (each statement recognised by the
 * remora.* function it calls, recorded, and answered with rows), and the
 * helpers that drive rounds and read what was called.  Static definitions,
 * included by runner_test.c alone (as sigv4_fixtures.h is), so that the
 * test reads the fake's state directly.
 */
#ifndef RUNNER_FIXTURES_H
#define RUNNER_FIXTURES_H

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
	ANSWER_YIELD,     /* a renewal: ok, and asked to yield */
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
	bool      commit_exec_fails[MAX_JOBS]; /* every commit, while set */
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
	static const char *renew_cols[3] = {"ok", "cancel_requested",
										"yield_requested"};
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
	else if (strcmp(c->fn, "commit") == 0 && h.commit_exec_fails[c->job])
		c->failed = true;
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
		v[0] =
			tf(h.renew[c->job] == ANSWER_OK || h.renew[c->job] == ANSWER_YIELD);
		v[1] = tf(h.renew[c->job] == ANSWER_CANCELLED);
		v[2] = tf(h.renew[c->job] == ANSWER_YIELD);
		answer(out, 1, 3, renew_cols, v);
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

#endif /* RUNNER_FIXTURES_H */
