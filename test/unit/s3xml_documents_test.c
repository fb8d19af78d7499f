/*
 * Unit tests of the S3 XML parser and request builders on the documents
 * stores send and take: error documents, single values, ListObjectsV2 and
 * ListMultipartUploads answers, and the DeleteObjects /
 * CompleteMultipartUpload bodies.  Plain C, built with AddressSanitizer and
 * UBSan.  Hostile documents are s3xml_hostile_test.c's.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "s3xml_fixtures.h"

#define S3_NS    "http://s3.amazonaws.com/doc/2006-03-01/"
#define S3RVR_NS "http://doc.s3.amazonaws.com/2006-03-01/"
#define XML_DECL "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"

/* ------------------------------------------------------------------ */

static void
test_errors(void)
{
	RemoraS3Error e;

	CHECK(error_doc(XML_DECL "<Error><Code>NoSuchKey</Code>"
							 "<Message>The specified key does not exist."
							 "</Message><Key>a/b c</Key>"
							 "<RequestId>4442587FB7D0A2F9</RequestId>"
							 "<HostId>eftixk72aD6Ap51T</HostId></Error>",
					&e),
		  "real S3 NoSuchKey is an error document");
	CHECK_STR(e.code, "NoSuchKey", "NoSuchKey code");
	CHECK_STR(e.message, "The specified key does not exist.",
			  "NoSuchKey message");
	CHECK_STR(e.request_id, "4442587FB7D0A2F9", "NoSuchKey request id");
	remora_s3xml_error_free(&e);
	CHECK(error_cleared(&e), "error_free clears the struct");
	remora_s3xml_error_free(&e);
	remora_s3xml_error_free(NULL);

	/* s3rver: namespaced, pretty-printed */
	CHECK(error_doc(XML_DECL "<Error xmlns=\"" S3RVR_NS "\">\n"
							 "  <Code>SlowDown</Code>\n"
							 "  <Message>\n    Please reduce your request "
							 "rate.\n  </Message>\n"
							 "  <RequestId>s3rver-1</RequestId>\n</Error>\n",
					&e),
		  "s3rver SlowDown is an error document");
	CHECK_STR(e.code, "SlowDown", "SlowDown code");
	CHECK_STR(e.message, "Please reduce your request rate.",
			  "SlowDown message, trimmed");
	CHECK_STR(e.request_id, "s3rver-1", "SlowDown request id");
	remora_s3xml_error_free(&e);

	/* a prefixed namespace, escapes and CDATA */
	CHECK(error_doc("<s3:Error xmlns:s3=\"" S3_NS "\">"
					"<s3:Code>SignatureDoesNotMatch</s3:Code>"
					"<s3:AWSAccessKeyId>AKIA</s3:AWSAccessKeyId>"
					"<s3:Message>The request signature we calculated does "
					"not match &amp; <![CDATA[<check> your key]]>"
					"</s3:Message><s3:StringToSign>AWS4-HMAC-SHA256"
					"</s3:StringToSign></s3:Error>",
					&e),
		  "prefixed SignatureDoesNotMatch is an error document");
	CHECK_STR(e.code, "SignatureDoesNotMatch", "SignatureDoesNotMatch code");
	CHECK_STR(e.message,
			  "The request signature we calculated does not match & "
			  "<check> your key",
			  "SignatureDoesNotMatch message with entity and CDATA");
	CHECK(e.request_id == NULL, "absent RequestId is NULL");
	remora_s3xml_error_free(&e);

	CHECK(error_doc("<Error/>", &e) && error_cleared(&e),
		  "an empty <Error/> is an error document with no fields");
	remora_s3xml_error_free(&e);

	/* not error documents */
	CHECK(
		!error_doc("<ListBucketResult><Name>b</Name></ListBucketResult>", &e) &&
			error_cleared(&e),
		"a listing is not an error document");
	CHECK(!error_doc("<Errors><Code>X</Code></Errors>", &e),
		  "<Errors> is not <Error>");
	CHECK(!error_doc("<html><body><h1>502 Bad Gateway</h1></body></html>", &e),
		  "an HTML error page is not an error document");
	CHECK(!error_doc("not xml at all", &e) && error_cleared(&e),
		  "garbage is not an error document");
	CHECK(!remora_s3xml_error("<Error/>", 0, &e), "an empty body is refused");
	CHECK(!error_doc("", &e), "an empty string is refused");
	CHECK(!error_doc("<Error><Code>NoSuch", &e) && error_cleared(&e),
		  "truncated XML is refused");
	CHECK(!error_doc("<Error><Code>X</Code></Error><Error/>", &e),
		  "two root elements are refused");
	CHECK(!error_doc("<a:Error><Code>X</Code></a:Error>", &e),
		  "an undeclared namespace prefix is refused");
	CHECK(!remora_s3xml_error(NULL, 10, &e), "a NULL body is refused");
	CHECK(!remora_s3xml_error("<Error/>", 8, NULL), "a NULL out is refused");
}

