/*-------------------------------------------------------------------------
 *
 * creds_cache.c
 *	  The process's cache of fetched credentials, and what a request is
 *	  signed with (creds.h).
 *
 * An entry per configuration that fetches anything (the chain, or a
 * role): its base credentials (the chain's, or the static keys) and, with
 * a role, the role's.  Entries are found by a digest of every field that
 * decides the credentials, secrets included, so that a changed setting
 * makes a new entry and an entry never holds two configurations' keys.
 * There are few (the target, a few source endpoints): a list.
 *
 *-------------------------------------------------------------------------
 */
#include "engine/s3/creds_int.h"
#include "engine/s3/sigv4.h"
#include "engine/common/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

/*
 * After a failed fetch, how long before the next while the credentials
 * cached are still good (a second when they are not).
 */
#define RETRY_S 15
/* How often credentials that do not expire (environment, files) are read. */
#define REREAD_S 300
/* Credentials fetched this recently are not fetched again when refused. */
#define STALE_S 10

typedef struct Entry
{
	char          key[65];
	Cred          base;
	Cred          role;        /* with a role_arn */
	bool          stale;       /* the store said expired: fetch again */
	time_t        retry_after; /* a fetch failed: not before */
	char          last_error[256];
	struct Entry *next;
} Entry;

static Entry *entries;

static bool
set(const char *s)
{
	return s && s[0];
}

bool
remora_creds_fetched(const RemoraTargetConfig *cfg)
{
	return !cfg->anonymous &&
		   ((cfg->credentials && strcmp(cfg->credentials, "chain") == 0) ||
			set(cfg->role_arn));
}

/* ----------------------------------------------------------------
 * Entries
 * ----------------------------------------------------------------
 */
static void
key_of(const RemoraTargetConfig *cfg, char key[65])
{
	const char *fields[] = {cfg->credentials,       cfg->access_key_id,
							cfg->secret_access_key, cfg->session_token,
							cfg->role_arn,          cfg->external_id,
							cfg->role_session_name, cfg->sts_endpoint,
							cfg->imds_endpoint,     cfg->region,
							cfg->endpoint};
	RemoraBuf   b = {0};
	char       *all;
	size_t      len;

	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
	{
		/* a length before each field: no two configurations join alike */
		remora_buf_printf(&b, "%zu:", fields[i] ? strlen(fields[i]) : 0);
		remora_buf_puts(&b, fields[i] ? fields[i] : "");
	}
	all = remora_buf_release(&b, &len);
	remora_sha256_hex(all ? all : "", all ? len : 0, key);
	if (all)
	{
		OPENSSL_cleanse(all, len);
		free(all);
	}
}

static Entry *
entry_for(const RemoraTargetConfig *cfg, bool create)
{
	char   key[65];
	Entry *e;

	key_of(cfg, key);
	for (e = entries; e; e = e->next)
		if (strcmp(e->key, key) == 0)
			return e;
	if (!create || (e = calloc(1, sizeof(Entry))) == NULL)
		return NULL;
	memcpy(e->key, key, sizeof(e->key));
	e->next = entries;
	entries = e;
	return e;
}

void
remora_creds_forget_all(void)
{
	while (entries)
	{
		Entry *next = entries->next;

		remora_cred_clear(&entries->base);
		remora_cred_clear(&entries->role);
		free(entries);
		entries = next;
	}
}

/* ----------------------------------------------------------------
 * Fetching when due
 * ----------------------------------------------------------------
 */

/*
 * Are c's credentials to be fetched again at now?  Temporary ones a
 * quarter of their life before they expire (five minutes at most), others
 * every REREAD_S (a file may have changed).
 */
static bool
due(const Cred *c, time_t now)
{
	time_t margin;

	if (c->access_key_id == NULL)
		return true;
	if (c->expires == 0)
		return now - c->fetched >= REREAD_S;
	margin = (c->expires - c->fetched) / 4;
	if (margin > 300)
		margin = 300;
	if (margin < 1)
		margin = 1;
	return now >= c->expires - margin;
}

