/*
 * creds_test.c: where a store's credentials come from (src/engine/creds*.c):
 * static keys, the chain's sources in their order (the environment, a web
 * identity token, the profile files, the container endpoint, IMDSv2), a
 * role assumed on top, their refresh before expiry, and a request the
 * store refused as expired signed and sent again.
 *
 * The platform's endpoints (IMDS, the container's, STS) and the store are
 * one small HTTP server on 127.0.0.1, in a thread, that follows AWS's
 * documented protocols and counts what it is asked.
 */
#define _GNU_SOURCE /* strcasestr */
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "engine/s3/creds_int.h"
#include "engine/core/engine_int.h"
#include "unit.h"

/* ---------------------------------------------------------------- server */

typedef struct Server
{
	int          fd;
	int          port;
	pthread_t    thread;
	volatile int stop;
	int          tokens; /* IMDSv2 token PUTs */
	int          imds;   /* credential GETs of the role */
	int          container;
	int          sts;
	int          store;       /* requests of the store's /b/k */
	int          expire_next; /* the store's next answers: ExpiredToken */
	int          lifetime;    /* seconds the credentials handed out last */
	char         sts_body[2048];
	char         sts_auth[512];
	char         store_token[256]; /* the last x-amz-security-token */
} Server;

static Server srv;

static void
reply(int c, const char *status, const char *type, const char *body)
{
	char head[512];
	int  n = snprintf(head, sizeof(head),
					  "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: "
					   "%zu\r\nConnection: close\r\n\r\n",
					  status, type, strlen(body));

	if (write(c, head, n) < 0 || write(c, body, strlen(body)) < 0)
		return;
}

static void
json_creds(int c, const char *akid)
{
	char      body[512];
	char      exp[32];
	time_t    t = time(NULL) + srv.lifetime;
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(exp, sizeof(exp), "%Y-%m-%dT%H:%M:%SZ", &tm);
	snprintf(body, sizeof(body),
			 "{\"Code\": \"Success\", \"AccessKeyId\": \"%s\", "
			 "\"SecretAccessKey\": \"SECRET-%s\", \"Token\": \"TOKEN-%s\", "
			 "\"Expiration\": \"%s\"}",
			 akid, akid, akid, exp);
	reply(c, "200 OK", "application/json", body);
}

static void
sts_creds(int c, const char *action, const char *akid)
{
	char      body[1024];
	char      exp[32];
	time_t    t = time(NULL) + srv.lifetime;
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(exp, sizeof(exp), "%Y-%m-%dT%H:%M:%SZ", &tm);
	snprintf(body, sizeof(body),
			 "<%sResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">"
			 "<%sResult><Credentials><AccessKeyId>%s</AccessKeyId>"
			 "<SecretAccessKey>SECRET-%s</SecretAccessKey>"
			 "<SessionToken>TOKEN-%s</SessionToken>"
			 "<Expiration>%s</Expiration></Credentials></%sResult>"
			 "</%sResponse>",
			 action, action, akid, akid, akid, exp, action, action);
	reply(c, "200 OK", "text/xml", body);
}

/* The value of header name in the request head, into out. */
static void
header(const char *req, const char *name, char *out, size_t outlen)
{
	const char *h = strcasestr(req, name);

	out[0] = '\0';
	if (h == NULL)
		return;
	h += strlen(name);
	while (*h == ' ')
		h++;
	snprintf(out, outlen, "%.*s", (int) strcspn(h, "\r\n"), h);
}

