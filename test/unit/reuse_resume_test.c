/*
 * Unit tests of a member transfer's parts (src/engine/transfer/parts.c) and of
 * a replacement's reuse of a lost attempt's upload
 * (src/engine/transfer/reuse.c): with nothing lost each byte is sent once; a
 * replacement completes the lost upload, copies its validated parts and reads
 * only the rest; with nothing valid to reuse it restarts from zero and says
 * why.  Against the source and store of reuse_fixtures.c.
 */
#include <stdlib.h>
#include <string.h>

#include "engine_fixtures.h"
#include "reuse_fixtures.h"
#include "unit.h"

static void
test_happy_path(void)
{
	RemoraEngine *e = engine_new();
	RemoraTask   *t = start(e, "a1", NULL);

	server_reset();
	CHECK(finish(e, t) == REMORA_TASK_SUCCEEDED && member_is_source(t),
		  "seven parts: the member is the source");
	CHECK(store.part_puts == 7 && store.part_bytes == OBJ_SIZE &&
			  store.part_copies == 0 && store.completes == 1,
		  "each byte sent once: %d UploadParts of %ld bytes, %d copies, %d "
		  "completion",
		  store.part_puts, store.part_bytes, store.part_copies,
		  store.completes);
	CHECK(live_uploads_of("a1") == 0, "no upload left open");
	remora_task_free(t);
	remora_engine_free(e);
}

/* A lost attempt (no longer running), then its replacement. */
static void
test_resume(void)
{
	RemoraEngine *e = engine_new();
	RemoraTask   *a = start(e, "b1", NULL);
	RemoraResume *r = until_parts(e, a, 3);
	RemoraTask   *b;
	int64_t       done = 0;

	CHECK(r != NULL && r->nparts >= 3, "a checkpoint of %d parts",
		  r ? r->nparts : 0);
	if (r == NULL)
		return;
	for (int i = 0; i < r->nparts; i++)
		done += r->parts[i].size;
	remora_task_abort(a, false); /* handed back: its upload stays */
	remora_task_free(a);
	server_reset();
	b = start(e, "b2", r);
	CHECK(finish(e, b) == REMORA_TASK_SUCCEEDED && member_is_source(b),
		  "the replacement: the member is the source");
	CHECK(store.completes == 2 && store.part_copies == r->nparts &&
			  store.source_from == done - 1 &&
			  store.part_bytes == OBJ_SIZE - done,
		  "it completed the lost upload, copied its %d parts, and read and "
		  "sent only the rest (from byte %d, %ld bytes)",
		  store.part_copies, store.source_from, store.part_bytes);
	CHECK(!remora_task_restarted(b, &(const char *){NULL}),
		  "and did not restart from zero");
	remora_task_free(b);
	remora_resume_free(r);
	remora_engine_free(e);
}

/* Give the lost upload the source's part no, as its attempt would have. */
static void
upload_part_past(const char *upload_id, int no)
{
	pthread_mutex_lock(&store.mu);
	for (int i = 0; i < store.nuploads; i++)
	{
		Upload *up = &store.uploads[i];
		size_t  first = (size_t) (no - 1) * PART;

		if (strcmp(up->id, upload_id) == 0 && up->parts[no].data == NULL)
			blob_set(&up->parts[no], store.obj + first,
					 first + PART > OBJ_SIZE ? OBJ_SIZE - first : PART);
	}
	pthread_mutex_unlock(&store.mu);
}

/*
 * The lost attempt uploaded parts past its last checkpoint, and the store
 * refuses a completion that names fewer parts than it holds (RGW): the
 * replacement lists them (in pages), completes with all, copies the
 * validated ones and reads only the rest.
 */
