/*
 * engine_fixtures.h: what the engine's unit tests share: an engine for an
 * endpoint, one turn of its loop as a host drives it, and a minimal S3
 * store on 127.0.0.1 in a thread of the test process.
 *
 * The store holds one prefix with one object, "src/a.bin" with the content
 * "hello" (OBJ_*): ListObjectsV2, GET of the object (presigned, not
 * checked), HEAD and GET of "out/present.bin", CopyObject and PUT, and
 * multipart copies under "mpu*" ("mpufail": the second part refused;
 * "mpuamb": the completion never answered; "amb/": a PUT never answered;
 * copies from "slo/" with x-amz-copy-source-if-match refused with 412, as
 * Swift refuses them for every object a multipart upload made, and their
 * HEAD: SLO_ETAG, "slo/changed.bin" another ETag); DELETE of what is under
 * "src/", answered and counted, not done.
 * One request per connection; it counts what it is asked, by kind.
 */
#ifndef REMORA_ENGINE_FIXTURES_H
#define REMORA_ENGINE_FIXTURES_H

#include <pthread.h>
#include <stdbool.h>

#include "engine/core/engine_int.h"

#define OBJ_BODY "hello"
#define OBJ_ETAG "\"5d41402abc4b2a76b9719d911017c592\""
#define OBJ_SHA                                                                \
	"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"

/* the ETag of the slo/ objects (engine_fixtures.c) */
#define SLO_ETAG "\"0123456789abcdef0123456789abcdef-3\""

#define OBJ_SHA_OTHER                                                          \
	"0000000000000000000000000000000000000000000000000000000000000000"

typedef struct FakeS3
{
	int       fd;
	int       port;
	pthread_t thread;
	int       stop;
	int       lists; /* requests seen, by kind */
	int       gets;
	int       copies;
	int       puts;
	int  uploads; /* multipart copies: started, parts, completed, aborted */
	int  parts;
	int  completes;
	int  aborts;
	char ranges[256]; /* the parts' x-amz-copy-source-range, in order */
	int  heads;       /* HEADs of slo/ */
	int  deletes;     /* DELETEs of src/ objects (a sweep's) */
	int  refused;     /* copies from slo/ refused for their condition */
} FakeS3;

/*
 * The configuration of an engine for endpoint: test credentials, 5 MiB
 * parts, no network policy; engine_for starts one so configured.
 */
extern void engine_config(RemoraEngineConfig *cfg, const char *endpoint,
						  bool path_style);
extern RemoraEngine *engine_for(const char *endpoint, bool path_style);

/* One wait and run of the engine, as a host does it (at most 50 ms). */
extern void turn(RemoraEngine *engine);
extern void turn_at_most(RemoraEngine *engine, int max_ms);

/* Start the store on a free port (s3->port); false if it cannot listen. */
extern bool fake_s3_start(FakeS3 *s3);
extern void fake_s3_stop(FakeS3 *s3);

/*
 * Run tests, in order, against one store, with libcurl's global state set
 * up around them, as a host process has it.  False if the store could not
 * start: then nothing ran.
 */
extern bool fake_s3_run(void (*const tests[])(FakeS3 *), int ntests);

#endif
