/*
 * Unit tests of AWS Signature Version 4 (src/engine/sigv4_*.c): the rules
 * of the canonical request (URI encoding, query sorting, header folding,
 * the date) and the refusals of requests, credentials and buffers the
 * signer must not sign.  Plain C, built with AddressSanitizer and UBSan.
 *
 * The known answers that show the signatures themselves are in
 * sigv4_vectors_test.c.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sigv4_fixtures.h"

/* Line n (0-based) of the canonical request, malloc'd; NULL on failure. */
static char *
creq_line(const RemoraSigV4Request *req, const RemoraSigV4Creds *creds, int n)
{
	char *creq = NULL;
	char *sts = NULL;
	char *line = NULL;

	if (remora_sigv4_debug(req, creds, T_SUITE, &creq, &sts))
	{
		const char *p = creq;

		for (int i = 0; i < n && p != NULL; i++)
		{
			p = strchr(p, '\n');
			if (p != NULL)
				p++;
		}
		if (p != NULL)
		{
			size_t len = strcspn(p, "\n");

			line = malloc(len + 1);
			if (line != NULL)
			{
				memcpy(line, p, len);
				line[len] = '\0';
			}
		}
	}
	free(creq);
	free(sts);
	return line;
}

/* The canonical query string of "GET /?<query>". */
static void
check_query(const char *name, const RemoraKV *query, int nquery,
			const char *want)
{
	RemoraSigV4Request req =
		mkreq("GET", "/", query, nquery, suite_headers, 2, EMPTY_SHA256);
	char *line = creq_line(&req, &suite_creds, 2);

	CHECK_STR(line, want, "canonical query: %s", name);
	free(line);
}

/* The canonical URI of "GET <path>". */
static void
check_path(const char *path, const char *want)
{
	RemoraSigV4Request req =
		mkreq("GET", path, NULL, 0, suite_headers, 2, EMPTY_SHA256);
	char *line = creq_line(&req, &suite_creds, 1);

	CHECK_STR(line, want, "canonical URI of \"%s\"", path);
	free(line);
}

static void
check_encode(const char *in, size_t len, bool keep_slash, const char *want)
{
	char *got = remora_uri_encode(in, len, keep_slash);

	CHECK_STR(got, want, "uri_encode gives \"%s\" (%s)", want,
			  keep_slash ? "'/' kept" : "'/' encoded");
	free(got);
}

static void
refuses_sign(const char *name, const RemoraSigV4Request *req,
			 const RemoraSigV4Creds *creds, time_t now, const char *needle)
{
	RemoraSigV4Result res;
	char              err[256] = "";
	bool ok = remora_sigv4_sign(req, creds, now, &res, err, sizeof(err));

	CHECK(!ok && strstr(err, needle) != NULL, "refuses %s: %s", name, err);
	CHECK(!leaks_secret(err) && res.authorization[0] == '\0',
		  "no secret and no header when refusing %s", name);
}

static void
refuses_presign(const char *name, const RemoraSigV4Request *req, int expires,
				const char *needle)
{
	char  err[256] = "";
	char *url =
		remora_sigv4_presign(req, &s3_creds, T_S3, expires, err, sizeof(err));

	CHECK(url == NULL && strstr(err, needle) != NULL,
		  "refuses to presign %s: %s", name, err);
	CHECK(!leaks_secret(err), "no secret in the presign error for %s", name);
	free(url);
}

/* ----------------------------------------------------------------
 * Encoding, sorting and header rules
 * ----------------------------------------------------------------
 */