static bool
usable(const Cred *c, time_t now)
{
	return c->access_key_id && (c->expires == 0 || now < c->expires);
}

static bool
same_string(const char *a, const char *b)
{
	return (a == NULL && b == NULL) || (a && b && strcmp(a, b) == 0);
}

static bool
same(const Cred *a, const Cred *b)
{
	return same_string(a->access_key_id, b->access_key_id) &&
		   same_string(a->secret_access_key, b->secret_access_key) &&
		   same_string(a->session_token, b->session_token);
}

/* The base credentials into fresh: the static keys, or the chain's. */
static bool
fetch_base(const RemoraTargetConfig *cfg, Cred *fresh, time_t now, char *errbuf,
		   size_t errlen)
{
	if (!(cfg->credentials && strcmp(cfg->credentials, "chain") == 0))
	{
		snprintf(fresh->source, sizeof(fresh->source), "static");
		if (remora_cred_set(fresh, cfg->access_key_id, cfg->secret_access_key,
							cfg->session_token, 0, now))
			return true;
		remora_errbuf_set(errbuf, errlen, "out of memory");
		return false;
	}
	return remora_creds_chain(cfg, now, fresh, errbuf, errlen);
}

/*
 * Bring e up to date: the base when due, then the role when due (or when
 * its base changed).  A failure keeps what is still usable, and the next
 * try waits RETRY_S.
 */
static void
refresh(const RemoraTargetConfig *cfg, Entry *e, time_t now)
{
	char err[256] = "";
	bool role = set(cfg->role_arn);
	Cred fresh;

	if (now < e->retry_after)
		return;
	memset(&fresh, 0, sizeof(fresh));
	if (e->stale || due(&e->base, now))
	{
		if (!fetch_base(cfg, &fresh, now, err, sizeof(err)))
			goto failed;
		if (!same(&e->base, &fresh))
			e->role.fetched = 0; /* assumed again with the new base */
		remora_cred_clear(&e->base);
		e->base = fresh;
		memset(&fresh, 0, sizeof(fresh));
	}
	if (role && (e->stale || e->role.fetched == 0 || due(&e->role, now)))
	{
		if (!remora_sts_assume_role(cfg, &e->base, now, &fresh, err,
									sizeof(err)))
			goto failed;
		remora_cred_clear(&e->role);
		e->role = fresh;
	}
	e->stale = false;
	e->last_error[0] = '\0';
	return;

failed:
	remora_cred_clear(&fresh);
	/* without usable ones, each request would fail: try again sooner */
	e->retry_after =
		now + (usable(role ? &e->role : &e->base, now) ? RETRY_S : 1);
	e->stale = false;
	snprintf(e->last_error, sizeof(e->last_error), "%s", err);
}

bool
remora_creds_get(const RemoraTargetConfig *cfg, time_t now, RemoraCreds *out,
				 char *errbuf, size_t errlen)
{
	Entry      *e;
	const Cred *c;

	memset(out, 0, sizeof(*out));
	if (!remora_creds_fetched(cfg))
	{
		out->access_key_id = cfg->access_key_id;
		out->secret_access_key = cfg->secret_access_key;
		out->session_token =
			set(cfg->session_token) ? cfg->session_token : NULL;
		out->source = "static";
		return true;
	}
	if ((e = entry_for(cfg, true)) == NULL)
	{
		remora_errbuf_set(errbuf, errlen, "out of memory");
		return false;
	}
	refresh(cfg, e, now);
	c = set(cfg->role_arn) ? &e->role : &e->base;
	if (!usable(c, now))
	{
		remora_errbuf_set(errbuf, errlen, "no credentials: %s",
						  e->last_error[0] ? e->last_error
										   : "they expired and were not "
											 "fetched again");
		return false;
	}
	out->access_key_id = c->access_key_id;
	out->secret_access_key = c->secret_access_key;
	out->session_token = c->session_token;
	out->expires = c->expires;
	out->source = c->source;
	return true;
}

