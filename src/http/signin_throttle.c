/*-------------------------------------------------------------------------
 *
 * signin_throttle.c
 *	  How often sign-in may be tried: failures counted per role, client
 *	  address and pair, and the places a role signed in from before.
 *
 * L is remora.http_login_max_failures.  Failures are counted under three
 * keys, each forgotten remora.http_login_lockout after its last failure:
 *	  - the pair (role, client address), limit L: how often one place may
 *		guess one role's password;
 *	  - the client address, limit 4 L: how many names one place may try;
 *	  - the role, limit 4 L: how many guesses at a role many places together
 *		may make.
 * A try is refused (429, the server is not asked) when its pair is at its
 * limit, or when its address or its role is at theirs, unless the pair is
 * a known place: the role signed in from that address within
 * KNOWN_PLACE_S.  So failures with made-up names, or with a role's name,
 * from one address lock neither that address's regular users nor the
 * role elsewhere (one address alone adds at most L failures to a role's count,
 * since its pair locks first and both are forgotten at the same moment);
 * a role new at an address that is being abused waits out the lockout.
 * The client address is the TCP peer's, or the one a trusted proxy
 * forwarded for (forwarded.c).
 *
 * A try is counted before it is made: it is reserved, under the lock,
 * against every limit that applies (failures plus tries in flight must
 * stay below it), and the reservation becomes a failure or is dropped when
 * the answer comes.  Many wrong passwords sent at once therefore reach the
 * server at most L times for one pair, however they interleave.
 *
 * The known places outlive a restart of "remora http": they are written to
 * remora_http_config.places_file (in the data directory, readable by the
 * server's OS user alone) by the server's tick when they changed, a line
 * "seconds<TAB>address role" each, and read back at start; otherwise the
 * failures of a shared address after a restart would lock every role there
 * out again.  The failure counts are not kept: a restart forgives them.
 *
 * One mutex guards both tables; nothing waits on the network or the disk
 * while holding it.  Calls only config.c (the limits); session.c asks it
 * before and after each try.
 *
 *-------------------------------------------------------------------------
 */
#include "http/http.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_THROTTLE     4096
#define MAX_KNOWN_PLACES 4096
#define KNOWN_PLACE_S    (7 * 86400)

typedef struct Throttle
{
	char   key[144]; /* "p:address role", "a:address" or "r:role" */
	int    failures;
	int    inflight; /* tries reserved, not yet answered */
	time_t last_failure;
} Throttle;

/* a role signed in from an address: "address role" */
typedef struct KnownPlace
{
	char   key[144];
	time_t last_success;
} KnownPlace;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static Throttle        throttle[MAX_THROTTLE];
static KnownPlace      known_places[MAX_KNOWN_PLACES];
static bool            places_changed; /* not yet written to places_file */

/*
 * The entry of key, or with create a new one (NULL if every entry has
 * tries in flight).  Entries with nothing in flight are forgotten a
 * lockout after their last failure; when the table is full, the one whose
 * last failure is oldest makes room.
 */
static Throttle *
throttle_find(const char *key, bool create, time_t now)
{
	Throttle *free_slot = NULL, *oldest = NULL;
	int       lockout = atomic_load(&remora_http_config.login_lockout_s);

	for (int i = 0; i < MAX_THROTTLE; i++)
	{
		Throttle *t = &throttle[i];

		if (t->key[0] && t->inflight == 0 && now - t->last_failure >= lockout)
			t->key[0] = '\0'; /* forgotten after a quiet lockout */
		if (t->key[0] == '\0')
		{
			if (!free_slot)
				free_slot = t;
			continue;
		}
		if (strcmp(t->key, key) == 0)
			return t;
		/*
		 * The table full, the entry with the fewest failures goes (the
		 * oldest of those): made-up names sprayed from many addresses
		 * fill it with entries of one failure each, and must not push out
		 * a role's count that is near its limit.
		 */
		if (t->inflight == 0 && (!oldest || t->failures < oldest->failures ||
								 (t->failures == oldest->failures &&
								  t->last_failure < oldest->last_failure)))
			oldest = t;
	}
	if (!create)
		return NULL;
	if (!free_slot)
		free_slot = oldest;
	if (!free_slot)
		return NULL;
	memset(free_slot, 0, sizeof(*free_slot));
	snprintf(free_slot->key, sizeof(free_slot->key), "%s", key);
	return free_slot;
}

/*
 * Seconds until key may be tried again under limit; 0 if now.  A key kept
 * at its limit only by tries in flight is asked again in a second.
 */
static int
throttled_for(const char *key, int limit, time_t now)
{
	Throttle *t = throttle_find(key, false, now);
	int       lockout = atomic_load(&remora_http_config.login_lockout_s);
	int       wait;

	if (t == NULL || t->failures + t->inflight < limit)
		return 0;
	if (t->failures < limit)
		return 1;
	wait = (int) (t->last_failure + lockout - now);
	return wait > 0 ? wait : 1;
}

static void
throttle_keys(const char *user, const char *address, char *pkey, char *akey,
			  char *rkey)
{
	/* an address has no space: the first space ends it */
	snprintf(pkey, 144, "p:%.63s %.63s", address, user);
	snprintf(akey, 144, "a:%.63s", address);
	snprintf(rkey, 144, "r:%.63s", user);
}

static KnownPlace *
known_place(const char *place, time_t now)
{
	for (int i = 0; i < MAX_KNOWN_PLACES; i++)
	{
		KnownPlace *k = &known_places[i];

		if (k->key[0] && now - k->last_success >= KNOWN_PLACE_S)
			k->key[0] = '\0';
		if (k->key[0] && strcmp(k->key, place) == 0)
			return k;
	}
	return NULL;
}

