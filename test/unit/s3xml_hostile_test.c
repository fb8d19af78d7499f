/*
 * Unit tests of the S3 XML parser against hostile documents: entity bombs,
 * external entities and DTDs (nothing read, nothing fetched), oversized and
 * deeply nested bodies, NUL bytes, and parse errors that must neither print
 * nor reach the host's libxml2 error handlers.  Plain C, built with
 * AddressSanitizer and UBSan.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <libxml/parser.h>
#include <libxml/xmlerror.h>

#include "s3xml_fixtures.h"

#if LIBXML_VERSION >= 21200
typedef const xmlError *ErrorArg;
#else
typedef xmlErrorPtr ErrorArg;
#endif

/* Is body refused by all three parsers? */
static bool
refused_everywhere(const char *body, size_t len, const char *name)
{
	RemoraS3Error   e;
	RemoraS3Listing l;
	char           *root = (char *) "unset";
	char           *text = remora_s3xml_text(body, len, name, &root);
	bool            ok = text == NULL && root == NULL;

	free(text);
	free(root);
	ok = !remora_s3xml_error(body, len, &e) && error_cleared(&e) && ok;
	remora_s3xml_error_free(&e);
	ok = !remora_s3xml_listing(body, len, &l) && listing_cleared(&l) && ok;
	remora_s3xml_listing_free(&l);
	return ok;
}

/* ------------------------------------------------------------------ */

static long
max_rss_kb(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

/*
 * CPU seconds of this process, not the wall clock: the suite runs the unit
 * tests at nice 19 beside other work, where wall time says nothing.
 */
static double
cpu_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void
test_entity_bomb(void)
{
	static const char bomb[] =
		"<?xml version=\"1.0\"?>\n<!DOCTYPE Error [\n"
		" <!ENTITY lol \"lol\">\n"
		" <!ENTITY lol1 \"&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;\">"
		" <!ENTITY lol2 \"&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;"
		"&lol1;&lol1;\">"
		" <!ENTITY lol3 \"&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;"
		"&lol2;&lol2;\">"
		" <!ENTITY lol4 \"&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;"
		"&lol3;&lol3;\">"
		" <!ENTITY lol5 \"&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;"
		"&lol4;&lol4;\">"
		" <!ENTITY lol6 \"&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;"
		"&lol5;&lol5;\">"
		" <!ENTITY lol7 \"&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;"
		"&lol6;&lol6;\">"
		" <!ENTITY lol8 \"&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;"
		"&lol7;&lol7;\">"
		" <!ENTITY lol9 \"&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;"
		"&lol8;&lol8;\">\n]>\n"
		"<Error><Code>&lol9;</Code><Message>&lol9;</Message></Error>";
	long   rss = max_rss_kb();
	double t0 = cpu_seconds();
	int    i;
	bool   refused = true;

	for (i = 0; i < 100; i++)
		refused = refused && refused_everywhere(bomb, strlen(bomb), "Code");
	CHECK(refused, "billion laughs refused");
	CHECK(cpu_seconds() - t0 < 2.0, "100 x 3 billion laughs in %.3f s of CPU",
		  cpu_seconds() - t0);
	CHECK(max_rss_kb() - rss < 64 * 1024,
		  "billion laughs: memory grew by %ld kB (limit 64 MB)",
		  max_rss_kb() - rss);
}

static void
test_external_entities(void)
{
	static const char xxe[] =
		"<?xml version=\"1.0\"?>\n"
		"<!DOCTYPE Error [<!ENTITY e SYSTEM \"file:///etc/passwd\">]>\n"
		"<Error><Code>X</Code><Message>&e;</Message></Error>";
	static const char xxe_listing[] =
		"<!DOCTYPE ListBucketResult [<!ENTITY e SYSTEM "
		"\"file:///etc/passwd\">]><ListBucketResult><Contents><Key>&e;</Key>"
		"<Size>1</Size></Contents></ListBucketResult>";
	RemoraS3Error   e;
	RemoraS3Listing l;
	char           *text;

	CHECK(!error_doc(xxe, &e) && e.message == NULL,
		  "external entity refused, /etc/passwd not read");
	text = text_of(xxe, "Message", NULL);
	CHECK(text == NULL, "external entity refused by the text helper");
	free(text);
	CHECK(!listing(xxe_listing, &l) && l.nobjects == 0,
		  "external entity in a listing key refused");
	CHECK(refused_everywhere(xxe, strlen(xxe), "Message"),
		  "external entity refused everywhere");

	/* no DOCTYPE, so no entity can be declared: an unknown one is an error */
	text = text_of("<Error><Message>&e;</Message></Error>", "Message", NULL);
	CHECK(text == NULL, "undeclared entity refused");
	free(text);

	/* predefined and character references are plain text */
	text = text_of("<A><M>&lt;&gt;&amp;&apos;&quot;&#65;&#x42;</M></A>", "M",
				   NULL);
	CHECK_STR(text, "<>&'\"AB", "predefined and character references");
	free(text);
	text = text_of("<A><M>&#x1;</M></A>", "M", NULL);
	CHECK(text == NULL, "&#x1; is not XML 1.0: refused");
	free(text);

	/* XInclude is never processed */
	text = text_of("<A xmlns:xi=\"http://www.w3.org/2001/XInclude\">"
				   "<xi:include href=\"file:///etc/passwd\" parse=\"text\"/>"
				   "</A>",
				   "A", NULL);
	CHECK(text != NULL && strstr(text, "root:") == NULL,
		  "XInclude not processed");
	free(text);

	CHECK(refused_everywhere("<!DOCTYPE Error><Error><Code>X</Code></Error>",
							 44, "Code"),
		  "a bare DOCTYPE is refused");
	CHECK(refused_everywhere("<Error><Code>X</Code></Error><!DOCTYPE Error>",
							 44, "Code"),
		  "a DOCTYPE after the root is refused");
}

/*
 * A loopback listener that nothing serves: if the parser ever fetched the
 * DTD or entity, the connection would be waiting in its backlog.
 */
static int
canary_listener(int *port)
{
	struct sockaddr_in sa;
	socklen_t          salen = sizeof(sa);
	int                fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) != 0 ||
		listen(fd, 4) != 0 ||
		getsockname(fd, (struct sockaddr *) &sa, &salen) != 0)
	{
		close(fd);
		return -1;
	}
	*port = ntohs(sa.sin_port);
	return fd;
}

