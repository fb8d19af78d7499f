/*-------------------------------------------------------------------------
 *
 * creds_chain.c
 *	  The AWS credential chain, in the SDKs' order: the environment, a web
 *	  identity token, the shared credentials and config files, the
 *	  container credentials endpoint, the instance metadata service
 *	  (IMDSv2).
 *
 * The first source that is configured answers: one that is configured
 * and fails (a token file that cannot be read, STS refusing the token, a
 * container endpoint that does not answer) is the chain's error, as in the
 * SDKs, rather than a silent fall to the next.  The instance metadata
 * service is configured unless AWS_EC2_METADATA_DISABLED is true; when it
 * does not answer within a second, the error lists what the chain looked
 * for.
 *
 * Of a profile, the static keys (aws_access_key_id, aws_secret_access_key,
 * aws_session_token) are read; a profile that would have its credentials
 * from elsewhere (role_arn, credential_process, sso_*) is refused with a
 * reason: remora.s3_role_arn assumes a role on top of the chain.
 *
 *-------------------------------------------------------------------------
 */
#include "engine/s3/creds_int.h"
#include "engine/common/json.h"
#include "engine/common/util.h"

#include <ctype.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <openssl/crypto.h>

#define IMDS_TIMEOUT_MS   1000L
#define FILE_LIMIT        (64 * 1024)
#define CONTAINER_DEFAULT "http://169.254.170.2"

static const char *
env(const char *name)
{
	const char *v = getenv(name);

	return v && v[0] ? v : NULL;
}

/* The first line of a small file, malloc'd (NULL, errbuf set: unreadable). */
static char *
read_first_line(const char *path, const char *what, char *errbuf, size_t errlen)
{
	FILE  *f = fopen(path, "r");
	char  *buf;
	size_t n;

	if (f == NULL)
	{
		remora_errbuf_set(errbuf, errlen, "%s %s cannot be read", what, path);
		return NULL;
	}
	buf = malloc(FILE_LIMIT + 1);
	n = buf ? fread(buf, 1, FILE_LIMIT, f) : 0;
	fclose(f);
	if (buf == NULL)
	{
		remora_errbuf_set(errbuf, errlen, "out of memory");
		return NULL;
	}
	buf[n] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
	if (buf[0] == '\0')
	{
		free(buf);
		remora_errbuf_set(errbuf, errlen, "%s %s is empty", what, path);
		return NULL;
	}
	return buf;
}

/* ----------------------------------------------------------------
 * The environment, and a web identity
 * ----------------------------------------------------------------
 */
static bool
from_environment(time_t now, Cred *out, char *errbuf, size_t errlen)
{
	snprintf(out->source, sizeof(out->source), "environment");
	if (remora_cred_set(out, env("AWS_ACCESS_KEY_ID"),
						env("AWS_SECRET_ACCESS_KEY"), env("AWS_SESSION_TOKEN"),
						0, now))
		return true;
	remora_errbuf_set(errbuf, errlen, "out of memory");
	return false;
}

static bool
from_web_identity(const RemoraTargetConfig *cfg, time_t now, Cred *out,
				  char *errbuf, size_t errlen)
{
	char *token = read_first_line(env("AWS_WEB_IDENTITY_TOKEN_FILE"),
								  "the web identity token file "
								  "(AWS_WEB_IDENTITY_TOKEN_FILE)",
								  errbuf, errlen);
	bool  ok;

	if (token == NULL)
		return false;
	ok = remora_sts_web_identity(cfg, env("AWS_ROLE_ARN"),
								 env("AWS_ROLE_SESSION_NAME"), token, now, out,
								 errbuf, errlen);
	OPENSSL_cleanse(token, strlen(token));
	free(token);
	return ok;
}

/* ----------------------------------------------------------------
 * The shared files
 * ----------------------------------------------------------------
 */
static char *
home_file(const char *var, const char *name)
{
	const char *home = env("HOME");
	RemoraBuf   b = {0};

	if (env(var))
		return remora_xstrdup(env(var));
	if (home == NULL)
	{
		struct passwd *pw = getpwuid(geteuid());

		home = pw ? pw->pw_dir : NULL;
	}
	if (home == NULL)
		return NULL;
	remora_buf_printf(&b, "%s/.aws/%s", home, name);
	return remora_buf_release(&b, NULL);
}

static char *
trim(char *s)
{
	char *end;

	while (isspace((unsigned char) *s))
		s++;
	end = s + strlen(s);
	while (end > s && isspace((unsigned char) end[-1]))
		*--end = '\0';
	return s;
}

typedef struct Profile
{
	char *keys[3];   /* access key id, secret, session token */
	char  other[40]; /* a setting that fetches credentials elsewhere */
	bool  found;
} Profile;

