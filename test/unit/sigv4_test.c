/*
 * Unit tests of AWS Signature Version 4 (src/engine/sigv4_*.c).  Plain C,
 * built with AddressSanitizer and UBSan.
 *
 * The point is known answers: a round trip through our own code would pass
 * with any consistent bug, so every signature here was computed by someone
 * else.
 *	 - The S3 API reference's worked examples (key AKIAIOSFODNN7EXAMPLE,
 *	   2013-05-24): "Signature Calculations for the Authorization Header:
 *	   Transferring Payload in a Single Chunk" (sig-v4-header-based-auth)
 *	   and "Authenticating Requests: Using Query Parameters"
 *	   (sigv4-query-string-auth).
 *	 - AWS's aws-sig-v4-test-suite (key AKIDEXAMPLE, 2015-08-30, service
 *	   "service"), as shipped in awslabs/aws-c-auth under
 *	   tests/aws-signing-test-suite/v4; only the cases whose path rules match
 *	   S3's (no normalisation, one encoding) are used.
 *	 - Two requests with awkward keys, queries and headers signed by
 *	   botocore's S3SigV4Auth and S3SigV4QueryAuth (botocore 1.43).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/sigv4.h"
#include "unit.h"

#define EMPTY_SHA256                                                           \
	"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

/* 2013-05-24T00:00:00Z: the S3 documentation's examples */
#define T_S3 ((time_t) 1369353600)
/* 2015-08-30T12:36:00Z: the aws-sig-v4-test-suite */
#define T_SUITE ((time_t) 1440938160)
/* 2024-01-02T03:04:05Z: the botocore cross-checks */
#define T_BOTO ((time_t) 1704164645)

#define S3_SECRET    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define SUITE_SECRET "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
#define S3_HOST      "examplebucket.s3.amazonaws.com"
#define S3_SCOPE     "20130524/us-east-1/s3/aws4_request"

static const RemoraSigV4Creds s3_creds = {"AKIAIOSFODNN7EXAMPLE", S3_SECRET,
										  "us-east-1", "s3"};
static const RemoraSigV4Creds suite_creds = {"AKIDEXAMPLE", SUITE_SECRET,
											 "us-east-1", "service"};
static const RemoraSigV4Creds boto_creds = {"AKIAIOSFODNN7EXAMPLE", S3_SECRET,
											"eu-west-1", "s3"};

/* A request, spelled as a call so that the fields read in order. */
static RemoraSigV4Request
mkreq(const char *method, const char *path, const RemoraKV *query, int nquery,
	  const RemoraKV *headers, int nheaders, const char *payload_hash)
{
	RemoraSigV4Request req;

	req.method = method;
	req.path = path;
	req.query = query;
	req.nquery = nquery;
	req.headers = headers;
	req.nheaders = nheaders;
	req.payload_hash = payload_hash;
	return req;
}

/* Does the output contain the secret, or a recognisable part of it? */
static bool
leaks_secret(const char *s)
{
	return s != NULL &&
		   (strstr(s, S3_SECRET) != NULL || strstr(s, SUITE_SECRET) != NULL ||
			strstr(s, "wJalrXUtnFEMI") != NULL);
}

/* ----------------------------------------------------------------
 * Helpers
 * ----------------------------------------------------------------
 */
static void
check_sign(const char *name, const RemoraSigV4Request *req,
		   const RemoraSigV4Creds *creds, time_t now, const char *want_auth)
{
	RemoraSigV4Result res;
	char              err[256] = "";
	bool ok = remora_sigv4_sign(req, creds, now, &res, err, sizeof(err));

	CHECK(ok, "%s: signs %s", name, err);
	CHECK_STR(ok ? res.authorization : NULL, want_auth,
			  "%s: Authorization header", name);
	CHECK(!leaks_secret(res.authorization), "%s: no secret in the header",
		  name);
}