static void
test_uri_encode(void)
{
	int all_ok = 1;

	check_encode("a b", 3, false, "a%20b");
	check_encode("a+b", 3, false, "a%2Bb");
	check_encode("~-_.", 4, false, "~-_.");
	check_encode("a/b", 3, true, "a/b");
	check_encode("a/b", 3, false, "a%2Fb");
	check_encode("*", 1, false, "%2A");
	check_encode("100%", 4, false, "100%25");
	check_encode("%2F", 3, true, "%252F");
	check_encode("=&?#", 4, true, "%3D%26%3F%23");
	check_encode("\xC3\xA9", 2, false, "%C3%A9");
	check_encode("\xF0\x9F\x98\x80", 4, false, "%F0%9F%98%80");
	check_encode("\xFF", 1, false, "%FF");
	check_encode("a\0b", 3, false, "a%00b");
	check_encode("", 0, false, "");
	check_encode(NULL, 0, true, "");
	CHECK(remora_uri_encode(NULL, 1, true) == NULL,
		  "uri_encode(NULL, 1) is NULL");

	/* every byte: kept exactly when unreserved, else %XX upper-case */
	for (int c = 0; c < 256; c++)
	{
		char in = (char) c;
		bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
					(c >= '0' && c <= '9') || c == '-' || c == '_' ||
					c == '.' || c == '~';
		char want[4];

		if (keep)
			snprintf(want, sizeof(want), "%c", c);
		else
			snprintf(want, sizeof(want), "%%%02X", c);
		char *got = remora_uri_encode(&in, 1, false);

		if (got == NULL || strcmp(got, want) != 0)
			all_ok = 0;
		free(got);
	}
	CHECK(all_ok, "uri_encode: all 256 byte values");
}

static void
test_sha256(void)
{
	char out[65];

	remora_sha256_hex("", 0, out);
	CHECK_STR(out, EMPTY_SHA256, "SHA-256 of nothing");
	remora_sha256_hex("abc", 3, out);
	CHECK_STR(
		out, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
		"SHA-256 of abc (FIPS 180-2)");
}

static void
test_query_rules(void)
{
	static const RemoraKV space_plus[] = {{"q", "a b+c"}};
	static const RemoraKV slash[] = {{"prefix", "dir/sub dir/"}};
	static const RemoraKV special[] = {{"k", "x=y&z*~%"}};
	static const RemoraKV dup[] = {{"a", "2"}, {"a", "10"}, {"a", "1"}};
	static const RemoraKV keycase[] = {{"b", "1"}, {"a", "z"}, {"A", "y"}};
	static const RemoraKV valueless[] = {
		{"uploads", NULL}, {"uploadId", ""}, {"delete", NULL}};
	/* raw 0x7E sorts before raw 0xC3, but "%" sorts before "~" */
	static const RemoraKV encoded_order[] = {{"a~", "2"}, {"a\xC3\xA9", "1"}};
	static const RemoraKV unicode[] = {
		{"name", "caf\xC3\xA9 \xF0\x9F\x98\x80"}};

	check_query("space and plus", space_plus, 1, "q=a%20b%2Bc");
	check_query("'/' is encoded in values", slash, 1,
				"prefix=dir%2Fsub%20dir%2F");
	check_query("= & * ~ %", special, 1, "k=x%3Dy%26z%2A~%25");
	check_query("duplicate keys sort by value", dup, 3, "a=1&a=10&a=2");
	check_query("key order is bytewise (upper case first)", keycase, 3,
				"A=y&a=z&b=1");
	check_query("valueless keys", valueless, 3, "delete=&uploadId=&uploads=");
	check_query("sorted by encoded key", encoded_order, 2, "a%C3%A9=1&a~=2");
	check_query("unicode values", unicode, 1, "name=caf%C3%A9%20%F0%9F%98%80");
	check_query("no query", NULL, 0, "");
}

static void
test_path_rules(void)
{
	check_path("", "/");
	check_path("/", "/");
	check_path("/bucket/a b+c~.txt", "/bucket/a%20b%2Bc~.txt");
	check_path("/bucket/already%20encoded", "/bucket/already%2520encoded");
	check_path("/a/../b/./c", "/a/../b/./c");
	check_path("/b/k?x=1#f", "/b/k%3Fx%3D1%23f");
	check_path("/b/caf\xC3\xA9/\xF0\x9F\x98\x80", "/b/caf%C3%A9/%F0%9F%98%80");
}

