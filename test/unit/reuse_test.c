/*
 * Unit tests of a member transfer's parts (src/engine/parts.c) and of a
 * replacement's reuse of the lost attempt's upload (src/engine/reuse.c),
 * against an HTTP source and an S3 store on 127.0.0.1 in threads of this
 * process.  The store keeps real multipart uploads: parts by number with
 * their MD5 ETags, CompleteMultipartUpload of the parts listed (their ETags
 * checked, the upload gone afterwards: NoSuchUpload), UploadPartCopy of a
 * byte range, HEAD, AbortMultipartUpload.  It counts the bytes it is sent,
 * so a test can tell each byte went once.
 *
 * The races: a zombie (an engine the test stops driving, as a paused
 * worker) and its replacement (another engine, with the zombie's last
 * checkpoint) in every order of who completes the zombie's upload.
 */
#define _GNU_SOURCE /* strcasestr, memmem */
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

#include "engine/engine_int.h"
#include "unit.h"

#define PART     (64 * 1024)
#define OBJ_SIZE (6 * PART + 123) /* seven parts */
#define MAXOBJ   64
#define MAXUP    64
#define MAXPART  16

typedef struct Blob
{
	char  *data;
	size_t len;
	char   etag[40]; /* quoted hex MD5 (or S3's <md5>-<n> of an upload) */
} Blob;

typedef struct Object
{
	char key[512];
	Blob b;
} Object;

typedef struct Upload
{
	char id[32];
	char key[512];
	bool live;
	Blob parts[MAXPART + 1]; /* by part number */
} Upload;

typedef struct Server
{
	int             fd;
	int             port;
	pthread_t       thread;
	int             stop;
	pthread_mutex_t mu;
	char            obj[OBJ_SIZE]; /* the source */
	Object          objects[MAXOBJ];
	Upload          uploads[MAXUP];
	int             nuploads;
	/* counters, reset by server_reset */
	long source_bytes;   /* bytes of the source sent */
	long part_bytes;     /* UploadPart bodies received */
	long put_bytes;      /* PutObject bodies received */
	int  part_puts;      /* UploadPart requests */
	int  part_copies;    /* UploadPartCopy requests */
	int  completes;      /* CompleteMultipartUpload answered 200 */
	int  no_such_upload; /* requests for an upload that is not there */
	int  heads;
	int  source_from; /* the first byte of the last source GET */
	int  source_gets;
	int  active; /* connections being served */
} Server;

static Server s;

/* ------------------------------------------------------------ helpers */

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
	s.no_such_upload++;
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

static void
md5_etag(const char *p, size_t n, char out[40])
{
	unsigned char d[16];

	EVP_Digest(p, n, d, NULL, EVP_md5(), NULL);
	out[0] = '"';
	for (int i = 0; i < 16; i++)
		snprintf(out + 1 + 2 * i, 3, "%02x", d[i]);
	strcat(out, "\"");
}

static void
blob_set(Blob *b, const char *p, size_t n)
{
	free(b->data);
	b->data = malloc(n ? n : 1);
	memcpy(b->data, p, n);
	b->len = n;
	md5_etag(p, n, b->etag);
}

static Object *
object_at(const char *key, bool create)
{
	for (int i = 0; i < MAXOBJ; i++)
		if (s.objects[i].key[0] && strcmp(s.objects[i].key, key) == 0)
			return &s.objects[i];
	for (int i = 0; create && i < MAXOBJ; i++)
		if (s.objects[i].key[0] == '\0')
		{
			snprintf(s.objects[i].key, sizeof(s.objects[i].key), "%s", key);
			return &s.objects[i];
		}
	return NULL;
}

static Upload *
upload_of(const char *req)
{
	char id[32];

	if (param(req, "uploadId", id, sizeof(id)) == NULL)
		return NULL;
	for (int i = 0; i < s.nuploads; i++)
		if (s.uploads[i].live && strcmp(s.uploads[i].id, id) == 0)
			return &s.uploads[i];
	return NULL;
}