static void
test_parts_past_checkpoint(void)
{
	RemoraEngine *e = engine_new();
	RemoraTask   *a = start(e, "g1", NULL);
	RemoraResume *r = until_parts(e, a, 2);
	RemoraTask   *b;
	Object       *o;
	int64_t       done = 0;
	size_t        held;

	CHECK(r != NULL, "a checkpoint of parts");
	if (r == NULL)
		return;
	for (int i = 0; i < r->nparts; i++)
		done += r->parts[i].size;
	remora_task_abort(a, false);
	remora_task_free(a);
	upload_part_past(r->upload_id, r->nparts + 1);
	upload_part_past(r->upload_id, r->nparts + 2);
	server_reset();
	pthread_mutex_lock(&store.mu);
	store.subset_refused = true;
	store.max_parts = 2;
	pthread_mutex_unlock(&store.mu);
	b = start(e, "g2", r);
	CHECK(finish(e, b) == REMORA_TASK_SUCCEEDED && member_is_source(b) &&
			  !remora_task_restarted(b, &(const char *){NULL}),
		  "two parts past the checkpoint: the member is the source, not "
		  "restarted from zero");
	pthread_mutex_lock(&store.mu);
	o = object_at(r->upload_key, false);
	held = o ? o->b.len : 0;
	pthread_mutex_unlock(&store.mu);
	CHECK(store.lists >= 2 && held >= (size_t) done + 2 * PART &&
			  store.part_copies == r->nparts && store.source_from == done - 1 &&
			  store.part_bytes == OBJ_SIZE - done,
		  "%d pages listed, the lost upload completed with all its parts "
		  "(%zu bytes), %d parts copied, the source from byte %d",
		  store.lists, held, store.part_copies, store.source_from);
	CHECK(live_uploads_of("g1") == 0 && live_uploads_of("g2") == 0,
		  "no upload left open");
	remora_task_free(b);
	remora_resume_free(r);
	store.subset_refused = false;
	store.max_parts = 1000;
	remora_engine_free(e);
}

/*
 * A store that refuses x-amz-copy-source-if-match on every object an
 * upload made (Swift): each copy is refused, a HEAD shows the object
 * completed, the copy goes again without the condition, a HEAD after it
 * still shows that object, and the copied part's ETag is the part's.
 */
static void
test_condition_refused(void)
{
	RemoraEngine *e = engine_new();
	RemoraTask   *a = start(e, "i1", NULL);
	RemoraResume *r = until_parts(e, a, 2);
	RemoraTask   *b;
	Object       *o;

	CHECK(r != NULL, "a checkpoint of parts");
	if (r == NULL)
		return;
	remora_task_abort(a, false);
	remora_task_free(a);
	server_reset();
	store.slo_if_match_refused = true;
	b = start(e, "i2", r);
	CHECK(finish(e, b) == REMORA_TASK_SUCCEEDED && member_is_source(b) &&
			  !remora_task_restarted(b, &(const char *){NULL}),
		  "the condition refused: the member is the source, not restarted");
	CHECK(store.part_copies == 2 * r->nparts && store.heads >= 2 * r->nparts,
		  "each of %d parts: a copy refused, a HEAD, a copy, a HEAD (%d "
		  "copies, %d HEADs)",
		  r->nparts, store.part_copies, store.heads);
	remora_task_free(b);

	/* the object at the key replaced after the completion: no copy */
	pthread_mutex_lock(&store.mu);
	o = object_at(r->upload_key, false);
	if (o != NULL)
		blob_set(&o->b, "replaced", 8);
	pthread_mutex_unlock(&store.mu);
	server_reset();
	b = start(e, "i3", r);
	CHECK(finish(e, b) == REMORA_TASK_SUCCEEDED && member_is_source(b) &&
			  remora_task_restarted(b, &(const char *){NULL}) &&
			  store.source_from == 0,
		  "an object that is not the one completed: restarted from zero");
	remora_task_free(b);
	store.slo_if_match_refused = false;
	remora_resume_free(r);
	remora_engine_free(e);
}

/* The lost upload lists a validated part with another ETag. */
static void
test_listed_part_differs(void)
{
	RemoraEngine *e = engine_new();
	RemoraTask   *a = start(e, "h1", NULL);
	RemoraResume *r = until_parts(e, a, 2);
	RemoraTask   *b;
	const char   *why = NULL;

	CHECK(r != NULL, "a checkpoint of parts");
	if (r == NULL)
		return;
	remora_task_abort(a, false);
	remora_task_free(a);
	pthread_mutex_lock(&store.mu);
	for (int i = 0; i < store.nuploads; i++)
		if (strcmp(store.uploads[i].id, r->upload_id) == 0)
			blob_set(&store.uploads[i].parts[2], "other bytes", 11);
	pthread_mutex_unlock(&store.mu);
	server_reset();
	b = start(e, "h2", r);
	CHECK(finish(e, b) == REMORA_TASK_SUCCEEDED && member_is_source(b) &&
			  remora_task_restarted(b, &why) && why &&
			  strstr(why, "list of parts differs") != NULL &&
			  store.source_from == 0 && store.part_copies == 0,
		  "restarted from zero, nothing copied (%s)", why ? why : "");
	remora_task_free(b);
	remora_resume_free(r);
	remora_engine_free(e);
}