static void
test_text(void)
{
	char *root;
	char *text;

	text = text_of("<InitiateMultipartUploadResult xmlns=\"" S3_NS "\">"
				   "<Bucket>b</Bucket><Key>k</Key>"
				   "<UploadId>VXBsb2FkIElE.Zm9v</UploadId>"
				   "</InitiateMultipartUploadResult>",
				   "UploadId", &root);
	CHECK_STR(text, "VXBsb2FkIElE.Zm9v", "UploadId, S3 namespace");
	CHECK_STR(root, "InitiateMultipartUploadResult", "root name, S3");
	free(text);
	free(root);

	text = text_of(XML_DECL "<InitiateMultipartUploadResult xmlns=\"" S3RVR_NS
							"\">\n  <Bucket>b</Bucket>\n"
							"  <UploadId>\n    abc123\n  </UploadId>\n"
							"</InitiateMultipartUploadResult>",
				   "UploadId", &root);
	CHECK_STR(text, "abc123", "UploadId, s3rver namespace, trimmed");
	CHECK_STR(root, "InitiateMultipartUploadResult", "root name, s3rver");
	free(text);
	free(root);

	text = text_of("<CompleteMultipartUploadResult xmlns=\"" S3_NS "\">"
				   "<Location>http://b.s3.amazonaws.com/k</Location>"
				   "<Bucket>b</Bucket><Key>k</Key>"
				   "<ETag>&quot;3858f62230ac3c915f300c664312c11f-9&quot;"
				   "</ETag></CompleteMultipartUploadResult>",
				   "ETag", &root);
	CHECK_STR(text, "\"3858f62230ac3c915f300c664312c11f-9\"",
			  "CompleteMultipartUploadResult ETag, quotes kept");
	CHECK_STR(root, "CompleteMultipartUploadResult", "root name, complete");
	free(text);
	free(root);

	/* CompleteMultipartUpload can answer 200 OK with an error */
	text = text_of(XML_DECL "\n<Error><Code>InternalError</Code>"
							"<Message>We encountered an internal error. "
							"Please try again.</Message>"
							"<RequestId>656c76696e6727732072657175657374"
							"</RequestId></Error>",
				   "ETag", &root);
	CHECK(text == NULL, "no ETag in a 200 OK <Error>");
	CHECK_STR(root, "Error", "the root name tells the 200 OK error apart");
	free(text);
	free(root);

	text = text_of("<CopyPartResult><LastModified>2009-10-28T22:32:00.000Z"
				   "</LastModified><ETag>\"9b2cf535f27731c974343645a3985328"
				   "\"</ETag></CopyPartResult>",
				   "ETag", NULL);
	CHECK_STR(text, "\"9b2cf535f27731c974343645a3985328\"",
			  "CopyPartResult ETag, root_name NULL");
	free(text);

	text = text_of("<CopyObjectResult><ETag>\"abc\"</ETag>"
				   "</CopyObjectResult>",
				   "UploadId", &root);
	CHECK(text == NULL, "absent element is NULL");
	CHECK_STR(root, "CopyObjectResult", "root name is set even when absent");
	free(text);
	free(root);

	text = text_of("<A><B><C><ETag>deep</ETag></C></B><ETag>late</ETag></A>",
				   "ETag", NULL);
	CHECK_STR(text, "deep", "first ETag in document order");
	free(text);

	text =
		text_of("<A><ETag>a<X>hidden</X>b<!-- c -->c</ETag></A>", "ETag", NULL);
	CHECK_STR(text, "abc", "only direct text children are read");
	free(text);

	text = text_of("<A><UploadId></UploadId></A>", "UploadId", NULL);
	CHECK_STR(text, "", "an empty element gives an empty string");
	free(text);

	text = text_of("<Root>x</Root>", "Root", NULL);
	CHECK_STR(text, "x", "the root element itself can be asked for");
	free(text);

	root = (char *) "unset";
	text = text_of("<A><UploadId>x</UploadId>", "UploadId", &root);
	CHECK(text == NULL && root == NULL, "truncated XML: NULL and no root");
	root = (char *) "unset";
	text = text_of("junk", "UploadId", &root);
	CHECK(text == NULL && root == NULL, "garbage: NULL and no root");
	text = text_of("<A><UploadId>x</UploadId></A>", NULL, NULL);
	CHECK(text == NULL, "a NULL local name finds nothing");

	/* the encoding declaration is honoured; output is UTF-8 */
	text = text_of("<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?>"
				   "<A><K>caf\xe9</K></A>",
				   "K", NULL);
	CHECK_STR(text, "caf\xc3\xa9", "Latin-1 body converted to UTF-8");
	free(text);
}