bool
remora_creds_expired(const RemoraTargetConfig *cfg, const char *access_key_id,
					 time_t now)
{
	Entry      *e;
	const Cred *c;

	if (!remora_creds_fetched(cfg) || (e = entry_for(cfg, false)) == NULL)
		return false;
	c = set(cfg->role_arn) ? &e->role : &e->base;

	/*
	 * A request signed with credentials replaced since is simply resent.
	 * Those fetched in the last STALE_S are not fetched again: a store
	 * that denies many requests at once (a permission that is missing)
	 * causes one fetch, not one each.
	 */
	if (c->access_key_id && access_key_id &&
		strcmp(c->access_key_id, access_key_id) == 0 &&
		now - c->fetched >= STALE_S)
	{
		e->stale = true;
		e->retry_after = 0;
	}
	return true;
}

/* ----------------------------------------------------------------
 * Copies of a configuration
 * ----------------------------------------------------------------
 */
RemoraTargetConfig *
remora_target_copy(const RemoraTargetConfig *cfg)
{
	RemoraTargetConfig *c = calloc(1, sizeof(RemoraTargetConfig));
	const char *const  *from[] = {
		 &cfg->endpoint,          &cfg->region,       &cfg->access_key_id,
		 &cfg->secret_access_key, &cfg->ca_pem,       &cfg->session_token,
		 &cfg->credentials,       &cfg->role_arn,     &cfg->external_id,
		 &cfg->role_session_name, &cfg->sts_endpoint, &cfg->imds_endpoint};
	const char **to[sizeof(from) / sizeof(from[0])];

	if (c == NULL)
		return NULL;
	*c = *cfg;
	to[0] = &c->endpoint;
	to[1] = &c->region;
	to[2] = &c->access_key_id;
	to[3] = &c->secret_access_key;
	to[4] = &c->ca_pem;
	to[5] = &c->session_token;
	to[6] = &c->credentials;
	to[7] = &c->role_arn;
	to[8] = &c->external_id;
	to[9] = &c->role_session_name;
	to[10] = &c->sts_endpoint;
	to[11] = &c->imds_endpoint;
	for (size_t i = 0; i < sizeof(from) / sizeof(from[0]); i++)
	{
		*to[i] = NULL;
		if (*from[i] && (*to[i] = remora_xstrdup(*from[i])) == NULL)
		{
			remora_target_free(c);
			return NULL;
		}
	}
	return c;
}

static bool
inherit(const char **field, const char *from)
{
	if (set(*field) || !set(from))
		return true;
	free((char *) *field);
	return (*field = remora_xstrdup(from)) != NULL;
}

bool
remora_target_inherit(RemoraTargetConfig       *copy,
					  const RemoraTargetConfig *target)
{
	return inherit(&copy->sts_endpoint, target->sts_endpoint) &&
		   inherit(&copy->imds_endpoint, target->imds_endpoint) &&
		   inherit(&copy->role_session_name, target->role_session_name);
}

static void
free_secret(const char *s)
{
	if (s)
		OPENSSL_cleanse((char *) s, strlen(s));
	free((char *) s);
}

void
remora_target_free(RemoraTargetConfig *c)
{
	if (c == NULL)
		return;
	free_secret(c->secret_access_key);
	free_secret(c->session_token);
	free((char *) c->endpoint);
	free((char *) c->region);
	free((char *) c->access_key_id);
	free((char *) c->ca_pem);
	free((char *) c->credentials);
	free((char *) c->role_arn);
	free((char *) c->external_id);
	free((char *) c->role_session_name);
	free((char *) c->sts_endpoint);
	free((char *) c->imds_endpoint);
	free(c);
}