static void
check_debug(const char *name, const RemoraSigV4Request *req,
			const RemoraSigV4Creds *creds, time_t now, const char *want_creq,
			const char *want_sts)
{
	char *creq = NULL;
	char *sts = NULL;
	bool  ok = remora_sigv4_debug(req, creds, now, &creq, &sts);

	CHECK(ok, "%s: canonicalises", name);
	CHECK_STR(creq, want_creq, "%s: canonical request", name);
	if (want_sts != NULL)
		CHECK_STR(sts, want_sts, "%s: string to sign", name);
	CHECK(!leaks_secret(creq) && !leaks_secret(sts),
		  "%s: no secret in the intermediate strings", name);
	free(creq);
	free(sts);
}

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

static const RemoraKV suite_headers[] = {
	{"Host", "example.amazonaws.com"},
	{"X-Amz-Date", "20150830T123600Z"},
};

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
 * The S3 API reference's examples
 * ----------------------------------------------------------------
 */

/*
 * The documentation prints Authorization with bare commas; the header
 * contract (and AWS's own test suite) puts a space after each, which S3
 * accepts equally.  What matters is the signature.
 */
#define S3_AUTH(signed_headers, sig)                                           \
	"AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/" S3_SCOPE               \
	", SignedHeaders=" signed_headers ", Signature=" sig