static void
test_header_rules(void)
{
	static const RemoraKV headers[] = {
		{"X-Amz-Meta-A", "\t a \t\t b  c \t"}, {"HOST", "  h.example  "},
		{"x-amz-date", "20150830T123600Z"},    {"Empty", ""},
		{"X-Amz-Meta-Utf8", "caf\xC3\xA9"},
	};
	RemoraSigV4Request req =
		mkreq("GET", "/", NULL, 0, headers, 5, EMPTY_SHA256);

	check_debug(
		"header rules", &req, &suite_creds, T_SUITE,
		"GET\n/\n\n"
		"empty:\n"
		"host:h.example\n"
		"x-amz-date:20150830T123600Z\n"
		"x-amz-meta-a:a b c\n"
		"x-amz-meta-utf8:caf\xC3\xA9\n"
		"\n"
		"empty;host;x-amz-date;x-amz-meta-a;x-amz-meta-utf8\n" EMPTY_SHA256,
		NULL);
}

static void
test_time(void)
{
	RemoraSigV4Request req =
		mkreq("GET", "/", NULL, 0, suite_headers, 1, EMPTY_SHA256);
	RemoraSigV4Result res;
	char              err[256] = "";

	/* only the host header, so that any time can be signed */
	CHECK(remora_sigv4_sign(&req, &suite_creds, T_SUITE + 59, &res, err,
							sizeof(err)) &&
			  strcmp(res.amz_date, "20150830T123659Z") == 0,
		  "x-amz-date is UTC, seconds included (%s)", res.amz_date);
	CHECK(remora_sigv4_sign(&req, &suite_creds, (time_t) 951782400, &res, err,
							sizeof(err)) &&
			  strcmp(res.amz_date, "20000229T000000Z") == 0,
		  "x-amz-date on a leap day (%s)", res.amz_date);
	if (sizeof(time_t) > 4)
	{
		/* year 10000 does not fit YYYYMMDD */
		CHECK(!remora_sigv4_sign(&req, &suite_creds, (time_t) 253402300800LL,
								 &res, err, sizeof(err)) &&
				  strstr(err, "time") != NULL,
			  "refuses a time past year 9999: %s", err);
	}
}

/* ----------------------------------------------------------------
 * Refusals
 * ----------------------------------------------------------------
 */
static void
test_bad_headers(void)
{
	static const RemoraKV no_host[] = {{"x-amz-date", "20130524T000000Z"}};
	static const RemoraKV empty_host[] = {{"Host", "  "}};
	static const RemoraKV crlf[] = {{"Host", S3_HOST},
									{"x-amz-meta-a", "a\r\nX-Evil: 1"}};
	static const RemoraKV lf[] = {{"Host", S3_HOST}, {"x-amz-meta-a", "a\nb"}};
	static const RemoraKV colon[] = {{"Host", S3_HOST}, {"X:Y", "1"}};
	static const RemoraKV space[] = {{"Host", S3_HOST}, {"X Y", "1"}};
	static const RemoraKV ctrl[] = {{"Host", S3_HOST}, {"X\x01Y", "1"}};
	static const RemoraKV noname[] = {{"Host", S3_HOST}, {"", "1"}};
	static const RemoraKV nullval[] = {{"Host", S3_HOST}, {"X-A", NULL}};
	static const RemoraKV twice[] = {{"Host", S3_HOST}, {"host", S3_HOST}};
	static const RemoraKV wrong_date[] = {{"Host", S3_HOST},
										  {"X-Amz-Date", "20130525T000000Z"}};
	static const RemoraKV wrong_hash[] = {
		{"Host", S3_HOST}, {"x-amz-content-sha256", "UNSIGNED-PAYLOAD"}};
	RemoraSigV4Request req = mkreq("GET", "/", NULL, 0, NULL, 0, EMPTY_SHA256);

	refuses_sign("no headers at all", &req, &s3_creds, T_S3, "host");
#define WITH(h) (req.headers = (h), req.nheaders = sizeof(h) / sizeof((h)[0]))
	WITH(no_host);
	refuses_sign("a missing host header", &req, &s3_creds, T_S3, "host");
	WITH(empty_host);
	refuses_sign("an empty host header", &req, &s3_creds, T_S3, "host");
	WITH(crlf);
	refuses_sign("CR LF in a header value", &req, &s3_creds, T_S3, "control");
	WITH(lf);
	refuses_sign("LF in a header value", &req, &s3_creds, T_S3, "control");
	WITH(colon);
	refuses_sign("':' in a header name", &req, &s3_creds, T_S3, "name");
	WITH(space);
	refuses_sign("a space in a header name", &req, &s3_creds, T_S3, "name");
	WITH(ctrl);
	refuses_sign("a control character in a header name", &req, &s3_creds, T_S3,
				 "name");
	WITH(noname);
	refuses_sign("an empty header name", &req, &s3_creds, T_S3, "name");
	WITH(nullval);
	refuses_sign("a NULL header value", &req, &s3_creds, T_S3, "value");
	WITH(twice);
	refuses_sign("a header given twice", &req, &s3_creds, T_S3, "repeats");
	WITH(wrong_date);
	refuses_sign("an x-amz-date other than the signing time", &req, &s3_creds,
				 T_S3, "signing time");
	WITH(wrong_hash);
	refuses_sign("an x-amz-content-sha256 other than the payload hash", &req,
				 &s3_creds, T_S3, "payload hash");
	req.headers = NULL;
	req.nheaders = 1;
	refuses_sign("a header count without headers", &req, &s3_creds, T_S3,
				 "header count");
#undef WITH
}

