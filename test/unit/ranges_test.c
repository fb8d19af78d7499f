/*
 * Unit tests of parallel ranged GETs (src/engine/transfer/ranges.c) and the
 * per-host connection cap, against a small HTTP source and S3 store on
 * 127.0.0.1 in threads of this process (a thread per connection, so that
 * parallel requests really overlap).
 */
#define _GNU_SOURCE /* strcasestr */
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <curl/curl.h>
#include <openssl/evp.h>

#include "engine/core/engine_int.h"
#include "unit.h"

#define PART         (64 * 1024)
#define OBJ_SIZE     (6 * PART + 123) /* seven parts */
#define SEG_ETAG     "\"0123456789abcdef0123456789abcdef\""
#define BIG_SIZE     (6 * 1024 * 1024) /* /src/big, for the rate caps */
#define RATE         (2 * 1024 * 1024)
#define CAP_DELAY_MS 1000 /* each source answer, behind a cap of 1 */

typedef struct Server
{
	int       fd;
	int       port;
	pthread_t thread;
	int       stop;
	int       active; /* source GETs read and not yet answered */
	int       max_active;
	int       source_gets; /* GETs of /src/ */
	int       ranged_gets; /* of which with a Range */
	int       from_zero;   /* of which from the first byte */
	int       delay_ms;    /* before each source answer */
	char      obj[2][OBJ_SIZE];
	char     *big; /* BIG_SIZE bytes */
} Server;

/*
 * Throttle answers still to give: 503 to ranged GETs of /src/busy not
 * from the first byte, 503 SlowDown to part PUTs.
 */
static int busy_ranges;
static int busy_parts;

/* Multipart uploads the store was asked to create. */
static int mpu_creates;

/* Part PUTs: each answered after part_delay_ms; how many ran at once. */
static int part_delay_ms;
static int parts_active;
static int parts_max_active;

/* The part size of the engines made (sub-ranges need parts over 1 MiB). */
static size_t engine_part = PART;

/* What the engine logged (its connection counts), one line after another. */
static char engine_log[8192];

static void
log_line(void *arg, const char *line)
{
	(void) arg;
	if (strlen(engine_log) + strlen(line) + 2 < sizeof(engine_log))
	{
		strcat(engine_log, line);
		strcat(engine_log, "\n");
	}
}

typedef struct Conn
{
	Server *s;
	int     c;
} Conn;

/*
 * A source GET counts as in flight from when it has been read until its answer
 * starts: the client cannot send its next request before that answer, so
 * with one connection allowed two never overlap, however the threads run.
 */
static __thread Server *in_flight;

static void
put_all(int c, const char *p, size_t n)
{
	if (in_flight)
	{
		__atomic_sub_fetch(&in_flight->active, 1, __ATOMIC_SEQ_CST);
		in_flight = NULL;
	}
	while (n > 0)
	{
		ssize_t w = send(c, p, n, MSG_NOSIGNAL);

		if (w <= 0)
			return;
		p += w;
		n -= (size_t) w;
	}
}

static void
reply(int c, const char *status, const char *extra, const char *body)
{
	char head[1024];
	int  n = snprintf(head, sizeof(head),
					  "HTTP/1.1 %s\r\nContent-Length: %zu\r\n%s"
					   "Connection: close\r\n\r\n",
					  status, strlen(body), extra);

	put_all(c, head, n);
	put_all(c, body, strlen(body));
}

/* A header's value (up to the line end) in the request, or NULL. */
static const char *
header(const char *req, const char *name, char *out, size_t outlen)
{
	const char *h = strcasestr(req, name);
	size_t      n;

	if (h == NULL)
		return NULL;
	h += strlen(name);
	while (*h == ' ')
		h++;
	n = strcspn(h, "\r\n");
	if (n >= outlen)
		n = outlen - 1;
	memcpy(out, h, n);
	out[n] = '\0';
	return out;
}

/*
 * The source: /src/obj serves ranges, If-Match and If-Range by its strong
 * ETag; /src/plain ignores Range; /src/swap becomes another object after
 * two GETs; /src/lax also swaps, and ignores If-Match; /src/dated has a
 * Last-Modified and no ETag; /src/bare has neither.
 */
