/*
 * set_manifest_test.c: a set's manifest within the store's part limit
 * (remora.max_upload_parts), its size known only at its end.
 *
 * A prefix of MEMBERS members with long names makes a manifest of about
 * 300 kB; with 64 kB parts (the engine's smallest, as in tests) that is
 * five parts, and a store that takes three refuses the fourth.  The set
 * must write it in three parts there (two of 64 kB, the rest as the last),
 * in as many parts as ever where the limit holds them, and in one PUT
 * where the limit is one part.  The store, in a thread of this process,
 * is just enough S3 for that: a listing of the prefix, its objects, copies
 * and PUTs, and a multipart upload that refuses part numbers above the
 * limit as a store does (400 InvalidArgument).
 */
#define _GNU_SOURCE /* strcasestr */
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <curl/curl.h>

#include "engine_fixtures.h"
#include "unit.h"

#define MEMBERS 400
#define PART    (64 * 1024)
#define NAME_AT "src/%0200d.bin" /* a member's key: long, for a long line */

typedef struct Store
{
	int       fd;
	int       port;
	pthread_t thread;
	int       stop;
	int       limit;   /* part numbers above it refused */
	int       parts;   /* UploadParts of the manifest taken */
	int       refused; /* and refused */
	int       uploads; /* multipart uploads created, completed */
	int       completes;
	int       puts; /* PUTs of the whole manifest */
	long      sizes[16];
	long      bytes; /* of the manifest, all parts or the PUT */
} Store;

static void
answer(int c, const char *status, const char *extra, const char *body)
{
	char   head[512];
	size_t blen = strlen(body);
	int    n = snprintf(head, sizeof(head),
						"HTTP/1.1 %s\r\nContent-Length: %zu\r\n%s"
						   "Connection: close\r\n\r\n",
						status, blen, extra);

	if (write(c, head, n) != n || write(c, body, blen) != (ssize_t) blen)
		return;
}

/* The prefix: MEMBERS objects of "hello", in one page. */
static void
listing(int c)
{
	size_t cap = (size_t) MEMBERS * 512 + 1024;
	char  *xml = malloc(cap);
	size_t len;

	if (xml == NULL)
		return;
	len = snprintf(xml, cap,
				   "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
				   "<ListBucketResult><Name>bkt</Name><Prefix>src/</Prefix>"
				   "<KeyCount>%d</KeyCount><IsTruncated>false</IsTruncated>",
				   MEMBERS);
	for (int i = 0; i < MEMBERS; i++)
		len += snprintf(xml + len, cap - len,
						"<Contents><Key>" NAME_AT "</Key><LastModified>"
						"2026-01-01T00:00:00.000Z</LastModified><ETag>" OBJ_ETAG
						"</ETag><Size>5</Size></Contents>",
						i);
	snprintf(xml + len, cap - len, "</ListBucketResult>");
	answer(c, "200 OK", "", xml);
	free(xml);
}