/*
 * The checkpoint's upload is gone (aborted), or its object no longer holds
 * the parts it validated: start from zero and say why.
 */
static void
test_nothing_to_reuse(void)
{
	RemoraEngine *e = engine_new();
	RemoraTask   *a = start(e, "e1", NULL);
	RemoraResume *r = until_parts(e, a, 2);
	RemoraTask   *b;
	const char   *why = NULL;
	Object       *o;

	CHECK(r != NULL, "a checkpoint of parts");
	if (r == NULL)
		return;
	remora_task_abort(a, true); /* the staging goes: the upload aborted */
	remora_task_free(a);
	for (int64_t end = remora_now_ms() + UNIT_WAIT_MS;
		 remora_now_ms() < end && live_uploads_of("e1") > 0;)
		turn_at_most(e, 10); /* the abort is sent */
	server_reset();
	b = start(e, "e2", r);
	CHECK(finish(e, b) == REMORA_TASK_SUCCEEDED && member_is_source(b) &&
			  remora_task_restarted(b, &why) && why &&
			  strstr(why, "no longer in the store") != NULL &&
			  store.source_from == 0 && store.part_copies == 0,
		  "upload gone: restarted from zero (%s)", why ? why : "");
	remora_task_free(b);

	/* an object at the key whose first part is not the validated one */
	pthread_mutex_lock(&store.mu);
	o = object_at(r->upload_key, true);
	blob_set(&o->b, store.obj, OBJ_SIZE);
	o->b.data[10] ^= 1;
	md5_etag(o->b.data, o->b.len, o->b.etag);
	pthread_mutex_unlock(&store.mu);
	server_reset();
	b = start(e, "e3", r);
	why = NULL;
	CHECK(finish(e, b) == REMORA_TASK_SUCCEEDED && member_is_source(b) &&
			  remora_task_restarted(b, &why) && why &&
			  strstr(why, "ETag differs") != NULL && store.source_from == 0,
		  "a part that differs: restarted from zero in a new upload (%s)",
		  why ? why : "");
	CHECK(live_uploads_of("e3") == 0,
		  "the upload the copies went to is aborted");
	remora_task_free(b);
	remora_resume_free(r);
	remora_engine_free(e);
}

/* ---------------------------------------------- the store's part limit */

/* An engine of part_size parts for a store of max_parts (0: S3's). */
static RemoraEngine *
engine_with(size_t part_size, int max_parts)
{
	RemoraEngineConfig cfg;
	char               endpoint[64], err[256];

	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%d", store.port);
	engine_config(&cfg, endpoint, true);
	cfg.part_size = part_size;
	cfg.max_upload_parts = max_parts;
	cfg.allow_networks = "127.0.0.0/8";
	/* no test here needs a stall to fire: a busy machine must not either */
	cfg.connect_timeout_ms = UNIT_WAIT_MS;
	cfg.stall_timeout_ms = UNIT_WAIT_MS;
	return remora_engine_new(&cfg, err, sizeof(err));
}

/*
 * A lost attempt of parts of PART by an engine of S3's limit (as before
 * the limit was a setting): its checkpoint, and the bytes it validated.
 */
static RemoraResume *
lost_attempt(const char *attempt, int64_t *done)
{
	RemoraEngine *e = engine_with(PART, 0);
	RemoraTask   *a = start(e, attempt, NULL);
	RemoraResume *r = until_parts(e, a, 2);

	*done = 0;
	for (int i = 0; r != NULL && i < r->nparts; i++)
		*done += r->parts[i].size;
	remora_task_abort(a, false); /* handed back: its upload stays */
	remora_task_free(a);
	remora_engine_free(e);
	return r;
}

/* ceil(n / part) */
static long
parts_for(int64_t n, int64_t part)
{
	return (long) ((n + part - 1) / part);
}

/*
 * Seven parts of PART do not fit a store of three: the object's size
 * (Content-Length) makes them 1 MiB, so the object is one PUT.
 */