static void
serve(int c)
{
	char   req[16384];
	size_t n = 0;
	char  *body;
	char   v[1024];
	long   clen = 0;
	char   method[8], path[512];

	/* the head, then the body its Content-Length says */
	while (n < sizeof(req) - 1)
	{
		ssize_t r = read(c, req + n, sizeof(req) - 1 - n);

		if (r <= 0)
			break;
		n += r;
		req[n] = '\0';
		if ((body = strstr(req, "\r\n\r\n")) != NULL)
		{
			header(req, "\ncontent-length:", v, sizeof(v));
			clen = atol(v);
			if ((size_t) (body + 4 - req) + clen <= n)
				break;
		}
	}
	req[n] = '\0';
	if (sscanf(req, "%7s %511s", method, path) != 2 ||
		(body = strstr(req, "\r\n\r\n")) == NULL)
		return;
	body += 4;

	if (strcmp(method, "PUT") == 0 && strcmp(path, "/latest/api/token") == 0)
	{
		header(req, "\nx-aws-ec2-metadata-token-ttl-seconds:", v, sizeof(v));
		srv.tokens++;
		reply(c, v[0] ? "200 OK" : "400 Bad Request", "text/plain",
			  v[0] ? "IMDSTOKEN" : "");
		return;
	}
	if (strncmp(path, "/latest/meta-data/iam/security-credentials/", 43) == 0)
	{
		header(req, "\nx-aws-ec2-metadata-token:", v, sizeof(v));
		if (strcmp(v, "IMDSTOKEN") != 0)
			reply(c, "401 Unauthorized", "text/plain", "");
		else if (path[43] == '\0')
			reply(c, "200 OK", "text/plain", "role-a\n");
		else if (strcmp(path + 43, "role-a") == 0)
		{
			char akid[32];

			snprintf(akid, sizeof(akid), "IMDS%d", ++srv.imds);
			json_creds(c, akid);
		}
		else
			reply(c, "404 Not Found", "text/plain", "");
		return;
	}
	if (strcmp(path, "/container") == 0)
	{
		header(req, "\nauthorization:", v, sizeof(v));
		srv.container++;
		if (strcmp(v, "Bearer pod-token") != 0)
			reply(c, "401 Unauthorized", "text/plain", "");
		else
			json_creds(c, "CONTAINER");
		return;
	}
	if (strcmp(method, "POST") == 0 && strcmp(path, "/") == 0)
	{
		char akid[32];

		srv.sts++;
		snprintf(srv.sts_body, sizeof(srv.sts_body), "%s", body);
		header(req, "\nauthorization:", srv.sts_auth, sizeof(srv.sts_auth));
		snprintf(akid, sizeof(akid), "ASIA%d", srv.sts);
		if (strstr(body, "RoleArn=arn%3Aaws%3Aiam%3A%3A1%3Arole%2Fdenied"))
			reply(c, "403 Forbidden", "text/xml",
				  "<ErrorResponse><Error><Code>AccessDenied</Code><Message>"
				  "not authorized to assume the role</Message></Error>"
				  "</ErrorResponse>");
		else if (strstr(body, "Action=AssumeRoleWithWebIdentity"))
			sts_creds(c, "AssumeRoleWithWebIdentity", akid);
		else
			sts_creds(c, "AssumeRole", akid);
		return;
	}
	if (strcmp(path, "/b/k") == 0)
	{
		srv.store++;
		header(req, "\nx-amz-security-token:", srv.store_token,
			   sizeof(srv.store_token));
		if (srv.expire_next > 0)
		{
			srv.expire_next--;
			reply(c, "400 Bad Request", "application/xml",
				  "<Error><Code>ExpiredToken</Code><Message>The provided "
				  "token has expired.</Message></Error>");
		}
		else
			reply(c, "200 OK", "application/octet-stream", "hello");
		return;
	}
	reply(c, "404 Not Found", "text/plain", "");
}

static void *
server_main(void *arg)
{
	(void) arg;
	while (!srv.stop)
	{
		struct pollfd p = {srv.fd, POLLIN, 0};
		int           c;

		if (poll(&p, 1, 50) <= 0)
			continue;
		if ((c = accept(srv.fd, NULL, NULL)) < 0)
			continue;
		serve(c);
		close(c);
	}
	return NULL;
}

static bool
server_start(void)
{
	struct sockaddr_in a = {0};
	socklen_t          len = sizeof(a);

	memset(&srv, 0, sizeof(srv));
	srv.lifetime = 3600;
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	srv.fd = socket(AF_INET, SOCK_STREAM, 0);
	if (srv.fd < 0 || bind(srv.fd, (struct sockaddr *) &a, sizeof(a)) != 0 ||
		listen(srv.fd, 16) != 0 ||
		getsockname(srv.fd, (struct sockaddr *) &a, &len) != 0)
		return false;
	srv.port = ntohs(a.sin_port);
	return pthread_create(&srv.thread, NULL, server_main, NULL) == 0;
}

static void
server_stop(void)
{
	srv.stop = 1;
	pthread_join(srv.thread, NULL);
	close(srv.fd);
}

/* ---------------------------------------------------------------- tests */

static char base_url[64];

