/*
 * proof/owners.pml: the rows of remora.queue_owners (sql/schema/10_schema.sql).
 *
 * A claim finds the owners with queued jobs through remora.queue_owners;
 * an owner with a queued job and no row there would never be claimed from.
 * A queue insert adds its owner's row (remora._owners_wait, a trigger) and
 * reconcile removes the rows of owners without queued jobs.  One owner,
 * under READ COMMITTED:
 *
 *   Submitter  a transaction that queues a job: the queue row (seen by
 *              others only at commit), then the trigger: FOR KEY SHARE on
 *              the owner's row, or, if there is none, INSERT ... ON
 *              CONFLICT DO NOTHING and look again;
 *   Reconciler statement 1 finds the owner without queued jobs in its
 *              snapshot and locks its row FOR UPDATE SKIP LOCKED; statement
 *              2, with a new snapshot, deletes it if the owner still has
 *              none; then it commits;
 *   Claimer    takes a committed queue row (a claim's own lock on the row,
 *              FOR NO KEY UPDATE, conflicts with neither of the others).
 *
 * A lock waited for is a guard: the step is taken once the holder
 * committed.  Property, at the end of every run: an owner with queued jobs
 * has its row.  BROKEN_SHARE leaves the lock out of the trigger (ON
 * CONFLICT DO NOTHING alone); BROKEN_SNAPSHOT deletes on statement 1's
 * snapshot; each must give a counterexample (proof/check.sh --broken).
 */
#ifndef SUBMITS
#define SUBMITS 2
#endif
#ifndef ROUNDS
#define ROUNDS 2
#endif

bool row = false;		/* the owner's row, committed */
bool mine = false;		/* the submitter's own insert of it, not yet committed */
bool share = false;		/* the submitter holds it FOR KEY SHARE */
bool upd = false;		/* the reconciler holds it FOR UPDATE */
bool gone = false;		/* the reconciler deleted it, not yet committed */
byte queued = 0;		/* committed queue rows */

proctype Submitter()
{
	byte n = 0;
	do
	:: n < SUBMITS ->
		/* INSERT INTO remora.queue: nobody else sees it yet */
		do
		:: atomic {
			!upd ->		/* FOR KEY SHARE waits for the reconciler's commit */
#ifdef BROKEN_SHARE
			if
			:: row || mine -> break
			:: else -> skip
			fi
#else
			if
			:: row || mine -> share = true; break
			:: else -> skip
			fi
#endif
		}
		/* INSERT ... ON CONFLICT DO NOTHING (waits for an open delete) */
		atomic { !upd -> if :: !row -> mine = true :: else -> skip fi }
		od;
		/* COMMIT */
		atomic {
			queued++;
			if :: mine -> row = true; mine = false :: else -> skip fi;
			share = false
		};
		n++
	:: else -> break
	od
}

proctype Reconciler()
{
	byte r = 0;
	bool none;		/* statement 1 saw no queued job */
	do
	:: r < ROUNDS ->
		/* statement 1: its snapshot, then the lock (skipped if held) */
		none = (queued == 0);
		atomic { if :: none && row && !share -> upd = true :: else -> skip fi };
		/* statement 2: a new snapshot */
#ifdef BROKEN_SNAPSHOT
		atomic { if :: upd && none -> gone = true :: else -> skip fi };
#else
		atomic { if :: upd && queued == 0 -> gone = true :: else -> skip fi };
#endif
		/* COMMIT */
		atomic { if :: gone -> row = false :: else -> skip fi; gone = false; upd = false };
		r++
	:: else -> break
	od
}

proctype Claimer()
{
	byte c = 0;
	do
	:: c < SUBMITS -> atomic { if :: queued > 0 -> queued-- :: else -> skip fi }; c++
	:: else -> break
	od
}

init
{
	atomic { run Submitter(); run Reconciler(); run Claimer() };
	(_nr_pr == 1);
	assert(queued == 0 || row)
}
