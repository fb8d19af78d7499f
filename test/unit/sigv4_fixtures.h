/*
 * sigv4_fixtures.h: what the SigV4 unit tests share: the known answers'
 * credentials and signing times, a request spelled as a call, and the
 * checks of a canonical request that both the known answers
 * (sigv4_vectors_test.c) and the rules (sigv4_rules_test.c) make.
 *
 * Its functions are static, so that their cases count in the including
 * program's unit.h counters; each is used by both programs.
 */
#ifndef REMORA_SIGV4_FIXTURES_H
#define REMORA_SIGV4_FIXTURES_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/s3/sigv4.h"
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
										  "us-east-1", "s3", NULL};
static const RemoraSigV4Creds suite_creds = {"AKIDEXAMPLE", SUITE_SECRET,
											 "us-east-1", "service", NULL};
static const RemoraSigV4Creds boto_creds = {"AKIAIOSFODNN7EXAMPLE", S3_SECRET,
											"eu-west-1", "s3", NULL};

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

static const RemoraKV suite_headers[] = {
	{"Host", "example.amazonaws.com"},
	{"X-Amz-Date", "20150830T123600Z"},
};

#endif
