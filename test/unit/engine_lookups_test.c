/*
 * Unit tests of the lookups a set asks its host (whether an earlier
 * attempt holds a member): queued, handed out once, waited for, answered
 * as found or not answerable, and withdrawn with a set that goes away;
 * and of a sweep's (which objects of a page to delete): the doomed ones
 * deleted, none when the host cannot answer, the lookup withdrawn with a
 * sweep that goes away; against the minimal S3 store of
 * engine_fixtures.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_fixtures.h"
#include "unit.h"

static int host_marker;

static RemoraTask *
start_prefix_set(RemoraEngine *engine)
{
	RemoraSetSpec spec;
	char          err[256];

	memset(&spec, 0, sizeof(spec));
	spec.kind = REMORA_SET_S3;
	spec.display = "s3://bkt/src/";
	spec.source_bucket = "bkt";
	spec.source_key = "src/";
	spec.bucket = "bkt";
	spec.staging_prefix = "stage/1/b/";
	spec.job_id = 1;
	spec.attempt_id = "00000000-0000-0000-0000-00000000000b";
	spec.fencing_token = 2;
	spec.earlier_attempts = true;
	spec.host_arg = &host_marker;
	return remora_set_start(engine, &spec, err, sizeof(err));
}

/* Run until the set queues a lookup (or UNIT_WAIT_MS pass). */
static bool
until_lookup(RemoraEngine *engine)
{
	for (int64_t end = remora_now_ms() + UNIT_WAIT_MS;
		 remora_now_ms() < end && engine->lookups == NULL;)
		turn(engine);
	return engine->lookups != NULL;
}

/*
 * A set runs with a lookup answered as found (the member is copied from
 * the earlier attempt: reused) or as not answerable (transferred again).
 */
static void
lookup_answered(FakeS3 *s3, bool found)
{
	RemoraEngine           *engine;
	RemoraTask             *task;
	RemoraLookup           *l;
	const RemoraTaskResult *r;
	char                    endpoint[64];
	const char             *how = found ? "found" : "not answerable";
	int copies0 = s3->copies, gets0 = s3->gets, puts0 = s3->puts;

	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%d", s3->port);
	engine = engine_for(endpoint, true);
	task = engine ? start_prefix_set(engine) : NULL;
	CHECK(task != NULL, "a set starts (%s)", how);
	if (task == NULL)
		return;
	CHECK(until_lookup(engine), "listing a page queues a lookup (%s)", how);
	CHECK(remora_engine_timeout_ms(engine) == 0,
		  "the host does not sleep while a lookup waits (%s)", how);
	l = remora_engine_lookup_next(engine);
	CHECK(l && l->n == 1 && strcmp(l->paths[0], "a.bin") == 0 &&
			  l->host_arg == &host_marker && !l->out[0].found,
		  "the lookup names the listed member and the set's host_arg (%s)",
		  how);
	CHECK(remora_engine_lookup_next(engine) == NULL,
		  "each lookup is handed out once (%s)", how);
	for (int i = 0; i < 5; i++)
		turn(engine);
	CHECK(__atomic_load_n(&s3->copies, __ATOMIC_SEQ_CST) == copies0 &&
			  __atomic_load_n(&s3->gets, __ATOMIC_SEQ_CST) == gets0 &&
			  remora_task_state(task) == REMORA_TASK_RUNNING,
		  "the page's members wait for the answer (%s)", how);
	if (l == NULL)
		return;
	if (found)
	{
		RemoraPrior *p = &l->out[0];

		p->found = true;
		snprintf(p->key, sizeof(p->key), "stage/1/a/data/a.bin");
		snprintf(p->etag, sizeof(p->etag), "%s", OBJ_ETAG);
		snprintf(p->sha256, sizeof(p->sha256), "%s", OBJ_SHA);
		p->size = 5;
		snprintf(p->source_etag, sizeof(p->source_etag), "%s", OBJ_ETAG);
	}
	else
		l->out[0].found = true; /* half-written: ok = false discards it */
	remora_engine_lookup_done(engine, l, found);
	CHECK(remora_engine_timeout_ms(engine) == 0,
		  "an answered lookup wakes the engine (%s)", how);
	for (int64_t end = remora_now_ms() + UNIT_WAIT_MS;
		 remora_now_ms() < end &&
		 remora_task_state(task) == REMORA_TASK_RUNNING;)
		turn(engine);
	r = remora_task_result(task);
	CHECK(remora_task_state(task) == REMORA_TASK_SUCCEEDED && r->members == 1,
		  "the set succeeds (%s): %s", how,
		  remora_task_state(task) == REMORA_TASK_FAILED
			  ? remora_task_error(task)->message
			  : "");
	if (found)
		CHECK(r->members_reused == 1 && s3->gets == gets0 &&
				  s3->copies == copies0 + 1,
			  "a member found in an earlier attempt is copied, not read");
	else
		CHECK(r->members_reused == 0 && s3->gets == gets0 + 1 &&
				  s3->copies == copies0 && s3->puts == puts0 + 2,
			  "a lookup the host could not answer counts as not found: the "
			  "member is read again, and being smaller than a part, streamed "
			  "(GET, then its PUT and the manifest's; no CopyObject): "
			  "%d GETs, %d copies, %d PUTs",
			  s3->gets - gets0, s3->copies - copies0, s3->puts - puts0);
	remora_task_free(task);
	remora_engine_free(engine);
}

