/*
 * Unit tests of the engine: S3 addressing (path and virtual-host style,
 * key encoding), the resumable SHA-256 state, the ETags and XML answers of
 * different stores' dialects, and the lookups a set asks its host, against
 * a minimal S3 store on 127.0.0.1 in a thread of this process.
 */
#define _GNU_SOURCE /* strcasestr */
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <curl/curl.h>

#include "engine/engine_int.h"
#include "engine/export_int.h"
#include "unit.h"

static RemoraEngine *
engine_for(const char *endpoint, bool path_style)
{
	RemoraEngineConfig cfg;
	char               err[256];

	memset(&cfg, 0, sizeof(cfg));
	cfg.target.endpoint = endpoint;
	cfg.target.region = "eu-west-1";
	cfg.target.path_style = path_style;
	cfg.target.access_key_id = "AKID";
	cfg.target.secret_access_key = "SECRET";
	cfg.part_size = 5 * 1024 * 1024;
	cfg.allow_networks = "";
	cfg.deny_networks = "";
	return remora_engine_new(&cfg, err, sizeof(err));
}

static void
address(RemoraEngine *e, const char *bucket, const char *key, const RemoraKV *q,
		int nq, const char *url, const char *host, const char *path)
{
	S3Address a;

	CHECK(remora_s3_address(&e->target, bucket, key, q, nq, &a),
		  "address of %s", key ? key : "(bucket)");
	CHECK_STR(a.url, url, "url of %s", key ? key : "(bucket)");
	CHECK_STR(a.host, host, "host of %s", key ? key : "(bucket)");
	CHECK_STR(a.path, path, "signed path of %s", key ? key : "(bucket)");
	remora_s3_address_free(&a);
}

static void
test_addressing(void)
{
	RemoraEngine      *p = engine_for("http://127.0.0.1:9000", true);
	RemoraEngine      *v = engine_for("https://s3.example.com", false);
	RemoraEngine      *aws = engine_for("", false);
	RemoraKV           list[2] = {{"list-type", "2"}, {"prefix", "a b/c"}};
	RemoraKV           uploads[1] = {{"uploads", ""}};
	char               err[256];
	RemoraEngineConfig bad;

	CHECK(p && v && aws, "engines build");
	address(p, "bkt", "dir/a b+c~.bin", NULL, 0,
			"http://127.0.0.1:9000/bkt/dir/a%20b%2Bc~.bin", "127.0.0.1:9000",
			"/bkt/dir/a b+c~.bin");
	address(p, "bkt", NULL, list, 2,
			"http://127.0.0.1:9000/bkt?list-type=2&prefix=a%20b%2Fc",
			"127.0.0.1:9000", "/bkt");
	address(p, "bkt", "k", uploads, 1, "http://127.0.0.1:9000/bkt/k?uploads",
			"127.0.0.1:9000", "/bkt/k");
	address(v, "bkt", "d/\xc3\xa9.bin", NULL, 0,
			"https://bkt.s3.example.com/d/%C3%A9.bin", "bkt.s3.example.com",
			"/d/\xc3\xa9.bin");
	address(v, "bkt", NULL, list, 2,
			"https://bkt.s3.example.com/?list-type=2&prefix=a%20b%2Fc",
			"bkt.s3.example.com", "/");
	address(aws, "bkt", "x", NULL, 0,
			"https://bkt.s3.eu-west-1.amazonaws.com/x",
			"bkt.s3.eu-west-1.amazonaws.com", "/x");
	remora_engine_free(p);
	remora_engine_free(v);
	remora_engine_free(aws);

	memset(&bad, 0, sizeof(bad));
	bad.target.endpoint = "ftp://example.com";
	bad.target.region = "r";
	CHECK(remora_engine_new(&bad, err, sizeof(err)) == NULL &&
			  strstr(err, "http") != NULL,
		  "a non-http endpoint is refused: %s", err);
	bad.target.endpoint = "http://h";
	bad.allow_networks = "not-a-network";
	CHECK(remora_engine_new(&bad, err, sizeof(err)) == NULL,
		  "a bad network list is refused: %s", err);
}

static void
test_sha256_state(void)
{
	RemoraSha256 *a = remora_sha256_new();
	RemoraSha256 *b = remora_sha256_new();
	char         *data = malloc(3 * 65536 + 17);
	char          whole[65], resumed[65], saved[200];

	for (int i = 0; i < 3 * 65536 + 17; i++)
		data[i] = (char) (i * 7 + 3);
	remora_sha256_update(a, data, 3 * 65536 + 17);
	remora_sha256_final_hex(a, whole);

	/* hash two "segments", save, restore into another, hash the rest */
	remora_sha256_reset(a);
	remora_sha256_update(a, data, 2 * 65536);
	CHECK(remora_sha256_save(a, saved, sizeof(saved)),
		  "state saved at a block boundary");
	CHECK(remora_sha256_restore(b, saved), "state restored");
	CHECK(remora_sha256_bytes(b) == 2 * 65536,
		  "restored length is the bytes hashed");
	remora_sha256_update(b, data + 2 * 65536, 65536 + 17);
	remora_sha256_final_hex(b, resumed);
	CHECK_STR(resumed, whole, "a resumed hash equals the whole hash");

	/* final does not disturb the running state */
	remora_sha256_final_hex(a, resumed);
	remora_sha256_update(a, data + 2 * 65536, 65536 + 17);
	remora_sha256_final_hex(a, resumed);
	CHECK_STR(resumed, whole, "final_hex leaves the state usable");

	remora_sha256_reset(a);
	remora_sha256_update(a, data, 100);
	CHECK(!remora_sha256_save(a, saved, sizeof(saved)),
		  "no save inside a block");
	CHECK(!remora_sha256_restore(b, "s1:zz"), "a malformed state is refused");
	CHECK(!remora_sha256_restore(b, "s2:"
									"000000000000000000000000000000000000000000"
									"0000000000000000000000:0000000000000200"),
		  "an unknown version is refused");
	CHECK(!remora_sha256_restore(b, "s1:"
									"000000000000000000000000000000000000000000"
									"0000000000000000000000:0000000000000201"),
		  "a length that is not whole blocks is refused");
	remora_sha256_free(a);
	remora_sha256_free(b);
	free(data);
}