static void
test_bad_requests(void)
{
	static const RemoraKV host[] = {{"Host", S3_HOST}};
	static const RemoraKV nokey[] = {{NULL, "v"}};
	RemoraSigV4Request    good = {"GET", "/", NULL, 0, host, 1, EMPTY_SHA256};
	RemoraSigV4Request    req;
	RemoraSigV4Creds      creds;
	RemoraSigV4Result     res;
	char                  err[64];

	refuses_sign("a NULL request", NULL, &s3_creds, T_S3, "request");
	req = good, req.method = NULL;
	refuses_sign("a NULL method", &req, &s3_creds, T_S3, "method");
	req = good, req.method = "GE T";
	refuses_sign("a method with a space", &req, &s3_creds, T_S3, "method");
	req = good, req.path = NULL;
	refuses_sign("a NULL path", &req, &s3_creds, T_S3, "path");
	req = good, req.path = "relative";
	refuses_sign("a relative path", &req, &s3_creds, T_S3, "path");
	req = good, req.payload_hash = NULL;
	refuses_sign("a NULL payload hash", &req, &s3_creds, T_S3, "payload");
	req = good, req.query = nokey, req.nquery = 1;
	refuses_sign("a query key that is NULL", &req, &s3_creds, T_S3, "query");
	req = good, req.nquery = -1;
	refuses_sign("a negative query count", &req, &s3_creds, T_S3, "query");

	refuses_sign("NULL credentials", &good, NULL, T_S3, "credentials");
	creds = s3_creds, creds.access_key_id = NULL;
	refuses_sign("a NULL access key", &good, &creds, T_S3, "access key");
	creds = s3_creds, creds.secret_access_key = "";
	refuses_sign("an empty secret", &good, &creds, T_S3, "secret");
	creds = s3_creds, creds.region = "us/east";
	refuses_sign("a region with '/'", &good, &creds, T_S3, "region");
	creds = s3_creds, creds.service = NULL;
	refuses_sign("a NULL service", &good, &creds, T_S3, "service");

	CHECK(!remora_sigv4_sign(&good, &s3_creds, T_S3, NULL, err, sizeof(err)),
		  "refuses a NULL result buffer");
	req = good, req.method = NULL;
	CHECK(!remora_sigv4_sign(&req, &s3_creds, T_S3, &res, NULL, 0),
		  "refuses without an error buffer");
	CHECK(!remora_sigv4_sign(&req, &s3_creds, T_S3, &res, err, 1) &&
			  err[0] == '\0',
		  "a one-byte error buffer is only terminated");
}