/* One request of a connection; body: its length, read and dropped. */
static void
serve_one(Store *st, int c)
{
	char   req[16384];
	size_t len = 0;
	char  *end = NULL, *cl, *pn;
	long   body = 0, have;
	bool   manifest;

	while (len < sizeof(req) - 1 && end == NULL)
	{
		ssize_t n = read(c, req + len, sizeof(req) - 1 - len);

		if (n <= 0)
			return;
		len += n;
		req[len] = '\0';
		end = strstr(req, "\r\n\r\n");
	}
	if (end == NULL)
		return;
	cl = strcasestr(req, "content-length:");
	if (cl && cl < end)
		body = strtol(cl + 15, NULL, 10);
	for (have = (long) (len - (end + 4 - req)); have < body;)
	{
		char    sink[65536];
		ssize_t n = read(c, sink, sizeof(sink));

		if (n <= 0)
			return;
		have += n;
	}
	*end = '\0';
	manifest = strstr(req, "/manifest.jsonl") != NULL;
	pn = strstr(req, "partNumber=");
	if (strncmp(req, "GET ", 4) == 0 && strstr(req, "list-type=2"))
		listing(c);
	else if (strncmp(req, "GET /bkt/src/", 13) == 0)
		answer(c, "200 OK", "ETag: " OBJ_ETAG "\r\n", OBJ_BODY);
	else if (strncmp(req, "POST ", 5) == 0 && strstr(req, "?uploads"))
	{
		__atomic_add_fetch(&st->uploads, 1, __ATOMIC_SEQ_CST);
		answer(c, "200 OK", "",
			   "<InitiateMultipartUploadResult><UploadId>m1</UploadId>"
			   "</InitiateMultipartUploadResult>");
	}
	else if (strncmp(req, "POST ", 5) == 0)
	{
		__atomic_add_fetch(&st->completes, 1, __ATOMIC_SEQ_CST);
		answer(c, "200 OK", "",
			   "<CompleteMultipartUploadResult><ETag>\"whole\"</ETag>"
			   "</CompleteMultipartUploadResult>");
	}
	else if (strncmp(req, "PUT ", 4) == 0 && manifest && pn)
	{
		long partno = strtol(pn + 11, NULL, 10);
		int  i = __atomic_fetch_add(&st->parts, 1, __ATOMIC_SEQ_CST);

		if (partno > st->limit)
		{
			__atomic_add_fetch(&st->refused, 1, __ATOMIC_SEQ_CST);
			answer(c, "400 Bad Request", "",
				   "<Error><Code>InvalidArgument</Code><Message>Part number "
				   "must be an integer between 1 and 3, inclusive</Message>"
				   "<ArgumentName>partNumber</ArgumentName></Error>");
			return;
		}
		if (i < 16)
			st->sizes[i] = body;
		__atomic_add_fetch(&st->bytes, body, __ATOMIC_SEQ_CST);
		answer(c, "200 OK", "ETag: \"0123456789abcdef0123456789abcdef\"\r\n",
			   "");
	}
	else if (strncmp(req, "PUT ", 4) == 0 && strcasestr(req, "copy-source:"))
		answer(c, "200 OK", "",
			   "<CopyObjectResult><ETag>" OBJ_ETAG
			   "</ETag></CopyObjectResult>");
	else if (strncmp(req, "PUT ", 4) == 0)
	{
		if (manifest)
		{
			__atomic_add_fetch(&st->puts, 1, __ATOMIC_SEQ_CST);
			__atomic_add_fetch(&st->bytes, body, __ATOMIC_SEQ_CST);
		}
		answer(c, "200 OK", "ETag: \"0123456789abcdef0123456789abcdef\"\r\n",
			   "");
	}
	else
		answer(c, "404 Not Found", "", "");
}

static void *
serve(void *arg)
{
	Store *st = arg;

	while (!__atomic_load_n(&st->stop, __ATOMIC_SEQ_CST))
	{
		struct pollfd p = {st->fd, POLLIN, 0};
		int           c;

		if (poll(&p, 1, 50) <= 0)
			continue;
		c = accept(st->fd, NULL, NULL);
		if (c < 0)
			continue;
		serve_one(st, c);
		close(c);
	}
	return NULL;
}

static bool
store_start(Store *st)
{
	struct sockaddr_in a;
	socklen_t          alen = sizeof(a);

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	st->fd = socket(AF_INET, SOCK_STREAM, 0);
	if (st->fd < 0 || bind(st->fd, (struct sockaddr *) &a, sizeof(a)) != 0 ||
		listen(st->fd, 64) != 0 ||
		getsockname(st->fd, (struct sockaddr *) &a, &alen) != 0)
		return false;
	st->port = ntohs(a.sin_port);
	return pthread_create(&st->thread, NULL, serve, st) == 0;
}

/*
 * The prefix copied as a set, with remora.max_upload_parts = limit: its end
 * state (the error's message in why when it failed).
 */
