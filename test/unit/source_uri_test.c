/*
 * Unit tests of source parsing, bucket and prefix rules, the network
 * policy, and a webhook's URL and signature.  Plain C, built with
 * AddressSanitizer and UBSan.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>

#include "engine/engine.h"
#include "engine/common/netpolicy.h"
#include "engine/common/source_uri.h"
#include "engine/common/util.h"
#include "unit.h"

static void
parses(const char *text, RemoraSourceKind kind, const char *canonical,
	   const char *file_name)
{
	RemoraSourceUri u;
	char            err[REMORA_ERRBUF_LEN] = "";
	int             ok = remora_source_uri_parse(text, &u, err, sizeof(err));

	CHECK(ok && u.kind == kind, "parses %s (%s)", text, ok ? "" : err);
	if (ok)
	{
		CHECK_STR(u.canonical, canonical, "canonical form of %s", text);
		CHECK_STR(u.file_name, file_name, "file name of %s", text);
	}
	remora_source_uri_free(&u);
}

static void
refuses(const char *text, const char *needle)
{
	RemoraSourceUri u;
	char            err[REMORA_ERRBUF_LEN] = "";
	int             ok = remora_source_uri_parse(text, &u, err, sizeof(err));

	char   shown[64];
	size_t i;

	/* show the input without its control characters */
	for (i = 0; text[i] && i < sizeof(shown) - 1; i++)
		shown[i] = ((unsigned char) text[i] < 0x20) ? '?' : text[i];
	shown[i] = '\0';
	CHECK(!ok && strstr(err, needle) != NULL, "refuses %s: %s", shown, err);
	/* never echo a credential back */
	CHECK(strstr(err, "secret") == NULL, "no secret in the error for %s",
		  shown);
	remora_source_uri_free(&u);
}

