/*-------------------------------------------------------------------------
 *
 * leases.c
 *	  Lease reservations: how remora.claim keeps the leases in use within
 *	  remora.max_active_leases without making every claimer wait for the
 *	  others' commits.
 *
 * A claim counts the leases it can see and adds the ones it takes.  The
 * leases of a claim that has not committed yet are invisible to the
 * others, so counting alone could let two claimers both take the last
 * room.  Claims used to serialise on a row lock for that, held until their
 * commit, and so through its WAL flush: with synchronous_commit on, no more
 * claims per second than flushes, whatever the number of claimers.
 *
 * Instead, a claim reserves its leases in shared memory before it takes
 * them, and the reservation lasts until its transaction ends, after the
 * leases became visible (or are gone, on abort).  One 64-bit word holds
 * the number reserved (low half) and a sequence number (high half) that
 * every change increments.  A claim:
 *
 *	 1. reads the word (remora._lease_reservations());
 *	 2. counts the leases in use, in a snapshot taken after step 1;
 *	 3. reserves room = limit - counted - reserved, with a compare-and-swap
 *		from the word it read (remora._reserve_leases()); if the word
 *		changed in between, from step 1 again.
 *
 * When the swap succeeds the word did not change between steps 1 and 3, so
 * every other claim was either reserved in it (and is counted there, and
 * perhaps also in the snapshot: counted twice, which only errs on the safe
 * side), or had ended before step 1, its leases visible in the snapshot of
 * step 2 (a reservation is released after the commit made its leases
 * visible).  Unused room is given back at once (remora._release_leases()).
 *
 * A crash restart resets shared memory and the unlogged lease table
 * together.  A prepared transaction would hold leases nobody sees and no
 * reservation: PREPARE TRANSACTION after a claim is refused.
 *
 *-------------------------------------------------------------------------
 */
#include "remora.h"

#include <math.h>

#include "access/xact.h"
#include "fmgr.h"

#include "pg/leases.h"
#include "pg/shmem.h"

PG_FUNCTION_INFO_V1(remora_lease_reservations);
PG_FUNCTION_INFO_V1(remora_reserve_leases);
PG_FUNCTION_INFO_V1(remora_release_leases);
PG_FUNCTION_INFO_V1(remora_turn);

#define RESERVED(word) ((int64) ((word) &UINT64CONST(0xFFFFFFFF)))
#define NEXT(word, count)                                                      \
	((((word) >> 32) + 1) << 32 | ((uint64) (count) &UINT64CONST(0xFFFFFFFF)))

/* this backend's reservations in the current transaction */
static int64 my_reserved = 0;

static pg_atomic_uint64 *
word(void)
{
	if (remora_shared == NULL)
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						errmsg("remora's shared memory is not initialised"),
						errhint("Add remora to shared_preload_libraries.")));
	return &remora_shared->lease_reservations;
}

/* Give back n of this backend's reservations. */
static void
release(int64 n)
{
	pg_atomic_uint64 *w = &remora_shared->lease_reservations;
	uint64            old = pg_atomic_read_u64(w);

	if (n <= 0)
		return;
	Assert(n <= my_reserved && n <= RESERVED(old));
	while (
		!pg_atomic_compare_exchange_u64(w, &old, NEXT(old, RESERVED(old) - n)))
		;
	my_reserved -= n;
}

/*
 * At the end of the transaction the leases it took are visible (commit) or
 * gone (abort): its reservations are not needed any more.  A transaction
 * callback of its own (remora_leases_init).
 */
static void
leases_xact(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_PREPARE:
			if (my_reserved > 0)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot prepare a transaction that claimed "
								"remora jobs")));
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PARALLEL_ABORT:
			if (my_reserved > 0 && remora_shared != NULL)
				release(my_reserved);
			my_reserved = 0;
			break;
		default:
			break;
	}
}

/*
 * Register the transaction callback that releases a transaction's
 * reservations when it ends.  Module initialisation calls it after
 * remora_xact_init: callbacks run newest first, so the room is given back
 * before the workers that a committed submit wakes look for it.
 */
void
remora_leases_init(void)
{
	RegisterXactCallback(leases_xact, NULL);
}

/* remora._lease_reservations(): the word, for remora._reserve_leases */
Datum
remora_lease_reservations(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64((int64) pg_atomic_read_u64(word()));
}

/*
 * remora._reserve_leases(seen bigint, n integer): reserve n leases if the
 * word is still the one seen; false if it changed (count again).
 */
Datum
remora_reserve_leases(PG_FUNCTION_ARGS)
{
	uint64 seen = (uint64) PG_GETARG_INT64(0);
	int32  n = PG_GETARG_INT32(1);

	if (n < 0 || RESERVED(seen) + n > PG_INT32_MAX)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("invalid lease reservation: %d", n)));
	if (!pg_atomic_compare_exchange_u64(word(), &seen,
										NEXT(seen, RESERVED(seen) + n)))
		PG_RETURN_BOOL(false);
	my_reserved += n;
	PG_RETURN_BOOL(true);
}

/* remora._release_leases(n integer): give back room a claim did not use */
Datum
remora_release_leases(PG_FUNCTION_ARGS)
{
	int32 n = PG_GETARG_INT32(0);

	if (n < 0 || n > my_reserved)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("invalid lease release: %d", n),
						errdetail("This transaction holds %lld reservations.",
								  (long long) my_reserved)));
	(void) word();
	release(n);
	PG_RETURN_VOID();
}

/*
 * remora._turn(at_least float8): the claims' turn, first raised to at_least
 * (remora.claim: owners with nothing running take turns in the order of
 * their pass, and an owner that comes back after its turn went by starts
 * from this one).  Passes are never negative, and non-negative doubles
 * order as their bit patterns do: the word keeps the greatest seen with one
 * compare-and-swap, and no lock.  A restart begins it again at 0; the next
 * claim raises it to the least pass it finds.
 */
Datum
remora_turn(PG_FUNCTION_ARGS)
{
	float8            at_least = PG_GETARG_FLOAT8(0);
	pg_atomic_uint64 *w;
	uint64            old;
	uint64            want;

	if (!(at_least >= 0) || isinf(at_least))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("invalid turn: %g", at_least)));
	(void) word(); /* the shared memory is there */
	w = &remora_shared->turn;
	at_least += 0.0; /* -0 is 0 */
	memcpy(&want, &at_least, sizeof(want));
	old = pg_atomic_read_u64(w);
	while (old < want && !pg_atomic_compare_exchange_u64(w, &old, want))
		;
	if (old > want)
		memcpy(&at_least, &old, sizeof(at_least));
	PG_RETURN_FLOAT8(at_least);
}