/* ------------------------------------------------------------------ */

static const char listing_page[] = XML_DECL
	"<ListBucketResult xmlns=\"" S3_NS "\">"
	"<Name>bucket</Name><Prefix>data/</Prefix><KeyCount>5</KeyCount>"
	"<MaxKeys>1000</MaxKeys><Delimiter>/</Delimiter>"
	"<IsTruncated>true</IsTruncated>"
	"<Contents><Key>data/a b.txt</Key>"
	"<LastModified>2024-01-02T03:04:05.000Z</LastModified>"
	"<ETag>&quot;d41d8cd98f00b204e9800998ecf8427e&quot;</ETag>"
	"<Size>0</Size><StorageClass>STANDARD</StorageClass></Contents>"
	"<Contents><Key>data/x&amp;y</Key><Size>12345</Size>"
	"<ETag>\"e1\"</ETag></Contents>"
	"<Contents><Key>data/\xe6\x97\xa5\xe6\x9c\xac/\xc3\xbc.bin</Key>"
	"<Size>9223372036854775807</Size></Contents>"
	"<Contents><Key>data/c++/a+b</Key><Size>\n  7\n</Size></Contents>"
	"<Contents><Key> data/spaced </Key><Size>1</Size></Contents>"
	"<CommonPrefixes><Prefix>data/sub dir/</Prefix></CommonPrefixes>"
	"<CommonPrefixes><Prefix>data/q&amp;a/</Prefix></CommonPrefixes>"
	"<NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM="
	"</NextContinuationToken>"
	"<StartAfter>data/</StartAfter></ListBucketResult>";

/* A one-entry listing whose only <Contents> is the given text. */
static bool
one_entry(const char *contents, RemoraS3Listing *l)
{
	char xml[1024];

	snprintf(xml, sizeof(xml),
			 "<ListBucketResult><Name>b</Name>%s"
			 "<IsTruncated>false</IsTruncated></ListBucketResult>",
			 contents);
	return listing(xml, l);
}

static void
bad_entry(const char *contents, const char *what)
{
	RemoraS3Listing l;

	CHECK(!one_entry(contents, &l) && listing_cleared(&l),
		  "listing refused: %s", what);
}

static void
bad_size(const char *size)
{
	char contents[256];
	char shown[64];

	snprintf(contents, sizeof(contents),
			 "<Contents><Key>k</Key><Size>%s</Size></Contents>", size);
	snprintf(shown, sizeof(shown), "Size \"%s\"", size);
	bad_entry(contents, shown);
}