static void
test_sources(void)
{
	RemoraSourceUri u;
	char            err[REMORA_ERRBUF_LEN];

	parses("https://Example.com/a/b.bin#x", REMORA_SOURCE_HTTP,
		   "https://example.com/a/b.bin", "b.bin");
	parses("http://h:8080/x%20y.tgz?sig=1", REMORA_SOURCE_HTTP,
		   "http://h:8080/x%20y.tgz?sig=1", "x y.tgz");
	parses("https://[::1]/f", REMORA_SOURCE_HTTP, "https://[::1]/f", "f");
	parses("s3://bucket/dir/obj", REMORA_SOURCE_S3_OBJECT,
		   "s3://bucket/dir/obj", "obj");
	parses("s3://bucket/dir/", REMORA_SOURCE_S3_PREFIX, "s3://bucket/dir/",
		   NULL);
	parses("s3://bucket/", REMORA_SOURCE_S3_PREFIX, "s3://bucket/", NULL);
	parses("hf://a/b", REMORA_SOURCE_HF, "hf://a/b@main", NULL);
	parses("hf://datasets/a/b@v1", REMORA_SOURCE_HF, "hf://datasets/a/b@v1",
		   NULL);
	parses("hf://models/a/b@refs/pr/3", REMORA_SOURCE_HF, "hf://a/b@refs/pr/3",
		   NULL);

	CHECK(
		remora_source_uri_parse("hf://datasets/o/n@r", &u, err, sizeof(err)) &&
			strcmp(u.repo_type, "dataset") == 0 && strcmp(u.repo, "o/n") == 0 &&
			strcmp(u.revision, "r") == 0,
		"hf fields");
	remora_source_uri_free(&u);
	CHECK(remora_source_uri_parse("s3://bkt/k/ey", &u, err, sizeof(err)) &&
			  strcmp(u.bucket, "bkt") == 0 && strcmp(u.key, "k/ey") == 0,
		  "s3 fields");
	remora_source_uri_free(&u);

	refuses("", "empty");
	refuses("ftp://h/f", "must be an http");
	refuses("file:///etc/passwd", "must be an http");
	refuses("https://user:secret@h/f", "credentials");
	refuses("https://h/", "file name");
	refuses("https://h/%2e%2e", "file name");
	refuses("https://h/a%00", "file name");
	refuses("https://h/a b", "spaces");
	refuses("https://h/a\r\nX: y", "control");
	refuses("https://h/\x80", "UTF-8");
	refuses("s3://b", "must name an object");
	refuses("s3://B/k", "bucket");
	refuses("s3://bucket//x/", "must not begin");
	refuses("s3://bucket//x", "must not begin");
	/* "." and ".." anywhere, and empty segments, in a key or a prefix */
	refuses("s3://bucket/pub/../private/secret.bin", "\"..\" segments");
	refuses("s3://bucket/../private/secret.bin", "\"..\" segments");
	refuses("s3://bucket/pub/./secret.bin", "\"..\" segments");
	refuses("s3://bucket/./secret.bin", "\"..\" segments");
	refuses("s3://bucket/pub//secret.bin", "empty segments");
	refuses("s3://bucket/pub/../", "\"..\" segments");
	refuses("s3://bucket/pub/./", "\"..\" segments");
	refuses("s3://bucket/../", "\"..\" segments");
	refuses("s3://bucket/pub//", "empty segments");
	refuses("s3://bucket/a//b/", "empty segments");
	refuses("s3://bucket/dir/..", "\"..\" segments");
	refuses("s3://bucket/dir/.", "\"..\" segments");
	/* dots inside a segment are ordinary characters */
	parses("s3://bucket/a..b/.c/d.", REMORA_SOURCE_S3_OBJECT,
		   "s3://bucket/a..b/.c/d.", "d.");
	parses("s3://bucket/...x/", REMORA_SOURCE_S3_PREFIX, "s3://bucket/...x/",
		   NULL);
	/* hf: names never begin with '.', revisions have no "." segments */
	refuses("hf://./b", "hf://owner/name");
	refuses("hf://a/..", "hf://owner/name");
	refuses("hf://a/b@.", "revision");
	refuses("hf://a/b@refs/./x", "revision");
	refuses("hf://a/b@./x", "revision");
	refuses("hf://a/b@x/.", "revision");
	parses("hf://a/b@v1.0", REMORA_SOURCE_HF, "hf://a/b@v1.0", NULL);
	refuses("hf://x", "hf://owner/name");
	refuses("hf://a/b@..", "revision");
	refuses("hf://a/b/c", "hf://owner/name");
	refuses("hf://spaces/a/b", "spaces");
	refuses("hf://a/b--c", "hf://owner/name");
}

