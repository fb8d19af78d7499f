/*
 * Unit tests of AWS Signature Version 4 (src/engine/sigv4_*.c): known
 * answers.  Plain C, built with AddressSanitizer and UBSan.
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

#include "sigv4_fixtures.h"

/* Signs, as want_auth, with no secret in the header. */
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
	return unit_done();
}
