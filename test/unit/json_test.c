/*
 * json_test.c: the Hub answers' JSON reader (strict RFC 8259 with limits)
 * and the member path rules that every listed name must pass.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/common/json.h"
#include "engine/common/source_uri.h"
#include "unit.h"

static RemoraJson *
parse(const char *text)
{
	char err[200];

	return remora_json_parse(text, strlen(text), err, sizeof(err));
}

static int
parses(const char *text)
{
	RemoraJson *v = parse(text);

	remora_json_free(v);
	return v != NULL;
}

static int64_t
int_of(const char *text)
{
	RemoraJson *v = parse(text);
	int64_t     n = v ? remora_json_int(v, "n") : -2;

	remora_json_free(v);
	return n;
}

static void
test_tree_page(void)
{
	const char *page =
		"[{\"type\":\"directory\",\"oid\":\"ab\",\"size\":0,\"path\":\"w\"},"
		" {\"type\":\"file\",\"oid\":\"3f1c\",\"size\":1234,"
		"\"path\":\"w/model.safetensors\",\"lfs\":{\"oid\":"
		"\"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\","
		"\"size\":1234,\"pointerSize\":134}},"
		" {\"type\":\"file\",\"oid\":\"9a\",\"size\":12,\"path\":"
		"\"caf\\u00e9 \\ud83d\\ude00.txt\"}]";
	RemoraJson       *doc = parse(page);
	const RemoraJson *f;

	CHECK(doc != NULL && doc->type == RJ_ARRAY, "a tree page parses");
	if (doc == NULL)
		return;
	f = doc->child->next;
	CHECK_STR(remora_json_string(f, "path"), "w/model.safetensors",
			  "a file's path");
	CHECK(remora_json_int(f, "size") == 1234, "a file's size");
	CHECK_STR(
		remora_json_string(remora_json_get(f, "lfs"), "oid"),
		"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		"an LFS file's content SHA-256");
	CHECK(remora_json_get(doc->child, "lfs") == NULL,
		  "a directory has no lfs object");
	CHECK_STR(remora_json_string(f->next, "path"),
			  "caf\xc3\xa9 \xf0\x9f\x98\x80.txt",
			  "escapes and surrogate pairs decode to UTF-8");
	CHECK(remora_json_string(f, "size") == NULL, "a number is not a string");
	remora_json_free(doc);
}

static void
test_strictness(void)
{
	char *deep = malloc(200);

	CHECK(parses("{\"sha\":\"0123\"}"), "an object");
	CHECK(parses(" [1, -2.5e3, true, false, null] "), "scalars");
	CHECK(!parses(""), "empty input is refused");
	CHECK(!parses("[1,]"), "a trailing comma is refused");
	CHECK(!parses("{\"a\":1,}"), "a trailing comma in an object is refused");
	CHECK(!parses("{'a':1}"), "single quotes are refused");
	CHECK(!parses("[01]"), "a leading zero is refused");
	CHECK(!parses("[1] x"), "trailing garbage is refused");
	CHECK(!parses("[\"a\\u0000b\"]"), "an escaped NUL is refused");
	CHECK(!parses("[\"\\ud800\"]"), "an unpaired surrogate is refused");
	CHECK(!parses("[\"a\x01\"]"), "a raw control character is refused");
	CHECK(!parses("[\"\xff\"]"), "invalid UTF-8 is refused");
	CHECK(!parses("[\"abc"), "an unterminated string is refused");
	CHECK(!parses("{\"a\" 1}"), "a missing colon is refused");
	memset(deep, '[', 100);
	memset(deep + 100, ']', 99);
	deep[199] = '\0';
	CHECK(!parses(deep), "unbalanced deep nesting is refused");
	deep[99] = ']';
	CHECK(!parses(deep), "nesting deeper than the limit is refused");
	free(deep);
	CHECK(int_of("{\"n\":42}") == 42 && int_of("{\"n\":-1}") == -1 &&
			  int_of("{\"n\":1.5}") == -1 &&
			  int_of("{\"n\":99999999999999999999}") == -1,
		  "only non-negative int64 integers are sizes");
}

static void
test_member_paths(void)
{
	const char *good[] = {"a",      "dir/file.bin", "caf\xc3\xa9.txt",
						  "a..b/c", ".hidden",      "x/.y/z"};
	const char *bad[] = {"",
						 "/etc/passwd",
						 "../escape",
						 "a/../b",
						 "a/./b",
						 "a//b",
						 "a/",
						 "dir\\x",
						 "a\x01"
						 "b",
						 "\xff",
						 ".",
						 ".."};
	char        longp[1100];

	for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++)
		CHECK(remora_member_path_valid(good[i]), "member path \"%s\" is fine",
			  good[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		CHECK(!remora_member_path_valid(bad[i]), "member path #%zu is refused",
			  i);
	memset(longp, 'a', sizeof(longp) - 1);
	longp[sizeof(longp) - 1] = '\0';
	CHECK(!remora_member_path_valid(longp), "a path over 1024 bytes");
}

int
main(void)
{
	test_tree_page();
	test_strictness();
	test_member_paths();
	return unit_done();
}