/* -------------------------------------------------------------- store */

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
	s.completes++;
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
	s.part_copies++;
	if (o == NULL)
	{
		reply(c, "404 Not Found", "", "<Error><Code>NoSuchKey</Code></Error>");
		return;
	}
	if (header(req, "\nx-amz-copy-source-if-match:", ifm, sizeof(ifm)) &&
		strcmp(ifm, o->b.etag) != 0)
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

		s.heads++;
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
	else if (strncmp(req, "POST ", 5) == 0 && strstr(req, "?uploads"))
	{
		Upload *u = &s.uploads[s.nuploads++];
		char    answer[200];

		snprintf(u->id, sizeof(u->id), "up%d", s.nuploads);
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
			s.part_puts++;
			s.part_bytes += (long) blen;
			blob_set(&up->parts[no], body, blen);
			snprintf(extra, sizeof(extra), "ETag: %s\r\n", up->parts[no].etag);
			reply(c, "200 OK", extra, "");
		}
	}
	else if (strncmp(req, "PUT ", 4) == 0)
	{
		Object *o = object_at(key, true);

		s.put_bytes += (long) blen;
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
	s.source_from = (int) first;
	s.source_gets++;
	s.source_bytes += last - first + 1;
	n = snprintf(head, sizeof(head),
				 "HTTP/1.1 %s\r\n%s%ld-%ld/%d%sContent-Length: %ld\r\n"
				 "ETag: \"v1\"\r\nConnection: close\r\n\r\n",
				 ranged ? "206 Partial Content" : "200 OK",
				 ranged ? "Content-Range: bytes " : "X-Whole: ", first, last,
				 OBJ_SIZE, "\r\n", last - first + 1);
	pthread_mutex_unlock(&s.mu);
	put_all(c, head, n);
	put_all(c, s.obj + first, last - first + 1);
	pthread_mutex_lock(&s.mu);
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
		pthread_mutex_lock(&s.mu);
		if (strncmp(req, "GET /src/", 9) == 0)
			serve_source(c, req);
		else
			serve_store(c, req, end + 4, (size_t) blen);
		pthread_mutex_unlock(&s.mu);
	}
	free(req);
	close(c);
	__atomic_sub_fetch(&s.active, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

static void *
serve(void *arg)
{
	(void) arg;
	while (!__atomic_load_n(&s.stop, __ATOMIC_SEQ_CST))
	{
		struct pollfd p = {s.fd, POLLIN, 0};
		pthread_t     t;
		int           c;

		if (poll(&p, 1, 50) <= 0)
			continue;
		c = accept(s.fd, NULL, NULL);
		if (c < 0)
			continue;
		__atomic_add_fetch(&s.active, 1, __ATOMIC_SEQ_CST);
		if (pthread_create(&t, NULL, serve_conn, (void *) (intptr_t) c) != 0)
		{
			close(c);
			__atomic_sub_fetch(&s.active, 1, __ATOMIC_SEQ_CST);
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
		s.obj[i] = (char) ((i * 13 + i / 241) & 0xff);
	pthread_mutex_init(&s.mu, NULL);
	s.fd = socket(AF_INET, SOCK_STREAM, 0);
	if (s.fd < 0 || bind(s.fd, (struct sockaddr *) &a, sizeof(a)) != 0 ||
		listen(s.fd, 64) != 0 ||
		getsockname(s.fd, (struct sockaddr *) &a, &alen) != 0)
		return false;
	s.port = ntohs(a.sin_port);
	return pthread_create(&s.thread, NULL, serve, NULL) == 0;
}

/* A connection being served, or waiting to be accepted? */
static bool
store_busy(void)
{
	struct pollfd p = {s.fd, POLLIN, 0};

	return __atomic_load_n(&s.active, __ATOMIC_SEQ_CST) > 0 ||
		   poll(&p, 1, 0) > 0;
}

/*
 * Zero the counters, once the requests of the test before (a cancelled
 * task's, which the store may still be reading) are served: at most 5 s.
 */
static void
server_reset(void)
{
	for (int i = 0; i < 500 && store_busy(); i++)
		usleep(10 * 1000);
	pthread_mutex_lock(&s.mu);
	s.source_bytes = s.part_bytes = s.put_bytes = 0;
	s.part_puts = s.part_copies = s.completes = s.no_such_upload = 0;
	s.heads = s.source_from = s.source_gets = 0;
	pthread_mutex_unlock(&s.mu);
}

/* ------------------------------------------------------------- engine */

static RemoraEngine *
engine_new(void)
{
	RemoraEngineConfig cfg;
	char               endpoint[64], err[256];

	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%d", s.port);
	memset(&cfg, 0, sizeof(cfg));
	cfg.target.endpoint = endpoint;
	cfg.target.region = "eu-west-1";
	cfg.target.path_style = true;
	cfg.target.access_key_id = "AKID";
	cfg.target.secret_access_key = "SECRET";
	cfg.part_size = PART;
	cfg.allow_networks = "127.0.0.0/8";
	cfg.deny_networks = "";
	cfg.connect_timeout_ms = 2000;
	cfg.stall_timeout_ms = 2000;
	return remora_engine_new(&cfg, err, sizeof(err));
}

static RemoraTask *
start(RemoraEngine *engine, const char *attempt, const RemoraResume *resume)
{
	RemoraTaskSpec spec;
	char           url[128], staging[64], err[256];

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/src/obj", s.port);
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

static void
turn(RemoraEngine *engine)
{
	struct pollfd p = {remora_engine_fd(engine), POLLIN, 0};
	long          t = remora_engine_timeout_ms(engine);

	poll(&p, 1, t < 0 || t > 10 ? 10 : (int) t);
	remora_engine_run(engine);
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

/* Drive a task until its checkpoint holds at least nparts parts. */
static RemoraResume *
until_parts(RemoraEngine *engine, RemoraTask *task, int nparts)
{
	for (int i = 0; i < 3000 && remora_task_state(task) == REMORA_TASK_RUNNING;
		 i++)
	{
		RemoraTaskCheckpoint cp;

		turn(engine);
		if (remora_task_checkpoint(task, &cp) && cp.nparts >= nparts)
			return as_resume(&cp);
	}
	return NULL;
}

static RemoraTaskState
finish(RemoraEngine *engine, RemoraTask *task)
{
	for (int i = 0; i < 3000 && remora_task_state(task) == REMORA_TASK_RUNNING;
		 i++)
		turn(engine);
	return remora_task_state(task);
}

/* Is the member the task made the source, byte for byte, in the store? */
static bool
member_is_source(RemoraTask *task)
{
	const RemoraTaskResult *r = remora_task_result(task);
	Object                 *o;
	bool                    same;

	if (r == NULL)
		return false;
	pthread_mutex_lock(&s.mu);
	o = object_at(r->member_key, false);
	same = o && o->b.len == OBJ_SIZE && memcmp(o->b.data, s.obj, OBJ_SIZE) == 0;
	pthread_mutex_unlock(&s.mu);
	return same;
}

static int
live_uploads_of(const char *attempt)
{
	int  n = 0;
	char prefix[64];

	snprintf(prefix, sizeof(prefix), "stage/1/%s/", attempt);
	pthread_mutex_lock(&s.mu);
	for (int i = 0; i < s.nuploads; i++)
		n += s.uploads[i].live &&
			 strncmp(s.uploads[i].key, prefix, strlen(prefix)) == 0;
	pthread_mutex_unlock(&s.mu);
	return n;
}

/* ------------------------------------------------------------- tests */

static void
test_happy_path(void)
{
	RemoraEngine *e = engine_new();
	RemoraTask   *t = start(e, "a1", NULL);

	server_reset();
	CHECK(finish(e, t) == REMORA_TASK_SUCCEEDED && member_is_source(t),
		  "seven parts: the member is the source");
	CHECK(s.part_puts == 7 && s.part_bytes == OBJ_SIZE && s.part_copies == 0 &&
			  s.completes == 1,
		  "each byte sent once: %d UploadParts of %ld bytes, %d copies, %d "
		  "completion",
		  s.part_puts, s.part_bytes, s.part_copies, s.completes);
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
	CHECK(s.completes == 2 && s.part_copies == r->nparts &&
			  s.source_from == done - 1 && s.part_bytes == OBJ_SIZE - done,
		  "it completed the lost upload, copied its %d parts, and read and "
		  "sent only the rest (from byte %d, %ld bytes)",
		  s.part_copies, s.source_from, s.part_bytes);
	CHECK(!remora_task_restarted(b, &(const char *){NULL}),
		  "and did not restart from zero");
	remora_task_free(b);
	remora_resume_free(r);
	remora_engine_free(e);
}

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
			  s.part_copies == r->nparts,
		  "it reused the zombie's %d parts", s.part_copies);
	/* the zombie wakes up */
	CHECK(finish(ez, z) == REMORA_TASK_FAILED && s.no_such_upload >= 1,
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
	CHECK(s.no_such_upload == 1 && s.heads >= 1 && s.part_copies == r->nparts &&
			  !remora_task_restarted(b, &(const char *){NULL}),
		  "its completion found no upload, a HEAD found the zombie's object, "
		  "%d parts copied from it",
		  s.part_copies);
	remora_task_free(z);
	remora_task_free(b);
	remora_resume_free(r);
	remora_engine_free(ez);
	remora_engine_free(er);
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
	for (int i = 0; i < 100 && live_uploads_of("e1") > 0; i++)
		turn(e); /* the abort is sent */
	server_reset();
	b = start(e, "e2", r);
	CHECK(finish(e, b) == REMORA_TASK_SUCCEEDED && member_is_source(b) &&
			  remora_task_restarted(b, &why) && why &&
			  strstr(why, "no longer in the store") != NULL &&
			  s.source_from == 0 && s.part_copies == 0,
		  "upload gone: restarted from zero (%s)", why ? why : "");
	remora_task_free(b);

	/* an object at the key whose first part is not the validated one */
	pthread_mutex_lock(&s.mu);
	o = object_at(r->upload_key, true);
	blob_set(&o->b, s.obj, OBJ_SIZE);
	o->b.data[10] ^= 1;
	md5_etag(o->b.data, o->b.len, o->b.etag);
	pthread_mutex_unlock(&s.mu);
	server_reset();
	b = start(e, "e3", r);
	why = NULL;
	CHECK(finish(e, b) == REMORA_TASK_SUCCEEDED && member_is_source(b) &&
			  remora_task_restarted(b, &why) && why &&
			  strstr(why, "ETag differs") != NULL && s.source_from == 0,
		  "a part that differs: restarted from zero in a new upload (%s)",
		  why ? why : "");
	CHECK(live_uploads_of("e3") == 0,
		  "the upload the copies went to is aborted");
	remora_task_free(b);
	remora_resume_free(r);
	remora_engine_free(e);
}

int
main(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
	if (!server_start())
	{
		CHECK(false, "the test server starts");
		return unit_done();
	}
	test_happy_path();
	test_resume();
	test_zombie_loses();
	test_zombie_wins();
	test_nothing_to_reuse();
	__atomic_store_n(&s.stop, 1, __ATOMIC_SEQ_CST);
	pthread_join(s.thread, NULL);
	close(s.fd);
	curl_global_cleanup();
	return unit_done();
}