static void
serve_source(Server *s, int c, const char *req)
{
	char v[256], extra[512];
	bool plain = strncmp(req, "GET /src/plain ", 15) == 0;
	bool swaps = strncmp(req, "GET /src/swap ", 14) == 0 ||
				 strncmp(req, "GET /src/lax ", 13) == 0;
	bool        lax = strncmp(req, "GET /src/lax ", 13) == 0;
	bool        dated = strncmp(req, "GET /src/dated ", 15) == 0;
	bool        bare = strncmp(req, "GET /src/bare ", 14) == 0;
	bool        big = strncmp(req, "GET /src/big ", 13) == 0;
	bool        busy = strncmp(req, "GET /src/busy ", 14) == 0;
	long        size = big ? BIG_SIZE : OBJ_SIZE;
	int         n = __atomic_add_fetch(&s->source_gets, 1, __ATOMIC_SEQ_CST);
	int         ver = swaps && n > 2 ? 1 : 0;
	const char *bytes = big ? s->big : s->obj[ver];
	const char *etag = ver ? "\"v2\"" : "\"v1\"";
	long        first = 0, last = size - 1;
	bool        ranged = false;

	if (s->delay_ms > 0)
		usleep(s->delay_ms * 1000);
	if (!plain && header(req, "\nRange: bytes=", v, sizeof(v)))
	{
		char *dash;

		first = strtol(v, &dash, 10);
		if (dash[1] != '\0')
			last = strtol(dash + 1, NULL, 10);
		if (last > size - 1)
			last = size - 1;
		ranged = true;
		__atomic_add_fetch(&s->ranged_gets, 1, __ATOMIC_SEQ_CST);
		if (first == 0)
			__atomic_add_fetch(&s->from_zero, 1, __ATOMIC_SEQ_CST);
	}
	else
		__atomic_add_fetch(&s->from_zero, 1, __ATOMIC_SEQ_CST);
	if (busy && ranged && first > 0 &&
		__atomic_sub_fetch(&busy_ranges, 1, __ATOMIC_SEQ_CST) >= 0)
	{
		reply(c, "503 Service Unavailable", "", "busy");
		return;
	}
	if (!lax && header(req, "\nIf-Match:", v, sizeof(v)) && strcmp(v, etag))
	{
		reply(c, "412 Precondition Failed", "", "");
		return;
	}
	if (header(req, "\nIf-Range:", v, sizeof(v)) && strcmp(v, etag) != 0)
		ranged = false, first = 0, last = size - 1;
	if (ranged)
		snprintf(extra, sizeof(extra),
				 "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes "
				 "%ld-%ld/%ld\r\n",
				 first, last, size);
	else
		snprintf(extra, sizeof(extra), "HTTP/1.1 200 OK\r\n");
	snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra),
			 "Content-Length: %ld\r\n%s%s%s%s"
			 "Connection: close\r\n\r\n",
			 last - first + 1,
			 bare || dated ? "" : "ETag: ", bare || dated ? "" : etag,
			 bare || dated ? "" : "\r\n",
			 bare ? "" : "Last-Modified: Mon, 01 Jun 2026 00:00:00 GMT\r\n");
	put_all(c, extra, strlen(extra));
	put_all(c, bytes + first, last - first + 1);
}

/*
 * The store: just enough S3 for a multipart upload, the reuse of one
 * (completed, its parts copied) and a manifest.
 */