/* A job that goes away with a lookup pending takes it along (ASan: no leak). */
static void
lookup_withdrawn(FakeS3 *s3)
{
	RemoraEngine *engine;
	RemoraTask   *task;
	char          endpoint[64];

	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%d", s3->port);
	engine = engine_for(endpoint, true);

	/* freed while the lookup is queued, not yet taken */
	task = engine ? start_prefix_set(engine) : NULL;
	CHECK(task && until_lookup(engine), "a lookup is queued");
	remora_task_free(task);
	CHECK(engine->lookups == NULL &&
			  remora_engine_lookup_next(engine) == NULL &&
			  remora_engine_timeout_ms(engine) != 0,
		  "a freed set's queued lookup is withdrawn");

	/* aborted while the host holds the lookup, then freed */
	task = start_prefix_set(engine);
	CHECK(task && until_lookup(engine) &&
			  remora_engine_lookup_next(engine) != NULL,
		  "the host takes a lookup");
	remora_task_abort(task, false);
	CHECK(engine->lookups == NULL &&
			  remora_task_state(task) == REMORA_TASK_ABORTED,
		  "an aborted set's taken lookup is withdrawn");
	remora_task_free(task);

	/* the engine freed with a job and its lookup still there */
	task = start_prefix_set(engine);
	CHECK(task && until_lookup(engine), "a lookup is queued again");
	remora_task_free(task);
	remora_engine_free(engine);
}

static void
lookup_found(FakeS3 *s3)
{
	lookup_answered(s3, true);
}

static void
lookup_not_answerable(FakeS3 *s3)
{
	lookup_answered(s3, false);
}

/* Run until the task is no longer running (or UNIT_WAIT_MS pass). */
static RemoraTaskState
until_ended(RemoraEngine *engine, RemoraTask *task)
{
	for (int64_t end = remora_now_ms() + UNIT_WAIT_MS;
		 remora_now_ms() < end &&
		 remora_task_state(task) == REMORA_TASK_RUNNING;)
		turn(engine);
	return remora_task_state(task);
}

/*
 * A sweep of src/ asks about its page (one object); answered with the
 * object doomed it is deleted, answered with nothing doomed nothing is,
 * and one the host cannot answer fails the sweep and deletes nothing.
 */
static void
sweep_answered(FakeS3 *s3, bool doom, bool ok)
{
	RemoraEngine *engine;
	RemoraTask   *task;
	RemoraLookup *l;
	char          endpoint[64], err[256];
	int           deletes0 = s3->deletes;
	const char   *how = !ok ? "not answerable" : doom ? "doomed" : "spared";

	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%d", s3->port);
	engine = engine_for(endpoint, true);
	task = remora_sweep_start(engine, "bkt", "src/", &host_marker, err,
							  sizeof(err));
	CHECK(task != NULL, "a sweep starts (%s)", how);
	if (task == NULL)
		return;
	CHECK(until_lookup(engine), "the sweep asks about its page (%s)", how);
	l = remora_engine_lookup_next(engine);
	CHECK(l && l->kind == REMORA_LOOKUP_SWEEP_PAGE && l->n == 1 &&
			  strcmp(l->objects[0].key, "src/a.bin") == 0 &&
			  l->objects[0].size == 5 && !l->doomed[0] &&
			  l->host_arg == &host_marker,
		  "the page holds the listed object, not doomed yet (%s)", how);
	CHECK(remora_engine_lookup_next(engine) == NULL,
		  "a lookup is handed out once (%s)", how);
	if (l)
	{
		l->doomed[0] = doom;
		remora_engine_lookup_done(engine, l, ok);
	}
	CHECK(until_ended(engine, task) ==
			  (ok ? REMORA_TASK_SUCCEEDED : REMORA_TASK_FAILED),
		  "the sweep %s (%s)", ok ? "succeeds" : "fails", how);
	CHECK(s3->deletes - deletes0 == (ok && doom ? 1 : 0),
		  "%d object deleted (%s)", ok && doom ? 1 : 0, how);
	remora_task_free(task);
	remora_engine_free(engine);
}

static void
sweep_doomed(FakeS3 *s3)
{
	sweep_answered(s3, true, true);
}

static void
sweep_spared(FakeS3 *s3)
{
	sweep_answered(s3, false, true);
}

static void
sweep_not_answerable(FakeS3 *s3)
{
	sweep_answered(s3, true, false);
}

/* A sweep freed while its lookup waits withdraws it. */
static void
sweep_withdrawn(FakeS3 *s3)
{
	RemoraEngine *engine;
	RemoraTask   *task;
	char          endpoint[64], err[256];

	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%d", s3->port);
	engine = engine_for(endpoint, true);
	task = remora_sweep_start(engine, "bkt", "src/", &host_marker, err,
							  sizeof(err));
	CHECK(task && until_lookup(engine), "a sweep asks about its page");
	remora_task_free(task);
	CHECK(remora_engine_lookup_next(engine) == NULL,
		  "a freed sweep's lookup is withdrawn");
	CHECK(remora_sweep_start(engine, "bkt", "src", &host_marker, err,
							 sizeof(err)) == NULL &&
			  strstr(err, "ending in '/'") != NULL,
		  "a sweep of a prefix without its '/' is refused");
	remora_engine_free(engine);
}

int
main(void)
{
	static void (*const tests[])(FakeS3 *) = {
		lookup_found, lookup_not_answerable, lookup_withdrawn, sweep_doomed,
		sweep_spared, sweep_not_answerable,  sweep_withdrawn};

	if (!fake_s3_run(tests, sizeof(tests) / sizeof(tests[0])))
		CHECK(false, "the test store starts");
	return unit_done();
}