/* ETags as AWS, the test server and RGW write them */
static void
test_etags(void)
{
	char        c[REMORA_ETAG_MAX];
	const char *parts[2] = {"\"5d41402abc4b2a76b9719d911017c592\"",
							"7D793037A0760186574B0282F2F435E7"};
	const char *one[1] = {"\"5d41402abc4b2a76b9719d911017c592-3\""};

	remora_etag_canon("764efa883dda1e11db47671c4a3bbd9e", c, sizeof(c));
	CHECK_STR(c, "\"764efa883dda1e11db47671c4a3bbd9e\"",
			  "an unquoted ETag (RGW's CopyObjectResult) gets its quotes");
	remora_etag_canon("&quot;764e&quot;", c, sizeof(c));
	CHECK_STR(c, "\"764e\"", "an entity-quoted ETag is quoted plainly");
	remora_etag_canon(" \"764e\" ", c, sizeof(c));
	CHECK_STR(c, "\"764e\"", "whitespace around an ETag is dropped");
	remora_etag_canon("", c, sizeof(c));
	CHECK_STR(c, "", "an empty ETag stays empty");
	remora_etag_canon("\"\"", c, sizeof(c));
	CHECK_STR(c, "", "a pair of quotes alone is no ETag");
	remora_etag_canon("\"0123456789\"", c, 8);
	CHECK_STR(c, "",
			  "an ETag too long for the buffer is no ETag, not a "
			  "truncated one");
	CHECK(remora_etag_equal("\"764EFA\"", "764efa"),
		  "equality ignores quotes and the case of hex digits");
	CHECK(!remora_etag_equal("\"764efa\"", "\"764efb\""),
		  "different ETags differ");
	CHECK(!remora_etag_equal("", "") && !remora_etag_equal(NULL, "\"\""),
		  "two missing ETags prove nothing, so they are not equal");
	CHECK(remora_etag_is_md5("\"5d41402abc4b2a76b9719d911017c592\"") &&
			  remora_etag_is_md5("5D41402ABC4B2A76B9719D911017C592"),
		  "an MD5 ETag is recognised, quoted or not");
	CHECK(!remora_etag_is_md5("\"5d41402abc4b2a76b9719d911017c592-2\"") &&
			  !remora_etag_is_md5("\"5d41402abc4b2a76b9719d911017c59\""),
		  "a multipart ETag or a short one is not an MD5");
	CHECK(remora_etag_of_parts(parts, 2, c, sizeof(c)) &&
			  strcmp(c, "\"065947336a2f2a95ba8899f3675c3be6-2\"") == 0,
		  "the ETag of an object completed from two parts (known answer)");
	CHECK(
		remora_etag_is_multipart("\"065947336a2f2a95ba8899f3675c3be6-2\"", 2) &&
			!remora_etag_is_multipart("\"065947336a2f2a95ba8899f3675c3be6-2\"",
									  3) &&
			!remora_etag_is_multipart("\"065947336a2f2a95ba8899f3675c3be6\"",
									  1) &&
			!remora_etag_is_multipart("\"06594733-2\"", 2),
		"the S3 shape of a completed upload is told by its part count");
	CHECK(remora_etag_fits_parts("\"065947336a2f2a95ba8899f3675c3be6-2\"",
								 parts, 2) &&
			  !remora_etag_fits_parts("\"165947336a2f2a95ba8899f3675c3be6-2\"",
									  parts, 2) &&
			  remora_etag_fits_parts("\"5d41402abc4b2a76b9719d911017c592\"",
									 parts, 2),
		  "a completed ETag of S3's shape must be the parts'; another shape "
		  "is not judged");
	CHECK(!remora_etag_of_parts(one, 1, c, sizeof(c)),
		  "no completed-object ETag from parts whose ETags are not MD5s");
}

static void
answer(const char *body, const char *root, const char *want, bool retryable,
	   const char *name)
{
	Request         req;
	RemoraTaskError err;
	char           *got;

	memset(&req, 0, sizeof(req));
	req.status = 200;
	req.body = (char *) body;
	req.body_len = strlen(body);
	got = remora_s3_answer_etag(&req, root, &err, "testing");
	if (want)
		CHECK_STR(got, want, "%s", name);
	else
		CHECK(got == NULL && err.retryable == retryable &&
				  strncmp(err.message, "testing: ", 9) == 0,
			  "%s (%s)", name, err.message);
	free(got);
}