static void
test_external_dtd(void)
{
	char          xml[512];
	int           port = 1;
	int           fd = canary_listener(&port);
	struct pollfd pfd;

	CHECK(fd >= 0, "canary listener on 127.0.0.1:%d", port);

	snprintf(xml, sizeof(xml),
			 "<?xml version=\"1.0\"?>\n<!DOCTYPE Error SYSTEM "
			 "\"http://127.0.0.1:%d/x.dtd\">\n<Error><Code>X</Code></Error>",
			 port);
	CHECK(refused_everywhere(xml, strlen(xml), "Code"), "external DTD refused");

	snprintf(xml, sizeof(xml),
			 "<!DOCTYPE Error PUBLIC \"-//X//Y//EN\" "
			 "\"http://127.0.0.1:%d/pub.dtd\"><Error><Code>X</Code></Error>",
			 port);
	CHECK(refused_everywhere(xml, strlen(xml), "Code"),
		  "public external DTD refused");

	snprintf(xml, sizeof(xml),
			 "<!DOCTYPE Error [<!ENTITY %% p SYSTEM "
			 "\"http://127.0.0.1:%d/p.dtd\"> %%p;]>"
			 "<Error><Code>X</Code></Error>",
			 port);
	CHECK(refused_everywhere(xml, strlen(xml), "Code"),
		  "parameter entity refused");

	snprintf(xml, sizeof(xml),
			 "<!DOCTYPE Error [<!ENTITY e SYSTEM "
			 "\"http://127.0.0.1:%d/e\">]><Error><Code>&e;</Code></Error>",
			 port);
	CHECK(refused_everywhere(xml, strlen(xml), "Code"),
		  "external http entity refused");

	if (fd >= 0)
	{
		pfd.fd = fd;
		pfd.events = POLLIN;
		pfd.revents = 0;
		CHECK(poll(&pfd, 1, 200) == 0, "no connection reached the canary");
		close(fd);
	}
}

/* A well-formed <Error> of exactly len bytes, padded with elements. */
static char *
padded_error(size_t len)
{
	static const char head[] = "<Error><Code>SlowDown</Code>";
	static const char tail[] = "</Error>";
	const size_t      pad_len = 1024; /* "<P>" + text + "</P>" */
	char             *body = malloc(len);
	size_t            at = 0;

	if (body == NULL)
		return NULL;
	memcpy(body, head, sizeof(head) - 1);
	at += sizeof(head) - 1;
	while (len - sizeof(tail) + 1 - at >= pad_len)
	{
		memcpy(body + at, "<P>", 3);
		memset(body + at + 3, 'a', pad_len - 7);
		memcpy(body + at + pad_len - 4, "</P>", 4);
		at += pad_len;
	}
	while (at < len - (sizeof(tail) - 1))
		body[at++] = ' ';
	memcpy(body + at, tail, sizeof(tail) - 1);
	return body;
}