static void
profile_clear(Profile *p)
{
	for (int i = 0; i < 3; i++)
		if (p->keys[i])
		{
			OPENSSL_cleanse(p->keys[i], strlen(p->keys[i]));
			free(p->keys[i]);
		}
	memset(p, 0, sizeof(*p));
}

/*
 * Read section into p from an INI file: "[name]" (credentials file) or
 * "[profile name]" (config file; "[default]" there too).  A missing file
 * is no profile; keys already read (the credentials file's) win.
 */
static void
read_profile(const char *path, const char *name, bool config, Profile *p)
{
	static const char *const names[3] = {
		"aws_access_key_id", "aws_secret_access_key", "aws_session_token"};
	static const char *const elsewhere[] = {
		"role_arn",    "credential_process",      "sso_start_url",
		"sso_session", "web_identity_token_file", "credential_source"};
	FILE *f = path ? fopen(path, "r") : NULL;
	char  line[4096];
	bool  in = false;

	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f))
	{
		char *s = trim(line);
		char *eq;

		if (s[0] == '[')
		{
			char *end = strchr(s, ']');
			char *sect;

			if (end == NULL)
				continue;
			*end = '\0';
			sect = trim(s + 1);
			if (config && strncmp(sect, "profile ", 8) == 0)
				sect = trim(sect + 8);
			in = strcmp(sect, name) == 0;
			p->found |= in;
			continue;
		}
		if (!in || s[0] == '#' || s[0] == ';' || (eq = strchr(s, '=')) == NULL)
			continue;
		*eq = '\0';
		s = trim(s);
		for (int i = 0; i < 3; i++)
			if (strcasecmp(s, names[i]) == 0 && p->keys[i] == NULL)
				p->keys[i] = remora_xstrdup(trim(eq + 1));
		for (size_t i = 0; i < sizeof(elsewhere) / sizeof(elsewhere[0]); i++)
			if (strcasecmp(s, elsewhere[i]) == 0 && p->other[0] == '\0')
				snprintf(p->other, sizeof(p->other), "%s", elsewhere[i]);
	}
	OPENSSL_cleanse(line, sizeof(line));
	fclose(f);
}

/* -1: no such profile (try the next source); 0: an error; 1: found. */
static int
from_files(time_t now, Cred *out, char *errbuf, size_t errlen)
{
	const char *name = env("AWS_PROFILE") ? env("AWS_PROFILE") : "default";
	char       *creds = home_file("AWS_SHARED_CREDENTIALS_FILE", "credentials");
	char       *config = home_file("AWS_CONFIG_FILE", "config");
	Profile     p;
	int         r = -1;

	memset(&p, 0, sizeof(p));
	read_profile(creds, name, false, &p);
	read_profile(config, name, true, &p);
	if (p.keys[0] && p.keys[1])
	{
		snprintf(out->source, sizeof(out->source), "profile %s", name);
		r = remora_cred_set(out, p.keys[0], p.keys[1], p.keys[2], 0, now);
		if (!r)
			remora_errbuf_set(errbuf, errlen, "out of memory");
	}
	else if (p.found && p.other[0])
	{
		remora_errbuf_set(errbuf, errlen,
						  "profile %s has its credentials from %s, which "
						  "Remora does not follow (give the role as "
						  "remora.s3_role_arn)",
						  name, p.other);
		r = 0;
	}
	else if (p.found || env("AWS_PROFILE"))
	{
		remora_errbuf_set(errbuf, errlen,
						  "profile %s has no aws_access_key_id and "
						  "aws_secret_access_key",
						  name);
		r = 0;
	}
	profile_clear(&p);
	free(creds);
	free(config);
	return r;
}

/* ----------------------------------------------------------------
 * The container endpoint and IMDSv2: JSON credentials
 * ----------------------------------------------------------------
 */

/* {"AccessKeyId", "SecretAccessKey", "Token", "Expiration"} into out. */
static bool
json_credentials(const CredsAnswer *a, const char *what, time_t now, Cred *out,
				 char *errbuf, size_t errlen)
{
	char        err[128];
	RemoraJson *j;
	time_t      expires = 0;
	bool        ok = false;

	if (a->status != 200)
	{
		remora_errbuf_set(errbuf, errlen, "%s answered HTTP %ld", what,
						  a->status);
		return false;
	}
	j = remora_json_parse(a->body, a->len, err, sizeof(err));
	if (j == NULL)
	{
		remora_errbuf_set(errbuf, errlen, "%s answered no JSON: %s", what, err);
		return false;
	}
	if (!remora_json_string(j, "AccessKeyId") ||
		!remora_json_string(j, "SecretAccessKey") ||
		(remora_json_string(j, "Expiration") &&
		 !remora_creds_parse_time(remora_json_string(j, "Expiration"),
								  &expires)))
		remora_errbuf_set(errbuf, errlen,
						  "%s answered without AccessKeyId, SecretAccessKey "
						  "or a valid Expiration",
						  what);
	else if (!(ok = remora_cred_set(out, remora_json_string(j, "AccessKeyId"),
									remora_json_string(j, "SecretAccessKey"),
									remora_json_string(j, "Token"), expires,
									now)))
		remora_errbuf_set(errbuf, errlen, "out of memory");
	remora_json_free(j);
	return ok;
}