static void
test_answers(void)
{
	answer("<CompleteMultipartUploadResult><Bucket>b</Bucket><ETag></ETag>"
		   "</CompleteMultipartUploadResult>",
		   "CompleteMultipartUploadResult", "", false,
		   "RGW's completion without an ETag: empty, to be HEADed");
	answer("<CompleteMultipartUploadResult xmlns=\"http://s3.amazonaws.com/"
		   "doc/2006-03-01/\"><ETag>&quot;3858f62230ac3c915f300c664312c11f-9"
		   "&quot;</ETag></CompleteMultipartUploadResult>",
		   "CompleteMultipartUploadResult",
		   "\"3858f62230ac3c915f300c664312c11f-9\"", false,
		   "AWS's completion: the entity-quoted ETag, canonical");
	answer("<CopyObjectResult><LastModified>2026-01-01T00:00:00.000Z"
		   "</LastModified><ETag>764efa883dda1e11db47671c4a3bbd9e</ETag>"
		   "</CopyObjectResult>",
		   "CopyObjectResult", "\"764efa883dda1e11db47671c4a3bbd9e\"", false,
		   "RGW's unquoted CopyObjectResult ETag, canonical");
	answer("<Error><Code>InternalError</Code><Message>We encountered an "
		   "internal error.</Message></Error>",
		   "CopyPartResult", NULL, true,
		   "200 with an <Error> body is a retryable failure");
	answer("<Error><Code>AccessDenied</Code><Message></Message></Error>",
		   "CopyObjectResult", NULL, true,
		   "200 with any <Error> body is a failure, judged as a 500");
	answer("<ListBucketResult/>", "CopyObjectResult", NULL, true,
		   "an answer of another kind is a failure");
	answer("not xml", "CopyObjectResult", NULL, true,
		   "an answer that is not XML is a failure");
}

/* ------------------------------------------------------------ lookups */

/*
 * A minimal S3 store for one prefix holding one object, "src/a.bin" with
 * the content "hello": ListObjectsV2, GET of the object (presigned, not
 * checked), CopyObject and PUT.  One request per connection.
 */
#define OBJ_BODY "hello"
#define OBJ_ETAG "\"5d41402abc4b2a76b9719d911017c592\""
#define OBJ_SHA                                                                \
	"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"

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
} FakeS3;

static void
answer_with(int c, const char *status, const char *etag, const char *body)
{
	char head[512];
	int  n = snprintf(head, sizeof(head),
					  "HTTP/1.1 %s\r\nContent-Length: %zu\r\n%s%s%s"
					   "Connection: close\r\n\r\n",
					  status, strlen(body), etag ? "ETag: " : "",
                     etag ? etag : "", etag ? "\r\n" : "");

	if (write(c, head, n) != n ||
		write(c, body, strlen(body)) != (ssize_t) strlen(body))
		return;
}

static void
serve_one(FakeS3 *s3, int c)
{
	char   req[16384];
	size_t len = 0;
	char  *end = NULL;
	char  *cl;
	long   body = 0;

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
	/* the body, read and dropped */
	for (long have = (long) (len - (end + 4 - req)); have < body;)
	{
		char    sink[4096];
		ssize_t n = read(c, sink, sizeof(sink));

		if (n <= 0)
			return;
		have += n;
	}
	if (strncmp(req, "GET ", 4) == 0 && strstr(req, "list-type=2") &&
		strstr(req, "list-type=2") < end)
	{
		__atomic_add_fetch(&s3->lists, 1, __ATOMIC_SEQ_CST);
		answer_with(c, "200 OK", NULL,
					"<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
					"<ListBucketResult><Name>bkt</Name><Prefix>src/</Prefix>"
					"<KeyCount>1</KeyCount><IsTruncated>false</IsTruncated>"
					"<Contents><Key>src/a.bin</Key><LastModified>"
					"2026-01-01T00:00:00.000Z</LastModified><ETag>" OBJ_ETAG
					"</ETag><Size>5</Size></Contents></ListBucketResult>");
	}
	else if (strncmp(req, "PUT /bkt/amb/", 13) == 0)
		return; /* read, and no answer at all */
	else if (strncmp(req, "POST /bkt/mpu", 13) == 0 &&
			 strstr(req, "?uploads") != NULL && strstr(req, "?uploads") < end)
	{
		__atomic_add_fetch(&s3->uploads, 1, __ATOMIC_SEQ_CST);
		answer_with(c, "200 OK", NULL,
					"<InitiateMultipartUploadResult><Bucket>bkt</Bucket>"
					"<UploadId>up-1</UploadId>"
					"</InitiateMultipartUploadResult>");
	}
	else if (strncmp(req, "PUT /bkt/mpu", 12) == 0 &&
			 strstr(req, "partNumber=") != NULL)
	{
		const char *r = strcasestr(req, "x-amz-copy-source-range: ");
		size_t      have = strlen(s3->ranges);

		__atomic_add_fetch(&s3->parts, 1, __ATOMIC_SEQ_CST);
		if (r && r < end && have < sizeof(s3->ranges) - 1)
			snprintf(s3->ranges + have, sizeof(s3->ranges) - have, "%.*s;",
					 (int) strcspn(r + 25, "\r"), r + 25);
		if (strncmp(req, "PUT /bkt/mpufail/", 17) == 0 &&
			strstr(req, "partNumber=2&") != NULL)
			answer_with(c, "403 Forbidden", NULL,
						"<Error><Code>AccessDenied</Code></Error>");
		else
			answer_with(
				c, "200 OK", NULL,
				"<CopyPartResult><ETag>\"5f363e0e58a95f06cbe9bbc662c5dfb6"
				"\"</ETag></CopyPartResult>");
	}
	else if (strncmp(req, "POST /bkt/mpu", 13) == 0)
	{
		__atomic_add_fetch(&s3->completes, 1, __ATOMIC_SEQ_CST);
		if (strncmp(req, "POST /bkt/mpuamb/", 17) == 0)
			return; /* completed, and no answer at all */
		answer_with(
			c, "200 OK", NULL,
			"<CompleteMultipartUploadResult><ETag>\"0123456789abcdef0123"
			"456789abcdef-3\"</ETag></CompleteMultipartUploadResult>");
	}
	else if (strncmp(req, "DELETE /bkt/mpu", 15) == 0)
	{
		__atomic_add_fetch(&s3->aborts, 1, __ATOMIC_SEQ_CST);
		answer_with(c, "204 No Content", NULL, "");
	}
	else if (strncmp(req, "GET /bkt/out/present.bin ", 25) == 0)
		answer_with(c, "200 OK", OBJ_ETAG, OBJ_BODY);
	else if (strncmp(req, "GET /bkt/src/a.bin", 18) == 0)
	{
		__atomic_add_fetch(&s3->gets, 1, __ATOMIC_SEQ_CST);
		answer_with(c, "200 OK", OBJ_ETAG, OBJ_BODY);
	}
	else if (strncmp(req, "HEAD /bkt/out/present.bin ", 26) == 0)
	{
		static const char head[] = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"
								   "ETag: " OBJ_ETAG "\r\n"
								   "x-amz-version-id: v7\r\n"
								   "Connection: close\r\n\r\n";

		if (write(c, head, sizeof(head) - 1) != (ssize_t) sizeof(head) - 1)
			return;
	}
	else if (strncmp(req, "PUT ", 4) == 0 &&
			 strcasestr(req, "x-amz-copy-source:") != NULL)
	{
		__atomic_add_fetch(&s3->copies, 1, __ATOMIC_SEQ_CST);
		answer_with(c, "200 OK", NULL,
					"<CopyObjectResult><ETag>" OBJ_ETAG
					"</ETag></CopyObjectResult>");
	}
	else if (strncmp(req, "PUT ", 4) == 0)
	{
		__atomic_add_fetch(&s3->puts, 1, __ATOMIC_SEQ_CST);
		answer_with(c, "200 OK", "\"0123456789abcdef0123456789abcdef\"", "");
	}
	else
		answer_with(c, "404 Not Found", NULL, "");
}

