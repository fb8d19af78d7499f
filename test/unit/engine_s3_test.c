/*
 * Unit tests of what the engine says to a store and reads from it: S3
 * addressing (path and virtual-host style, key encoding, src/engine/s3/s3.c),
 * the ETags and XML answers of different stores' dialects, the resumable
 * SHA-256 state of a member (src/engine/common/hash.c), unsigned requests to an
 * anonymous endpoint, and the errors that name a bucket's region.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "engine_fixtures.h"
#include "unit.h"

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

/* Does any header of the request start with prefix (any case)? */
static bool
has_header(const Request *req, const char *prefix)
{
	for (const struct curl_slist *h = req->headers; h; h = h->next)
		if (strncasecmp(h->data, prefix, strlen(prefix)) == 0)
			return true;
	return false;
}

/* An endpoint without credentials is read with no signature at all. */
static void
test_anonymous(void)
{
	RemoraEngine      *e = engine_for("http://127.0.0.1:9000", true);
	RemoraTargetConfig anon = {0};
	RemoraTargetConfig keyed = {0};
	RemoraKV           list[1] = {{"list-type", "2"}};
	S3Call             call = {0};
	S3Endpoint         ep;
	Request           *req;
	char               err[256];
	char              *url;

	anon = (RemoraTargetConfig){.endpoint = "http://127.0.0.1:9000",
								.region = "us-east-1",
								.path_style = true,
								.access_key_id = "",
								.secret_access_key = "",
								.anonymous = true};
	keyed = anon;
	keyed.access_key_id = "AKID";
	keyed.secret_access_key = "SECRET";
	keyed.anonymous = false;
	call =
		(S3Call){.method = "GET", .bucket = "pub", .query = list, .nquery = 1};
	url = remora_s3_presign_get(&anon, "pub", "a b.bin", 0, 3600, err,
								sizeof(err));
	CHECK_STR(url, "http://127.0.0.1:9000/pub/a%20b.bin",
			  "an anonymous GET URL is the plain URL");
	free(url);
	url = remora_s3_presign_get(&keyed, "pub", "a b.bin", 0, 3600, err,
								sizeof(err));
	CHECK(url && strstr(url, "X-Amz-Signature=") &&
			  strstr(url, "X-Amz-Credential=AKID"),
		  "a keyed endpoint's GET URL is presigned");
	free(url);

	ep = e->target;
	ep.auth = &anon;
	ep.anonymous = true;
	req = remora_s3_request(&e->loop, &ep, NULL, &call, NULL, err, sizeof(err));
	CHECK(req != NULL, "an anonymous request is made: %s", err);
	if (req)
	{
		CHECK(!has_header(req, "Authorization:") &&
				  !has_header(req, "x-amz-date:") &&
				  !has_header(req, "x-amz-content-sha256:"),
			  "an anonymous request carries no signature");
		remora_req_cancel(req);
	}
	req = remora_s3_request(&e->loop, &e->target, NULL, &call, NULL, err,
							sizeof(err));
	CHECK(req && has_header(req, "Authorization: AWS4-HMAC-SHA256"),
		  "the target's requests are signed");
	if (req)
		remora_req_cancel(req);
	remora_engine_free(e);
}

/* The value of the request's header name (any case), or NULL. */
static const char *
header_value(const Request *req, const char *name)
{
	size_t n = strlen(name);

	for (const struct curl_slist *h = req->headers; h; h = h->next)
		if (strncasecmp(h->data, name, n) == 0 && h->data[n] == ':')
			return h->data + n + 2;
	return NULL;
}

/*
 * Temporary credentials: the token goes with every request, signed, and
 * into presigned URLs, where S3 signs it with the rest.
 */