static void
test_s3_get_object(void)
{
	/* names in mixed case and out of order: both must be canonicalised */
	static const RemoraKV headers[] = {
		{"X-Amz-Date", "20130524T000000Z"},
		{"Range", "bytes=0-9"},
		{"x-amz-content-sha256", EMPTY_SHA256},
		{"Host", S3_HOST},
	};
	RemoraSigV4Request req =
		mkreq("GET", "/test.txt", NULL, 0, headers, 4, EMPTY_SHA256);
	RemoraSigV4Result res;

	check_debug(
		"S3 GET Object", &req, &s3_creds, T_S3,
		"GET\n"
		"/test.txt\n"
		"\n"
		"host:" S3_HOST "\n"
		"range:bytes=0-9\n"
		"x-amz-content-sha256:" EMPTY_SHA256 "\n"
		"x-amz-date:20130524T000000Z\n"
		"\n"
		"host;range;x-amz-content-sha256;x-amz-date\n" EMPTY_SHA256,
		"AWS4-HMAC-SHA256\n"
		"20130524T000000Z\n" S3_SCOPE "\n"
		"7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
	check_sign("S3 GET Object", &req, &s3_creds, T_S3,
			   S3_AUTH("host;range;x-amz-content-sha256;x-amz-date",
					   "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c"
					   "6036bdb41"));
	CHECK(remora_sigv4_sign(&req, &s3_creds, T_S3, &res, NULL, 0) &&
			  strcmp(res.amz_date, "20130524T000000Z") == 0,
		  "S3 GET Object: x-amz-date is 20130524T000000Z");
}

static void
test_s3_put_object(void)
{
	static const char body[] = "Welcome to Amazon S3.";
	char              hash[65];

	remora_sha256_hex(body, strlen(body), hash);
	CHECK_STR(
		hash,
		"44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
		"SHA-256 of the S3 PUT example's body");
	{
		const RemoraKV headers[] = {
			{"Host", S3_HOST},
			{"Date", "Fri, 24 May 2013 00:00:00 GMT"},
			{"x-amz-date", "20130524T000000Z"},
			{"x-amz-storage-class", "REDUCED_REDUNDANCY"},
			{"x-amz-content-sha256", hash},
		};
		/* '$' must be encoded, and only once */
		RemoraSigV4Request req =
			mkreq("PUT", "/test$file.text", NULL, 0, headers, 5, hash);

		check_debug(
			"S3 PUT Object", &req, &s3_creds, T_S3,
			"PUT\n"
			"/test%24file.text\n"
			"\n"
			"date:Fri, 24 May 2013 00:00:00 GMT\n"
			"host:" S3_HOST "\n"
			"x-amz-content-sha256:"
			"44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072\n"
			"x-amz-date:20130524T000000Z\n"
			"x-amz-storage-class:REDUCED_REDUNDANCY\n"
			"\n"
			"date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class\n"
			"44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
			"AWS4-HMAC-SHA256\n"
			"20130524T000000Z\n" S3_SCOPE "\n"
			"9e0e90d9c76de8fa5b200d8c849cd5b8dc7a3be3951ddb7f6a76b4158342019d");
		check_sign("S3 PUT Object", &req, &s3_creds, T_S3,
				   S3_AUTH("date;host;x-amz-content-sha256;x-amz-date;"
						   "x-amz-storage-class",
						   "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b59"
						   "71af0ece108bd"));
	}
}

static const RemoraKV s3_get_headers[] = {
	{"Host", S3_HOST},
	{"x-amz-date", "20130524T000000Z"},
	{"x-amz-content-sha256", EMPTY_SHA256},
};

static void
test_s3_get_lifecycle(void)
{
	static const RemoraKV query[] = {{"lifecycle", NULL}};
	RemoraSigV4Request    req =
		mkreq("GET", "/", query, 1, s3_get_headers, 3, EMPTY_SHA256);

	check_debug(
		"S3 GET Bucket lifecycle", &req, &s3_creds, T_S3,
		"GET\n"
		"/\n"
		"lifecycle=\n"
		"host:" S3_HOST "\n"
		"x-amz-content-sha256:" EMPTY_SHA256 "\n"
		"x-amz-date:20130524T000000Z\n"
		"\n"
		"host;x-amz-content-sha256;x-amz-date\n" EMPTY_SHA256,
		"AWS4-HMAC-SHA256\n"
		"20130524T000000Z\n" S3_SCOPE "\n"
		"9766c798316ff2757b517bc739a67f6213b4ab36dd5da2f94eaebf79c77395ca");
	check_sign("S3 GET Bucket lifecycle", &req, &s3_creds, T_S3,
			   S3_AUTH("host;x-amz-content-sha256;x-amz-date",
					   "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0"
					   "136783543"));
}

static void
test_s3_list_objects(void)
{
	/* given out of order on purpose: the canonical form sorts them */
	static const RemoraKV query[] = {{"prefix", "J"}, {"max-keys", "2"}};
	RemoraSigV4Request    req =
		mkreq("GET", "/", query, 2, s3_get_headers, 3, EMPTY_SHA256);

	check_debug(
		"S3 GET Bucket (list objects)", &req, &s3_creds, T_S3,
		"GET\n"
		"/\n"
		"max-keys=2&prefix=J\n"
		"host:" S3_HOST "\n"
		"x-amz-content-sha256:" EMPTY_SHA256 "\n"
		"x-amz-date:20130524T000000Z\n"
		"\n"
		"host;x-amz-content-sha256;x-amz-date\n" EMPTY_SHA256,
		"AWS4-HMAC-SHA256\n"
		"20130524T000000Z\n" S3_SCOPE "\n"
		"df57d21db20da04d7fa30298dd4488ba3a2b47ca3a489c74750e0f1e7df1b9b7");
	check_sign("S3 GET Bucket (list objects)", &req, &s3_creds, T_S3,
			   S3_AUTH("host;x-amz-content-sha256;x-amz-date",
					   "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711"
					   "ef69dc6f7"));
}

/* The documented presigned GET /test.txt, valid for a day. */
#define S3_PRESIGNED                                                           \
	"X-Amz-Algorithm=AWS4-HMAC-SHA256"                                         \
	"&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2F"    \
	"aws4_request"                                                             \
	"&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400"                         \
	"&X-Amz-SignedHeaders=host"                                                \
	"&X-Amz-Signature="                                                        \
	"aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"

static void
test_s3_presign(void)
{
	static const RemoraKV host[] = {{"Host", S3_HOST}};
	/* a presigned URL signs only the host, whatever else is passed */
	static const RemoraKV more[] = {
		{"x-amz-date", "20130524T000000Z"},
		{"Host", S3_HOST},
		{"Range", "bytes=0-9"},
	};
	RemoraSigV4Request req =
		mkreq("GET", "/test.txt", NULL, 0, host, 1, "UNSIGNED-PAYLOAD");
	char  err[256] = "";
	char *url;

	url = remora_sigv4_presign(&req, &s3_creds, T_S3, 86400, err, sizeof(err));
	CHECK_STR(url, S3_PRESIGNED, "S3 presigned GET Object %s", err);
	CHECK(!leaks_secret(url), "no secret in the presigned query");
	free(url);

	req.headers = more;
	req.nheaders = 3;
	req.payload_hash = NULL; /* not used: presigning is UNSIGNED-PAYLOAD */
	url = remora_sigv4_presign(&req, &s3_creds, T_S3, 86400, err, sizeof(err));
	CHECK_STR(url, S3_PRESIGNED,
			  "presigning ignores headers other than host %s", err);
	free(url);
}

/* ----------------------------------------------------------------
 * aws-sig-v4-test-suite
 * ----------------------------------------------------------------
 */
#define SUITE_AUTH(signed_headers, sig)                                        \
	"AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/"      \
	"aws4_request, SignedHeaders=" signed_headers ", Signature=" sig
#define SUITE_STS(hash)                                                        \
	"AWS4-HMAC-SHA256\n20150830T123600Z\n"                                     \
	"20150830/us-east-1/service/aws4_request\n" hash
#define SUITE_CREQ(path, query)                                                \
	"GET\n" path "\n" query "\n"                                               \
	"host:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\n"              \
	"host;x-amz-date\n" EMPTY_SHA256

/* A GET with only Host and X-Amz-Date, as most suite cases are. */
static void
suite_get(const char *name, const char *path, const RemoraKV *query, int nquery,
		  const char *want_creq, const char *want_sts, const char *sig)
{
	RemoraSigV4Request req =
		mkreq("GET", path, query, nquery, suite_headers, 2, EMPTY_SHA256);
	char want_auth[256];

	snprintf(want_auth, sizeof(want_auth), "%s%s",
			 SUITE_AUTH("host;x-amz-date", ""), sig);
	check_debug(name, &req, &suite_creds, T_SUITE, want_creq, want_sts);
	check_sign(name, &req, &suite_creds, T_SUITE, want_auth);
}

static void
test_suite_paths(void)
{
	suite_get(
		"get-vanilla", "/", NULL, 0, SUITE_CREQ("/", ""),
		SUITE_STS(
			"bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63"),
		"5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
	suite_get(
		"get-utf8", "/\xE1\x88\xB4", NULL, 0, SUITE_CREQ("/%E1%88%B4", ""),
		SUITE_STS(
			"2a0a97d02205e45ce2e994789806b19270cfbbb0921b278ccf58f5249ac42102"),
		"8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85");
	suite_get(
		"get-unreserved",
		"/-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
		NULL, 0,
		SUITE_CREQ(
			"/-._~"
			"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
			""),
		NULL,
		"07ef7494c76fa4850883e2b006601f940f8a34d404d0cfa977f52a65bbf5f24f");
	/* the "unnormalized" variants: what S3 does */
	suite_get(
		"get-space-unnormalized", "/example space/", NULL, 0,
		SUITE_CREQ("/example%20space/", ""), NULL,
		"652487583200325589f1fba4c7e578f72c47cb61beeca81406b39ddec1366741");
	suite_get(
		"get-slashes-unnormalized", "//example//", NULL, 0,
		SUITE_CREQ("//example//", ""),
		SUITE_STS(
			"528ec3105ee1f34ab014bb0a1a45da0ed2742a4fea3555149e5b4d5d201eb240"),
		"87cca117541a147f6df867677d98a7d80dff226d2bfca9e4ffa899665623c7e5");
	suite_get(
		"get-slash-dot-slash-unnormalized", "/./", NULL, 0,
		SUITE_CREQ("/./", ""), NULL,
		"68714168e6557f8f2de0ef956fc24dc2593a4bd2961f8df51898d8a134695145");
	suite_get(
		"get-relative-relative-unnormalized", "/example1/example2/../..", NULL,
		0, SUITE_CREQ("/example1/example2/../..", ""), NULL,
		"dc33e0856fd4baca4d7aa2146c38958283844764f38c74252a333df5e613003b");
}

static void
test_suite_queries(void)
{
	static const RemoraKV order_key_case[] = {{"Param2", "value2"},
											  {"Param1", "value1"}};
	static const RemoraKV unreserved[] = {
		{"-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
		 "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"}};
	static const RemoraKV utf8[] = {{"\xE1\x88\xB4", "bar"}};
	static const RemoraKV order_encoded[] = {
		{"Param-3", "Value3"}, {"Param", "Value2"}, {"\xE1\x88\xB4", "Value1"}};

	suite_get(
		"get-vanilla-query-order-key-case", "/", order_key_case, 2,
		SUITE_CREQ("/", "Param1=value1&Param2=value2"),
		SUITE_STS(
			"816cd5b414d056048ba4f7c5386d6e0533120fb1fcfa93762cf0fc39e2cf19e0"),
		"b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500");
	suite_get(
		"get-vanilla-query-unreserved", "/", unreserved, 1,
		SUITE_CREQ(
			"/",
			"-._~"
			"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz="
			"-._~"
			"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"),
		SUITE_STS(
			"c30d4703d9f799439be92736156d47ccfb2d879ddf56f5befa6d1d6aab979177"),
		"9c3e54bfcdf0b19771a7f523ee5669cdf59bc7cc0884027167c21bb143a40197");
	suite_get(
		"get-vanilla-utf8-query", "/", utf8, 1,
		SUITE_CREQ("/", "%E1%88%B4=bar"),
		SUITE_STS(
			"eb30c5bed55734080471a834cc727ae56beb50e5f39d1bff6d0d38cb192a7073"),
		"2cdec8eed098649ff3a119c94853b13c643bcf08f8b0a1d91e12c9027818dd04");
	/* sorted by the encoded key: "%E1..." before "Param" */
	suite_get(
		"get-vanilla-query-order-encoded", "/", order_encoded, 3,
		SUITE_CREQ("/", "%E1%88%B4=Value1&Param=Value2&Param-3=Value3"), NULL,
		"371d3713e185cc334048618a97f809c9ffe339c62934c032af5a0e595648fcac");
}

static void
test_suite_headers(void)
{
	/* "My-Header1: value1" on the wire: the value keeps its leading space */
	static const RemoraKV trim[] = {
		{"Host", "example.amazonaws.com"},
		{"My-Header1", " value1"},
		{"My-Header2", " \"a   b   c\""},
		{"X-Amz-Date", "20150830T123600Z"},
	};
	static const RemoraKV sort[] = {
		{"Host", "example.amazonaws.com"},
		{"X-Amz-Date", "20150830T123600Z"},
		{"My-Header1", "value1"},
	};
	static const RemoraKV token[] = {
		{"Host", "example.amazonaws.com"},
		{"X-Amz-Date", "20150830T123600Z"},
		{"X-Amz-Security-Token",
		 "6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267"},
	};
	RemoraSigV4Request req = mkreq("GET", "/", NULL, 0, trim, 4, EMPTY_SHA256);

	check_debug("get-header-value-trim", &req, &suite_creds, T_SUITE,
				"GET\n/\n\nhost:example.amazonaws.com\nmy-header1:value1\n"
				"my-header2:\"a b c\"\nx-amz-date:20150830T123600Z\n\n"
				"host;my-header1;my-header2;x-amz-date\n" EMPTY_SHA256,
				SUITE_STS("a726db9b0df21c14f559d0a978e563112acb1b9e05476f0a6a1c"
						  "7d68f28605c7"));
	check_sign(
		"get-header-value-trim", &req, &suite_creds, T_SUITE,
		SUITE_AUTH("host;my-header1;my-header2;x-amz-date",
				   "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a"
				   "9c736"));

	req = mkreq("POST", "/", NULL, 0, sort, 3, EMPTY_SHA256);
	check_sign(
		"post-header-key-sort", &req, &suite_creds, T_SUITE,
		SUITE_AUTH("host;my-header1;x-amz-date",
				   "c5410059b04c1ee005303aed430f6e6645f61f4dc9e1461ec8f8916fdf1"
				   "8852c"));

	req = mkreq("GET", "/", NULL, 0, token, 3, EMPTY_SHA256);
	check_sign(
		"get-vanilla-with-session-token", &req, &suite_creds, T_SUITE,
		SUITE_AUTH("host;x-amz-date;x-amz-security-token",
				   "07ec1639c89043aa0e3e2de82b96708f198cceab042d4a97044c66dd9f7"
				   "4e7f8"));
}

/* ----------------------------------------------------------------
 * botocore cross-checks: odd keys, query values and headers together
 * ----------------------------------------------------------------
 */
static void
test_botocore_put(void)
{
	static const RemoraKV query[] = {{"uploadId", "x/y+z= q"},
									 {"partNumber", "2"}};
	static const RemoraKV headers[] = {
		{"Host", S3_HOST},
		{"Content-Type", "  text/plain   charset=x "},
		{"x-amz-meta-note", "a   b"},
		{"X-Amz-Date", "20240102T030405Z"},
		{"X-Amz-Content-SHA256",
		 "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"},
	};
	char               hash[65];
	RemoraSigV4Request req =
		mkreq("PUT", "/bucket/dir/a b+c~\xC3\xA9\xF0\x9F\x98\x80*%.txt", query,
			  2, headers, 5, hash);

	remora_sha256_hex("hello", 5, hash);
	check_debug(
		"botocore PUT", &req, &boto_creds, T_BOTO,
		"PUT\n"
		"/bucket/dir/a%20b%2Bc~%C3%A9%F0%9F%98%80%2A%25.txt\n"
		"partNumber=2&uploadId=x%2Fy%2Bz%3D%20q\n"
		"content-type:text/plain charset=x\n"
		"host:" S3_HOST "\n"
		"x-amz-content-sha256:"
		"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824\n"
		"x-amz-date:20240102T030405Z\n"
		"x-amz-meta-note:a b\n"
		"\n"
		"content-type;host;x-amz-content-sha256;x-amz-date;x-amz-meta-note\n"
		"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
		NULL);
	check_sign("botocore PUT", &req, &boto_creds, T_BOTO,
			   "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20240102/"
			   "eu-west-1/s3/aws4_request, SignedHeaders=content-type;host;"
			   "x-amz-content-sha256;x-amz-date;x-amz-meta-note, "
			   "Signature=942642c78897a81aed66462aa8413cbb962fff9080ab830d2012f"
			   "c955e9c9a28");
}

static void
test_botocore_presign(void)
{
	static const RemoraKV query[] = {
		{"versionId", "3/L4kqtJl40Nr8X8gdRQBpUMLUo"},
		{"response-content-disposition", "attachment; filename=\"a b.txt\""},
	};
	static const RemoraKV host[] = {{"host", "s3.eu-west-1.amazonaws.com"}};
	RemoraSigV4Request req = mkreq("GET", "/bucket/key with space/\xC3\xBC.bin",
								   query, 2, host, 1, NULL);
	char               err[256] = "";
	char              *url;

	/* the request's own parameters sort after the upper-case X-Amz-* */
	url =
		remora_sigv4_presign(&req, &boto_creds, T_BOTO, 3600, err, sizeof(err));
	CHECK_STR(url,
			  "X-Amz-Algorithm=AWS4-HMAC-SHA256"
			  "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20240102%2Feu-west-1%2F"
			  "s3%2Faws4_request"
			  "&X-Amz-Date=20240102T030405Z&X-Amz-Expires=3600"
			  "&X-Amz-SignedHeaders=host"
			  "&response-content-disposition=attachment%3B%20filename%3D%22a%"
			  "20b.txt%22"
			  "&versionId=3%2FL4kqtJl40Nr8X8gdRQBpUMLUo"
			  "&X-Amz-Signature=6f2d9c0b46eef9af55e118e0193191ff027f6d9d7cc3468"
			  "4e2ffb3538baf015f",
			  "botocore presigned GET with its own query %s", err);
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
	test_s3_get_object();
	test_s3_put_object();
	test_s3_get_lifecycle();
	test_s3_list_objects();
	test_s3_presign();
	test_suite_paths();
	test_suite_queries();
	test_suite_headers();
	test_botocore_put();
	test_botocore_presign();
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
