/*
 * reuse_fixtures.c: the HTTP source and the S3 store with real multipart
 * uploads that the parts and reuse tests run against, and the engine
 * driven as a host drives it; see reuse_fixtures.h.
 */
#define _GNU_SOURCE /* strcasestr, memmem */
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
#include <openssl/evp.h>

#include "engine_fixtures.h"
#include "wait.h"
#include "reuse_fixtures.h"

Server store;

static void
put_all(int c, const char *p, size_t n)
{
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

static void
no_such_upload(int c)
{
	store.no_such_upload++;
	reply(c, "404 Not Found", "",
		  "<Error><Code>NoSuchUpload</Code><Message>gone</Message></Error>");
}

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

/* A query parameter's value in the request line, or NULL. */
static const char *
param(const char *req, const char *name, char *out, size_t outlen)
{
	const char *eol = strstr(req, " HTTP/");
	const char *q = strchr(req, '?');
	char        pat[64];
	const char *p;
	size_t      n;

	if (q == NULL || eol == NULL || q > eol)
		return NULL;
	snprintf(pat, sizeof(pat), "%s=", name);
	for (p = q + 1; p < eol; p += strcspn(p, "&") + 1)
		if (strncmp(p, pat, strlen(pat)) == 0)
		{
			p += strlen(pat);
			n = strcspn(p, "& ");
			if (n >= outlen)
				n = outlen - 1;
			memcpy(out, p, n);
			out[n] = '\0';
			return out;
		}
	return NULL;
}

/* The key of the request line: "/<bucket>/<key>" up to '?' or ' '. */
static void
key_of(const char *req, char *out, size_t outlen)
{
	const char *p = strchr(req, ' ') + 1;
	size_t      n;

	p = strchr(p + 1, '/') + 1; /* past /bucket/ */
	n = strcspn(p, "? ");
	if (n >= outlen)
		n = outlen - 1;
	memcpy(out, p, n);
	out[n] = '\0';
}

void
md5_etag(const char *p, size_t n, char out[40])
{
	unsigned char d[16];

	EVP_Digest(p, n, d, NULL, EVP_md5(), NULL);
	out[0] = '"';
	for (int i = 0; i < 16; i++)
		snprintf(out + 1 + 2 * i, 3, "%02x", d[i]);
	strcat(out, "\"");
}

void
blob_set(Blob *b, const char *p, size_t n)
{
	free(b->data);
	b->data = malloc(n ? n : 1);
	memcpy(b->data, p, n);
	b->len = n;
	md5_etag(p, n, b->etag);
}

Object *
object_at(const char *key, bool create)
{
	for (int i = 0; i < MAXOBJ; i++)
		if (store.objects[i].key[0] && strcmp(store.objects[i].key, key) == 0)
			return &store.objects[i];
	for (int i = 0; create && i < MAXOBJ; i++)
		if (store.objects[i].key[0] == '\0')
		{
			snprintf(store.objects[i].key, sizeof(store.objects[i].key), "%s",
					 key);
			return &store.objects[i];
		}
	return NULL;
}

static Upload *
upload_of(const char *req)
{
	char id[32];

	if (param(req, "uploadId", id, sizeof(id)) == NULL)
		return NULL;
	for (int i = 0; i < store.nuploads; i++)
		if (store.uploads[i].live && strcmp(store.uploads[i].id, id) == 0)
			return &store.uploads[i];
	return NULL;
}

/* -------------------------------------------------------------- store */

static int
parts_held(const Upload *up)
{
	int n = 0;

	for (int i = 1; i <= MAXPART; i++)
		n += up->parts[i].data != NULL;
	return n;
}

/* ListParts: a page of store.max_parts parts after part-number-marker. */
static void
list_parts(int c, const char *req, Upload *up)
{
	char v[16], answer[4096];
	int  marker = 0, n = 0, len, last = 0;

	if (param(req, "part-number-marker", v, sizeof(v)))
		marker = atoi(v);
	store.lists++;
	len = snprintf(answer, sizeof(answer), "<ListPartsResult>");
	for (int i = marker + 1; i <= MAXPART; i++)
	{
		if (up->parts[i].data == NULL)
			continue;
		if (n == store.max_parts)
		{
			len += snprintf(answer + len, sizeof(answer) - len,
							"<IsTruncated>true</IsTruncated>"
							"<NextPartNumberMarker>%d</NextPartNumberMarker>",
							last);
			break;
		}
		len += snprintf(answer + len, sizeof(answer) - len,
						"<Part><PartNumber>%d</PartNumber><ETag>%s</ETag>"
						"<Size>%zu</Size></Part>",
						i, up->parts[i].etag, up->parts[i].len);
		last = i;
		n++;
	}
	snprintf(answer + len, sizeof(answer) - len, "</ListPartsResult>");
	reply(c, "200 OK", "", answer);
}

static void
complete(int c, const char *req, const char *body, Upload *up)
{
	char          key[512];
	unsigned char md5s[16 * MAXPART];
	int           n = 0;
	size_t        len = 0;
	char         *all;
	Object       *o;
	char          etag[40], answer[768];

	key_of(req, key, sizeof(key));
	/* <Part><PartNumber>N</PartNumber><ETag>E</ETag></Part>... in order */
	for (const char *p = strstr(body, "<PartNumber>"); p;
		 p = strstr(p + 1, "<PartNumber>"))
	{
		int         no = atoi(p + 12);
		const char *e = strstr(p, "<ETag>");
		char        want[40];

		if (no < 1 || no > MAXPART || e == NULL || up->parts[no].data == NULL)
		{
			reply(c, "400 Bad Request", "",
				  "<Error><Code>InvalidPart</Code></Error>");
			return;
		}
		snprintf(want, sizeof(want), "%.*s", (int) strcspn(e + 6, "<"), e + 6);
		if (strstr(want, "&quot;") == NULL && strcmp(want, up->parts[no].etag))
		{
			reply(c, "400 Bad Request", "",
				  "<Error><Code>InvalidPart</Code></Error>");
			return;
		}
		len += up->parts[no].len;
		n++;
	}
	if (store.subset_refused && n < parts_held(up))
	{
		/* RGW: "total parts mismatch: have: 6 expected: 5" */
		reply(c, "400 Bad Request", "",
			  "<Error><Code>InvalidPart</Code></Error>");
		return;
	}
	all = malloc(len ? len : 1);
	len = 0;
	n = 0;
	for (const char *p = strstr(body, "<PartNumber>"); p;
		 p = strstr(p + 1, "<PartNumber>"))
	{
		Blob *b = &up->parts[atoi(p + 12)];

		memcpy(all + len, b->data, b->len);
		len += b->len;
		for (int i = 0; i < 16; i++)
		{
			unsigned int x;

			sscanf(b->etag + 1 + 2 * i, "%2x", &x);
			md5s[16 * n + i] = (unsigned char) x;
		}
		n++;
	}
	o = object_at(up->key, true);
	blob_set(&o->b, all, len);
	free(all);
	md5_etag((const char *) md5s, 16 * n, etag);
	snprintf(o->b.etag, sizeof(o->b.etag), "%.33s-%d\"", etag, n);
	up->live = false;
	for (int i = 0; i <= MAXPART; i++)
	{
		free(up->parts[i].data);
		up->parts[i].data = NULL;
	}
	store.completes++;
	snprintf(answer, sizeof(answer),
			 "<CompleteMultipartUploadResult><Key>%s</Key><ETag>%s</ETag>"
			 "</CompleteMultipartUploadResult>",
			 key, o->b.etag);
	reply(c, "200 OK", "", answer);
}

static void
part_copy(int c, const char *req, Upload *up, int no)
{
	char    src[600], range[64], ifm[64], answer[200];
	Object *o;
	long    first = 0, last = -1;

	header(req, "\nx-amz-copy-source:", src, sizeof(src));
	/* "/bkt/<key>": the key starts after the second slash */
	o = object_at(strchr(src + 1, '/') + 1, false);
	store.part_copies++;
	if (o == NULL)
	{
		reply(c, "404 Not Found", "", "<Error><Code>NoSuchKey</Code></Error>");
		return;
	}
	/* Swift refuses the condition on every object an upload made */
	if (header(req, "\nx-amz-copy-source-if-match:", ifm, sizeof(ifm)) &&
		(strcmp(ifm, o->b.etag) != 0 ||
		 (store.slo_if_match_refused && strchr(o->b.etag, '-') != NULL)))
	{
		reply(c, "412 Precondition Failed", "",
			  "<Error><Code>PreconditionFailed</Code></Error>");
		return;
	}
	if (header(req, "\nx-amz-copy-source-range:", range, sizeof(range)))
		sscanf(range, "bytes=%ld-%ld", &first, &last);
	else
		last = (long) o->b.len - 1;
	if (first < 0 || last >= (long) o->b.len || last < first)
	{
		reply(c, "400 Bad Request", "",
			  "<Error><Code>InvalidRange</Code></Error>");
		return;
	}
	blob_set(&up->parts[no], o->b.data + first, (size_t) (last - first + 1));
	snprintf(answer, sizeof(answer),
			 "<CopyPartResult><ETag>%s</ETag></CopyPartResult>",
			 up->parts[no].etag);
	reply(c, "200 OK", "", answer);
}

static void
serve_store(int c, const char *req, const char *body, size_t blen)
{
	char    key[512], v[64], extra[128];
	Upload *up;

	key_of(req, key, sizeof(key));
	if (strncmp(req, "HEAD ", 5) == 0)
	{
		Object *o = object_at(key, false);
		char    head[256];
		int     n;

		store.heads++;
		if (o == NULL)
		{
			reply(c, "404 Not Found", "", "");
			return;
		}
		n = snprintf(head, sizeof(head),
					 "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nETag: %s\r\n"
					 "Connection: close\r\n\r\n",
					 o->b.len, o->b.etag);
		put_all(c, head, n);
	}
	else if (strncmp(req, "GET ", 4) == 0 && strstr(req, "uploadId="))
	{
		if ((up = upload_of(req)) == NULL)
			no_such_upload(c);
		else
			list_parts(c, req, up);
	}
	else if (strncmp(req, "POST ", 5) == 0 && strstr(req, "?uploads"))
	{
		Upload *u = &store.uploads[store.nuploads++];
		char    answer[200];

		snprintf(u->id, sizeof(u->id), "up%d", store.nuploads);
		snprintf(u->key, sizeof(u->key), "%s", key);
		u->live = true;
		snprintf(answer, sizeof(answer),
				 "<InitiateMultipartUploadResult><UploadId>%s</UploadId>"
				 "</InitiateMultipartUploadResult>",
				 u->id);
		reply(c, "200 OK", "", answer);
	}
	else if (strncmp(req, "POST ", 5) == 0)
	{
		if ((up = upload_of(req)) == NULL)
			no_such_upload(c);
		else
			complete(c, req, body, up);
	}
	else if (strncmp(req, "PUT ", 4) == 0 &&
			 param(req, "partNumber", v, sizeof(v)))
	{
		int no = atoi(v);

		if ((up = upload_of(req)) == NULL)
			no_such_upload(c);
		else if (header(req, "\nx-amz-copy-source:", extra, sizeof(extra)))
			part_copy(c, req, up, no);
		else
		{
			while (store.hold_above > 0 && no > store.hold_above)
				pthread_cond_wait(&store.held, &store.mu);
			store.part_puts++;
			store.part_bytes += (long) blen;
			blob_set(&up->parts[no], body, blen);
			snprintf(extra, sizeof(extra), "ETag: %s\r\n", up->parts[no].etag);
			reply(c, "200 OK", extra, "");
		}
	}
	else if (strncmp(req, "PUT ", 4) == 0)
	{
		Object *o = object_at(key, true);

		store.put_bytes += (long) blen;
		blob_set(&o->b, body, blen);
		snprintf(extra, sizeof(extra), "ETag: %s\r\n", o->b.etag);
		reply(c, "200 OK", extra, "");
	}
	else if (strncmp(req, "DELETE ", 7) == 0)
	{
		if ((up = upload_of(req)) != NULL)
			up->live = false;
		reply(c, "204 No Content", "", "");
	}
	else
		reply(c, "404 Not Found", "", "");
}

/* The source: /src/obj, ETag "v1", Range and If-Range honoured. */
static void
serve_source(int c, const char *req)
{
	char v[64], head[512];
	long first = 0, last = OBJ_SIZE - 1;
	bool ranged = false;
	int  n;

	if (header(req, "\nRange: bytes=", v, sizeof(v)))
	{
		char *dash;

		first = strtol(v, &dash, 10);
		if (dash[1] != '\0')
			last = strtol(dash + 1, NULL, 10);
		if (last > OBJ_SIZE - 1)
			last = OBJ_SIZE - 1;
		ranged = true;
	}
	if (header(req, "\nIf-Range:", v, sizeof(v)) && strcmp(v, "\"v1\"") != 0)
		ranged = false, first = 0, last = OBJ_SIZE - 1;
	store.source_from = (int) first;
	store.source_gets++;
	store.source_bytes += last - first + 1;
	n = snprintf(head, sizeof(head),
				 "HTTP/1.1 %s\r\n%s%ld-%ld/%d%sContent-Length: %ld\r\n"
				 "ETag: \"v1\"\r\nConnection: close\r\n\r\n",
				 ranged ? "206 Partial Content" : "200 OK",
				 ranged ? "Content-Range: bytes " : "X-Whole: ", first, last,
				 OBJ_SIZE, "\r\n", last - first + 1);
	pthread_mutex_unlock(&store.mu);
	put_all(c, head, n);
	put_all(c, store.obj + first, last - first + 1);
	pthread_mutex_lock(&store.mu);
}

static void *
serve_conn(void *arg)
{
	int    c = (int) (intptr_t) arg;
	size_t cap = OBJ_SIZE + 65536, len = 0;
	char  *req = malloc(cap + 1);
	char  *end = NULL;
	char   v[64];
	long   blen = 0;

	while (req && len < cap &&
		   (end == NULL || (long) (len - (end + 4 - req)) < blen))
	{
		ssize_t n = read(c, req + len, cap - len);

		if (n <= 0)
			break;
		len += n;
		req[len] = '\0';
		if (end == NULL && (end = strstr(req, "\r\n\r\n")) != NULL)
		{
			end[2] = '\0';
			if (header(req, "\ncontent-length:", v, sizeof(v)))
				blen = strtol(v, NULL, 10);
		}
	}
	/* a request cut short (its client cancelled it) is not served */
	if (end != NULL && (long) (len - (end + 4 - req)) >= blen)
	{
		pthread_mutex_lock(&store.mu);
		if (strncmp(req, "GET /src/", 9) == 0)
			serve_source(c, req);
		else
			serve_store(c, req, end + 4, (size_t) blen);
		pthread_mutex_unlock(&store.mu);
	}
	free(req);
	close(c);
	__atomic_sub_fetch(&store.active, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

static void *
serve(void *arg)
{
	(void) arg;
	while (!__atomic_load_n(&store.stop, __ATOMIC_SEQ_CST))
	{
		struct pollfd p = {store.fd, POLLIN, 0};
		pthread_t     t;
		int           c;

		if (poll(&p, 1, 50) <= 0)
			continue;
		c = accept(store.fd, NULL, NULL);
		if (c < 0)
			continue;
		__atomic_add_fetch(&store.active, 1, __ATOMIC_SEQ_CST);
		if (pthread_create(&t, NULL, serve_conn, (void *) (intptr_t) c) != 0)
		{
			close(c);
			__atomic_sub_fetch(&store.active, 1, __ATOMIC_SEQ_CST);
		}
		else
			pthread_detach(t);
	}
	return NULL;
}

static bool
server_start(void)
{
	struct sockaddr_in a;
	socklen_t          alen = sizeof(a);

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	for (int i = 0; i < OBJ_SIZE; i++)
		store.obj[i] = (char) ((i * 13 + i / 241) & 0xff);
	pthread_mutex_init(&store.mu, NULL);
	pthread_cond_init(&store.held, NULL);
	store.max_parts = 1000;
	store.fd = socket(AF_INET, SOCK_STREAM, 0);
	if (store.fd < 0 ||
		bind(store.fd, (struct sockaddr *) &a, sizeof(a)) != 0 ||
		listen(store.fd, 64) != 0 ||
		getsockname(store.fd, (struct sockaddr *) &a, &alen) != 0)
		return false;
	store.port = ntohs(a.sin_port);
	return pthread_create(&store.thread, NULL, serve, NULL) == 0;
}

/* A connection being served, or waiting to be accepted? */
static bool
store_busy(void)
{
	struct pollfd p = {store.fd, POLLIN, 0};

	return __atomic_load_n(&store.active, __ATOMIC_SEQ_CST) > 0 ||
		   poll(&p, 1, 0) > 0;
}

void
server_reset(void)
{
	for (int64_t end = remora_now_ms() + UNIT_WAIT_MS;
		 remora_now_ms() < end && store_busy();)
		usleep(10 * 1000);
	pthread_mutex_lock(&store.mu);
	store.source_bytes = store.part_bytes = store.put_bytes = 0;
	store.part_puts = store.part_copies = store.completes =
		store.no_such_upload = 0;
	store.heads = store.source_from = store.source_gets = store.lists = 0;
	pthread_mutex_unlock(&store.mu);
}

/* ------------------------------------------------------------- engine */

RemoraEngine *
engine_new(void)
{
	RemoraEngineConfig cfg;
	char               endpoint[64], err[256];

	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%d", store.port);
	engine_config(&cfg, endpoint, true);
	cfg.part_size = PART;
	cfg.allow_networks = "127.0.0.0/8";
	/* no test here needs a stall to fire: a busy machine must not either */
	cfg.connect_timeout_ms = UNIT_WAIT_MS;
	cfg.stall_timeout_ms = UNIT_WAIT_MS;
	return remora_engine_new(&cfg, err, sizeof(err));
}

RemoraTask *
start(RemoraEngine *engine, const char *attempt, const RemoraResume *resume)
{
	RemoraTaskSpec spec;
	char           url[128], staging[64], err[256];

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/src/obj", store.port);
	snprintf(staging, sizeof(staging), "stage/1/%s/", attempt);
	memset(&spec, 0, sizeof(spec));
	spec.source_url = url;
	spec.file_name = "obj.bin";
	spec.bucket = "bkt";
	spec.staging_prefix = staging;
	spec.job_id = 1;
	spec.attempt_id = attempt;
	spec.fencing_token = 1;
	spec.connections = 1;
	spec.resume = resume;
	return remora_task_start(engine, &spec, err, sizeof(err));
}

/* A copy of a checkpoint as a resume (what a claim would offer). */
static RemoraResume *
as_resume(const RemoraTaskCheckpoint *cp)
{
	RemoraResume *r = calloc(1, sizeof(RemoraResume));

	r->etag = strdup(cp->etag);
	r->last_modified = strdup(cp->last_modified);
	r->size = cp->bytes_total;
	r->sha256_state = strdup(cp->sha256_state);
	r->upload_key = strdup(cp->upload_key);
	r->upload_id = strdup(cp->upload_id);
	r->parts = calloc(cp->nparts, sizeof(RemoraPart));
	memcpy(r->parts, cp->parts, cp->nparts * sizeof(RemoraPart));
	r->nparts = cp->nparts;
	return r;
}

/* Let the store answer every UploadPart (until_parts held some). */
static void
release_parts(void)
{
	pthread_mutex_lock(&store.mu);
	store.hold_above = 0;
	pthread_cond_broadcast(&store.held);
	pthread_mutex_unlock(&store.mu);
}

/*
 * Drive a task until its checkpoint holds at least nparts parts.  The
 * store holds the UploadParts after the first nparts meanwhile: else one
 * turn of the engine could take the task from fewer parts to its end on a
 * fast turn, and no checkpoint of parts would be seen.
 */
RemoraResume *
until_parts(RemoraEngine *engine, RemoraTask *task, int nparts)
{
	const RemoraTaskError *err;
	RemoraResume          *r = NULL;

	pthread_mutex_lock(&store.mu);
	store.hold_above = nparts;
	pthread_mutex_unlock(&store.mu);
	for (int64_t end = remora_now_ms() + UNIT_WAIT_MS;
		 r == NULL && remora_now_ms() < end &&
		 remora_task_state(task) == REMORA_TASK_RUNNING;)
	{
		RemoraTaskCheckpoint cp;

		turn_at_most(engine, 10);
		if (remora_task_checkpoint(task, &cp) && cp.nparts >= nparts)
			r = as_resume(&cp);
	}
	release_parts();
	if (r != NULL)
		return r;
	err = remora_task_error(task);
	if (remora_task_state(task) == REMORA_TASK_RUNNING)
		printf("# no checkpoint of %d parts in %d s\n", nparts,
			   UNIT_WAIT_MS / 1000);
	else
		printf("# no checkpoint of %d parts: the task ended (%s)\n", nparts,
			   err ? err->message : "no error");
	fflush(stdout);
	return NULL;
}

RemoraTaskState
finish(RemoraEngine *engine, RemoraTask *task)
{
	for (int64_t end = remora_now_ms() + UNIT_WAIT_MS;
		 remora_now_ms() < end &&
		 remora_task_state(task) == REMORA_TASK_RUNNING;)
		turn_at_most(engine, 10);
	return remora_task_state(task);
}

/* Is the member the task made the source, byte for byte, in the store? */
bool
member_is_source(RemoraTask *task)
{
	const RemoraTaskResult *r = remora_task_result(task);
	Object                 *o;
	bool                    same;

	if (r == NULL)
		return false;
	pthread_mutex_lock(&store.mu);
	o = object_at(r->member_key, false);
	same = o && o->b.len == OBJ_SIZE &&
		   memcmp(o->b.data, store.obj, OBJ_SIZE) == 0;
	pthread_mutex_unlock(&store.mu);
	return same;
}

int
live_uploads_of(const char *attempt)
{
	int  n = 0;
	char prefix[64];

	snprintf(prefix, sizeof(prefix), "stage/1/%s/", attempt);
	pthread_mutex_lock(&store.mu);
	for (int i = 0; i < store.nuploads; i++)
		n += store.uploads[i].live &&
			 strncmp(store.uploads[i].key, prefix, strlen(prefix)) == 0;
	pthread_mutex_unlock(&store.mu);
	return n;
}

bool
reuse_run(void (*const tests[])(void), int ntests)
{
	bool started;

	curl_global_init(CURL_GLOBAL_DEFAULT);
	started = server_start();
	for (int i = 0; started && i < ntests; i++)
		tests[i]();
	if (started)
	{
		__atomic_store_n(&store.stop, 1, __ATOMIC_SEQ_CST);
		pthread_join(store.thread, NULL);
		close(store.fd);
	}
	curl_global_cleanup();
	return started;
}