static void *
serve(void *arg)
{
	FakeS3 *s3 = arg;

	while (!__atomic_load_n(&s3->stop, __ATOMIC_SEQ_CST))
	{
		struct pollfd p = {s3->fd, POLLIN, 0};
		int           c;

		if (poll(&p, 1, 50) <= 0)
			continue;
		c = accept(s3->fd, NULL, NULL);
		if (c < 0)
			continue;
		serve_one(s3, c);
		close(c);
	}
	return NULL;
}

static bool
fake_s3_start(FakeS3 *s3)
{
	struct sockaddr_in a;
	socklen_t          alen = sizeof(a);

	memset(s3, 0, sizeof(*s3));
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	s3->fd = socket(AF_INET, SOCK_STREAM, 0);
	if (s3->fd < 0 || bind(s3->fd, (struct sockaddr *) &a, sizeof(a)) != 0 ||
		listen(s3->fd, 16) != 0 ||
		getsockname(s3->fd, (struct sockaddr *) &a, &alen) != 0)
		return false;
	s3->port = ntohs(a.sin_port);
	return pthread_create(&s3->thread, NULL, serve, s3) == 0;
}

static void
fake_s3_stop(FakeS3 *s3)
{
	__atomic_store_n(&s3->stop, 1, __ATOMIC_SEQ_CST);
	pthread_join(s3->thread, NULL);
	close(s3->fd);
}

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

/* One wait and run of the engine, as a host does it (at most 50 ms). */
static void
turn(RemoraEngine *engine)
{
	struct pollfd p = {remora_engine_fd(engine), POLLIN, 0};
	long          t = remora_engine_timeout_ms(engine);

	poll(&p, 1, t < 0 || t > 50 ? 50 : (int) t);
	remora_engine_run(engine);
}