static void
test_session_token(void)
{
	RemoraEngineConfig cfg;
	RemoraEngine      *e;
	char               err[256];
	S3Call             call = {.method = "GET", .bucket = "b", .key = "k"};
	Request           *req;
	const char        *auth;
	char              *url;

	engine_config(&cfg, "http://127.0.0.1:9000", true);
	cfg.target.session_token = "FQoG/token+x=";
	e = remora_engine_new(&cfg, err, sizeof(err));
	CHECK(e != NULL, "an engine with a session token: %s", err);
	if (e == NULL)
		return;
	req = remora_s3_request(&e->loop, &e->target, NULL, &call, NULL, err,
							sizeof(err));
	CHECK(req != NULL, "a request is signed: %s", err);
	if (req)
	{
		auth = header_value(req, "Authorization");
		CHECK_STR(header_value(req, "x-amz-security-token"),
				  "FQoG/token+x=", "the token is sent as x-amz-security-token");
		CHECK(auth && strstr(auth, "x-amz-security-token"), "and signed: %s",
			  auth ? auth : "(none)");
		remora_req_cancel(req);
	}
	url =
		remora_s3_presign_get(&cfg.target, "b", "k", 0, 3600, err, sizeof(err));
	CHECK(url && strstr(url, "X-Amz-Security-Token=FQoG%2Ftoken%2Bx%3D"),
		  "a presigned URL carries the token, encoded: %s", url ? url : err);
	free(url);
	cfg.target.session_token = NULL;
	url =
		remora_s3_presign_get(&cfg.target, "b", "k", 0, 3600, err, sizeof(err));
	CHECK(url && !strstr(url, "X-Amz-Security-Token"), "and none without one");
	free(url);
	remora_engine_free(e);
}

/* The engine's request for call, its header name's value checked. */
static void
check_header(RemoraEngine *e, const S3Call *call, const char *name,
			 const char *want, const char *what)
{
	char     err[256] = "";
	Request *req = remora_s3_request(&e->loop, &e->target, NULL, call, NULL,
									 err, sizeof(err));

	CHECK(req != NULL, "%s: made (%s)", what, err);
	if (req == NULL)
		return;
	if (want)
		CHECK_STR(header_value(req, name), want, "%s", what);
	else
		CHECK(header_value(req, name) == NULL, "%s (got %s)", what,
			  header_value(req, name));
	remora_req_cancel(req);
}

static RemoraEngine *
engine_sse(const char *sse, const char *kms, const char *key,
		   const char *storage_class, char *err, size_t errlen)
{
	RemoraEngineConfig cfg;

	engine_config(&cfg, "http://127.0.0.1:9000", true);
	cfg.sse = (RemoraSseConfig){sse, kms, key, storage_class};
	return remora_engine_new(&cfg, err, errlen);
}

/*
 * What each request carries under each kind of server-side encryption:
 * an object created names it (and its storage class), SSE-C's key goes
 * with every request on an object's data, and a copy of Remora's own
 * object sends it as the source's key too.
 */