static void
test_limit_grows_parts(void)
{
	RemoraEngine *e = engine_with(PART, 3);
	RemoraTask   *t;

	CHECK(e != NULL, "an engine for a store of 3 parts");
	if (e == NULL)
		return;
	server_reset();
	t = start(e, "l1", NULL);
	CHECK(finish(e, t) == REMORA_TASK_SUCCEEDED && member_is_source(t) &&
			  store.part_puts == 0 && store.completes == 0 &&
			  store.put_bytes > OBJ_SIZE,
		  "limit 3: parts of 1 MiB, so one PUT of the object and its "
		  "manifest (%d UploadParts, %ld bytes PUT)",
		  store.part_puts, store.put_bytes);
	remora_task_free(t);
	remora_engine_free(e);
	CHECK(engine_with(PART, REMORA_MAX_PARTS + 1) == NULL &&
			  engine_with(PART, -1) == NULL,
		  "a limit above 10,000 or below 1 is refused");
}

/*
 * A replacement goes on with its checkpoint's part size, not the
 * engine's (remora.part_size changed in between); a checkpoint made
 * before the limit was a setting resumes.
 */
static void
test_resume_keeps_part_size(void)
{
	int64_t       done;
	RemoraResume *r = lost_attempt("k1", &done);
	RemoraEngine *e = engine_with(2 * PART, 0);
	RemoraTask   *b;

	CHECK(r != NULL && done < OBJ_SIZE, "a checkpoint of parts");
	if (r == NULL || done >= OBJ_SIZE)
		return;
	server_reset();
	b = start(e, "k2", r);
	CHECK(finish(e, b) == REMORA_TASK_SUCCEEDED && member_is_source(b) &&
			  !remora_task_restarted(b, &(const char *){NULL}) &&
			  store.part_copies == r->nparts &&
			  store.part_puts == parts_for(OBJ_SIZE - done, PART),
		  "the rest in parts of the checkpoint's %d bytes: %d UploadParts "
		  "after %d copies",
		  PART, store.part_puts, store.part_copies);
	remora_task_free(b);
	remora_resume_free(r);
	remora_engine_free(e);
}

/*
 * The store's limit was lowered since the checkpoint: the rest goes in
 * larger parts when the parts left hold it, and the attempt restarts from
 * zero, saying why, when none is left.
 */
static void
test_resume_under_lower_limit(void)
{
	int64_t       done;
	RemoraResume *r = lost_attempt("m1", &done);
	RemoraEngine *e;
	RemoraTask   *b;
	const char   *why = NULL;

	CHECK(r != NULL && done < OBJ_SIZE, "a checkpoint of parts");
	if (r == NULL || done >= OBJ_SIZE)
		return;
	e = engine_with(PART, r->nparts + 1);
	server_reset();
	b = start(e, "m2", r);
	CHECK(finish(e, b) == REMORA_TASK_SUCCEEDED && member_is_source(b) &&
			  !remora_task_restarted(b, &(const char *){NULL}) &&
			  store.part_copies == r->nparts && store.part_puts == 1 &&
			  store.part_bytes == OBJ_SIZE - done,
		  "one part left: the rest in one part (%d UploadParts, %ld bytes)",
		  store.part_puts, store.part_bytes);
	remora_task_free(b);
	remora_resume_free(r);
	remora_engine_free(e);

	r = lost_attempt("m3", &done);
	CHECK(r != NULL, "another checkpoint of parts");
	if (r == NULL)
		return;
	e = engine_with(PART, r->nparts);
	server_reset();
	b = start(e, "m4", r);
	CHECK(finish(e, b) == REMORA_TASK_SUCCEEDED && member_is_source(b) &&
			  remora_task_restarted(b, &why) && why &&
			  strstr(why, "remora.max_upload_parts") != NULL &&
			  store.source_from == 0 && store.part_copies == 0,
		  "no part left: restarted from zero (%s)", why ? why : "");
	remora_task_free(b);
	remora_resume_free(r);
	remora_engine_free(e);
}

int
main(void)
{
	static void (*const tests[])(void) = {test_happy_path,
										  test_resume,
										  test_parts_past_checkpoint,
										  test_listed_part_differs,
										  test_condition_refused,
										  test_nothing_to_reuse,
										  test_limit_grows_parts,
										  test_resume_keeps_part_size,
										  test_resume_under_lower_limit};

	if (!reuse_run(tests, sizeof(tests) / sizeof(tests[0])))
		CHECK(false, "the test server starts");
	return unit_done();
}