/* Run until the set queues a lookup (or 5 s pass). */
static bool
until_lookup(RemoraEngine *engine)
{
	for (int i = 0; i < 100 && engine->lookups == NULL; i++)
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
	for (int i = 0; i < 100 && remora_task_state(task) == REMORA_TASK_RUNNING;
		 i++)
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

/*
 * The host of an export in these tests: it answers the pages the export
 * asks for from members (sorted by path, as strcmp orders them), as
 * remora.export_members would: up to max after the path asked; refuse:
 * hands them back not ok; short_by: fewer than asked by that many.
 */
typedef struct ExportHost
{
	const RemoraExportMember *members;
	int                       n;
	bool                      refuse;
	int                       short_by;
	int                       pages;      /* lookups answered */
	int                       wrong;      /* lookups not as asked */
	int                       max_asked;  /* the largest page asked for */
	int                       max_window; /* most members the export held */
} ExportHost;

static void
answer_pages(RemoraEngine *engine, ExportHost *h)
{
	RemoraLookup *l;
	char          err[256];

	while ((l = remora_engine_lookup_next(engine)) != NULL)
	{
		int  i = 0, added = 0;
		bool ok = !h->refuse;

		if (l->kind != REMORA_LOOKUP_EXPORT_PAGE || l->host_arg != h ||
			l->max < 1 || l->max > REMORA_EXPORT_PAGE)
			h->wrong++;
		if (l->max > h->max_asked)
			h->max_asked = l->max;
		while (l->after && i < h->n &&
			   strcmp(h->members[i].path, l->after) <= 0)
			i++;
		for (; ok && i < h->n && added < l->max - h->short_by; i++, added++)
			ok = remora_lookup_add_member(l, &h->members[i], err, sizeof(err));
		h->pages++;
		remora_engine_lookup_done(engine, l, ok);
	}
}

/* Run an export to its end; its refs by checkpoint into *nrefs. */
static RemoraTaskState
run_export_host(RemoraEngine *engine, RemoraExportSpec *spec, ExportHost *h,
				int *nrefs, char *outcome, size_t outlen)
{
	char                 err[256];
	RemoraTask          *task;
	RemoraTaskCheckpoint cp;
	RemoraTaskState      st;
	int64_t              bytes = 0;

	for (int i = 0; i < h->n; i++)
		bytes += h->members[i].size;
	spec->members_total = h->n;
	spec->bytes_total = bytes;
	spec->host_arg = h;
	task = remora_export_start(engine, spec, err, sizeof(err));
	*nrefs = 0;
	outcome[0] = '\0';
	if (task == NULL)
		return REMORA_TASK_ABORTED;
	for (int i = 0; i < 20000 && remora_task_state(task) == REMORA_TASK_RUNNING;
		 i++)
	{
		turn(engine);
		answer_pages(engine, h);
		if (remora_task_checkpoint(task, &cp))
			*nrefs += cp.nrefs;
	}
	if (remora_task_checkpoint(task, &cp))
		*nrefs += cp.nrefs;
	st = remora_task_state(task);
	h->max_window = ((Export *) task)->held_max;
	if (st == REMORA_TASK_FAILED)
		snprintf(outcome, outlen, "%s: %s", remora_task_error(task)->class,
				 remora_task_error(task)->message);
	remora_task_free(task);
	return st;
}

static RemoraTaskState
run_export(RemoraEngine *engine, RemoraExportSpec *spec,
		   const RemoraExportMember *members, int n, int *nrefs, char *outcome,
		   size_t outlen)
{
	ExportHost h;

	memset(&h, 0, sizeof(h));
	h.members = members;
	h.n = n;
	return run_export_host(engine, spec, &h, nrefs, outcome, outlen);
}

/*
 * An export copies a missing member, finds a present one, refuses a
 * present one with other content under if_exists = fail, and a verify
 * reports what is not there.
 */
static void
test_export(FakeS3 *s3)
{
	RemoraEngine      *engine;
	char               endpoint[64];
	char               why[700];
	int                nrefs;
	int                copies0 = s3->copies;
	RemoraExportMember m[2] = {{"new.bin", "bkt", "stage/1/a/data/new.bin",
								OBJ_ETAG, OBJ_SHA, 5, NULL, false},
							   {"present.bin", "bkt",
								"stage/1/a/data/present.bin", OBJ_ETAG, OBJ_SHA,
								5, NULL, false}};
	RemoraExportSpec spec = {"bkt",   "out", REMORA_IF_EXISTS_FAIL, false, 0, 0,
							 OBJ_SHA, NULL};
	const RemoraExportMember *ms = m;
	int                       nm = 2;

	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%d", s3->port);
	engine = engine_for(endpoint, true);
	CHECK(engine != NULL, "an engine for the export starts");
	if (engine == NULL)
		return;
	CHECK(run_export(engine, &spec, ms, nm, &nrefs, why, sizeof(why)) ==
				  REMORA_TASK_SUCCEEDED &&
			  nrefs == 2 && s3->copies == copies0 + 1,
		  "an export copies the missing member and finds the present one: %s",
		  why);

	m[1].etag = "\"00000000000000000000000000000000\"";
	CHECK(run_export(engine, &spec, ms, nm, &nrefs, why, sizeof(why)) ==
				  REMORA_TASK_FAILED &&
			  strncmp(why, "exists:", 7) == 0,
		  "if_exists = fail refuses a key with other content: %s", why);

	/*
	 * overwrite and skip_identical write over other content only where the
	 * host says the export's owner may (an administrator, or the key's
	 * publisher); otherwise they are refused like fail, and nothing is sent
	 */
	ms = &m[1];
	nm = 1;
	copies0 = s3->copies;
	spec.if_exists = REMORA_IF_EXISTS_OVERWRITE;
	CHECK(run_export(engine, &spec, ms, nm, &nrefs, why, sizeof(why)) ==
				  REMORA_TASK_FAILED &&
			  strncmp(why, "exists:", 7) == 0 &&
			  strstr(why, "\"out/present.bin\"") != NULL &&
			  strstr(why, "(if_exists is overwrite)") != NULL &&
			  s3->copies == copies0,
		  "overwrite without may_overwrite refuses other content, copying "
		  "nothing: %s",
		  why);
	spec.if_exists = REMORA_IF_EXISTS_SKIP_IDENTICAL;
	CHECK(run_export(engine, &spec, ms, nm, &nrefs, why, sizeof(why)) ==
				  REMORA_TASK_FAILED &&
			  strncmp(why, "exists:", 7) == 0 && s3->copies == copies0,
		  "and so does skip_identical: %s", why);
	m[1].may_overwrite = true;
	run_export(engine, &spec, ms, nm, &nrefs, why, sizeof(why));
	CHECK(s3->copies == copies0 + 1,
		  "with may_overwrite, skip_identical sends the copy over it");
	spec.if_exists = REMORA_IF_EXISTS_FAIL;
	ms = m;
	nm = 2;

	m[1].etag = OBJ_ETAG;
	spec.verify = true;
	CHECK(run_export(engine, &spec, ms, nm, &nrefs, why, sizeof(why)) ==
				  REMORA_TASK_FAILED &&
			  strstr(why, "verify_mismatch: 1 of 2") == why &&
			  strstr(why, "out/new.bin (missing)") != NULL && nrefs == 1,
		  "a verify names the member that is not there: %s", why);

	/* an ETag that cannot tell (a multipart member's copy): read and hash */
	ms = &m[1];
	nm = 1;
	m[1].etag = "\"0123456789abcdef0123456789abcdef-2\"";
	CHECK(run_export(engine, &spec, ms, nm, &nrefs, why, sizeof(why)) ==
				  REMORA_TASK_SUCCEEDED &&
			  nrefs == 1,
		  "a verify hashes a key whose ETag cannot tell, and finds it: %s",
		  why);
	m[1].sha256 = OBJ_SHA_OTHER;
	CHECK(run_export(engine, &spec, ms, nm, &nrefs, why, sizeof(why)) ==
				  REMORA_TASK_FAILED &&
			  strstr(why, "out/present.bin (other content)") != NULL,
		  "and names it when its SHA-256 differs: %s", why);

	/* a copy sent and never answered */
	m[1].sha256 = OBJ_SHA;
	m[1].may_overwrite = true;
	spec.verify = false;
	spec.prefix = "amb";
	spec.if_exists = REMORA_IF_EXISTS_OVERWRITE;
	CHECK(run_export(engine, &spec, ms, nm, &nrefs, why, sizeof(why)) ==
				  REMORA_TASK_FAILED &&
			  strncmp(why, "outcome_unknown: amb/present.bin:", 33) == 0,
		  "a copy without an answer is outcome_unknown: %s", why);
	remora_engine_free(engine);
}

/*
 * A member above the engine's export_copy_cutoff: a multipart upload of
 * UploadPartCopy ranges of part_size, completed; a part refused: the
 * upload is aborted and the failure is conclusive; a completion without an
 * answer: outcome_unknown, and the upload is aborted too.
 */
static void
test_export_multipart(FakeS3 *s3)
{
	RemoraEngineConfig cfg;
	RemoraEngine      *engine;
	char               endpoint[64], err[256], why[700];
	int                nrefs;
	int64_t            mib = 1024 * 1024;
	RemoraExportMember m = {"big.bin", "bkt",   "stage/1/a/data/big.bin",
							OBJ_ETAG,  OBJ_SHA, 12 * mib,
							NULL,      true};
	RemoraExportSpec   spec = {
		  "bkt", "mpu", REMORA_IF_EXISTS_OVERWRITE, false, 0, 0, OBJ_SHA, NULL};

	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%d", s3->port);
	memset(&cfg, 0, sizeof(cfg));
	cfg.target.endpoint = endpoint;
	cfg.target.region = "eu-west-1";
	cfg.target.path_style = true;
	cfg.target.access_key_id = "AKID";
	cfg.target.secret_access_key = "SECRET";
	cfg.part_size = 5 * mib;
	cfg.allow_networks = "";
	cfg.deny_networks = "";
	cfg.export_copy_cutoff = 5 * mib;
	engine = remora_engine_new(&cfg, err, sizeof(err));
	CHECK(engine != NULL, "an engine with a 5 MiB copy cutoff starts");
	if (engine == NULL)
		return;
	CHECK(run_export(engine, &spec, &m, 1, &nrefs, why, sizeof(why)) ==
				  REMORA_TASK_SUCCEEDED &&
			  nrefs == 1 && s3->uploads == 1 && s3->parts == 3 &&
			  s3->completes == 1 && s3->aborts == 0,
		  "a 12 MiB member: one upload, three part copies, completed (%s; "
		  "%d %d %d %d)",
		  why, s3->uploads, s3->parts, s3->completes, s3->aborts);
	CHECK_STR(s3->ranges,
			  "bytes=0-5242879;bytes=5242880-10485759;"
			  "bytes=10485760-12582911;",
			  "the parts' source ranges cover the member exactly");

	spec.prefix = "mpufail";
	CHECK(run_export(engine, &spec, &m, 1, &nrefs, why, sizeof(why)) ==
				  REMORA_TASK_FAILED &&
			  strncmp(why, "outcome_unknown", 15) != 0 && nrefs == 0 &&
			  s3->completes == 1 && s3->aborts == 1,
		  "a part refused: a conclusive failure, the upload aborted (%s)", why);

	spec.prefix = "mpuamb";
	CHECK(run_export(engine, &spec, &m, 1, &nrefs, why, sizeof(why)) ==
				  REMORA_TASK_FAILED &&
			  strncmp(why, "outcome_unknown: mpuamb/big.bin:", 32) == 0 &&
			  s3->completes == 2 && s3->aborts == 2,
		  "a completion without an answer: outcome_unknown, and aborted (%s)",
		  why);

	/* if_exists = fail: a HEAD (404) first, then the multipart copy */
	spec.prefix = "mpuhead";
	spec.if_exists = REMORA_IF_EXISTS_FAIL;
	CHECK(run_export(engine, &spec, &m, 1, &nrefs, why, sizeof(why)) ==
				  REMORA_TASK_SUCCEEDED &&
			  nrefs == 1 && s3->uploads == 4 && s3->completes == 3,
		  "after a HEAD that finds nothing, the same multipart copy (%s; %d "
		  "%d)",
		  why, s3->uploads, s3->completes);
	spec.if_exists = REMORA_IF_EXISTS_OVERWRITE;

	/* below the cutoff: one CopyObject, as before */
	m.size = 5 * mib;
	spec.prefix = "small";
	CHECK(run_export(engine, &spec, &m, 1, &nrefs, why, sizeof(why)) ==
				  REMORA_TASK_SUCCEEDED &&
			  s3->uploads == 4,
		  "a member at the cutoff is one CopyObject (%s)", why);
	remora_engine_free(engine);
}

/*
 * An export of 2,500 members gets them from its host a page at a time (at
 * most REMORA_EXPORT_PAGE asked for, never more than two pages held); a
 * page the host cannot answer, one short, or a member the engine refuses
 * fails it, retryably; no new member starts while EXPORT_REFS_MAX answers
 * wait for a checkpoint; an export of no members asks nothing.
 */
static void
test_export_pages(FakeS3 *s3)
{
	enum
	{
		N = 2500
	};
	RemoraEngine       *engine;
	char                endpoint[64], why[700], err[256];
	int                 nrefs, copies0 = s3->copies;
	static char         paths[N][24];
	RemoraExportMember *m = calloc(N, sizeof(RemoraExportMember));
	RemoraExportSpec    spec = {
		   "bkt", "many", REMORA_IF_EXISTS_OVERWRITE, false, 0, 0, OBJ_SHA, NULL};
	ExportHost           h;
	RemoraTask          *task;
	Export              *x;
	RemoraTaskCheckpoint cp;

	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%d", s3->port);
	engine = engine_for(endpoint, true);
	CHECK(engine != NULL && m != NULL, "an engine for a paged export starts");
	if (engine == NULL || m == NULL)
	{
		free(m);
		remora_engine_free(engine);
		return;
	}
	for (int i = 0; i < N; i++)
	{
		snprintf(paths[i], sizeof(paths[i]), "d/%05d.bin", i);
		m[i] = (RemoraExportMember){paths[i], "bkt", paths[i], OBJ_ETAG,
									OBJ_SHA,  5,     NULL,     false};
	}

	memset(&h, 0, sizeof(h));
	h.members = m;
	h.n = N;
	CHECK(run_export_host(engine, &spec, &h, &nrefs, why, sizeof(why)) ==
				  REMORA_TASK_SUCCEEDED &&
			  nrefs == N && s3->copies == copies0 + N,
		  "2,500 members exported, every one copied and answered (%s; %d "
		  "refs, %d copies)",
		  why, nrefs, s3->copies - copies0);
	CHECK(h.pages == 3 && h.wrong == 0 && h.max_asked == REMORA_EXPORT_PAGE,
		  "in three pages of at most %d (%d pages, %d not as asked)",
		  REMORA_EXPORT_PAGE, h.pages, h.wrong);
	CHECK(h.max_window > 0 && h.max_window <= 2 * REMORA_EXPORT_PAGE,
		  "never more than two pages of members held (at most %d)",
		  h.max_window);

	memset(&h, 0, sizeof(h));
	h.members = m;
	h.n = N;
	h.refuse = true;
	CHECK(run_export_host(engine, &spec, &h, &nrefs, why, sizeof(why)) ==
				  REMORA_TASK_FAILED &&
			  strstr(why, "internal: the export's members after 0 of 2500") ==
				  why &&
			  nrefs == 0,
		  "a page the host cannot answer fails the export: %s", why);

	memset(&h, 0, sizeof(h));
	h.members = m;
	h.n = N;
	h.short_by = 1;
	CHECK(run_export_host(engine, &spec, &h, &nrefs, why, sizeof(why)) ==
				  REMORA_TASK_FAILED &&
			  strstr(why, "handed out 999 of the 1000 members") != NULL,
		  "so does a page with fewer members than asked: %s", why);

	m[3].sha256 = "not-a-digest";
	memset(&h, 0, sizeof(h));
	h.members = m;
	h.n = N;
	CHECK(run_export_host(engine, &spec, &h, &nrefs, why, sizeof(why)) ==
				  REMORA_TASK_FAILED &&
			  nrefs == 0,
		  "and a member the engine refuses: %s", why);
	m[3].sha256 = OBJ_SHA;

	/* no checkpoint: the answers waiting stop new members at the bound */
	memset(&h, 0, sizeof(h));
	h.members = m;
	h.n = N;
	spec.members_total = N;
	spec.bytes_total = 5 * N;
	spec.host_arg = &h;
	task = remora_export_start(engine, &spec, err, sizeof(err));
	x = (Export *) task;
	for (int i = 0;
		 task && i < 20000 && !(x->nrefs >= EXPORT_REFS_MAX && x->running == 0);
		 i++)
	{
		turn(engine);
		answer_pages(engine, &h);
	}
	for (int i = 0; task && i < 10; i++)
		turn(engine);
	CHECK(task && x->nrefs >= EXPORT_REFS_MAX &&
			  x->nrefs < EXPORT_REFS_MAX + REMORA_EXPORT_CONCURRENCY &&
			  x->running == 0 && remora_task_state(task) == REMORA_TASK_RUNNING,
		  "without checkpoints it stops at %d answers and those in flight "
		  "(%d)",
		  EXPORT_REFS_MAX, task ? x->nrefs : -1);
	nrefs = 0;
	for (int i = 0;
		 task && i < 20000 && remora_task_state(task) == REMORA_TASK_RUNNING;
		 i++)
	{
		if (remora_task_checkpoint(task, &cp))
			nrefs += cp.nrefs;
		turn(engine);
		answer_pages(engine, &h);
	}
	if (task && remora_task_checkpoint(task, &cp))
		nrefs += cp.nrefs;
	CHECK(task && remora_task_state(task) == REMORA_TASK_SUCCEEDED &&
			  nrefs == N,
		  "and a checkpoint lets it go on to the end (%d answers)", nrefs);
	remora_task_free(task);

	memset(&h, 0, sizeof(h));
	CHECK(run_export_host(engine, &spec, &h, &nrefs, why, sizeof(why)) ==
				  REMORA_TASK_SUCCEEDED &&
			  h.pages == 0 && nrefs == 0,
		  "an export of no members succeeds and asks for no page (%s)", why);
	free(m);
	remora_engine_free(engine);
}

static void
test_lookups(void)
{
	FakeS3 s3;

	if (!fake_s3_start(&s3))
	{
		CHECK(false, "the test store starts");
		return;
	}
	lookup_answered(&s3, true);
	lookup_answered(&s3, false);
	lookup_withdrawn(&s3);
	test_export(&s3);
	test_export_multipart(&s3);
	test_export_pages(&s3);
	fake_s3_stop(&s3);
}

/*
 * Which transport failures are TLS failures (class tls, not retried): the
 * certificate and protocol ones; a handshake the network cut is not.
 */
static void
test_tls_classes(void)
{
	CHECK(
		remora_curl_is_tls_failure(
			CURLE_PEER_FAILED_VERIFICATION,
			"SSL certificate problem: unable to get local issuer certificate"),
		"an unknown CA is a TLS failure");
	CHECK(remora_curl_is_tls_failure(CURLE_PEER_FAILED_VERIFICATION,
									 "SSL: no alternative certificate subject "
									 "name matches target host name 'x'"),
		  "a host name mismatch is a TLS failure");
	CHECK(remora_curl_is_tls_failure(CURLE_SSL_CACERT_BADFILE, ""),
		  "an unreadable CA file is a TLS failure");
	CHECK(remora_curl_is_tls_failure(CURLE_SSL_CIPHER, NULL),
		  "no shared cipher is a TLS failure");
	CHECK(remora_curl_is_tls_failure(CURLE_SSL_CONNECT_ERROR,
									 "error:0A00010B:SSL routines::wrong "
									 "version number"),
		  "TLS to a plain-HTTP port is a TLS failure");
	CHECK(remora_curl_is_tls_failure(CURLE_SSL_CONNECT_ERROR,
									 "error:0A00042E:SSL routines::tlsv1 "
									 "alert protocol version"),
		  "a protocol version mismatch is a TLS failure");
	CHECK(!remora_curl_is_tls_failure(CURLE_SSL_CONNECT_ERROR,
									  "OpenSSL SSL_connect: Connection reset "
									  "by peer in connection to x:443"),
		  "a handshake reset by the network is retried");
	CHECK(!remora_curl_is_tls_failure(
			  CURLE_SSL_CONNECT_ERROR,
			  "OpenSSL SSL_connect: SSL_ERROR_SYSCALL in connection to x:443"),
		  "a handshake cut by the network is retried");
	CHECK(!remora_curl_is_tls_failure(CURLE_SSL_CONNECT_ERROR, NULL),
		  "a handshake failure without a reason is retried");
	CHECK(!remora_curl_is_tls_failure(CURLE_COULDNT_CONNECT, "certificate"),
		  "a refused connection is not a TLS failure");
	CHECK(!remora_curl_is_tls_failure(CURLE_OPERATION_TIMEDOUT, ""),
		  "a timeout is not a TLS failure");
}

/* no_proxy: names with their subdomains, addresses, '*'. */
static void
test_no_proxy(void)
{
	const char *np = "internal.example, .corp.example,10.0.0.1,[::1]";

	CHECK(remora_no_proxy_matches(np, "internal.example"), "a name itself");
	CHECK(remora_no_proxy_matches(np, "s3.Internal.Example"),
		  "a subdomain, in any case");
	CHECK(remora_no_proxy_matches(np, "corp.example"),
		  "a leading dot names the domain too");
	CHECK(remora_no_proxy_matches(np, "a.corp.example."), "a trailing dot");
	CHECK(!remora_no_proxy_matches(np, "notinternal.example"),
		  "not a suffix that is no subdomain");
	CHECK(remora_no_proxy_matches(np, "10.0.0.1"), "an address");
	CHECK(!remora_no_proxy_matches(np, "10.0.0.10"), "not another address");
	CHECK(remora_no_proxy_matches(np, "::1") &&
			  remora_no_proxy_matches(np, "[::1]"),
		  "an IPv6 address, bracketed or not");
	CHECK(remora_no_proxy_matches("*", "anything.example"), "'*' is all");
	CHECK(!remora_no_proxy_matches("", "a.example") &&
			  !remora_no_proxy_matches(NULL, "a.example"),
		  "nothing is nothing");
}

/* Proxy credentials never survive in a message. */
static void
test_redact_userinfo(void)
{
	char msg[200];

	snprintf(msg, sizeof(msg), "via http://bob:s3cret-pass@proxy:3128 failed");
	remora_redact_userinfo(msg, "http://bob:s3cret-pass@proxy:3128");
	CHECK_STR(msg, "via http://(redacted)@proxy:3128 failed",
			  "user:password is redacted");
	snprintf(msg, sizeof(msg), "x a:b@p y a:b");
	remora_redact_userinfo(msg, "http://a:b@p:1");
	CHECK_STR(msg, "x ***@p y ***", "short credentials are blanked");
	snprintf(msg, sizeof(msg), "no credentials here");
	remora_redact_userinfo(msg, "http://proxy:3128");
	CHECK_STR(msg, "no credentials here", "a proxy without credentials");
}

int
main(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
	test_addressing();
	test_sha256_state();
	test_etags();
	test_answers();
	test_lookups();
	test_tls_classes();
	test_no_proxy();
	test_redact_userinfo();
	curl_global_cleanup();
	return unit_done();
}