/*
 * The container's URL may be plain HTTP only on the addresses the
 * platforms use (ECS, EKS Pod Identity) or the loopback, as in the SDKs: a
 * token sent elsewhere in the clear could be read on the way.
 */
static bool
container_url_allowed(const char *url)
{
	static const char *const plain[] = {"http://127.",
										"http://localhost:",
										"http://localhost/",
										"http://[::1]",
										"http://169.254.170.2:",
										"http://169.254.170.2/",
										"http://169.254.170.23:",
										"http://169.254.170.23/",
										"http://[fd00:ec2::23]"};

	if (strncmp(url, "https://", 8) == 0)
		return true;
	for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++)
		if (strncmp(url, plain[i], strlen(plain[i])) == 0)
			return true;
	return false;
}

static bool
from_container(time_t now, Cred *out, char *errbuf, size_t errlen)
{
	RemoraBuf          b = {0};
	char              *url;
	char              *token = NULL;
	char               err[200];
	struct curl_slist *h = NULL;
	CredsAnswer        a;
	bool               ok = false;

	if (env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"))
		remora_buf_printf(&b, "%s%s", CONTAINER_DEFAULT,
						  env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"));
	else
		remora_buf_puts(&b, env("AWS_CONTAINER_CREDENTIALS_FULL_URI"));
	if ((url = remora_buf_release(&b, NULL)) == NULL)
	{
		remora_errbuf_set(errbuf, errlen, "out of memory");
		return false;
	}
	if (!container_url_allowed(url))
	{
		remora_errbuf_set(errbuf, errlen,
						  "the container credentials endpoint must be https:// "
						  "or on the loopback or the platform's address");
		goto done;
	}
	if (env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"))
	{
		token = read_first_line(env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"),
								"the container authorization token file",
								errbuf, errlen);
		if (token == NULL)
			goto done;
	}
	else if (env("AWS_CONTAINER_AUTHORIZATION_TOKEN"))
		token = remora_xstrdup(env("AWS_CONTAINER_AUTHORIZATION_TOKEN"));
	if (token)
	{
		char *line = malloc(strlen(token) + 32);

		if (line)
		{
			sprintf(line, "Authorization: %s", token);
			h = curl_slist_append(NULL, line);
			OPENSSL_cleanse(line, strlen(line));
			free(line);
		}
		if (h == NULL)
		{
			remora_errbuf_set(errbuf, errlen, "out of memory");
			goto done;
		}
	}
	if (!remora_creds_request("GET", url, h, NULL, CREDS_TIMEOUT_MS, &a, err,
							  sizeof(err)))
	{
		remora_errbuf_set(errbuf, errlen,
						  "the container credentials endpoint did not answer: "
						  "%s",
						  err);
		goto done;
	}
	snprintf(out->source, sizeof(out->source), "container endpoint");
	ok = json_credentials(&a, "the container credentials endpoint", now, out,
						  errbuf, errlen);
	free(a.body);
done:
	if (h)
	{
		OPENSSL_cleanse(h->data, strlen(h->data));
		curl_slist_free_all(h);
	}
	if (token)
	{
		OPENSSL_cleanse(token, strlen(token));
		free(token);
	}
	free(url);
	return ok;
}

/* GET base+path with the IMDSv2 token; false with errbuf set. */
static bool
imds_get(const char *base, const char *path, const char *token, CredsAnswer *a,
		 char *errbuf, size_t errlen)
{
	RemoraBuf          b = {0};
	char              *url;
	char              *line;
	struct curl_slist *h;
	bool               ok;

	remora_buf_printf(&b, "%s%s", base, path);
	url = remora_buf_release(&b, NULL);
	remora_buf_printf(&b, "X-aws-ec2-metadata-token: %s", token);
	line = remora_buf_release(&b, NULL);
	h = line ? curl_slist_append(NULL, line) : NULL;
	ok = url && h &&
		 remora_creds_request("GET", url, h, NULL, IMDS_TIMEOUT_MS, a, errbuf,
							  errlen);
	if (!url || !h)
		remora_errbuf_set(errbuf, errlen, "out of memory");
	if (ok && a->status != 200)
	{
		remora_errbuf_set(errbuf, errlen, "%s answered HTTP %ld", path,
						  a->status);
		free(a->body);
		a->body = NULL;
		ok = false;
	}
	if (line)
		OPENSSL_cleanse(line, strlen(line));
	free(line);
	curl_slist_free_all(h);
	free(url);
	return ok;
}

static bool
from_imds(const RemoraTargetConfig *cfg, time_t now, Cred *out, char *errbuf,
		  size_t errlen)
{
	const char        *base = cfg->imds_endpoint && cfg->imds_endpoint[0]
								  ? cfg->imds_endpoint
								  : "http://169.254.169.254";
	RemoraBuf          b = {0};
	char              *url;
	char               err[200] = "";
	char              *token = NULL;
	char               role[256];
	CredsAnswer        a;
	bool               ok = false;
	struct curl_slist *h =
		curl_slist_append(NULL, "X-aws-ec2-metadata-token-ttl-seconds: 21600");

	remora_buf_printf(&b, "%s/latest/api/token", base);
	url = remora_buf_release(&b, NULL);
	if (url == NULL || h == NULL)
	{
		remora_errbuf_set(errbuf, errlen, "out of memory");
		goto done;
	}
	if (!remora_creds_request("PUT", url, h, NULL, IMDS_TIMEOUT_MS, &a, err,
							  sizeof(err)) ||
		a.status != 200)
	{
		if (err[0] == '\0' || a.status)
			snprintf(err, sizeof(err), "HTTP %ld", a.status);
		free(a.body);
		remora_errbuf_set(errbuf, errlen,
						  "no credentials in the environment, a web identity, "
						  "the profile files or a container endpoint, and the "
						  "instance metadata service (%s) gave no token: %s",
						  base, err);
		goto done;
	}
	token = a.body;
	if (!imds_get(base, "/latest/meta-data/iam/security-credentials/", token,
				  &a, err, sizeof(err)))
	{
		remora_errbuf_set(errbuf, errlen,
						  "the instance metadata service names no role: %s",
						  err);
		goto done;
	}
	snprintf(role, sizeof(role), "%.*s", (int) strcspn(a.body, "\r\n"), a.body);
	free(a.body);
	if (role[0] == '\0' || strchr(role, '/') || strstr(role, ".."))
	{
		remora_errbuf_set(errbuf, errlen,
						  "the instance metadata service names no role");
		goto done;
	}
	remora_buf_printf(&b, "/latest/meta-data/iam/security-credentials/%s",
					  role);
	free(url);
	url = remora_buf_release(&b, NULL);
	if (url == NULL || !imds_get(base, url, token, &a, err, sizeof(err)))
	{
		remora_errbuf_set(errbuf, errlen,
						  "the instance metadata service gave no credentials "
						  "for role %s: %s",
						  role, url ? err : "out of memory");
		goto done;
	}
	snprintf(out->source, sizeof(out->source), "instance role %.150s (IMDSv2)",
			 role);
	ok = json_credentials(&a, "the instance metadata service", now, out, errbuf,
						  errlen);
	free(a.body);
done:
	if (token)
	{
		OPENSSL_cleanse(token, strlen(token));
		free(token);
	}
	curl_slist_free_all(h);
	free(url);
	return ok;
}

bool
remora_creds_chain(const RemoraTargetConfig *cfg, time_t now, Cred *out,
				   char *errbuf, size_t errlen)
{
	const char *off = env("AWS_EC2_METADATA_DISABLED");
	int         r;

	if (env("AWS_ACCESS_KEY_ID") && env("AWS_SECRET_ACCESS_KEY"))
		return from_environment(now, out, errbuf, errlen);
	if (env("AWS_WEB_IDENTITY_TOKEN_FILE") && env("AWS_ROLE_ARN"))
		return from_web_identity(cfg, now, out, errbuf, errlen);
	if ((r = from_files(now, out, errbuf, errlen)) >= 0)
		return r == 1;
	if (env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") ||
		env("AWS_CONTAINER_CREDENTIALS_FULL_URI"))
		return from_container(now, out, errbuf, errlen);
	if (off && strcasecmp(off, "true") == 0)
	{
		remora_errbuf_set(errbuf, errlen,
						  "no credentials in the environment, a web identity, "
						  "the profile files or a container endpoint, and the "
						  "instance metadata service is off "
						  "(AWS_EC2_METADATA_DISABLED)");
		return false;
	}
	return from_imds(cfg, now, out, errbuf, errlen);
}