/* No AWS_* variable of the chain is set, and no profile file is found. */
static void
clear_environment(void)
{
	static const char *const vars[] = {"AWS_ACCESS_KEY_ID",
									   "AWS_SECRET_ACCESS_KEY",
									   "AWS_SESSION_TOKEN",
									   "AWS_WEB_IDENTITY_TOKEN_FILE",
									   "AWS_ROLE_ARN",
									   "AWS_ROLE_SESSION_NAME",
									   "AWS_PROFILE",
									   "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
									   "AWS_CONTAINER_CREDENTIALS_FULL_URI",
									   "AWS_CONTAINER_AUTHORIZATION_TOKEN",
									   "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
									   "AWS_EC2_METADATA_DISABLED"};

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
	setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials", 1);
	setenv("AWS_CONFIG_FILE", "/nonexistent/config", 1);
	remora_creds_forget_all();
}

static RemoraTargetConfig
chain_config(void)
{
	RemoraTargetConfig cfg = {.endpoint = base_url,
							  .region = "us-east-1",
							  .path_style = true,
							  .credentials = "chain",
							  .imds_endpoint = base_url,
							  .sts_endpoint = base_url};

	return cfg;
}

static void
test_times(void)
{
	time_t t;

	CHECK(remora_creds_parse_time("2026-12-07T08:00:00Z", &t) &&
			  t == 1796630400,
		  "an ISO 8601 time in UTC");
	CHECK(remora_creds_parse_time("2026-12-07T08:00:00.123Z", &t) &&
			  t == 1796630400,
		  "with fractions of a second");
	CHECK(remora_creds_parse_time("2026-12-07T08:00:00+00:00", &t) &&
			  t == 1796630400,
		  "with +00:00");
	CHECK(!remora_creds_parse_time("2026-12-07T08:00:00+02:00", &t) &&
			  !remora_creds_parse_time("tomorrow", &t) &&
			  !remora_creds_parse_time(NULL, &t),
		  "anything else is refused");
}

static void
test_static(void)
{
	RemoraTargetConfig cfg = {.access_key_id = "AKID",
							  .secret_access_key = "SECRET",
							  .session_token = "TOKEN"};
	RemoraCreds        c;
	char               err[256];

	CHECK(remora_creds_get(&cfg, time(NULL), &c, err, sizeof(err)) &&
			  strcmp(c.access_key_id, "AKID") == 0 &&
			  strcmp(c.session_token, "TOKEN") == 0 && c.expires == 0 &&
			  strcmp(c.source, "static") == 0,
		  "static keys and their session token are the configuration's");
	CHECK(!remora_creds_expired(&cfg, "AKID", time(NULL)),
		  "static keys said expired are not fetched again");
}

static void
test_environment(void)
{
	RemoraTargetConfig cfg = chain_config();
	RemoraCreds        c;
	char               err[256] = "";

	clear_environment();
	setenv("AWS_ACCESS_KEY_ID", "ENVKEY", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "ENVSECRET", 1);
	setenv("AWS_SESSION_TOKEN", "ENVTOKEN", 1);
	setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://127.0.0.1:1/x", 1);
	CHECK(remora_creds_get(&cfg, time(NULL), &c, err, sizeof(err)) &&
			  strcmp(c.access_key_id, "ENVKEY") == 0 &&
			  strcmp(c.session_token, "ENVTOKEN") == 0 &&
			  strcmp(c.source, "environment") == 0,
		  "the environment comes first: %s", err);
	clear_environment();
}

static void
write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (f)
	{
		fputs(text, f);
		fclose(f);
	}
}