static void
test_listing(void)
{
	RemoraS3Listing l;

	CHECK(listing(listing_page, &l), "a full ListObjectsV2 page parses");
	CHECK(l.nobjects == 5, "five objects (%d)", l.nobjects);
	if (l.nobjects == 5)
	{
		CHECK_STR(l.objects[0].key, "data/a b.txt", "key with a space");
		CHECK(l.objects[0].size == 0, "size 0");
		CHECK_STR(l.objects[0].etag, "\"d41d8cd98f00b204e9800998ecf8427e\"",
				  "ETag with quotes");
		CHECK_STR(l.objects[0].last_modified, "2024-01-02T03:04:05.000Z",
				  "LastModified");
		CHECK_STR(l.objects[1].key, "data/x&y", "key with &amp;");
		CHECK(l.objects[1].size == 12345, "size 12345");
		CHECK(l.objects[1].last_modified == NULL,
			  "absent LastModified is NULL");
		CHECK_STR(l.objects[2].key,
				  "data/\xe6\x97\xa5\xe6\x9c\xac/\xc3\xbc.bin", "unicode key");
		CHECK(l.objects[2].size == INT64_MAX, "size INT64_MAX");
		CHECK(l.objects[2].etag == NULL, "absent ETag is NULL");
		CHECK_STR(l.objects[3].key, "data/c++/a+b", "key with +");
		CHECK(l.objects[3].size == 7, "size with surrounding whitespace");
		CHECK_STR(l.objects[4].key, " data/spaced ",
				  "key kept verbatim, surrounding spaces included");
	}
	CHECK(l.nprefixes == 2, "two common prefixes (%d)", l.nprefixes);
	if (l.nprefixes == 2)
	{
		CHECK_STR(l.common_prefixes[0], "data/sub dir/", "prefix 1");
		CHECK_STR(l.common_prefixes[1], "data/q&a/", "prefix 2");
	}
	CHECK(l.truncated, "IsTruncated true");
	CHECK_STR(l.next_token, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=",
			  "NextContinuationToken");
	remora_s3xml_listing_free(&l);
	CHECK(listing_cleared(&l), "listing_free clears the struct");
	remora_s3xml_listing_free(&l);
	remora_s3xml_listing_free(NULL);

	CHECK(listing(XML_DECL "<ListBucketResult xmlns=\"" S3RVR_NS "\">\n"
						   "  <IsTruncated>false</IsTruncated>\n"
						   "  <Contents>\n    <Key>only</Key>\n"
						   "    <Size>3</Size>\n  </Contents>\n"
						   "</ListBucketResult>\n",
				  &l),
		  "s3rver-style listing parses");
	CHECK(l.nobjects == 1 && l.nprefixes == 0 && !l.truncated &&
			  l.next_token == NULL,
		  "one object, not truncated, no token");
	if (l.nobjects == 1)
		CHECK_STR(l.objects[0].key, "only", "s3rver key");
	remora_s3xml_listing_free(&l);

	CHECK(listing("<ListBucketResult xmlns=\"" S3_NS "\"><Name>b</Name>"
				  "<KeyCount>0</KeyCount><IsTruncated>false</IsTruncated>"
				  "</ListBucketResult>",
				  &l) &&
			  listing_cleared(&l),
		  "an empty listing parses to nothing");
	remora_s3xml_listing_free(&l);

	CHECK(listing("<ListBucketResult/>", &l) && listing_cleared(&l),
		  "no IsTruncated means not truncated");
	remora_s3xml_listing_free(&l);

	bad_entry("<Contents><Size>1</Size></Contents>", "missing Key");
	bad_entry("<Contents><Key></Key><Size>1</Size></Contents>", "empty Key");
	bad_entry("<Contents><Key>k</Key></Contents>", "missing Size");
	bad_entry("<Contents><Key>a</Key><Key>b</Key><Size>1</Size></Contents>",
			  "two Keys");
	bad_entry("<Contents><Key>a</Key><Size>1</Size><Size>2</Size></Contents>",
			  "two Sizes");
	bad_entry("<Contents><Key>k</Key><Size>1</Size></Contents>"
			  "<CommonPrefixes></CommonPrefixes>",
			  "CommonPrefixes without Prefix");
	bad_entry("<Contents><Key>k</Key><Size>1</Size></Contents>"
			  "<IsTruncated>yes</IsTruncated>",
			  "IsTruncated neither true nor false");
	bad_entry("<Contents><Key>k</Key><Size>1</Size></Contents>"
			  "<Contents><Size>2</Size></Contents>",
			  "a valid entry then one without Key");
	bad_size("-1");
	bad_size("abc");
	bad_size("99999999999999999999");
	bad_size("9223372036854775808");
	bad_size("");
	bad_size("1e3");
	bad_size("+1");
	bad_size("1 2");
	bad_size("0x10");
	bad_size("1.0");

	CHECK(!listing("<ListAllMyBucketsResult><Buckets/>"
				   "</ListAllMyBucketsResult>",
				   &l) &&
			  listing_cleared(&l),
		  "another root is not a listing");
	CHECK(!listing("<Error><Code>AccessDenied</Code></Error>", &l),
		  "an error document is not a listing");
	CHECK(!listing("<ListBucketResult><Contents>", &l) && listing_cleared(&l),
		  "a truncated listing is refused");
	CHECK(!remora_s3xml_listing("<ListBucketResult/>", 19, NULL),
		  "a NULL out is refused");
}