static void
serve_store(int c, const char *req)
{
	char v[256];

	if (strncmp(req, "HEAD ", 5) == 0)
	{
		/* a segment of the checkpoint: .../NNNNNN */
		const char *sp = strchr(req + 5, ' ');
		long        segno = strtol(sp - 6, NULL, 10);
		long        size = OBJ_SIZE - (segno - 1) * PART;
		char        head[256];
		int         n;

		n = snprintf(head, sizeof(head),
					 "HTTP/1.1 200 OK\r\nContent-Length: %ld\r\nETag: " SEG_ETAG
					 "\r\nConnection: close\r\n\r\n",
					 size < PART ? size : PART);
		put_all(c, head, n);
	}
	else if (strncmp(req, "POST ", 5) == 0 && strstr(req, "?uploads"))
	{
		__atomic_add_fetch(&mpu_creates, 1, __ATOMIC_SEQ_CST);
		reply(c, "200 OK", "",
			  "<InitiateMultipartUploadResult><UploadId>u1</UploadId>"
			  "</InitiateMultipartUploadResult>");
	}
	else if (strncmp(req, "POST ", 5) == 0)
		reply(c, "200 OK", "",
			  "<CompleteMultipartUploadResult><ETag>\"whole\"</ETag>"
			  "</CompleteMultipartUploadResult>");
	else if (strncmp(req, "PUT ", 4) == 0 &&
			 header(req, "\nx-amz-copy-source:", v, sizeof(v)))
		reply(c, "200 OK", "",
			  "<CopyPartResult><ETag>" SEG_ETAG "</ETag></CopyPartResult>");
	else if (strncmp(req, "PUT ", 4) == 0 && strstr(req, "partNumber=") &&
			 __atomic_sub_fetch(&busy_parts, 1, __ATOMIC_SEQ_CST) >= 0)
		reply(c, "503 Slow Down", "",
			  "<Error><Code>SlowDown</Code><Message>Reduce your request "
			  "rate.</Message></Error>");
	else if (strncmp(req, "PUT ", 4) == 0 && strstr(req, "partNumber="))
	{
		int now = __atomic_add_fetch(&parts_active, 1, __ATOMIC_SEQ_CST);
		int max = __atomic_load_n(&parts_max_active, __ATOMIC_SEQ_CST);

		while (now > max &&
			   !__atomic_compare_exchange_n(&parts_max_active, &max, now, false,
											__ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
			;
		usleep(__atomic_load_n(&part_delay_ms, __ATOMIC_SEQ_CST) * 1000);
		__atomic_sub_fetch(&parts_active, 1, __ATOMIC_SEQ_CST);
		reply(c, "200 OK", "ETag: " SEG_ETAG "\r\n", "");
	}
	else if (strncmp(req, "PUT ", 4) == 0)
		reply(c, "200 OK", "ETag: " SEG_ETAG "\r\n", "");
	else if (strncmp(req, "DELETE ", 7) == 0)
		reply(c, "204 No Content", "", "");
	else
		reply(c, "404 Not Found", "", "");
}

static void *
serve_conn(void *arg)
{
	Conn   *conn = arg;
	Server *s = conn->s;
	char    req[16384];
	size_t  len = 0;
	char   *end = NULL;
	char    v[64];
	long    body = 0;
	while (len < sizeof(req) - 1 && end == NULL)
	{
		ssize_t n = read(conn->c, req + len, sizeof(req) - 1 - len);

		if (n <= 0)
			break;
		len += n;
		req[len] = '\0';
		end = strstr(req, "\r\n\r\n");
	}
	if (end != NULL)
	{
		end[2] = '\0'; /* headers only, for the lookups below */
		if (header(req, "\ncontent-length:", v, sizeof(v)))
			body = strtol(v, NULL, 10);
		for (long have = (long) (len - (end + 4 - req)); have < body;)
		{
			char    sink[4096];
			ssize_t n = read(conn->c, sink, sizeof(sink));

			if (n <= 0)
				break;
			have += n;
		}
		/*
		 * Source GETs only: a store request may be a straggler of the test
		 * before (a DELETE sent as its engine was freed).
		 */
		if (strncmp(req, "GET /src/", 9) == 0)
		{
			int now = __atomic_add_fetch(&s->active, 1, __ATOMIC_SEQ_CST);
			int max = __atomic_load_n(&s->max_active, __ATOMIC_SEQ_CST);

			while (now > max && !__atomic_compare_exchange_n(
									&s->max_active, &max, now, false,
									__ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
				;
			in_flight = s;
		}
		if (strncmp(req, "GET /src/", 9) == 0)
			serve_source(s, conn->c, req);
		else
			serve_store(conn->c, req);
	}
	if (in_flight)
		__atomic_sub_fetch(&s->active, 1, __ATOMIC_SEQ_CST);
	in_flight = NULL;
	close(conn->c);
	free(conn);
	return NULL;
}

static void *
serve(void *arg)
{
	Server *s = arg;

	while (!__atomic_load_n(&s->stop, __ATOMIC_SEQ_CST))
	{
		struct pollfd p = {s->fd, POLLIN, 0};
		Conn         *conn;
		pthread_t     t;

		if (poll(&p, 1, 50) <= 0)
			continue;
		conn = malloc(sizeof(Conn));
		if (conn == NULL)
			continue;
		conn->s = s;
		conn->c = accept(s->fd, NULL, NULL);
		if (conn->c < 0 || pthread_create(&t, NULL, serve_conn, conn) != 0)
		{
			if (conn->c >= 0)
				close(conn->c);
			free(conn);
			continue;
		}
		pthread_detach(t);
	}
	return NULL;
}

static bool
server_start(Server *s)
{
	struct sockaddr_in a;
	socklen_t          alen = sizeof(a);

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	for (int i = 0; i < OBJ_SIZE; i++)
	{
		s->obj[0][i] = (char) ((i * 7 + i / 251) & 0xff);
		s->obj[1][i] = (char) (s->obj[0][i] ^ 0x55);
	}
	s->big = malloc(BIG_SIZE);
	if (s->big == NULL)
		return false;
	for (int i = 0; i < BIG_SIZE; i++)
		s->big[i] = (char) ((i * 13 + i / 4093) & 0xff);
	s->fd = socket(AF_INET, SOCK_STREAM, 0);
	if (s->fd < 0 || bind(s->fd, (struct sockaddr *) &a, sizeof(a)) != 0 ||
		listen(s->fd, 64) != 0 ||
		getsockname(s->fd, (struct sockaddr *) &a, &alen) != 0)
		return false;
	s->port = ntohs(a.sin_port);
	return pthread_create(&s->thread, NULL, serve, s) == 0;
}

static void
server_reset(Server *s, int delay_ms)
{
	/* the last test's stragglers (its deletes) first */
	for (int64_t end = remora_now_ms() + UNIT_WAIT_MS;
		 remora_now_ms() < end &&
		 __atomic_load_n(&s->active, __ATOMIC_SEQ_CST);)
		usleep(10 * 1000);
	__atomic_store_n(&s->max_active, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&s->source_gets, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&s->ranged_gets, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&s->from_zero, 0, __ATOMIC_SEQ_CST);
	s->delay_ms = delay_ms;
}

static RemoraEngine *
engine_with_cap(const Server *s, int cap)
{
	RemoraEngineConfig cfg;
	char               endpoint[64], err[256];

	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%d", s->port);
	memset(&cfg, 0, sizeof(cfg));
	cfg.target.endpoint = endpoint;
	cfg.target.region = "eu-west-1";
	cfg.target.path_style = true;
	cfg.target.access_key_id = "AKID";
	cfg.target.secret_access_key = "SECRET";
	cfg.part_size = engine_part;
	cfg.allow_networks = "127.0.0.0/8";
	cfg.deny_networks = "";
	/*
	 * Both shorter than the last requests wait behind a cap of 1 (seven of
	 * CAP_DELAY_MS each), and long beside one request's answer, which a
	 * busy machine (the suite runs this at nice 19) may slow.
	 */
	cfg.connect_timeout_ms = 4000;
	cfg.stall_timeout_ms = 4000;
	cfg.max_connections_per_host = cap;
	cfg.log = log_line;
	return remora_engine_new(&cfg, err, sizeof(err));
}

/* Run a task to its end; the engine as a host drives it. */
static RemoraTaskState
run(RemoraEngine *engine, RemoraTask *task, RemoraResume *capture)
{
	for (int64_t end = remora_now_ms() + UNIT_WAIT_MS;
		 remora_now_ms() < end &&
		 remora_task_state(task) == REMORA_TASK_RUNNING;)
	{
		struct pollfd        p = {remora_engine_fd(engine), POLLIN, 0};
		long                 t = remora_engine_timeout_ms(engine);
		RemoraTaskCheckpoint cp;

		poll(&p, 1, t < 0 || t > 10 ? 10 : (int) t);
		remora_engine_run(engine);
		/* keep the first checkpoint of two parts or more, for a resume */
		if (remora_task_checkpoint(task, &cp) && capture &&
			capture->nparts == 0 && cp.nparts >= 2 && cp.bytes_done < OBJ_SIZE)
		{
			capture->etag = strdup(cp.etag);
			capture->last_modified = strdup(cp.last_modified);
			capture->size = cp.bytes_total;
			capture->sha256_state = strdup(cp.sha256_state);
			capture->upload_key = strdup(cp.upload_key);
			capture->upload_id = strdup(cp.upload_id);
			capture->parts = calloc(cp.nparts, sizeof(RemoraPart));
			memcpy(capture->parts, cp.parts, cp.nparts * sizeof(RemoraPart));
			capture->nparts = cp.nparts;
		}
	}
	return remora_task_state(task);
}

static RemoraTask *
start(RemoraEngine *engine, const Server *s, const char *path, int conns,
	  const RemoraResume *resume)
{
	RemoraTaskSpec spec;
	char           url[128], err[256];

	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", s->port, path);
	memset(&spec, 0, sizeof(spec));
	spec.source_url = url;
	spec.file_name = "obj.bin";
	spec.bucket = "bkt";
	spec.staging_prefix = "stage/1/a/";
	spec.job_id = 1;
	spec.attempt_id = "00000000-0000-0000-0000-00000000000a";
	spec.fencing_token = 1;
	spec.connections = conns;
	spec.resume = resume;
	return remora_task_start(engine, &spec, err, sizeof(err));
}

static void
sha_hex(const char *p, size_t n, char out[65])
{
	unsigned char d[32];

	EVP_Digest(p, n, d, NULL, EVP_sha256(), NULL);
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* One task on path: its end state, and the SHA-256 it found if it ended. */
static RemoraTaskState
transfer(Server *s, int cap, const char *path, int conns, char sha[65],
		 const RemoraTaskError **why, RemoraResume *capture,
		 const RemoraResume *resume)
{
	RemoraEngine *engine = engine_with_cap(s, cap);
	RemoraTask   *task = engine ? start(engine, s, path, conns, resume) : NULL;
	RemoraTaskState st = task ? run(engine, task, capture) : REMORA_TASK_FAILED;
	static RemoraTaskError err;

	sha[0] = '\0';
	memset(&err, 0, sizeof(err));
	if (task && remora_task_result(task))
		memcpy(sha, remora_task_result(task)->member_sha256, 65);
	if (task && remora_task_error(task))
		err = *remora_task_error(task);
	*why = &err;
	if (task)
		remora_task_free(task);
	if (engine)
		remora_engine_free(engine);
	return st;
}

/*
 * A task capped at RATE moves BIG_SIZE bytes in no less than 0.9 x
 * BIG_SIZE / RATE, over one connection or several sharing the cap.  Only
 * the lower bound: it is what a cap promises.
 */
static void
test_rate(Server *s, int conns)
{
	RemoraEngine *engine = engine_with_cap(s, 0);
	RemoraTask   *task =
        engine ? start(engine, s, "/src/big", conns, NULL) : NULL;
	int64_t         t0 = remora_now_ms();
	int64_t         took;
	int64_t         least = (int64_t) BIG_SIZE * 900 / RATE; /* ms */
	RemoraTaskState st = REMORA_TASK_FAILED;
	char            want[65];

	if (task == NULL)
	{
		CHECK(false, "capped, %d connections: the task starts", conns);
		if (engine)
			remora_engine_free(engine);
		return;
	}
	remora_task_set_max_rate(task, RATE);
	while ((st = remora_task_state(task)) == REMORA_TASK_RUNNING &&
		   remora_now_ms() - t0 < 60 * 1000)
	{
		struct pollfd p = {remora_engine_fd(engine), POLLIN, 0};
		long          t = remora_engine_timeout_ms(engine);

		poll(&p, 1, t < 0 || t > 10 ? 10 : (int) t);
		remora_engine_run(engine);
	}
	took = remora_now_ms() - t0;
	sha_hex(s->big, BIG_SIZE, want);
	CHECK(st == REMORA_TASK_SUCCEEDED, "capped, %d connections: succeeded (%s)",
		  conns,
		  remora_task_error(task) ? remora_task_error(task)->message : "");
	CHECK(st == REMORA_TASK_SUCCEEDED &&
			  strcmp(remora_task_result(task)->member_sha256, want) == 0,
		  "capped, %d connections: the object's SHA-256", conns);
	CHECK(took >= least,
		  "capped at %d B/s, %d connections: %d bytes took %" PRId64
		  " ms, at least %" PRId64,
		  RATE, conns, BIG_SIZE, took, least);
	if (conns > 1)
		CHECK(s->ranged_gets > 1,
			  "capped, %d connections: in ranges that share the cap (%d)",
			  conns, s->ranged_gets);
	remora_task_free(task);
	remora_engine_free(engine);
}

/*
 * Not pinned: ranges from REMORA_ADAPT_START; a 503 to a range or SlowDown
 * to a part is backed off from and asked again, in the same attempt.  A
 * pinned count fails the attempt on a 503, as it always did.
 */
static void
test_adaptive(Server *s, const char *want)
{
	char                   got[65];
	const RemoraTaskError *err;

	server_reset(s, 20);
	engine_log[0] = '\0';
	CHECK(transfer(s, 0, "/src/obj", REMORA_CONNECTIONS_ADAPT(4), got, &err,
				   NULL, NULL) == REMORA_TASK_SUCCEEDED,
		  "adaptive: succeeded (%s)", err->message);
	CHECK_STR(got, want, "adaptive: the object's SHA-256");
	CHECK(s->ranged_gets == 7 && s->max_active >= 2,
		  "adaptive: ranges from the start, overlapping (%d GETs, %d at once)",
		  s->ranged_gets, s->max_active);
	CHECK(strstr(engine_log, "ranged connections 0 -> 4 at") != NULL,
		  "adaptive: logs the start count (%s)", engine_log);

	server_reset(s, 20);
	engine_log[0] = '\0';
	busy_ranges = 2;
	busy_parts = 1;
	CHECK(transfer(s, 0, "/src/busy", REMORA_CONNECTIONS_ADAPT(4), got, &err,
				   NULL, NULL) == REMORA_TASK_SUCCEEDED,
		  "adaptive, throttled: succeeded in one attempt (%s)", err->message);
	CHECK_STR(got, want, "adaptive, throttled: the object's SHA-256");
	CHECK(s->ranged_gets == 7 + 2,
		  "adaptive, throttled: the two refused ranges asked again (%d GETs)",
		  s->ranged_gets);
	CHECK(strstr(engine_log, "answered a range with HTTP 503") != NULL &&
			  strstr(engine_log, "answered a part with HTTP 503 SlowDown") !=
				  NULL,
		  "adaptive, throttled: each back-off logged (%s)", engine_log);
	CHECK(strstr(engine_log, "ranged connections 4 -> 3 at") != NULL,
		  "adaptive, throttled: a connection fewer (%s)", engine_log);

	server_reset(s, 20);
	busy_ranges = 1;
	CHECK(transfer(s, 0, "/src/busy", 4, got, &err, NULL, NULL) ==
				  REMORA_TASK_FAILED &&
			  err->http_status == 503 && err->retryable,
		  "pinned, throttled: the attempt fails retryably (%s)", err->message);
	busy_ranges = 0;
	busy_parts = 0;
}

/* The most ranged connections the engine logged a change to. */
static int
most_logged(void)
{
	const char *p = engine_log;
	int         most = 0, was, n;

	while ((p = strstr(p, "ranged connections ")) != NULL)
	{
		if (sscanf(p, "ranged connections %d -> %d", &was, &n) == 2 && n > most)
			most = n;
		p++;
	}
	return most;
}

/*
 * A store slower than the source: an adaptive task holds no more part
 * buffers than its count and REMORA_PARTS_IN_FLIGHT, as a pinned count
 * does, though it has buffers for the most connections it may reach; so
 * its part uploads in flight stay within that too (96 parts of a source
 * answered at once, each PUT answered after 50 ms).
 */
static void
test_upload_backpressure(Server *s)
{
	char                   got[65], want[65];
	const RemoraTaskError *err;
	int                    most;

	server_reset(s, 0);
	engine_log[0] = '\0';
	parts_max_active = 0;
	part_delay_ms = 50;
	sha_hex(s->big, BIG_SIZE, want);
	CHECK(transfer(s, 0, "/src/big", REMORA_CONNECTIONS_ADAPT(4), got, &err,
				   NULL, NULL) == REMORA_TASK_SUCCEEDED,
		  "a slow store, adaptive: succeeded (%s)", err->message);
	CHECK_STR(got, want, "a slow store, adaptive: the object's SHA-256");
	most = most_logged();
	CHECK(most >= 4 && parts_max_active >= 2 &&
			  parts_max_active <= most + REMORA_PARTS_IN_FLIGHT,
		  "a slow store, adaptive: at most %d part uploads at once with at "
		  "most %d connections (%d)",
		  most + REMORA_PARTS_IN_FLIGHT, most, parts_max_active);
	part_delay_ms = 0;
}

/*
 * Parts over REMORA_SUBRANGE_MIN: several ranged GETs fill one part's
 * buffer at once, hashed in order; an object of one part is one PUT.
 */
static void
test_subranges(Server *s)
{
	char                   want[65], got[65];
	const RemoraTaskError *err;

	sha_hex(s->big, BIG_SIZE, want);
	/* 6 MiB in parts of 4 MiB: 1 MiB sub-ranges, the first GET's too */
	engine_part = 4 * 1024 * 1024;
	server_reset(s, 200);
	mpu_creates = 0;
	CHECK(transfer(s, 0, "/src/big", 8, got, &err, NULL, NULL) ==
			  REMORA_TASK_SUCCEEDED,
		  "sub-ranges: succeeded (%s)", err->message);
	CHECK_STR(got, want, "sub-ranges: the object's SHA-256");
	CHECK(s->ranged_gets == 6 && s->from_zero == 1,
		  "sub-ranges: six ranged GETs of 1 MiB, one from the first byte "
		  "(%d, %d)",
		  s->ranged_gets, s->from_zero);
	CHECK(s->max_active > 2,
		  "sub-ranges: more GETs at once than the object has parts (%d)",
		  s->max_active);
	CHECK(mpu_creates == 1, "sub-ranges: one multipart upload (%d)",
		  mpu_creates);

	/* of unknown size, within one part: probed, then ranges, one PUT */
	engine_part = 8 * 1024 * 1024;
	server_reset(s, 200);
	mpu_creates = 0;
	CHECK(transfer(s, 0, "/src/big", 8, got, &err, NULL, NULL) ==
			  REMORA_TASK_SUCCEEDED,
		  "one part in sub-ranges: succeeded (%s)", err->message);
	CHECK_STR(got, want, "one part in sub-ranges: the object's SHA-256");
	CHECK(s->ranged_gets == 6 && s->max_active > 2,
		  "one part in sub-ranges: six ranged GETs, overlapping (%d, %d at "
		  "once)",
		  s->ranged_gets, s->max_active);
	CHECK(mpu_creates == 0, "one part in sub-ranges: one PUT, no upload (%d)",
		  mpu_creates);
	engine_part = PART;
}

int
main(void)
{
	static Server          s;
	char                   want[65], got[65];
	const RemoraTaskError *err;
	RemoraResume          *cp = calloc(1, sizeof(RemoraResume));

	curl_global_init(CURL_GLOBAL_DEFAULT);
	memset(&s, 0, sizeof(s));
	if (cp == NULL || !server_start(&s))
	{
		CHECK(false, "the test server starts");
		return unit_done();
	}
	sha_hex(s.obj[0], OBJ_SIZE, want);

	/* one connection: one plain GET, as always */
	server_reset(&s, 0);
	CHECK(transfer(&s, 0, "/src/obj", 1, got, &err, NULL, NULL) ==
			  REMORA_TASK_SUCCEEDED,
		  "one connection: succeeded (%s)", err->message);
	CHECK_STR(got, want, "one connection: the object's SHA-256");
	CHECK(s.source_gets == 1 && s.ranged_gets == 0,
		  "one connection: one GET without a range (%d, %d)", s.source_gets,
		  s.ranged_gets);

	/* eight: a GET per segment, overlapping, hashed in order */
	server_reset(&s, 30);
	CHECK(transfer(&s, 0, "/src/obj", 8, got, &err, NULL, NULL) ==
			  REMORA_TASK_SUCCEEDED,
		  "eight connections: succeeded (%s)", err->message);
	CHECK_STR(got, want, "eight connections: the object's SHA-256");
	CHECK(s.source_gets == 7 && s.ranged_gets == 7 && s.from_zero == 1,
		  "eight connections: seven ranged GETs (%d, %d)", s.source_gets,
		  s.ranged_gets);
	CHECK(s.max_active > 2, "eight connections: GETs overlap (%d at once)",
		  s.max_active);

	/* the cap per host holds, and a queued request is not a stalled one */
	server_reset(&s, CAP_DELAY_MS);
	CHECK(transfer(&s, 1, "/src/obj", 8, got, &err, NULL, NULL) ==
			  REMORA_TASK_SUCCEEDED,
		  "capped at 1 per host: succeeded although requests waited longer "
		  "than the connect and stall timeouts (%s)",
		  err->message);
	CHECK_STR(got, want, "capped: the object's SHA-256");
	CHECK(s.max_active == 1, "capped: one source GET at a time (%d)",
		  s.max_active);

	/* a source that ignores Range: one stream */
	server_reset(&s, 0);
	CHECK(transfer(&s, 0, "/src/plain", 8, got, &err, NULL, NULL) ==
			  REMORA_TASK_SUCCEEDED,
		  "no ranges: succeeded (%s)", err->message);
	CHECK_STR(got, want, "no ranges: the object's SHA-256");
	CHECK(s.source_gets == 1, "no ranges: one GET (%d)", s.source_gets);

	/* validators: Last-Modified alone will do; nothing at all will not */
	server_reset(&s, 0);
	CHECK(transfer(&s, 0, "/src/dated", 8, got, &err, NULL, NULL) ==
			  REMORA_TASK_SUCCEEDED,
		  "Last-Modified only: succeeded (%s)", err->message);
	CHECK_STR(got, want, "Last-Modified only: the object's SHA-256");
	CHECK(s.ranged_gets == 7, "Last-Modified only: in ranges (%d)",
		  s.ranged_gets);
	server_reset(&s, 0);
	CHECK(transfer(&s, 0, "/src/bare", 8, got, &err, NULL, NULL) ==
			  REMORA_TASK_SUCCEEDED,
		  "no validators: succeeded (%s)", err->message);
	CHECK_STR(got, want, "no validators: the object's SHA-256");
	CHECK(s.source_gets == 2 && s.ranged_gets == 1,
		  "no validators: the first range, then one plain GET (%d, %d)",
		  s.source_gets, s.ranged_gets);

	/* a source that changes mid-download: refused, retryably */
	server_reset(&s, 20);
	CHECK(transfer(&s, 0, "/src/swap", 4, got, &err, NULL, NULL) ==
				  REMORA_TASK_FAILED &&
			  err->class && strcmp(err->class, REMORA_ERR_SOURCE) == 0 &&
			  err->retryable,
		  "a changed source (412): failed retryably, class source (%s)",
		  err->message);
	server_reset(&s, 20);
	CHECK(transfer(&s, 0, "/src/lax", 4, got, &err, NULL, NULL) ==
				  REMORA_TASK_FAILED &&
			  err->class && strcmp(err->class, REMORA_ERR_SOURCE) == 0 &&
			  err->retryable && strstr(err->message, "ETag") != NULL,
		  "a changed source that ignores If-Match: failed by its ETag (%s)",
		  err->message);

	/* resume from a checkpoint: in parallel, from the first missing one */
	server_reset(&s, 100);
	CHECK(transfer(&s, 0, "/src/obj", 2, got, &err, cp, NULL) ==
			  REMORA_TASK_SUCCEEDED,
		  "a first attempt with checkpoints (%s)", err->message);
	CHECK(cp->nparts >= 2, "a checkpoint of %d parts taken", cp->nparts);
	if (cp->nparts >= 2)
	{
		server_reset(&s, 0);
		CHECK(transfer(&s, 0, "/src/obj", 4, got, &err, NULL, cp) ==
				  REMORA_TASK_SUCCEEDED,
			  "the resume: succeeded (%s)", err->message);
		CHECK_STR(got, want, "the resume: the object's SHA-256");
		CHECK(s.from_zero == 0 && s.ranged_gets == 7 - cp->nparts,
			  "the resume: %d ranged GETs, none from the first byte",
			  s.ranged_gets);
	}
	remora_resume_free(cp);

	test_adaptive(&s, want);
	test_upload_backpressure(&s);
	test_subranges(&s);

	/* byte-rate caps */
	server_reset(&s, 0);
	test_rate(&s, 1);
	server_reset(&s, 0);
	test_rate(&s, 4);

	__atomic_store_n(&s.stop, 1, __ATOMIC_SEQ_CST);
	pthread_join(s.thread, NULL);
	close(s.fd);
	free(s.big);
	curl_global_cleanup();
	return unit_done();
}