static void
test_sizes(void)
{
	char         *body = padded_error(REMORA_S3XML_MAX_BODY + 1);
	RemoraS3Error e;

	CHECK(body != NULL &&
			  refused_everywhere(body, REMORA_S3XML_MAX_BODY + 1, "Code"),
		  "a body of REMORA_S3XML_MAX_BODY + 1 bytes is refused");
	CHECK(body != NULL &&
			  remora_s3xml_error(body, REMORA_S3XML_MAX_BODY, &e) == false,
		  "cut to the limit it is truncated XML, refused");
	free(body);

	body = padded_error(REMORA_S3XML_MAX_BODY);
	CHECK(body != NULL && remora_s3xml_error(body, REMORA_S3XML_MAX_BODY, &e),
		  "a well-formed body of exactly REMORA_S3XML_MAX_BODY is parsed");
	CHECK_STR(e.code, "SlowDown", "its code");
	remora_s3xml_error_free(&e);
	free(body);
}

static void
test_nesting(void)
{
	const int levels = 100000;
	char     *body = malloc((size_t) levels * 7 + 32);
	size_t    len = 0;
	int       i;
	char     *text;

	if (body == NULL)
		return;
	for (i = 0; i < levels; i++)
	{
		memcpy(body + len, "<a>", 3);
		len += 3;
	}
	memcpy(body + len, "x", 1);
	len++;
	for (i = 0; i < levels; i++)
	{
		memcpy(body + len, "</a>", 4);
		len += 4;
	}
	CHECK(refused_everywhere(body, len, "a"),
		  "100000 levels of nesting refused");
	free(body);

	/* modest nesting is fine */
	text = text_of("<a><b><c><d><e><f><g><h><K>deep</K></h></g></f></e></d>"
				   "</c></b></a>",
				   "K", NULL);
	CHECK_STR(text, "deep", "nine levels are fine");
	free(text);
}

static void
test_nul_bytes(void)
{
	static const char nul[] = "<Error><Code>No\0SuchKey</Code></Error>";
	static const char utf16[] = "\xff\xfe<\0E\0r\0r\0o\0r\0/\0>\0";

	CHECK(refused_everywhere(nul, sizeof(nul) - 1, "Code"),
		  "a NUL byte inside is refused");
	CHECK(refused_everywhere(nul, sizeof(nul), "Code"),
		  "a trailing NUL counted in len is refused");
	CHECK(refused_everywhere(utf16, sizeof(utf16) - 1, "Error"),
		  "UTF-16 (NUL bytes) is refused");
}

/* Counters for the host-handler check. */
static int host_errors;

static void
host_structured(void *ctx, ErrorArg error)
{
	(void) ctx;
	(void) error;
	host_errors++;
}

static void
host_generic(void *ctx, const char *msg, ...)
{
	(void) ctx;
	(void) msg;
	host_errors++;
}

/*
 * Parse errors must neither print nor reach the host's global handlers:
 * run hostile and broken documents with stderr redirected to a file and
 * counting handlers installed.
 */
static void
test_silence(void)
{
	FILE         *capture = tmpfile();
	int           saved = dup(2);
	RemoraS3Error e;
	char         *text;
	long          printed;

	if (capture == NULL || saved < 0)
	{
		CHECK(0, "cannot capture stderr");
		return;
	}
	fflush(stderr);
	dup2(fileno(capture), 2);
	xmlSetStructuredErrorFunc(NULL, host_structured);
	xmlSetGenericErrorFunc(NULL, host_generic);

	(void) error_doc("<Error><Code>X</Code", &e);
	(void) error_doc("<Error><Code>X</Cod></Error>", &e);
	(void) error_doc("<Error>&nope;</Error>", &e);
	(void) error_doc("<a:Error/>", &e);
	(void) error_doc("<!DOCTYPE Error [<!ENTITY e SYSTEM \"file:///x\">]>"
					 "<Error>&e;</Error>",
					 &e);
	(void) error_doc("<?xml version=\"1.1\"?><Error xmlns=\"rel\"/>", &e);
	remora_s3xml_error_free(&e);
	text = text_of("\xff\xff", "X", NULL);
	free(text);

	xmlSetStructuredErrorFunc(NULL, NULL);
	xmlSetGenericErrorFunc(NULL, NULL);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	fseek(capture, 0, SEEK_END);
	printed = ftell(capture);
	fclose(capture);

	CHECK(printed == 0, "nothing printed to stderr (%ld bytes)", printed);
	CHECK(host_errors == 0, "host error handlers not called (%d calls)",
		  host_errors);
}

int
main(void)
{
	test_entity_bomb();
	test_external_entities();
	test_external_dtd();
	test_sizes();
	test_nesting();
	test_nul_bytes();
	test_silence();
	return unit_done();
}