/* ------------------------------------------------------------------ */

static void
test_delete_body(void)
{
	const char *keys[] = {
		"a&b<c>\"d\"'e'", "\xe6\x97\xa5\xe6\x9c\xac \xc3\xbc \xf0\x9f\x98\x80",
		"plain/key.txt",  "line\r\nbreak\ttab",
		" spaced \x7f",
	};
	const char *expected =
		"<Delete><Quiet>true</Quiet>"
		"<Object><Key>a&amp;b&lt;c&gt;&quot;d&quot;&apos;e&apos;</Key>"
		"</Object>"
		"<Object><Key>\xe6\x97\xa5\xe6\x9c\xac \xc3\xbc \xf0\x9f\x98\x80"
		"</Key></Object>"
		"<Object><Key>plain/key.txt</Key></Object>"
		"<Object><Key>line&#13;&#10;break&#9;tab</Key></Object>"
		"<Object><Key> spaced \x7f</Key></Object>"
		"</Delete>";
	const char *many[1001];
	size_t      len = 0;
	char       *body;
	char       *text;
	int         i;

	body = remora_s3xml_delete_body(keys, 5, &len);
	CHECK_STR(body, expected, "delete body, escaped");
	CHECK(body != NULL && len == strlen(body), "delete body length");
	text = body ? remora_s3xml_text(body, len, "Key", NULL) : NULL;
	CHECK_STR(text, keys[0], "the escaped key parses back to itself");
	free(text);
	free(body);

	body = remora_s3xml_delete_body(keys + 2, 1, NULL);
	CHECK_STR(body,
			  "<Delete><Quiet>true</Quiet><Object><Key>plain/key.txt</Key>"
			  "</Object></Delete>",
			  "one key, len NULL");
	free(body);

	for (i = 0; i < 1001; i++)
		many[i] = "k";
	body = remora_s3xml_delete_body(many, 1000, &len);
	CHECK(body != NULL, "1000 keys accepted");
	free(body);
	CHECK(remora_s3xml_delete_body(many, 1001, &len) == NULL,
		  "1001 keys refused");
	CHECK(remora_s3xml_delete_body(many, 0, &len) == NULL, "0 keys refused");
	CHECK(remora_s3xml_delete_body(many, -1, &len) == NULL,
		  "negative count refused");
	CHECK(remora_s3xml_delete_body(NULL, 1, &len) == NULL,
		  "NULL array refused");

	{
		static const char *const bad[] = {
			"a\001b",          /* C0 control */
			"a\x1f",           /* C0 control */
			"a\x0b",           /* vertical tab */
			"",                /* empty key */
			"\xff",            /* not UTF-8 */
			"\xc0\xaf",        /* overlong '/' */
			"\xe0\x80\xaf",    /* overlong '/' */
			"\xed\xa0\x80",    /* surrogate */
			"\xef\xbf\xbe",    /* U+FFFE */
			"\xe6\x97",        /* truncated sequence */
			"\xf4\x90\x80\x80" /* beyond U+10FFFF */
		};
		const char *one[2];

		for (i = 0; i < (int) (sizeof(bad) / sizeof(bad[0])); i++)
		{
			one[0] = "good";
			one[1] = bad[i];
			CHECK(remora_s3xml_delete_body(one, 2, &len) == NULL,
				  "unrepresentable key %d refused", i);
		}
		one[1] = NULL;
		CHECK(remora_s3xml_delete_body(one, 2, &len) == NULL,
			  "NULL key refused");
	}
}