static void
test_profiles(void)
{
	RemoraTargetConfig cfg = chain_config();
	RemoraCreds        c;
	char               err[256] = "";
	char               dir[] = "/tmp/creds_testXXXXXX";
	char               creds[64], config[64];

	clear_environment();
	if (mkdtemp(dir) == NULL)
		return;
	snprintf(creds, sizeof(creds), "%s/credentials", dir);
	snprintf(config, sizeof(config), "%s/config", dir);
	write_file(creds, "[default]\naws_access_key_id = DEFKEY\n"
					  "aws_secret_access_key = DEFSECRET\n\n"
					  "# a comment\n[team]\n aws_access_key_id=TEAMKEY\n"
					  "aws_secret_access_key=TEAMSECRET\n"
					  "aws_session_token = TEAMTOKEN\n");
	write_file(config, "[profile assumed]\nrole_arn = arn:aws:iam::1:role/r\n"
					   "source_profile = default\n"
					   "[profile keyed]\naws_access_key_id = CFGKEY\n"
					   "aws_secret_access_key = CFGSECRET\n");
	setenv("AWS_SHARED_CREDENTIALS_FILE", creds, 1);
	setenv("AWS_CONFIG_FILE", config, 1);
	remora_creds_forget_all();
	CHECK(remora_creds_get(&cfg, time(NULL), &c, err, sizeof(err)) &&
			  strcmp(c.access_key_id, "DEFKEY") == 0 &&
			  c.session_token == NULL &&
			  strcmp(c.source, "profile default") == 0,
		  "the default profile of the credentials file: %s", err);
	setenv("AWS_PROFILE", "team", 1);
	remora_creds_forget_all();
	CHECK(remora_creds_get(&cfg, time(NULL), &c, err, sizeof(err)) &&
			  strcmp(c.access_key_id, "TEAMKEY") == 0 &&
			  strcmp(c.session_token, "TEAMTOKEN") == 0,
		  "AWS_PROFILE names another, with its session token: %s", err);
	setenv("AWS_PROFILE", "keyed", 1);
	remora_creds_forget_all();
	CHECK(remora_creds_get(&cfg, time(NULL), &c, err, sizeof(err)) &&
			  strcmp(c.access_key_id, "CFGKEY") == 0,
		  "a profile of the config file: %s", err);
	setenv("AWS_PROFILE", "assumed", 1);
	remora_creds_forget_all();
	CHECK(!remora_creds_get(&cfg, time(NULL), &c, err, sizeof(err)) &&
			  strstr(err, "role_arn") && strstr(err, "remora.s3_role_arn"),
		  "a profile that assumes a role is refused, saying what to do: %s",
		  err);
	setenv("AWS_PROFILE", "missing", 1);
	remora_creds_forget_all();
	CHECK(!remora_creds_get(&cfg, time(NULL), &c, err, sizeof(err)) &&
			  strstr(err, "profile missing"),
		  "a profile that is not there is an error: %s", err);
	unlink(creds);
	unlink(config);
	rmdir(dir);
	clear_environment();
}

static void
test_container(void)
{
	RemoraTargetConfig cfg = chain_config();
	RemoraCreds        c;
	char               err[256] = "";
	char               url[96];

	clear_environment();
	snprintf(url, sizeof(url), "%s/container", base_url);
	setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", url, 1);
	setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "Bearer pod-token", 1);
	CHECK(remora_creds_get(&cfg, time(NULL), &c, err, sizeof(err)) &&
			  strcmp(c.access_key_id, "CONTAINER") == 0 &&
			  strcmp(c.session_token, "TOKEN-CONTAINER") == 0 &&
			  c.expires > time(NULL) &&
			  strcmp(c.source, "container endpoint") == 0,
		  "the container endpoint, with its authorization token: %s", err);
	setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "Bearer wrong", 1);
	remora_creds_forget_all();
	CHECK(!remora_creds_get(&cfg, time(NULL), &c, err, sizeof(err)) &&
			  strstr(err, "HTTP 401") && !strstr(err, "wrong"),
		  "a refused token is an error that does not quote it: %s", err);
	setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://10.1.2.3/creds", 1);
	remora_creds_forget_all();
	CHECK(!remora_creds_get(&cfg, time(NULL), &c, err, sizeof(err)) &&
			  strstr(err, "https://"),
		  "a plain-HTTP endpoint off the loopback is refused: %s", err);
	clear_environment();
}