static void
test_sse(void)
{
	/* base64 of 32 bytes "0123456789abcdef0123456789abcdef", and its MD5 */
	const char *key = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
	const char *md5 = "hRasmdxgYDKV3nvbahU1MA==";
	RemoraKV    uploads[1] = {{"uploads", ""}};
	RemoraKV    part[2] = {{"partNumber", "1"}, {"uploadId", "u"}};
	RemoraKV    done[1] = {{"uploadId", "u"}};
	RemoraKV    list[1] = {{"list-type", "2"}};
	RemoraKV    copy[1] = {{"x-amz-copy-source", "/b/src"}};
	S3Call      put = {.method = "PUT", .bucket = "b", .key = "k"};
	S3Call      create = {.method = "POST",
						  .bucket = "b",
						  .key = "k",
						  .query = uploads,
						  .nquery = 1};
	S3Call      upload = {
			 .method = "PUT", .bucket = "b", .key = "k", .query = part, .nquery = 2};
	S3Call complete = {.method = "POST",
					   .bucket = "b",
					   .key = "k",
					   .query = done,
					   .nquery = 1};
	S3Call get = {.method = "GET", .bucket = "b", .key = "k"};
	S3Call listing = {
		.method = "GET", .bucket = "b", .query = list, .nquery = 1};
	S3Call        del = {.method = "DELETE", .bucket = "b", .key = "k"};
	S3Call        ours = {.method = "PUT",
						  .bucket = "b",
						  .key = "k",
						  .headers = copy,
						  .nheaders = 1,
						  .copy_source_ours = true};
	S3Call        theirs = ours;
	char          err[256];
	RemoraEngine *e;

	theirs.copy_source_ours = false;
	e = engine_sse("aws:kms", "key-1", NULL, "STANDARD_IA", err, sizeof(err));
	CHECK(e != NULL, "SSE-KMS with a key id: %s", err);
	if (e)
	{
		const char *kms = "x-amz-server-side-encryption-aws-kms-key-id";

		check_header(e, &put, "x-amz-server-side-encryption", "aws:kms",
					 "a PUT of an object names SSE-KMS");
		check_header(e, &put, kms, "key-1", "and its key");
		check_header(e, &put, "x-amz-storage-class", "STANDARD_IA",
					 "and the storage class");
		check_header(e, &create, "x-amz-server-side-encryption", "aws:kms",
					 "CreateMultipartUpload names SSE-KMS");
		check_header(e, &create, kms, "key-1", "and its key");
		check_header(e, &theirs, "x-amz-server-side-encryption", "aws:kms",
					 "CopyObject names SSE-KMS");
		check_header(e, &upload, "x-amz-server-side-encryption", NULL,
					 "UploadPart does not (S3 refuses it there)");
		check_header(e, &get, "x-amz-server-side-encryption", NULL,
					 "nor does a GET");
		put.storage_class = "GLACIER_IR";
		check_header(e, &put, "x-amz-storage-class", "GLACIER_IR",
					 "a job's own storage class wins");
		put.storage_class = NULL;
		remora_engine_free(e);
	}
	e = engine_sse("customer", NULL, key, NULL, err, sizeof(err));
	CHECK(e != NULL, "SSE-C with a key: %s", err);
	if (e)
	{
		const char *alg = "x-amz-server-side-encryption-customer-algorithm";
		const char *k = "x-amz-server-side-encryption-customer-key";
		const char *m = "x-amz-server-side-encryption-customer-key-md5";
		const char *ck =
			"x-amz-copy-source-server-side-encryption-customer-key";

		check_header(e, &put, alg, "AES256", "a PUT sends SSE-C's algorithm");
		check_header(e, &put, k, key, "its key");
		check_header(e, &put, m, md5, "and the key's MD5");
		check_header(e, &put, "x-amz-server-side-encryption", NULL,
					 "and not x-amz-server-side-encryption");
		check_header(e, &create, k, key, "CreateMultipartUpload sends it");
		check_header(e, &upload, k, key, "UploadPart sends it");
		check_header(e, &complete, k, NULL,
					 "CompleteMultipartUpload does not (S3 asks it not)");
		check_header(e, &get, k, key, "a GET of an object too");
		check_header(e, &listing, k, NULL, "a listing does not");
		check_header(e, &del, k, NULL, "nor a DELETE");
		check_header(e, &ours, ck, key,
					 "a copy of Remora's object sends the source's key");
		check_header(e, &theirs, ck, NULL,
					 "a copy of a user's object does not");
		check_header(e, &theirs, k, key, "but encrypts the copy with the key");
		remora_engine_free(e);
	}
	e = engine_sse("AES256", NULL, NULL, NULL, err, sizeof(err));
	CHECK(e != NULL, "SSE-S3: %s", err);
	if (e)
	{
		check_header(e, &put, "x-amz-server-side-encryption", "AES256",
					 "a PUT names AES256");
		check_header(e, &put, "x-amz-storage-class", NULL,
					 "no storage class unless one is set");
		remora_engine_free(e);
	}
	CHECK(engine_sse("aws:kms:dsse", NULL, NULL, NULL, err, sizeof(err)) ==
				  NULL &&
			  strstr(err, "AES256, aws:kms or customer"),
		  "another encryption is refused: %s", err);
	CHECK(engine_sse("customer", NULL, "c2hvcnQ=", NULL, err, sizeof(err)) ==
				  NULL &&
			  strstr(err, "32 bytes") && !strstr(err, "c2hvcnQ"),
		  "a customer key that is not 32 bytes is refused, unquoted: %s", err);
	CHECK(engine_sse("customer", NULL, NULL, NULL, err, sizeof(err)) == NULL,
		  "SSE-C without a key is refused");
	CHECK(engine_sse(NULL, NULL, NULL, "COLD", err, sizeof(err)) == NULL &&
			  strstr(err, "storage class"),
		  "a storage class S3 does not name is refused: %s", err);
}