static void
test_complete_body(void)
{
	const char *etags[] = {
		"\"a54357aff0632cce46d942af68356b38\"",
		"\"0c78aef83f66abc1fa1e8477f296d394\"",
		"\"acbd18db4cc2f85cedef654fccc4a4d8-1\"",
	};
	const char *odd[] = {"\"<x>&'\""};
	size_t      len = 0;
	char       *body;
	char       *text;
	const char *many[10001];
	int         i;

	body = remora_s3xml_complete_body(etags, 3, &len);
	CHECK_STR(body,
			  "<CompleteMultipartUpload>"
			  "<Part><PartNumber>1</PartNumber>"
			  "<ETag>&quot;a54357aff0632cce46d942af68356b38&quot;</ETag></Part>"
			  "<Part><PartNumber>2</PartNumber>"
			  "<ETag>&quot;0c78aef83f66abc1fa1e8477f296d394&quot;</ETag></Part>"
			  "<Part><PartNumber>3</PartNumber>"
			  "<ETag>&quot;acbd18db4cc2f85cedef654fccc4a4d8-1&quot;</ETag>"
			  "</Part></CompleteMultipartUpload>",
			  "complete body for three parts");
	CHECK(body != NULL && len == strlen(body), "complete body length");
	text = body ? remora_s3xml_text(body, len, "ETag", NULL) : NULL;
	CHECK_STR(text, etags[0], "the first ETag parses back");
	free(text);
	free(body);

	body = remora_s3xml_complete_body(odd, 1, NULL);
	CHECK_STR(body,
			  "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber>"
			  "<ETag>&quot;&lt;x&gt;&amp;&apos;&quot;</ETag></Part>"
			  "</CompleteMultipartUpload>",
			  "a hostile ETag cannot inject XML");
	free(body);

	for (i = 0; i < 10001; i++)
		many[i] = "\"e\"";
	body = remora_s3xml_complete_body(many, 10000, &len);
	CHECK(body != NULL && strstr(body, "<PartNumber>10000</PartNumber>"),
		  "10000 parts accepted");
	free(body);
	CHECK(remora_s3xml_complete_body(many, 10001, &len) == NULL,
		  "10001 parts refused");
	CHECK(remora_s3xml_complete_body(many, 0, &len) == NULL, "0 parts refused");
	odd[0] = "\"a\x02\"";
	CHECK(remora_s3xml_complete_body(odd, 1, &len) == NULL,
		  "control character in an ETag refused");
	CHECK(remora_s3xml_complete_body(NULL, 1, &len) == NULL,
		  "NULL array refused");
}

/* ListMultipartUploads, as AWS and RGW answer it */
static void
test_uploads(void)
{
	RemoraS3Uploads u;
	const char     *aws =
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
		"<ListMultipartUploadsResult xmlns=\"http://s3.amazonaws.com/doc/"
		"2006-03-01/\"><Bucket>b</Bucket><KeyMarker></KeyMarker>"
		"<NextKeyMarker>remora/7/a/data/y</NextKeyMarker>"
		"<NextUploadIdMarker>2~zz</NextUploadIdMarker><IsTruncated>true"
		"</IsTruncated><Upload><Key>remora/7/a/data/x</Key><UploadId>2~abc"
		"</UploadId></Upload><Upload><Key>remora/7/a/data/y</Key><UploadId>"
		"2~zz</UploadId></Upload></ListMultipartUploadsResult>";
	const char *empty = "<ListMultipartUploadsResult><Bucket>b</Bucket>"
						"<IsTruncated>false</IsTruncated>"
						"</ListMultipartUploadsResult>";

	CHECK(remora_s3xml_uploads(aws, strlen(aws), &u) && u.nuploads == 2 &&
			  strcmp(u.uploads[0].key, "remora/7/a/data/x") == 0 &&
			  strcmp(u.uploads[1].upload_id, "2~zz") == 0 && u.truncated &&
			  strcmp(u.next_key_marker, "remora/7/a/data/y") == 0 &&
			  strcmp(u.next_upload_id_marker, "2~zz") == 0,
		  "uploads: two uploads and the markers of the next page");
	remora_s3xml_uploads_free(&u);
	CHECK(remora_s3xml_uploads(empty, strlen(empty), &u) && u.nuploads == 0 &&
			  !u.truncated && u.next_key_marker == NULL,
		  "uploads: none");
	remora_s3xml_uploads_free(&u);
	CHECK(!remora_s3xml_uploads(
			  "<ListMultipartUploadsResult><Upload><Key>k</Key></Upload>"
			  "</ListMultipartUploadsResult>",
			  86, &u) &&
			  u.uploads == NULL,
		  "uploads: an upload without an id is refused, and cleared");
	CHECK(!remora_s3xml_uploads("<ListBucketResult/>", 19, &u),
		  "uploads: another kind of answer is refused");
	CHECK(!remora_s3xml_uploads(
			  "<ListMultipartUploadsResult><IsTruncated>maybe</IsTruncated>"
			  "</ListMultipartUploadsResult>",
			  89, &u),
		  "uploads: a truncation flag that is not a boolean is refused");
}

