/*
 * Unit tests of the engine's pure parts: S3 addressing (path and virtual-
 * host style, key encoding) and the resumable SHA-256 state.  No network.
 */
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "engine/engine_int.h"
#include "unit.h"

static RemoraEngine *
engine_for(const char *endpoint, bool path_style)
{
	RemoraEngineConfig cfg;
	char               err[256];

	memset(&cfg, 0, sizeof(cfg));
	cfg.target.endpoint = endpoint;
	cfg.target.region = "eu-west-1";
	cfg.target.path_style = path_style;
	cfg.target.access_key_id = "AKID";
	cfg.target.secret_access_key = "SECRET";
	cfg.part_size = 5 * 1024 * 1024;
	cfg.allow_networks = "";
	cfg.deny_networks = "";
	return remora_engine_new(&cfg, err, sizeof(err));
}

static void
address(RemoraEngine *e, const char *bucket, const char *key, const RemoraKV *q,
		int nq, const char *url, const char *host, const char *path)
{
	S3Address a;

	CHECK(remora_s3_address(e, bucket, key, q, nq, &a), "address of %s",
		  key ? key : "(bucket)");
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

int
main(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
	test_addressing();
	test_sha256_state();
	curl_global_cleanup();
	return unit_done();
}