static RemoraTaskState
copy_set(Store *st, int limit, char *why, size_t whylen)
{
	RemoraEngineConfig cfg;
	RemoraSetSpec      spec;
	RemoraEngine      *engine;
	RemoraTask        *task;
	RemoraTaskState    state;
	char               endpoint[64], err[256];

	st->limit = limit;
	st->parts = st->refused = st->uploads = st->completes = st->puts = 0;
	st->bytes = 0;
	memset(st->sizes, 0, sizeof(st->sizes));
	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%d", st->port);
	engine_config(&cfg, endpoint, true);
	cfg.part_size = PART;
	cfg.max_upload_parts = limit;
	engine = remora_engine_new(&cfg, err, sizeof(err));
	memset(&spec, 0, sizeof(spec));
	spec.kind = REMORA_SET_S3;
	spec.display = "s3://bkt/src/";
	spec.source_bucket = "bkt";
	spec.source_key = "src/";
	spec.bucket = "bkt";
	spec.staging_prefix = "stage/1/m/";
	spec.job_id = 1;
	spec.attempt_id = "00000000-0000-0000-0000-00000000000c";
	spec.fencing_token = 1;
	task = engine ? remora_set_start(engine, &spec, err, sizeof(err)) : NULL;
	snprintf(why, whylen, "%s", task ? "" : err);
	if (task == NULL)
	{
		if (engine)
			remora_engine_free(engine);
		return REMORA_TASK_FAILED;
	}
	/* 400 members of two requests each, one at a time */
	for (int64_t end = remora_now_ms() + UNIT_WAIT_MS;
		 remora_now_ms() < end &&
		 remora_task_state(task) == REMORA_TASK_RUNNING;)
	{
		RemoraTaskCheckpoint cp;

		turn_at_most(engine, 10);
		(void) remora_task_checkpoint(task, &cp);
	}
	state = remora_task_state(task);
	if (state == REMORA_TASK_FAILED)
		snprintf(why, whylen, "%s", remora_task_error(task)->message);
	remora_task_free(task);
	remora_engine_free(engine);
	return state;
}

int
main(void)
{
	static Store st;
	char         why[512];
	long         total;

	curl_global_init(CURL_GLOBAL_DEFAULT);
	if (!store_start(&st))
	{
		CHECK(false, "the store starts");
		return unit_done();
	}

	/* as many parts as ever where the limit holds them */
	CHECK(copy_set(&st, 10000, why, sizeof(why)) == REMORA_TASK_SUCCEEDED,
		  "limit 10000: the set succeeds (%s)", why);
	total = st.bytes;
	CHECK(total > 4 * PART && st.uploads == 1 && st.completes == 1 &&
			  st.parts == (total + PART - 1) / PART && st.sizes[0] == PART &&
			  st.sizes[3] == PART,
		  "limit 10000: a manifest of %ld bytes in %d parts of 64 kB", total,
		  st.parts);

	/* three parts: two of 64 kB, the rest as the last */
	CHECK(copy_set(&st, 3, why, sizeof(why)) == REMORA_TASK_SUCCEEDED,
		  "limit 3: the set succeeds (%s)", why);
	CHECK(st.parts == 3 && st.refused == 0 && st.uploads == 1 &&
			  st.completes == 1,
		  "limit 3: the manifest in three parts (%d, %d refused)", st.parts,
		  st.refused);
	CHECK(st.sizes[0] == PART && st.sizes[1] == PART &&
			  st.sizes[2] == total - 2 * PART && st.bytes == total,
		  "limit 3: 64 kB, 64 kB, then the rest (%ld, %ld, %ld)", st.sizes[0],
		  st.sizes[1], st.sizes[2]);

	/* one part: the whole manifest in one PUT */
	CHECK(copy_set(&st, 1, why, sizeof(why)) == REMORA_TASK_SUCCEEDED,
		  "limit 1: the set succeeds (%s)", why);
	CHECK(st.puts == 1 && st.uploads == 0 && st.parts == 0 && st.bytes == total,
		  "limit 1: the manifest in one PUT (%d PUTs, %d uploads, %ld bytes)",
		  st.puts, st.uploads, st.bytes);

	__atomic_store_n(&st.stop, 1, __ATOMIC_SEQ_CST);
	pthread_join(st.thread, NULL);
	close(st.fd);
	curl_global_cleanup();
	return unit_done();
}