/* ListParts, as AWS answers it; hostile pages refused */
static void
test_parts(void)
{
	RemoraS3Parts p;
	const char   *aws =
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
		"<ListPartsResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
		"<Bucket>b</Bucket><Key>k</Key><UploadId>u</UploadId>"
		"<PartNumberMarker>0</PartNumberMarker>"
		"<NextPartNumberMarker>3</NextPartNumberMarker><MaxParts>2</MaxParts>"
		"<IsTruncated>true</IsTruncated>"
		"<Part><PartNumber>1</PartNumber><LastModified>2026-01-01T00:00:00Z"
		"</LastModified><ETag>&quot;aa&quot;</ETag><Size>5242880</Size></Part>"
		"<Part><PartNumber>3</PartNumber><ETag>\"bb\"</ETag><Size>7</Size>"
		"</Part></ListPartsResult>";
	const char *bad[] = {
		"<ListPartsResult><Part><PartNumber>2</PartNumber><ETag>\"a\"</ETag>"
		"<Size>1</Size></Part><Part><PartNumber>1</PartNumber><ETag>\"b\""
		"</ETag><Size>1</Size></Part></ListPartsResult>",
		"<ListPartsResult><Part><PartNumber>10001</PartNumber><ETag>\"a\""
		"</ETag><Size>1</Size></Part></ListPartsResult>",
		"<ListPartsResult><Part><PartNumber>1</PartNumber><Size>1</Size>"
		"</Part></ListPartsResult>",
		"<ListPartsResult><IsTruncated>true</IsTruncated></ListPartsResult>",
	};
	const char *gaps[] = {"\"a\"", NULL, "\"c\""};
	char       *body;

	CHECK(remora_s3xml_parts(aws, strlen(aws), &p) && p.nparts == 2 &&
			  p.parts[0].number == 1 &&
			  strcmp(p.parts[0].etag, "\"aa\"") == 0 &&
			  p.parts[0].size == 5242880 && p.parts[1].number == 3 &&
			  p.truncated && p.next_marker == 3,
		  "parts: two parts, a gap, and the marker of the next page");
	remora_s3xml_parts_free(&p);
	for (int i = 0; i < 4; i++)
		CHECK(
			!remora_s3xml_parts(bad[i], strlen(bad[i]), &p) && p.parts == NULL,
			"parts: hostile page %d refused (order, number, ETag, marker)", i);
	body = remora_s3xml_complete_body(gaps, 3, NULL);
	CHECK(body != NULL && strstr(body, "<PartNumber>2<") == NULL &&
			  strstr(body, "<PartNumber>3</PartNumber>") != NULL,
		  "complete body: a number the upload does not hold is left out");
	free(body);
	gaps[0] = gaps[2] = NULL;
	CHECK(remora_s3xml_complete_body(gaps, 3, NULL) == NULL,
		  "complete body: no part at all refused");
}

int
main(void)
{
	test_errors();
	test_uploads();
	test_parts();
	test_text();
	test_listing();
	test_delete_body();
	test_complete_body();
	return unit_done();
}
