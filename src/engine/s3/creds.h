/*-------------------------------------------------------------------------
 *
 * creds.h
 *	  The credentials a store's requests are signed with: static keys (with
 *	  a session token when they are temporary), the AWS credential chain,
 *	  and a role assumed on top of either.
 *
 * A store's configuration (RemoraTargetConfig) says where its credentials
 * come from; remora_creds_get answers with the ones to sign with now.
 * Static keys are the configuration's own.  Credentials from the chain or
 * from STS are cached per process, shared by every request and task that
 * names the same configuration, and fetched again before they expire (a
 * quarter of their life before, at most five minutes), so that a request
 * is never signed with credentials about to lapse.  A store that answers
 * ExpiredToken anyway (a clock that is off) marks them so
 * (remora_creds_expired) and the request is signed again once (s3.c).
 *
 * The chain is the AWS SDKs', in their order: the environment, a web
 * identity token (STS AssumeRoleWithWebIdentity), the shared credentials
 * and config files, the container credentials endpoint, then IMDSv2
 * (doc/operator-guide.md, "Cloud credentials").  Each process resolves
 * its own: a remora-worker uses its host's identity.
 *
 * Fetching blocks the caller, a few seconds at most (CREDS_TIMEOUT_MS):
 * it happens once per process and then about once an hour, and a worker's
 * transfers that wait meanwhile lose nothing.  A fetch that fails while
 * the cached credentials are still good keeps them and is tried again
 * later; one that fails without them fails the request, with a reason
 * that names the source and never a secret.
 *
 * One thread: the engine's hosts are single-threaded processes.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_CREDS_H
#define REMORA_CREDS_H

#include "engine/engine.h"

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

/* What a fetch may take, each of its requests (IMDS's: a second). */
#define CREDS_TIMEOUT_MS 5000L

typedef struct RemoraCreds
{
	const char *access_key_id;
	const char *secret_access_key;
	const char *session_token; /* NULL: none */
	time_t      expires;       /* 0: not temporary */
	const char *source;        /* where they came from, no secret */
} RemoraCreds;

/*
 * The credentials to sign cfg's requests with at now, fetched if need be.
 * The strings stay valid until the next call into this module.  False,
 * with errbuf set, when there are none.  Not for an anonymous store.
 */
extern bool remora_creds_get(const RemoraTargetConfig *cfg, time_t now,
							 RemoraCreds *out, char *errbuf, size_t errlen);

/*
 * The store refused access_key_id's session as expired.  True if new
 * credentials can be fetched (the next remora_creds_get does), false for
 * static keys: asking again would not help.
 */
extern bool remora_creds_expired(const RemoraTargetConfig *cfg,
								 const char *access_key_id, time_t now);

/* Does cfg take credentials from anywhere but its own static keys? */
extern bool remora_creds_fetched(const RemoraTargetConfig *cfg);

/* The CAs the fetches' TLS peers must chain to (NULL: the system's). */
extern void remora_creds_set_tls(const char *ca_file, const char *ca_path);

/* Forget every cached credential (tests; a process's end). */
extern void remora_creds_forget_all(void);

/* A deep copy of a store's configuration, and its release (secrets wiped). */
extern RemoraTargetConfig *remora_target_copy(const RemoraTargetConfig *cfg);
extern void                remora_target_free(RemoraTargetConfig *cfg);

/*
 * A source endpoint's copy takes the deployment's STS and IMDS endpoints
 * and session name from the target's where it names none.  False: out of
 * memory.
 */
extern bool remora_target_inherit(RemoraTargetConfig       *copy,
								  const RemoraTargetConfig *target);

#endif /* REMORA_CREDS_H */