static void
test_bucket_prefix(void)
{
	char                     err[REMORA_ERRBUF_LEN];
	char                    *p;
	static const char *const good[] = {"abc", "my-bucket.v2", "a1b", "0bucket"};
	static const char *const bad[] = {
		"ab",      "ABC",    "a_b",        "a..b",    "-ab", "ab-",
		"1.2.3.4", "xn--ab", "ab-s3alias", "ab.mrap", ""};

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		CHECK(remora_bucket_name_valid(good[i], err, sizeof(err)),
			  "bucket %s is valid", good[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(!remora_bucket_name_valid(bad[i], err, sizeof(err)),
			  "bucket \"%s\" is refused", bad[i]);

	p = remora_prefix_normalize("a/b///", err, sizeof(err));
	CHECK_STR(p, "a/b", "trailing slashes dropped");
	free(p);
	p = remora_prefix_normalize("", err, sizeof(err));
	CHECK_STR(p, "", "empty prefix allowed");
	free(p);
	p = remora_prefix_normalize("x/../y", err, sizeof(err));
	CHECK(p == NULL, "dot-dot segment refused");
	p = remora_prefix_normalize("/x", err, sizeof(err));
	CHECK(p == NULL, "leading slash refused");
	p = remora_prefix_normalize("x//y", err, sizeof(err));
	CHECK(p == NULL, "empty segment refused");
	p = remora_prefix_normalize("x\ty", err, sizeof(err));
	CHECK(p == NULL, "control character refused");

	CHECK(remora_utf8_valid("h\xc3\xa9", 3), "valid utf-8");
	CHECK(!remora_utf8_valid("\xc0\xaf", 2), "overlong utf-8 refused");
	CHECK(!remora_utf8_valid("\xed\xa0\x80", 3), "surrogate refused");
	CHECK(!remora_utf8_valid("\xe2\x82", 2), "truncated utf-8 refused");
}

static int
allowed(const RemoraNetPolicy *p, const char *addr)
{
	char why[REMORA_ERRBUF_LEN];

	return remora_netpolicy_allows_text(p, addr, why, sizeof(why));
}

static void
test_netpolicy(void)
{
	RemoraNetPolicy         *p;
	RemoraCidr              *list;
	int                      n;
	char                     err[REMORA_ERRBUF_LEN];
	struct sockaddr_in6      sa6;
	char                     addr[64];
	static const char *const denied[] = {"127.0.0.1",
										 "127.255.0.1",
										 "10.1.2.3",
										 "172.16.0.1",
										 "172.31.255.255",
										 "192.168.1.1",
										 "169.254.169.254",
										 "100.64.0.1",
										 "0.0.0.0",
										 "224.0.0.1",
										 "255.255.255.255",
										 "::1",
										 "::",
										 "fe80::1",
										 "fc00::1",
										 "fd12::1",
										 "ff02::1",
										 "::ffff:127.0.0.1",
										 "::ffff:169.254.169.254",
										 "::127.0.0.1",
										 "[::1]",
										 "fe80::1%eth0",
										 "64:ff9b::a9fe:a9fe",
										 "64:ff9b::7f00:1",
										 "64:ff9b:1::a00:1",
										 "2002:a00:1::1",
										 "2001:0:4136:e378::1"};
	static const char *const public[] = {"8.8.8.8", "1.1.1.1", "172.32.0.1",
										 "2606:4700::1111", "::ffff:8.8.8.8"};

	p = remora_netpolicy_new("", "", "", err, sizeof(err));
	CHECK(p != NULL, "default policy builds");
	for (size_t i = 0; i < sizeof(denied) / sizeof(denied[0]); i++)
		CHECK(!allowed(p, denied[i]), "default denies %s", denied[i]);
	for (size_t i = 0; i < sizeof(public) / sizeof(public[0]); i++)
		CHECK(allowed(p, public[i]), "default allows %s", public[i]);
	CHECK(allowed(p, "example.com"), "a host name is judged after resolution");
	remora_netpolicy_free(p);

	p = remora_netpolicy_new("127.0.0.1/32, 10.0.0.0/8", "8.8.8.0/24", "", err,
							 sizeof(err));
	CHECK(p != NULL, "custom policy builds");
	CHECK(allowed(p, "127.0.0.1"), "allow list opens 127.0.0.1");
	CHECK(!allowed(p, "127.0.0.2"), "but not the rest of loopback");
	CHECK(allowed(p, "::ffff:127.0.0.1"), "mapped form follows the allow list");
	CHECK(allowed(p, "10.9.9.9"), "allow list opens 10/8");
	CHECK(!allowed(p, "8.8.8.8"), "deny list closes 8.8.8.0/24");
	CHECK(allowed(p, "8.8.4.4"), "outside the deny list stays open");

	memset(&sa6, 0, sizeof(sa6));
	sa6.sin6_family = AF_INET6;
	sa6.sin6_port = htons(8080);
	inet_pton(AF_INET6, "::ffff:127.0.0.1", &sa6.sin6_addr);
	CHECK(
		remora_netpolicy_allows(p, (struct sockaddr *) &sa6, err, sizeof(err)),
		"sockaddr form of a mapped allowed address");
	inet_pton(AF_INET6, "::1", &sa6.sin6_addr);
	CHECK(
		!remora_netpolicy_allows(p, (struct sockaddr *) &sa6, err, sizeof(err)),
		"sockaddr ::1 denied");
	CHECK(strstr(err, "reserved range") != NULL && strstr(err, "::1") == NULL,
		  "the refusal names the rule, not the address: %s", err);
	remora_netpolicy_address((struct sockaddr *) &sa6, addr, sizeof(addr));
	CHECK(strcmp(addr, "::1") == 0, "the address, for the log: %s", addr);
	remora_netpolicy_free(p);

	/* Remora's own origins are refused whatever the networks allowed */
	p = remora_netpolicy_new("127.0.0.1/32", "", "", err, sizeof(err));
	CHECK(p && remora_netpolicy_block(p, "127.0.0.1:9000, [::1]:8080", err,
									  sizeof(err)),
		  "origins to block are taken");
	{
		struct sockaddr_in sa4;

		memset(&sa4, 0, sizeof(sa4));
		sa4.sin_family = AF_INET;
		inet_pton(AF_INET, "127.0.0.1", &sa4.sin_addr);
		sa4.sin_port = htons(9000);
		CHECK(!remora_netpolicy_allows(p, (struct sockaddr *) &sa4, err,
									   sizeof(err)) &&
				  strstr(err, "Remora's own") != NULL,
			  "an allowed address at a blocked origin's port is refused: %s",
			  err);
		sa4.sin_port = htons(9001);
		CHECK(remora_netpolicy_allows(p, (struct sockaddr *) &sa4, err,
									  sizeof(err)),
			  "at another port it is allowed");
		inet_pton(AF_INET6, "::ffff:127.0.0.1", &sa6.sin6_addr);
		sa6.sin6_port = htons(9000);
		CHECK(!remora_netpolicy_allows(p, (struct sockaddr *) &sa6, err,
									   sizeof(err)) &&
				  strstr(err, "Remora's own") != NULL,
			  "so is the same address written as IPv6: %s", err);
	}
	CHECK(!remora_netpolicy_block(p, "host-without-port", err, sizeof(err)),
		  "an origin without a port is refused: %s", err);
	remora_netpolicy_free(p);

	/* a deny entry wins over an allow entry */
	p = remora_netpolicy_new("10.0.0.0/8", "10.1.0.0/16", "", err, sizeof(err));
	CHECK(!allowed(p, "10.1.2.3") && allowed(p, "10.2.0.1"),
		  "deny wins over allow");
	remora_netpolicy_free(p);

	CHECK(remora_cidr_list_parse("10.1.2.3/8", &list, &n, err, sizeof(err)) &&
			  n == 1 && list[0].addr[1] == 0,
		  "host bits are cleared");
	free(list);
	CHECK(!remora_cidr_list_parse("10.0.0.0/33", &list, &n, err, sizeof(err)),
		  "/33 refused");
	CHECK(!remora_cidr_list_parse("0x7f.1", &list, &n, err, sizeof(err)),
		  "hex IPv4 spelling refused in a list");
	CHECK(!remora_cidr_list_parse("10.0.0.0/", &list, &n, err, sizeof(err)),
		  "empty prefix length refused");
	CHECK(remora_cidr_list_parse(" , ", &list, &n, err, sizeof(err)) && n == 0,
		  "empty list is valid");
	free(list);

	/* ports: the default list, custom lists, and the sockaddr's port */
	p = remora_netpolicy_new("127.0.0.1/32", "", "", err, sizeof(err));
	CHECK(remora_netpolicy_port_allowed(p, 80) &&
			  remora_netpolicy_port_allowed(p, 443) &&
			  remora_netpolicy_port_allowed(p, 8080) &&
			  !remora_netpolicy_port_allowed(p, 22) &&
			  !remora_netpolicy_port_allowed(p, 25) &&
			  !remora_netpolicy_port_allowed(p, 1023),
		  "default ports: 80, 443 and unprivileged ones");
	{
		struct sockaddr_in sa4;

		memset(&sa4, 0, sizeof(sa4));
		sa4.sin_family = AF_INET;
		inet_pton(AF_INET, "127.0.0.1", &sa4.sin_addr);
		sa4.sin_port = htons(22);
		CHECK(!remora_netpolicy_allows(p, (struct sockaddr *) &sa4, err,
									   sizeof(err)) &&
				  strstr(err, "port 22") != NULL,
			  "an allowed address on port 22 is refused: %s", err);
		sa4.sin_port = htons(8080);
		CHECK(remora_netpolicy_allows(p, (struct sockaddr *) &sa4, err,
									  sizeof(err)),
			  "the same address on 8080 is allowed");
	}
	remora_netpolicy_free(p);
	{
		RemoraPortRange *r;

		CHECK(remora_port_list_parse("443, 8000-8999", &r, &n, err,
									 sizeof(err)) &&
				  n == 2 && r[1].lo == 8000 && r[1].hi == 8999,
			  "a port list with a range");
		free(r);
		CHECK(!remora_port_list_parse("0", &r, &n, err, sizeof(err)),
			  "port 0 refused");
		CHECK(!remora_port_list_parse("70000", &r, &n, err, sizeof(err)),
			  "port 70000 refused");
		CHECK(!remora_port_list_parse("90-80", &r, &n, err, sizeof(err)),
			  "a backwards range refused");
		CHECK(!remora_port_list_parse("http", &r, &n, err, sizeof(err)),
			  "a name refused");
		CHECK(!remora_port_list_parse(" ", &r, &n, err, sizeof(err)),
			  "an empty port list refused");
	}
}

/* Text a server chose, made fit for jsonb and logs */
static void
scrubs(const char *in, const char *want, const char *name)
{
	char buf[64];

	snprintf(buf, sizeof(buf), "%s", in);
	remora_utf8_scrub(buf);
	CHECK_STR(buf, want, "scrub: %s", name);
	CHECK(remora_utf8_valid(buf, strlen(buf)), "scrub: %s is valid UTF-8",
		  name);
}

static void
test_scrub(void)
{
	scrubs("\"0123abc\"", "\"0123abc\"", "an ASCII ETag is unchanged");
	scrubs("caf\xc3\xa9", "caf\xc3\xa9", "valid UTF-8 is unchanged");
	scrubs("\"\xff\xfe bad\"", "\"?? bad\"", "invalid bytes become '?'");
	scrubs("a\xc3", "a?", "a sequence cut short becomes '?'");
	scrubs("\xc0\xaf", "??", "an overlong form becomes '?'");
	scrubs("\xed\xa0\x80", "???", "a surrogate becomes '?'");
	scrubs("a\tb\x1b[0m\x7f", "a?b?[0m?", "control characters become '?'");
}

/* util.c's helpers that the pure files (URIs, SigV4, XML) share */
static void
test_util(void)
{
	char                err[8] = "unset";
	char                hex[9];
	unsigned int        cp = 0;
	const unsigned char euro[] = "\xe2\x82\xac";
	const unsigned char bytes[] = {0x00, 0x7f, 0xab, 0xff};
	char               *s;
	RemoraBuf           b = {0};
	int                *ints = NULL;
	int                 cap = 0;

	s = remora_xstrndup("abcdef", 3);
	CHECK_STR(s, "abc", "xstrndup copies n bytes");
	free(s);

	remora_errbuf_set(NULL, 0, "ignored %d", 1);
	remora_errbuf_set(err, 0, "ignored");
	CHECK_STR(err, "unset", "errbuf_set leaves a zero-length buffer alone");
	remora_errbuf_set(err, sizeof(err), "port %d refused", 8080);
	CHECK_STR(err, "port 80", "errbuf_set truncates to the buffer");

	CHECK(remora_utf8_decode(euro, euro + 3, &cp) == 3 && cp == 0x20ac,
		  "utf8_decode reads U+20AC in three bytes");
	CHECK(remora_utf8_decode(euro, euro + 2, &cp) == 0,
		  "utf8_decode refuses a sequence cut by its end");

	remora_hex_encode(bytes, sizeof(bytes), hex);
	CHECK_STR(hex, "007fabff", "hex_encode, lower case");

	CHECK(remora_has_ctrl("a b", false), "has_ctrl: a space when not allowed");
	CHECK(!remora_has_ctrl("a b", true), "has_ctrl: a space when allowed");
	CHECK(remora_has_ctrl("a\x7f", true), "has_ctrl: DEL");

	s = remora_buf_release(&b, NULL);
	CHECK_STR(s, "", "an empty buffer releases \"\"");
	free(s);
	remora_buf_putc(&b, 'x');
	remora_buf_puts(&b, "yz");
	s = remora_buf_release(&b, NULL);
	CHECK_STR(s, "xyz", "putc and puts append");
	free(s);

	/* a manifest's text hands its head out as a part, keeps the rest */
	remora_buf_puts(&b, "part-one|rest");
	remora_buf_consume(&b, 9);
	CHECK(b.len == 4 && strcmp(b.data, "rest") == 0,
		  "consume drops the head and keeps the rest terminated");
	remora_buf_consume(&b, 100);
	CHECK(b.len == 0 && b.data[0] == '\0', "consume stops at the end");
	remora_buf_free(&b);

	for (int i = 0; i < 20; i++)
	{
		int *grown = remora_array_grow(ints, i, &cap, sizeof(int));

		if (grown == NULL)
			break;
		ints = grown;
		ints[i] = i;
	}
	CHECK(ints != NULL && cap == 32 && ints[19] == 19,
		  "array_grow doubles from 8 and keeps the items");
	CHECK(ints != NULL && ints[20] == 0 && ints[31] == 0,
		  "array_grow zeroes the new items");
	free(ints);
}

/* A webhook's URL need not name a file; its signature is Standard Webhooks'. */
static void
test_webhooks(void)
{
	RemoraSourceUri u;
	char            err[REMORA_ERRBUF_LEN] = "";
	char            sig[64] = "";
	/* the convention's published example:
	 * whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw */
	const unsigned char key[] = {
		0x31, 0xf2, 0x90, 0xf6, 0xbf, 0x06, 0x29, 0x8a, 0xab, 0x4f, 0x08, 0xd4,
		0x3c, 0x3f, 0x08, 0x2c, 0xf6, 0x48, 0xa3, 0x62, 0xda, 0x2d, 0xa4, 0xb0};
	const char *bad[] = {"https://",        "ftp://example.com/",
						 "https://a b/",    "https://user:pw@example.com/hook",
						 "s3://bucket/key", ""};

	CHECK(remora_http_url_parse("HTTPS://Example.COM", &u, err, sizeof(err)) &&
			  u.kind == REMORA_SOURCE_HTTP && u.file_name == NULL &&
			  strcmp(u.canonical, "https://example.com/") == 0 &&
			  strcmp(u.host, "example.com") == 0 && u.port == 443,
		  "a webhook URL without a file name parses (%s)", err);
	remora_source_uri_free(&u);
	CHECK(remora_http_url_parse("http://127.0.0.1:8080/hook?t=1#f", &u, err,
								sizeof(err)) &&
			  strcmp(u.canonical, "http://127.0.0.1:8080/hook?t=1") == 0 &&
			  u.port == 8080,
		  "its query is kept, its fragment dropped (%s)", err);
	remora_source_uri_free(&u);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
	{
		CHECK(!remora_http_url_parse(bad[i], &u, err, sizeof(err)),
			  "a webhook URL \"%s\" is refused", bad[i]);
		remora_source_uri_free(&u);
	}

	CHECK(remora_webhook_signature(key, sizeof(key),
								   "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330,
								   "{\"test\": 2432232314}", sig, sizeof(sig)),
		  "a webhook is signed");
	CHECK_STR(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
			  "its signature is the convention's example");
	CHECK(
		!remora_webhook_signature(key, sizeof(key), "msg_x", 1, "{}", sig, 40),
		"a signature that does not fit is refused");
}

int
main(void)
{
	test_util();
	test_scrub();
	test_sources();
	test_bucket_prefix();
	test_netpolicy();
	test_webhooks();
	return unit_done();
}