static void
test_imds(void)
{
	RemoraTargetConfig cfg = chain_config();
	RemoraCreds        c;
	char               err[256] = "";
	time_t             now = time(NULL);
	int                got;

	clear_environment();
	CHECK(remora_creds_get(&cfg, now, &c, err, sizeof(err)) &&
			  strcmp(c.access_key_id, "IMDS1") == 0 &&
			  strcmp(c.secret_access_key, "SECRET-IMDS1") == 0 &&
			  strcmp(c.source, "instance role role-a (IMDSv2)") == 0 &&
			  srv.tokens == 1,
		  "IMDSv2: a token, the role, its credentials: %s", err);
	got = srv.imds;
	CHECK(remora_creds_get(&cfg, now + 1000, &c, err, sizeof(err)) &&
			  srv.imds == got && strcmp(c.access_key_id, "IMDS1") == 0,
		  "cached while far from their expiry");
	CHECK(remora_creds_get(&cfg, now + 3400, &c, err, sizeof(err)) &&
			  srv.imds == got + 1 && strcmp(c.access_key_id, "IMDS2") == 0,
		  "fetched again five minutes before they expire");
	CHECK(remora_creds_expired(&cfg, "IMDS1", now + 3400) &&
			  remora_creds_get(&cfg, now + 3400, &c, err, sizeof(err)) &&
			  srv.imds == got + 1,
		  "an expiry said of credentials replaced since fetches nothing");
	CHECK(remora_creds_expired(&cfg, "IMDS2", now + 3420) &&
			  remora_creds_get(&cfg, now + 3420, &c, err, sizeof(err)) &&
			  srv.imds == got + 2 && strcmp(c.access_key_id, "IMDS3") == 0,
		  "the current ones said expired are fetched again");
	CHECK(remora_creds_expired(&cfg, "IMDS3", now + 3421) &&
			  remora_creds_get(&cfg, now + 3421, &c, err, sizeof(err)) &&
			  srv.imds == got + 2,
		  "but not within ten seconds of their fetch");

	/* short-lived ones: a quarter of their life before */
	srv.lifetime = 60;
	remora_creds_forget_all();
	now = time(NULL);
	got = srv.imds;
	remora_creds_get(&cfg, now, &c, err, sizeof(err));
	CHECK(remora_creds_get(&cfg, now + 40, &c, err, sizeof(err)) &&
			  srv.imds == got + 1,
		  "one-minute credentials are kept 40 s");
	CHECK(remora_creds_get(&cfg, now + 46, &c, err, sizeof(err)) &&
			  srv.imds == got + 2,
		  "and fetched again at 45 s");
	srv.lifetime = 3600;

	setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
	remora_creds_forget_all();
	CHECK(!remora_creds_get(&cfg, now, &c, err, sizeof(err)) &&
			  strstr(err, "AWS_EC2_METADATA_DISABLED"),
		  "nothing when the metadata service is off: %s", err);
	clear_environment();
	cfg.imds_endpoint = "http://127.0.0.1:1";
	CHECK(!remora_creds_get(&cfg, now, &c, err, sizeof(err)) &&
			  strstr(err, "instance metadata service"),
		  "an error that says what the chain looked for: %s", err);
}

static void
test_assume_role(void)
{
	RemoraTargetConfig cfg = {.endpoint = base_url,
							  .region = "eu-west-1",
							  .access_key_id = "BASEKEY",
							  .secret_access_key = "BASESECRET",
							  .role_arn = "arn:aws:iam::1:role/writer",
							  .external_id = "ext 42",
							  .sts_endpoint = base_url};
	RemoraCreds        c;
	char               err[256] = "";
	time_t             now = time(NULL);
	int                sts;

	remora_creds_forget_all();
	sts = srv.sts;
	CHECK(remora_creds_get(&cfg, now, &c, err, sizeof(err)) &&
			  strncmp(c.access_key_id, "ASIA", 4) == 0 && c.session_token &&
			  c.expires > now,
		  "a role assumed with static keys: %s", err);
	CHECK(strstr(srv.sts_body, "Action=AssumeRole&") &&
			  strstr(srv.sts_body,
					 "RoleArn=arn%3Aaws%3Aiam%3A%3A1%3Arole%2Fwriter") &&
			  strstr(srv.sts_body, "RoleSessionName=remora") &&
			  strstr(srv.sts_body, "ExternalId=ext%2042"),
		  "STS is asked for the role, the session's name and the external "
		  "id: %s",
		  srv.sts_body);
	CHECK(strstr(srv.sts_auth, "Credential=BASEKEY/") &&
			  strstr(srv.sts_auth, "/eu-west-1/sts/aws4_request"),
		  "signed with the base keys for STS in the region: %s", srv.sts_auth);
	CHECK(strstr(c.source, "role arn:aws:iam::1:role/writer (with static)"),
		  "its source names the role: %s", c.source);
	CHECK(remora_creds_get(&cfg, now + 600, &c, err, sizeof(err)) &&
			  srv.sts == sts + 1,
		  "not assumed again while far from expiry, though the static "
		  "keys were read again");
	cfg.role_arn = "arn:aws:iam::1:role/denied";
	CHECK(!remora_creds_get(&cfg, now, &c, err, sizeof(err)) &&
			  strstr(err, "AccessDenied") && strstr(err, "role/denied") &&
			  !strstr(err, "BASESECRET"),
		  "a refusal names STS's code and the role, no secret: %s", err);
}

