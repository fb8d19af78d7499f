/*
 * engine_fixtures.c: the engines and the minimal S3 store the engine's unit
 * tests run against; see engine_fixtures.h.
 */
#define _GNU_SOURCE /* strcasestr */
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

void
engine_config(RemoraEngineConfig *cfg, const char *endpoint, bool path_style)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->target.endpoint = endpoint;
	cfg->target.region = "eu-west-1";
	cfg->target.path_style = path_style;
	cfg->target.access_key_id = "AKID";
	cfg->target.secret_access_key = "SECRET";
	cfg->part_size = 5 * 1024 * 1024;
	cfg->allow_networks = "";
	cfg->deny_networks = "";
}

RemoraEngine *
engine_for(const char *endpoint, bool path_style)
{
	RemoraEngineConfig cfg;
	char               err[256];

	engine_config(&cfg, endpoint, path_style);
	return remora_engine_new(&cfg, err, sizeof(err));
}

void
turn_at_most(RemoraEngine *engine, int max_ms)
{
	struct pollfd p = {remora_engine_fd(engine), POLLIN, 0};
	long          t = remora_engine_timeout_ms(engine);

	poll(&p, 1, t < 0 || t > max_ms ? max_ms : (int) t);
	remora_engine_run(engine);
}

void
turn(RemoraEngine *engine)
{
	turn_at_most(engine, 50);
}

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

/*
 * A copy from slo/ with x-amz-copy-source-if-match: refused, as Swift
 * refuses it for every object a multipart upload made.
 */
static bool
slo_conditional_copy(const char *req, const char *end)
{
	const char *src = strcasestr(req, "x-amz-copy-source: /bkt/slo/");
	const char *cond = strcasestr(req, "x-amz-copy-source-if-match:");

	return strncmp(req, "PUT ", 4) == 0 && src && src < end && cond &&
		   cond < end;
}

/* HEAD of slo/<n>.bin: a multipart ETag; changed.bin: another one. */
static void
slo_head(FakeS3 *s3, int c, const char *req)
{
	char head[256];
	int  n;

	__atomic_add_fetch(&s3->heads, 1, __ATOMIC_SEQ_CST);
	n = snprintf(head, sizeof(head),
				 "HTTP/1.1 200 OK\r\nContent-Length: %s\r\nETag: %s\r\n"
				 "Connection: close\r\n\r\n",
				 strncmp(req + 14, "big.bin ", 8) == 0 ? "12582912" : "5",
				 strncmp(req + 14, "changed.bin ", 12) == 0 ? OBJ_ETAG
															: SLO_ETAG);
	if (write(c, head, n) != n)
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
	else if (slo_conditional_copy(req, end))
	{
		__atomic_add_fetch(&s3->refused, 1, __ATOMIC_SEQ_CST);
		answer_with(c, "412 Precondition Failed", NULL,
					"<Error><Code>PreconditionFailed</Code></Error>");
	}
	else if (strncmp(req, "HEAD /bkt/slo/", 14) == 0)
		slo_head(s3, c, req);
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
	else if (strncmp(req, "DELETE /bkt/src/", 16) == 0)
	{
		__atomic_add_fetch(&s3->deletes, 1, __ATOMIC_SEQ_CST);
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

bool
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

void
fake_s3_stop(FakeS3 *s3)
{
	__atomic_store_n(&s3->stop, 1, __ATOMIC_SEQ_CST);
	pthread_join(s3->thread, NULL);
	close(s3->fd);
}

bool
fake_s3_run(void (*const tests[])(FakeS3 *), int ntests)
{
	FakeS3 s3;
	bool   started;

	curl_global_init(CURL_GLOBAL_DEFAULT);
	started = fake_s3_start(&s3);
	for (int i = 0; started && i < ntests; i++)
		tests[i](&s3);
	if (started)
		fake_s3_stop(&s3);
	curl_global_cleanup();
	return started;
}