static void
remember_place(const char *place, time_t now)
{
	KnownPlace *k = known_place(place, now);

	if (k == NULL)
	{
		/* a free entry, or the one unused longest */
		for (int i = 0; i < MAX_KNOWN_PLACES; i++)
		{
			KnownPlace *c = &known_places[i];

			if (c->key[0] == '\0')
			{
				k = c;
				break;
			}
			if (!k || c->last_success < k->last_success)
				k = c;
		}
		snprintf(k->key, sizeof(k->key), "%s", place);
		places_changed = true;
	}
	/* a known place's time is written again once an hour at most */
	if (now - k->last_success >= 3600)
		places_changed = true;
	k->last_success = now;
}

/* Read the known places kept by an earlier server (none: a first start). */
void
remora_signin_load(time_t now)
{
	const char *path = remora_http_config.places_file;
	FILE       *f = path ? fopen(path, "r") : NULL;
	char        line[200];
	int         n = 0;

	if (f == NULL)
		return;
	pthread_mutex_lock(&lock);
	while (fgets(line, sizeof(line), f) && n < MAX_KNOWN_PLACES)
	{
		char  *tab = strchr(line, '\t');
		time_t at;

		line[strcspn(line, "\r\n")] = '\0';
		if (tab == NULL || tab[1] == '\0')
			continue;
		at = (time_t) strtoll(line, NULL, 10);
		if (at <= 0 || at > now || now - at >= KNOWN_PLACE_S)
			continue;
		snprintf(known_places[n].key, sizeof(known_places[n].key), "%s",
				 tab + 1);
		known_places[n++].last_success = at;
	}
	pthread_mutex_unlock(&lock);
	fclose(f);
}

/*
 * Write the known places if they changed (the server's tick): a copy taken
 * under the lock, written beside the file and renamed over it, so that a
 * crash leaves the old one or the new one whole.
 */
void
remora_signin_save(void)
{
	const char       *path = remora_http_config.places_file;
	static KnownPlace copy[MAX_KNOWN_PLACES];
	char              tmp[1100];
	FILE             *f;
	bool              ok;

	if (path == NULL ||
		snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int) sizeof(tmp))
		return;
	pthread_mutex_lock(&lock);
	if (!places_changed)
	{
		pthread_mutex_unlock(&lock);
		return;
	}
	memcpy(copy, known_places, sizeof(copy));
	places_changed = false;
	pthread_mutex_unlock(&lock);

	f = fopen(tmp, "w");
	if (f == NULL)
		return;
	(void) fchmod(fileno(f), S_IRUSR | S_IWUSR);
	for (int i = 0; i < MAX_KNOWN_PLACES; i++)
		if (copy[i].key[0])
			fprintf(f, "%lld\t%s\n", (long long) copy[i].last_success,
					copy[i].key);
	ok = fflush(f) == 0 && fsync(fileno(f)) == 0;
	ok = fclose(f) == 0 && ok;
	if (!ok || rename(tmp, path) != 0)
	{
		unlink(tmp);
		pthread_mutex_lock(&lock);
		places_changed = true; /* tried again at the next tick */
		pthread_mutex_unlock(&lock);
	}
}

/*
 * May user try to sign in from address now?  0: yes, and the try is
 * reserved against every limit that applies until remora_signin_done
 * reports its outcome; else the seconds to wait.  Takes the lock.
 */
int
remora_signin_admit(const char *user, const char *address, time_t now)
{
	char pkey[144], akey[144], rkey[144];
	int  limit = atomic_load(&remora_http_config.login_failures);
	int  wait;

	throttle_keys(user, address, pkey, akey, rkey);
	pthread_mutex_lock(&lock);
	wait = throttled_for(pkey, limit, now);
	if (wait == 0 && !known_place(pkey + 2, now))
	{
		wait = throttled_for(akey, 4 * limit, now);
		if (wait == 0)
			wait = throttled_for(rkey, 4 * limit, now);
	}
	if (wait == 0)
	{
		/* reserve: one more try in flight under each key */
		const char *keys[3] = {pkey, akey, rkey};
		Throttle   *t[3] = {NULL, NULL, NULL};
		int         n;

		for (n = 0; n < 3; n++)
		{
			t[n] = throttle_find(keys[n], true, now);
			if (t[n] == NULL)
				break;
			t[n]->inflight++;
		}
		if (n < 3)
		{
			/* the table is all tries in flight: ask again shortly */
			while (n-- > 0)
				t[n]->inflight--;
			wait = 1;
		}
	}
	pthread_mutex_unlock(&lock);
	return wait;
}

/*
 * The outcome of a try that remora_signin_admit reserved: refused
 * credentials (or a server that did not ask for them) are failures under
 * every key; a success clears the pair's failures and makes the address a
 * known place of the role.  Takes the lock.
 */
void
remora_signin_done(const char *user, const char *address, RemoraAuthResult r,
				   time_t now)
{
	char        pkey[144], akey[144], rkey[144];
	const char *keys[3];
	bool failed = r == REMORA_AUTH_REFUSED || r == REMORA_AUTH_NO_PASSWORD;

	throttle_keys(user, address, pkey, akey, rkey);
	keys[0] = pkey;
	keys[1] = akey;
	keys[2] = rkey;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < 3; i++)
	{
		/* in flight, so neither forgotten nor replaced since admitted */
		Throttle *t = throttle_find(keys[i], false, now);

		if (t == NULL)
			continue;
		if (t->inflight > 0)
			t->inflight--;
		if (failed)
		{
			t->failures++;
			t->last_failure = now;
		}
		else if (r == REMORA_AUTH_OK && i == 0)
			t->failures = 0;
	}
	if (r == REMORA_AUTH_OK)
		remember_place(pkey + 2, now);
	pthread_mutex_unlock(&lock);
}
