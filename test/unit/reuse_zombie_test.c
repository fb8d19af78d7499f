/*
 * Unit tests of a replacement's reuse of a lost attempt's upload
 * (src/engine/transfer/reuse.c) when the lost attempt is a zombie: an engine
 * the test stops driving, as a paused worker, and its replacement (another
 * engine, with the zombie's last checkpoint), in both orders of who
 * completes the zombie's upload.  Against the source and store of
 * reuse_fixtures.c.
 */
#include <stdlib.h>
#include <string.h>

#include "engine_fixtures.h"
#include "reuse_fixtures.h"
#include "unit.h"

/*
 * A zombie goes on after its replacement took over: the replacement
 * completes the zombie's upload first, the zombie's next part is refused.
 */
static void
test_zombie_loses(void)
{
	RemoraEngine *ez = engine_new();
	RemoraEngine *er = engine_new();
	RemoraTask   *z = start(ez, "c1", NULL);
	RemoraResume *r = until_parts(ez, z, 2);
	RemoraTask   *b;

	CHECK(r != NULL, "the zombie checkpointed parts");
	if (r == NULL)
		return;
	/* the zombie is paused (its engine not driven); the replacement runs */
	server_reset();
	b = start(er, "c2", r);
	CHECK(finish(er, b) == REMORA_TASK_SUCCEEDED && member_is_source(b),
		  "zombie paused: the replacement's member is the source");
	CHECK(!remora_task_restarted(b, &(const char *){NULL}) &&
			  store.part_copies == r->nparts,
		  "it reused the zombie's %d parts", store.part_copies);
	/* the zombie wakes up */
	CHECK(finish(ez, z) == REMORA_TASK_FAILED && store.no_such_upload >= 1,
		  "the zombie, resumed: its next part is refused (NoSuchUpload), it "
		  "fails (%s)",
		  remora_task_error(z) ? remora_task_error(z)->message : "no error");
	CHECK(member_is_source(b), "the replacement's member is untouched");
	remora_task_free(z);
	remora_task_free(b);
	remora_resume_free(r);
	remora_engine_free(ez);
	remora_engine_free(er);
}

/*
 * The zombie completes its own upload before the replacement gets to it:
 * the replacement finds the object and copies the validated parts from it.
 */
static void
test_zombie_wins(void)
{
	RemoraEngine *ez = engine_new();
	RemoraEngine *er = engine_new();
	RemoraTask   *z = start(ez, "d1", NULL);
	RemoraResume *r = until_parts(ez, z, 2);
	RemoraTask   *b;

	CHECK(r != NULL, "the zombie checkpointed parts");
	if (r == NULL)
		return;
	CHECK(finish(ez, z) == REMORA_TASK_SUCCEEDED,
		  "the zombie finished its upload (its commit would be refused)");
	server_reset();
	b = start(er, "d2", r);
	CHECK(finish(er, b) == REMORA_TASK_SUCCEEDED && member_is_source(b),
		  "the replacement after it: the member is the source");
	CHECK(store.no_such_upload == 2 && store.heads >= 1 &&
			  store.part_copies == r->nparts &&
			  !remora_task_restarted(b, &(const char *){NULL}),
		  "its list of parts and completion found no upload, a HEAD found the "
		  "zombie's object, "
		  "%d parts copied from it",
		  store.part_copies);
	remora_task_free(z);
	remora_task_free(b);
	remora_resume_free(r);
	remora_engine_free(ez);
	remora_engine_free(er);
}

int
main(void)
{
	static void (*const tests[])(void) = {test_zombie_loses, test_zombie_wins};

	if (!reuse_run(tests, sizeof(tests) / sizeof(tests[0])))
		CHECK(false, "the test server starts");
	return unit_done();
}