/* 64 long header names overflow the 1024-byte Authorization buffer. */
static void
test_too_long(void)
{
	enum
	{
		N = 64
	};
	RemoraKV           headers[N];
	char               names[N][40];
	RemoraSigV4Request req;

	headers[0] = (RemoraKV){"Host", S3_HOST};
	for (int i = 1; i < N; i++)
	{
		snprintf(names[i], sizeof(names[i]), "x-amz-meta-long-name-%02d", i);
		headers[i].key = names[i];
		headers[i].value = "v";
	}
	req = mkreq("GET", "/", NULL, 0, headers, N, EMPTY_SHA256);
	refuses_sign("an Authorization header over 1024 bytes", &req, &s3_creds,
				 T_S3, "too long");
}

static void
test_bad_presign(void)
{
	static const RemoraKV host[] = {{"Host", S3_HOST}};
	static const RemoraKV no_host[] = {{"Range", "bytes=0-9"}};
	static const RemoraKV crlf[] = {{"Host", S3_HOST "\r\nX-Evil: 1"}};
	static const RemoraKV sig[] = {{"x-amz-signature", "abc"}};
	static const RemoraKV expires[] = {{"X-Amz-Expires", "1"}};
	RemoraSigV4Request req = mkreq("GET", "/test.txt", NULL, 0, host, 1, NULL);
	char               err[256] = "";
	char              *url;

	refuses_presign("expiry 0", &req, 0, "expiry");
	refuses_presign("expiry 604801", &req, 604801, "expiry");
	refuses_presign("a negative expiry", &req, -1, "expiry");
	url = remora_sigv4_presign(&req, &s3_creds, T_S3, 1, err, sizeof(err));
	CHECK(url != NULL && strstr(url, "&X-Amz-Expires=1&") != NULL,
		  "presigns for 1 second %s", err);
	free(url);
	url = remora_sigv4_presign(&req, &s3_creds, T_S3, 604800, err, sizeof(err));
	CHECK(url != NULL && strstr(url, "&X-Amz-Expires=604800&") != NULL,
		  "presigns for seven days %s", err);
	free(url);

	req.headers = no_host;
	refuses_presign("without a host header", &req, 60, "host");
	req.headers = crlf;
	refuses_presign("with CR LF in the host", &req, 60, "control");
	req.headers = host;
	req.query = sig, req.nquery = 1;
	refuses_presign("with its own X-Amz-Signature", &req, 60, "presigning");
	req.query = expires;
	refuses_presign("with its own X-Amz-Expires", &req, 60, "presigning");
	req.nquery = 0;
	CHECK(remora_sigv4_presign(&req, NULL, T_S3, 60, err, sizeof(err)) ==
				  NULL &&
			  strstr(err, "credentials") != NULL,
		  "refuses to presign without credentials: %s", err);
}

static void
test_bad_debug(void)
{
	static const RemoraKV no_host[] = {{"Range", "bytes=0-9"}};
	RemoraSigV4Request    req =
		mkreq("GET", "/", NULL, 0, no_host, 1, EMPTY_SHA256);
	static char dummy[] = "x";
	char       *creq = dummy;
	char       *sts = dummy;

	CHECK(!remora_sigv4_debug(&req, &s3_creds, T_S3, &creq, &sts) &&
			  creq == NULL && sts == NULL,
		  "debug refuses a request without host and returns NULLs");
	CHECK(!remora_sigv4_debug(&req, &s3_creds, T_S3, NULL, &sts),
		  "debug refuses a NULL output pointer");
}

int
main(void)
{
	test_uri_encode();
	test_sha256();
	test_query_rules();
	test_path_rules();
	test_header_rules();
	test_time();
	test_bad_headers();
	test_bad_requests();
	test_too_long();
	test_bad_presign();
	test_bad_debug();
	return unit_done();
}