static void
test_web_identity(void)
{
	RemoraTargetConfig cfg = chain_config();
	RemoraCreds        c;
	char               err[256] = "";
	char               path[] = "/tmp/creds_test_tokenXXXXXX";
	int                fd = mkstemp(path);

	clear_environment();
	if (fd < 0 || write(fd, "eyJ.jwt.sig\n", 12) != 12)
		return;
	close(fd);
	setenv("AWS_WEB_IDENTITY_TOKEN_FILE", path, 1);
	setenv("AWS_ROLE_ARN", "arn:aws:iam::1:role/pod", 1);
	CHECK(remora_creds_get(&cfg, time(NULL), &c, err, sizeof(err)) &&
			  strncmp(c.access_key_id, "ASIA", 4) == 0 &&
			  strstr(c.source, "web identity"),
		  "a web identity token is exchanged at STS: %s", err);
	CHECK(strstr(srv.sts_body, "Action=AssumeRoleWithWebIdentity") &&
			  strstr(srv.sts_body, "WebIdentityToken=eyJ.jwt.sig") &&
			  strstr(srv.sts_body,
					 "RoleArn=arn%3Aaws%3Aiam%3A%3A1%3Arole%2Fpod") &&
			  srv.sts_auth[0] == '\0',
		  "unsigned, with the token and the role: %s", srv.sts_body);
	unlink(path);
	remora_creds_forget_all();
	CHECK(!remora_creds_get(&cfg, time(NULL), &c, err, sizeof(err)) &&
			  strstr(err, "AWS_WEB_IDENTITY_TOKEN_FILE"),
		  "a token file that is gone is the chain's error: %s", err);
	clear_environment();
}

static void
done_status(Request *req, CURLcode rc)
{
	long *status = req->owner;

	*status = rc == CURLE_OK ? req->status : -1;
}

/* A GET of the store's /b/k by an engine whose target is cfg. */
static long
store_get(RemoraTargetConfig *cfg)
{
	RemoraEngineConfig ec = {0};
	RemoraEngine      *e;
	char               err[256] = "";
	S3Call             call = {.method = "GET", .bucket = "b", .key = "k"};
	Request           *req;
	long               status = 0;
	int                turns = 0;

	ec.target = *cfg;
	ec.part_size = 5 * 1024 * 1024;
	e = remora_engine_new(&ec, err, sizeof(err));
	if (e == NULL)
		return -2;
	req = remora_s3_start(&e->loop, &e->target, &status, &call, done_status,
						  err, sizeof(err));
	while (req && status == 0 && turns++ < 200)
	{
		struct pollfd p = {remora_engine_fd(e), POLLIN, 0};

		poll(&p, 1, 25);
		remora_engine_run(e);
	}
	remora_engine_free(e);
	return status;
}

static void
test_expired_resent(void)
{
	RemoraTargetConfig cfg = chain_config();
	RemoraTargetConfig fixed = {.endpoint = base_url,
								.region = "us-east-1",
								.path_style = true,
								.access_key_id = "AKID",
								.secret_access_key = "SECRET",
								.session_token = "OLD"};
	int                n;

	clear_environment();
	remora_creds_get(&cfg, time(NULL) - 60, &(RemoraCreds){0}, NULL, 0);
	n = srv.store;
	srv.expire_next = 1;
	CHECK(store_get(&cfg) == 200 && srv.store == n + 2 &&
			  strncmp(srv.store_token, "TOKEN-IMDS", 10) == 0,
		  "an ExpiredToken answer: fetched again, signed again, sent again, "
		  "and the caller sees 200 (%d requests)",
		  srv.store - n);
	n = srv.store;
	srv.expire_next = 2;
	CHECK(store_get(&cfg) == 400 && srv.store == n + 2, "sent again once only");
	n = srv.store;
	srv.expire_next = 1;
	CHECK(store_get(&fixed) == 400 && srv.store == n + 1 &&
			  strcmp(srv.store_token, "OLD") == 0,
		  "static credentials are not sent again");
	srv.expire_next = 0;
}

int
main(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
	if (!server_start())
	{
		printf("Bail out! the test server cannot listen\n");
		return 1;
	}
	snprintf(base_url, sizeof(base_url), "http://127.0.0.1:%d", srv.port);
	test_times();
	test_static();
	test_environment();
	test_profiles();
	test_container();
	test_imds();
	test_assume_role();
	test_web_identity();
	test_expired_resent();
	remora_creds_forget_all();
	remora_creds_set_tls(NULL, NULL);
	server_stop();
	curl_global_cleanup();
	return unit_done();
}
