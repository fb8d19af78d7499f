/*
 * parts_memory_test.c: the part buffers a member transfer plans, at the
 * part size it uses.
 *
 * An adaptive count of ranged GETs is bounded so that its buffers (one
 * per connection, REMORA_PARTS_IN_FLIGHT more for uploads) stay within
 * REMORA_ADAPT_MEMORY (adapt.h).  When the store's part limit makes the
 * parts larger than remora.part_size (partsize.h), the bound is taken
 * again at that size: 20 GiB at 1,000 parts goes in parts of 21 MiB, and
 * the 32 buffers planned at 16 MiB would be 672 MiB.
 *
 * The tasks are started and looked at, never run: their source is a port
 * nothing listens on, and no turn of the loop connects to it.
 */
#include <inttypes.h>
#include <string.h>

#include <curl/curl.h>

#include "engine/transfer/transfer.h"
#include "unit.h"

#define MIB ((int64_t) 1024 * 1024)
#define GIB (1024 * MIB)

static RemoraEngine *
engine_with(int64_t part_size, int max_parts, int per_host)
{
	RemoraEngineConfig cfg;
	char               err[256];

	memset(&cfg, 0, sizeof(cfg));
	cfg.target.endpoint = "http://127.0.0.1:1";
	cfg.target.region = "eu-west-1";
	cfg.target.path_style = true;
	cfg.target.access_key_id = "AKID";
	cfg.target.secret_access_key = "SECRET";
	cfg.part_size = (size_t) part_size;
	cfg.max_upload_parts = max_parts;
	cfg.max_connections_per_host = per_host;
	cfg.allow_networks = "127.0.0.0/8";
	cfg.deny_networks = "";
	return remora_engine_new(&cfg, err, sizeof(err));
}

/* A set's member of size bytes (its size listed), with conns connections. */
static RemoraTask *
member(RemoraEngine *engine, int64_t size, int conns)
{
	RemoraTaskSpec spec;
	char           err[256];

	memset(&spec, 0, sizeof(spec));
	spec.source_url = "http://127.0.0.1:1/src/obj.bin";
	spec.file_name = "obj.bin";
	spec.bucket = "bkt";
	spec.staging_prefix = "stage/1/a/";
	spec.job_id = 1;
	spec.attempt_id = "00000000-0000-0000-0000-00000000000a";
	spec.fencing_token = 1;
	spec.connections = conns;
	spec.size_known = true;
	spec.expected_size = size;
	spec.no_manifest = true;
	return remora_task_start(engine, &spec, err, sizeof(err));
}

/*
 * One transfer's plan: its part size is part, and its buffers at that
 * size stay within REMORA_ADAPT_MEMORY (an adaptive count) or are the
 * pinned count's (nbufs).
 */
static void
expect(const char *name, int64_t part_size, int max_parts, int per_host,
	   int64_t size, int conns, int64_t part, int nbufs)
{
	RemoraEngine   *engine = engine_with(part_size, max_parts, per_host);
	RemoraTask     *task = engine ? member(engine, size, conns) : NULL;
	const Transfer *t = (const Transfer *) task;
	int             ahead = 0;

	CHECK(task != NULL && remora_task_state(task) == REMORA_TASK_RUNNING,
		  "%s: the transfer starts", name);
	if (task == NULL || remora_task_state(task) != REMORA_TASK_RUNNING)
		goto done;
	CHECK((int64_t) t->part_size == part,
		  "%s: parts of %" PRId64 " MiB (%zu bytes)", name, part / MIB,
		  t->part_size);
	CHECK(t->nbufs == nbufs, "%s: %d buffers (%d)", name, nbufs, t->nbufs);
	if (!t->adaptive)
		goto done;
	/* the floor: no source is read with fewer than REMORA_ADAPT_START */
	CHECK((int64_t) t->nbufs * (int64_t) t->part_size <= REMORA_ADAPT_MEMORY ||
			  t->adapt.max == REMORA_ADAPT_START,
		  "%s: its buffers within REMORA_ADAPT_MEMORY (%" PRId64 " MiB)", name,
		  (int64_t) t->nbufs * (int64_t) t->part_size / MIB);
	CHECK(t->adapt.max + REMORA_PARTS_IN_FLIGHT == t->nbufs &&
			  t->adapt.max ==
				  remora_adapt_bound(per_host, (int64_t) t->part_size),
		  "%s: at most %d connections, the bound at its part size (%d)", name,
		  remora_adapt_bound(per_host, (int64_t) t->part_size), t->adapt.max);
	CHECK(t->connections <= t->adapt.max && t->adapt.n <= t->adapt.max,
		  "%s: it starts within the bound (%d)", name, t->connections);
	/* the ranges' buffers are allocated on first use */
	for (int i = REMORA_PARTS_IN_FLIGHT + 1; i < t->nbufs; i++)
		ahead += t->bufs[i].data != NULL;
	CHECK(ahead == 0, "%s: no range's buffer allocated ahead (%d)", name,
		  ahead);
done:
	if (task)
		remora_task_free(task);
	if (engine)
		remora_engine_free(engine);
}

int
main(void)
{
	int adapt = REMORA_CONNECTIONS_ADAPT(REMORA_ADAPT_START);

	curl_global_init(CURL_GLOBAL_DEFAULT);

	/* the parts S3's limit holds: 16 MiB, 30 + 2 buffers = 512 MiB */
	expect("20 GiB, limit 10000", 16 * MIB, 10000, 0, 20 * GIB, adapt, 16 * MIB,
		   32);
	/*
	 * Swift's 1,000 parts: 21 MiB, so 512 / 21 - 2 = 22 connections and
	 * 24 buffers (504 MiB), not the 32 (672 MiB) planned at 16 MiB
	 */
	expect("20 GiB, limit 1000", 16 * MIB, 1000, 0, 20 * GIB, adapt, 21 * MIB,
		   24);
	/* 100 GiB at 1,000: parts of 103 MiB, the floor of four connections */
	expect("100 GiB, limit 1000", 16 * MIB, 1000, 0, 100 * GIB, adapt,
		   103 * MIB, REMORA_ADAPT_START + REMORA_PARTS_IN_FLIGHT);
	/* a per-host cap below the memory bound is kept */
	expect("20 GiB, limit 1000, 8 per host", 16 * MIB, 1000, 8, 20 * GIB, adapt,
		   21 * MIB, 8 + REMORA_PARTS_IN_FLIGHT);
	/* a pinned count is the job's: its buffers as it asked */
	expect("20 GiB, limit 1000, 8 pinned", 16 * MIB, 1000, 0, 20 * GIB, 8,
		   21 * MIB, 8 + REMORA_PARTS_IN_FLIGHT);

	curl_global_cleanup();
	return unit_done();
}