/* The answer of a store as a failed request of the given region. */
static void
failure(long status, const char *region_header, const char *body,
		const char *signed_region, RemoraTaskError *err)
{
	Request req;

	memset(&req, 0, sizeof(req));
	remora_http_headers_init(&req.hdr);
	req.status = status;
	req.body = (char *) body;
	req.body_len = strlen(body);
	req.region = signed_region;
	if (region_header)
		snprintf(req.hdr.bucket_region, sizeof(req.hdr.bucket_region), "%s",
				 region_header);
	CHECK(remora_s3_failed(&req, CURLE_OK, err, "listing the source"),
		  "HTTP %ld is a failure", status);
}

/*
 * AWS's answers to a request sent to the wrong region, as its error
 * documentation lists them (PermanentRedirect, 301; AuthorizationHeader-
 * Malformed, 400) with the bodies S3 sends: final, naming the region.
 */
static void
test_region_errors(void)
{
	RemoraTaskError err;

	failure(301, "eu-west-1",
			"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>"
			"PermanentRedirect</Code><Message>The bucket you are attempting "
			"to access must be addressed using the specified endpoint. "
			"Please send all future requests to this endpoint.</Message>"
			"<Bucket>pub</Bucket><Endpoint>pub.s3.eu-west-1.amazonaws.com"
			"</Endpoint><RequestId>D4FC960AEE757AF2</RequestId><HostId>"
			"aGVsbG8=</HostId></Error>",
			"us-east-1", &err);
	CHECK(strcmp(err.class, REMORA_ERR_S3) == 0 && !err.retryable &&
			  strcmp(err.s3_code, "PermanentRedirect") == 0 &&
			  strstr(err.message, "region eu-west-1") &&
			  strstr(err.message, "register the endpoint"),
		  "PermanentRedirect is final and names the region: %s", err.message);

	failure(301, NULL,
			"<Error><Code>PermanentRedirect</Code><Message>m</Message>"
			"<Bucket>pub</Bucket><Endpoint>pub.s3.eu-west-1.amazonaws.com"
			"</Endpoint></Error>",
			"us-east-1", &err);
	CHECK(!err.retryable &&
			  strstr(err.message, "pub.s3.eu-west-1.amazonaws.com"),
		  "without x-amz-bucket-region it names the endpoint: %s", err.message);

	failure(400, NULL,
			"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>"
			"AuthorizationHeaderMalformed</Code><Message>The authorization "
			"header is malformed; the region 'us-east-1' is wrong; "
			"expecting 'eu-west-1'</Message><Region>eu-west-1</Region>"
			"<RequestId>7T88HFP23DFETSEW</RequestId><HostId>aGVsbG8=</HostId>"
			"</Error>",
			"us-east-1", &err);
	CHECK(strcmp(err.class, REMORA_ERR_S3) == 0 && !err.retryable &&
			  strcmp(err.s3_code, "AuthorizationHeaderMalformed") == 0 &&
			  strstr(err.message, "region eu-west-1"),
		  "AuthorizationHeaderMalformed with <Region> is final and names "
		  "it: %s",
		  err.message);

	failure(503, "ap-south-1",
			"<Error><Code>SlowDown</Code><Message>m</Message></Error>",
			"us-east-1", &err);
	CHECK(!err.retryable && strstr(err.message, "region ap-south-1"),
		  "x-amz-bucket-region of another region on any error is final: %s",
		  err.message);

	failure(503, "us-east-1",
			"<Error><Code>SlowDown</Code><Message>m</Message></Error>",
			"us-east-1", &err);
	CHECK(err.retryable && !strstr(err.message, "region"),
		  "x-amz-bucket-region of the request's own region changes "
		  "nothing: %s",
		  err.message);

	failure(400, "eu-west-1\r\nX: y", "", "us-east-1", &err);
	CHECK(!strstr(err.message, "X: y"),
		  "a region that is not a region name is never quoted: %s",
		  err.message);
	failure(400, NULL,
			"<Error><Code>AuthorizationHeaderMalformed</Code><Region>"
			"eu west;1</Region></Error>",
			"us-east-1", &err);
	CHECK(!strstr(err.message, "eu west"), "nor one from the body: %s",
		  err.message);
}

int
main(void)
{
	test_addressing();
	test_sha256_state();
	test_etags();
	test_answers();
	test_anonymous();
	test_session_token();
	test_sse();
	test_region_errors();
	return unit_done();
}
