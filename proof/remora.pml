/*
 * remora.pml: a Promela model of Remora's job and export protocols, as
 * the install script (sql/functions/) implements them.  Checked with Spin by
 * proof/check.sh; doc/reliability.md says what is proven and with which
 * bounds.
 *
 * Every transition below is one SQL function call, one transaction: the
 * SQL serialises each on the job row lock (renew and reconcile also on the
 * lease lock when they re-create leases; a claim's count and take are made
 * atomic by its lease reservation, src/pg/leases.c), so one atomic step per
 * call is the code's own granularity.  Each transition names the
 * function that implements it ("Model: <Transition>" in the comment above
 * that function in sql/functions/); proof/map.sh checks that the two lists
 * agree.  remora.commit_many is Commit for several jobs in one transaction:
 * it holds every one of their job locks to its end, so its effect is that
 * of the same Commits one after another with nothing in between, one of
 * the interleavings the model already explores.
 *
 * Transitions (the names map.sh reads):
 *   @transition Authorize         remora._authorize
 *   @transition Settle            remora._settle
 *   @transition LeasesInUse       remora._leases_in_use
 *   @transition Claim             remora.claim
 *   @transition Renew             remora.renew
 *   @transition Checkpoint        remora.checkpoint
 *   @transition Commit            remora.commit
 *   @transition Commit            remora.commit_many
 *   @transition CommitExport      remora._commit_export
 *   @transition Fail              remora.fail
 *   @transition Yield             remora.yield
 *   @transition Cancel            remora._cancel
 *   @transition Reconcile         remora.reconcile
 *   @transition Resolve           remora._export_resolve
 *   @transition Export            remora._export
 *   @transition Submit            remora._submit
 *   @transition CoordinationLost  remora._coordination_lost
 *   @transition StagingToClean    remora.staging_to_clean
 *   @transition StagingCleaned    remora.staging_cleaned
 *
 * Bounds (change with -D on the spin command line; defaults in brackets):
 *   NJ jobs [2], of which job EXPORTJOB is an export [1; NJ or more: none],
 *   the others downloads;
 *   NW workers [2] (each a sequence of incarnations: a crash ends one,
 *   the next claim starts another); MAXATT attempts of budget per job [2];
 *   LIMIT = remora.max_active_leases [1]; MAXLOSS coordination losses
 *   (crash, failover, TRUNCATE of the queue or the leases) [1]; MAXDUP
 *   late or duplicated deliveries of a request [1]; MAXRESOLVE explicit
 *   decisions on an export in outcome_unknown [1]; MAXSTEPS renewals or
 *   checkpoints per attempt (an attempt's work is finite) [1]; MAXYIELD
 *   yields per job [1] (a job yields only after a time slice of progress,
 *   and its work is finite); NOCLEAN
 *   leaves the staging sweep out.  proof/check.sh runs three
 *   configurations (1 download job; 1 export; 2 download jobs under a
 *   lease limit of 1) and prints each one's states and time;
 *   doc/reliability.md has the latest.
 *
 * Abstractions:
 *   - Time: a lease is live or expired.  Expiry is a nondeterministic step
 *     that any live lease may take at any moment (a worker paused past its
 *     lease, a renewal that came too late); a renewal keeps a live lease
 *     live and never revives an expired one (remora._authorize settles the
 *     attempt lost first).  Backoff (not_before) is not modelled: a claim
 *     may take any queued entry at any time, which includes every order the
 *     queue index gives.
 *   - Attempt ids: a job's attempt is named by its fencing token (claim
 *     gives attempt and token together, token = highest + 1); the fencing
 *     check of remora._authorize (attempt is the job's current one, its
 *     token is the one given, the attempt runs) is one comparison here.
 *   - Failover with synchronous replication and crash recovery are the
 *     same step: durable state (every variable but q, lease, marker) is
 *     kept, UNLOGGED state (queue, leases, the remora.coordination marker)
 *     is emptied.  Nothing committed is lost because the model's durable
 *     variables are never reset.
 *   - Exports have one member: "written" says whether the target holds it.
 *     A dispatch answers conclusively (written, or refused), or not at all
 *     (the write may or may not have landed).
 *   - Ghost variables (g_*) are the properties' memory; the protocol never
 *     reads them.
 *
 * Broken variants (each must give a counterexample; check.sh --broken):
 *   BROKEN_FENCE   commit/renew/checkpoint/fail without the fencing check
 *   BROKEN_CANCEL  remora._authorize ignores a cancel request
 *   BROKEN_LEASES  claim counts only lease rows, also without the marker
 *   BROKEN_EXPORT  a lost export attempt is retried like a job's
 *   BROKEN_BUDGET  a claim does not consume budget when it replaces an
 *                  attempt that was lost without a word
 *   BROKEN_YIELD   a yield leaves its lease row behind (the permit leaks)
 *   BROKEN_STUCK   reconcile leaves expired leases alone (only the
 *                  attempt's own next call would settle it): a job whose
 *                  worker died never ends (the liveness property)
 */

#ifndef NJ
#define NJ 2
#endif
#ifndef NW
#define NW 2
#endif
#ifndef MAXATT
#define MAXATT 2
#endif
#ifndef LIMIT
#define LIMIT 1
#endif
#ifndef MAXLOSS
#define MAXLOSS 1
#endif
#ifndef MAXDUP
#define MAXDUP 1
#endif
#ifndef MAXRESOLVE
#define MAXRESOLVE 1
#endif
#ifndef MAXSTEPS
#define MAXSTEPS 1
#endif
#ifndef MAXYIELD
#define MAXYIELD 1
#endif
#ifndef EXPORTJOB
#define EXPORTJOB 1		/* which job is an export; NJ or more: none */
#endif
#define MAXTOK (MAXATT + MAXRESOLVE + MAXYIELD)
#define AT(j, t) ((j) * (MAXTOK + 1) + (t))

/* job states (remora.jobs.state) */
#define QUEUED 1
#define RUNNING 2
#define RETRYING 3
#define SUCCEEDED 4
#define FAILED 5
#define CANCELLED 6
#define UNKNOWN 7		/* outcome_unknown (exports only) */

/* attempt states (remora.attempts.state) */
#define A_RUNNING 1
#define A_SUCCEEDED 2
#define A_FAILED 3
#define A_LOST 4
#define A_CANCELLED 5
#define A_YIELDED 6

/* lease rows (remora.leases) */
#define L_NONE 0
#define L_LIVE 1
#define L_EXPIRED 2

/* verdicts of remora._authorize */
#define V_OK 1
#define V_STALE 2
#define V_LOST 3
#define V_CANCELLED 4

/* error classes given to remora.fail */
#define C_OTHER 0
#define C_UNKNOWN 1		/* 'outcome_unknown' */
#define C_WORKER 2		/* a stopping worker's hand-back */

/* export modes (remora.exports.mode) */
#define M_DISPATCH 0
#define M_VERIFY 1

/* ---- durable state (logged tables) ---- */
byte js[NJ];			/* jobs.state */
byte used[NJ];			/* jobs.attempts_used */
byte maxa[NJ];			/* jobs.max_attempts */
byte ftok[NJ];			/* jobs.fencing_token: the highest given */
byte cur[NJ];			/* jobs.current_attempt (its token) */
bool cancel_req[NJ];	/* jobs.cancel_requested_at IS NOT NULL */
byte att[NJ * (MAXTOK + 1)];	/* attempts.state by (job, token) */
byte result[NJ];		/* results.fencing_token (0: no row); exports.committed_attempt */
byte cp_tok[NJ];		/* checkpoints.fencing_token */
bool refs[NJ];			/* exports.refs holds the member's conclusive answer */
bool mode[NJ];			/* exports.mode */

/* ---- coordination state (UNLOGGED tables) ---- */
bool q[NJ];				/* remora.queue has the job */
byte lease[NJ];			/* remora.leases row of the job (L_*) */
byte lease_tok[NJ];		/* its fencing_token */
bool marker;			/* remora.coordination has its row */

/* ---- the target store, for exports ---- */
bool written[NJ];		/* the exported member is at its key */

/* ---- ghosts ---- */
byte g_commits[NJ];		/* successful commits */
byte g_claims[NJ];		/* attempts created */
byte g_yields[NJ];		/* attempts that yielded */
bool g_cancel_won[NJ];	/* a remora_cancel committed before the job ended */
bool g_pending[NJ];		/* a write may have been sent without an answer, and
						   nobody decided since */
bool g_was_unknown[NJ];	/* the export went outcome_unknown, and nobody
						   decided since */
bool g_cleaned[NJ * (MAXTOK + 1)];	/* the attempt's staging was deleted */
byte g_losses;			/* coordination losses so far */
byte g_dups;			/* late deliveries so far */
byte g_resolves;		/* explicit decisions so far */

/* a worker's last protocol request as the network holds it, for a late
 * duplicate: kind (0 none, 1 commit, 2 fail, 3 yield), job, token, and for a
 * commit whether it carried the export's answer */
byte net_kind[NW];
byte net_job[NW];
byte net_tok[NW];
bool net_refs[NW];

#define is_export(j) ((j) == EXPORTJOB)
#define ended(j) (js[j] == SUCCEEDED || js[j] == FAILED || js[j] == CANCELLED || js[j] == UNKNOWN)
#define all_ended (ended(0) && (NJ < 2 || ended(1)))

/* remora._leases_in_use(): with the marker, the lease rows; without it,
 * the jobs that run or hold a lease row (the union). */
inline LeasesInUse(n) {
	n = 0;
	k = 0;
	do
	:: k < NJ ->
#ifdef BROKEN_LEASES
		if :: lease[k] != L_NONE -> n++ :: else -> skip fi;
#else
		if
		:: marker && lease[k] != L_NONE -> n++
		:: !marker && (js[k] == RUNNING || lease[k] != L_NONE) -> n++
		:: else -> skip
		fi;
#endif
		k++
	:: else -> break
	od
}

/* The invariants that hold in every state. */
inline Invariants() {
	k = 0;
	n = 0;
	do
	:: k < NJ ->
		/* at most one committed result per job */
		assert(g_commits[k] <= 1);
		assert(result[k] == 0 || js[k] == SUCCEEDED);
		/* the budget counts every attempt created, lost ones included,
		 * but those that yielded */
		assert(used[k] + g_yields[k] == g_claims[k]);
		assert(used[k] <= maxa[k]);
		assert(ftok[k] == g_claims[k]);
		/* while the marker is there every running attempt has its lease
		 * row: the premise of counting lease rows in claim */
		assert(!marker || js[k] != RUNNING || lease[k] != L_NONE);
		/* a lease row belongs to the running current attempt */
		assert(lease[k] == L_NONE || (js[k] == RUNNING && lease_tok[k] == cur[k]));
		/* the queue never holds an export in outcome_unknown */
		assert(!(js[k] == UNKNOWN && q[k]));
		/* an attempt runs exactly when it is the running job's current one */
		assert(js[k] != RUNNING || att[AT(k, cur[k])] == A_RUNNING);
		if :: js[k] == RUNNING -> n++ :: else -> skip fi;
		k++
	:: else -> break
	od;
	/* running attempts (live leases among them) never exceed the limit */
	assert(n <= LIMIT);
	k = 0;
	n = 0
}

/* remora._settle: end the attempt, move the job on.  Caller holds the lock. */
inline Settle(j, t, outcome, retryable, cls) {
	att[AT(j, t)] = outcome;
	lease[j] = L_NONE;
	if
	:: is_export(j) && mode[j] == M_VERIFY -> js[j] = UNKNOWN
	:: else ->
		if
		:: outcome == A_CANCELLED || cancel_req[j] -> js[j] = CANCELLED
		:: else ->
			if
#ifndef BROKEN_EXPORT
			:: is_export(j) && (outcome == A_LOST || cls == C_UNKNOWN || cls == C_WORKER) ->
				js[j] = UNKNOWN
#else
			:: is_export(j) && (cls == C_UNKNOWN || cls == C_WORKER) -> js[j] = UNKNOWN
#endif
			:: else ->
				if
				:: retryable && used[j] < maxa[j] -> js[j] = RETRYING; q[j] = true
				:: else -> js[j] = FAILED
				fi
			fi
		fi
	fi;
	if :: js[j] == UNKNOWN -> g_was_unknown[j] = true :: else -> skip fi
}

/* remora._authorize: lock the job, judge (attempt, token).  A missing
 * lease row never revokes; an expired one does. */
inline Authorize(j, t, verdict) {
#ifdef BROKEN_FENCE
	if
	:: js[j] != RUNNING -> verdict = V_STALE
#else
	if
	:: t != cur[j] || att[AT(j, t)] != A_RUNNING || js[j] != RUNNING -> verdict = V_STALE
#endif
	:: else ->
		if
		:: lease[j] == L_EXPIRED ->
			Settle(j, cur[j], A_LOST, true, C_OTHER);
			verdict = V_LOST
#ifndef BROKEN_CANCEL
		:: lease[j] != L_EXPIRED && cancel_req[j] ->
			Settle(j, cur[j], A_CANCELLED, false, C_OTHER);
			verdict = V_CANCELLED
		:: else -> verdict = V_OK
#else
		:: else -> verdict = V_OK
#endif
		fi
	fi
}

/* remora.claim: one job (max_jobs = 1); count and take as one step (the
 * reservation of src/pg/leases.c makes them linearizable).  Which queued
 * job a claim takes is left open here (any j): the weighted fair share and
 * a role's max_running only narrow that choice or refuse a claim, so the
 * real claim's runs are a subset of the model's and its safety properties
 * (the lease limit among them) carry over unchanged. */
inline Claim(j, t) {
	LeasesInUse(n);
	if
	:: n < LIMIT ->
		/* the queue entry goes whether or not the job still waits */
		q[j] = false;
		if
		:: (js[j] == QUEUED || js[j] == RETRYING) && !cancel_req[j] && used[j] < maxa[j] ->
			/* no export is dispatched again after outcome_unknown without an
			 * explicit decision */
			assert(!(is_export(j) && g_was_unknown[j]));
			assert(!(is_export(j) && mode[j] == M_DISPATCH && g_pending[j]));
#ifdef BROKEN_BUDGET
			if
			:: att[AT(j, ftok[j])] != A_LOST -> used[j]++
			:: else -> skip
			fi;
#else
			used[j]++;
#endif
			g_claims[j]++;
			ftok[j]++;
			t = ftok[j];
			cur[j] = t;
			js[j] = RUNNING;
			att[AT(j, t)] = A_RUNNING;
			lease[j] = L_LIVE;
			lease_tok[j] = t
		:: else -> t = 0
		fi
	:: else -> t = 0
	fi
}

/* remora.renew */
inline Renew(j, t, ok) {
	Authorize(j, t, v);
	if
	:: v == V_OK ->
		/* a lease lost with coordination state is re-created */
		lease[j] = L_LIVE;
		lease_tok[j] = t;
		ok = true
	:: else -> ok = false
	fi
}

/* remora.checkpoint: a validated checkpoint of the current attempt, and
 * for an export its conclusive answers */
inline Checkpoint(j, t, answer) {
	Authorize(j, t, v);
	if
	:: v == V_OK ->
		assert(t == cur[j]);
		cp_tok[j] = t;
		if :: is_export(j) && answer -> refs[j] = true :: else -> skip fi
	:: else -> skip
	fi
}

/* the property checked at every successful commit */
inline Committed(j, t) {
	assert(g_commits[j] == 0);
	/* the job's current attempt and token at the moment of commit */
	assert(t == cur[j] && t == ftok[j] && att[AT(j, t)] == A_RUNNING);
	/* nothing commits after a cancel wins */
	assert(!g_cancel_won[j]);
	/* nor from staging that the cleanup already deleted */
	assert(!g_cleaned[AT(j, t)]);
	g_commits[j]++;
	result[j] = t;
	att[AT(j, t)] = A_SUCCEEDED;
	js[j] = SUCCEEDED;
	lease[j] = L_NONE
}

/* remora.commit of a download: the result row, or the exact repeat of
 * the call that made it (true) */
inline Commit(j, t, ok) {
	Authorize(j, t, v);
	if
	:: v == V_OK ->
		Committed(j, t);
		cp_tok[j] = 0;
		ok = true
	:: else -> ok = (result[j] == t)
	fi
}

/* remora._commit_export: every member answered (recorded or carried) */
inline CommitExport(j, t, answer, ok) {
	Authorize(j, t, v);
	if
	:: v == V_OK && (refs[j] || answer) ->
		refs[j] = true;
		/* an export succeeds only with the member at its key */
		assert(written[j]);
		Committed(j, t);
		ok = true
	:: v == V_OK && !(refs[j] || answer) -> ok = false
	:: else -> ok = (result[j] == t && js[j] == SUCCEEDED)
	fi
}

/* remora.fail */
inline Fail(j, t, retryable, cls) {
	Authorize(j, t, v);
	if
	:: v == V_OK -> Settle(j, t, A_FAILED, retryable, cls)
	:: else -> skip
	fi
}

/* remora.yield: the job back in the queue, its claim's budget given back;
 * never an export's */
inline Yield(j, t) {
	Authorize(j, t, v);
	if
	:: v == V_OK && !is_export(j) ->
		att[AT(j, t)] = A_YIELDED;
#ifndef BROKEN_YIELD
		lease[j] = L_NONE;
#endif
		used[j]--;
		g_yields[j]++;
		js[j] = QUEUED;
		q[j] = true
	:: else -> skip
	fi
}

/* remora._cancel (remora_cancel, and remora_delete of an unfinished job) */
inline Cancel(j) {
	if
	:: js[j] == QUEUED || js[j] == RETRYING ->
		js[j] = CANCELLED;
		cancel_req[j] = true;
		q[j] = false;
		g_cancel_won[j] = true
	:: js[j] == RUNNING && !cancel_req[j] ->
		cancel_req[j] = true;
		g_cancel_won[j] = true
	:: else -> skip
	fi
}

/* remora.reconcile: expire lapsed leases, drop leases of attempts that no
 * longer run, re-create lost leases of running attempts, and rebuild the
 * queue only when the marker is gone (then set it again) */
inline Reconcile() {
	i = 0;
	do
	:: i < NJ ->
#ifndef BROKEN_STUCK
		if
		:: lease[i] == L_EXPIRED -> Authorize(i, lease_tok[i], v)
		:: else -> skip
		fi;
#endif
		if
		:: lease[i] != L_NONE &&
		   !(js[i] == RUNNING && lease_tok[i] == cur[i] && att[AT(i, cur[i])] == A_RUNNING) ->
			lease[i] = L_NONE
		:: else -> skip
		fi;
		if
		:: js[i] == RUNNING && att[AT(i, cur[i])] == A_RUNNING && lease[i] == L_NONE ->
			lease[i] = L_LIVE;
			lease_tok[i] = cur[i]
		:: else -> skip
		fi;
		i++
	:: else -> break
	od;
	if
	:: !marker ->
		i = 0;
		do
		:: i < NJ -> q[i] = (js[i] == QUEUED || js[i] == RETRYING); i++
		:: else -> break
		od;
		marker = true
	:: else -> skip
	fi;
	i = 0
}

/* remora._export_resolve by an admin (or the owner, for verify) */
inline Resolve(j, action) {
	if
	:: js[j] == UNKNOWN ->
		if
		:: action == 0 -> mode[j] = M_VERIFY
		:: else -> mode[j] = M_DISPATCH
		fi;
		if
		:: action == 2 -> js[j] = FAILED
		:: else ->
			js[j] = QUEUED;
			if :: maxa[j] < used[j] + 1 -> maxa[j] = used[j] + 1 :: else -> skip fi;
			q[j] = true
		fi;
		/* an explicit decision */
		g_was_unknown[j] = false;
		g_pending[j] = false
	:: else -> skip
	fi
}

/* The network keeps a copy of a worker's commit or fail (only while a
 * late delivery may still happen) */
inline Sent(kind, carried) {
	if
	:: g_dups < MAXDUP ->
		net_kind[w] = kind; net_job[w] = j; net_tok[w] = t; net_refs[w] = carried
	:: else -> skip
	fi
}

/* the worker has no attempt in hand any more */
inline Idle() {
	j = 0; t = 0; steps = 0; ok = false; answer = false; sent = false; inconclusive = false
}

/* A worker: claims, then acts on its attempt in any order (also after it
 * lost authority: a zombie), until it commits, fails, hands the attempt
 * back, or dies. */
proctype Worker(byte w) {
	byte j, t, steps, v, n, k, i;
	bool ok, answer, sent, inconclusive;
	/* t == 0: no attempt in hand (polling); t != 0: attempt t of job j */
	do
	:: atomic {
		/* a claim when some queue entry exists (otherwise it returns nothing
		 * and the worker polls again) */
		t == 0 && (q[0] || (NJ > 1 && q[1])) ->
		if
		:: q[0] -> j = 0
		:: NJ > 1 && q[1] -> j = 1
		fi;
		Claim(j, t);
		Invariants();
		if :: t == 0 -> j = 0 :: else -> skip fi
	   }
	:: atomic { t != 0 && steps < MAXSTEPS -> steps++; Renew(j, t, ok); Invariants(); v = 0; ok = false }
	:: atomic { t != 0 && steps < MAXSTEPS -> steps++; Checkpoint(j, t, answer); Invariants(); v = 0 }
	/* an export's dispatch of its member (dispatch mode, once an attempt) */
	:: atomic {
		t != 0 && is_export(j) && mode[j] == M_DISPATCH && !sent -> sent = true;
		if
		:: written[j] = true; answer = true			/* conclusive: written */
		:: skip										/* conclusive: refused */
		:: written[j] = true; inconclusive = true	/* no answer, it landed */
		:: inconclusive = true						/* no answer, nothing landed */
		fi;
		/* the ghost remembers an unanswered write of the attempt that holds
		 * authority; a zombie's (one that lost it) is physical I/O that no
		 * protocol can stop, and what it writes is the same member */
		if
		:: inconclusive && t == cur[j] && js[j] == RUNNING -> g_pending[j] = true
		:: else -> skip
		fi
	   }
	/* a verify attempt observes the target */
	:: atomic { t != 0 && is_export(j) && mode[j] == M_VERIFY && !sent -> sent = true; answer = written[j] }
	:: atomic {
		t != 0 && !is_export(j) -> Commit(j, t, ok); Invariants(); v = 0;
		Sent(1, false);
		/* true or false, the attempt is over for its worker (a zombie's
		 * repeats are the network's late deliveries) */
		Idle()
	   }
	:: atomic {
		t != 0 && is_export(j) && answer -> CommitExport(j, t, answer, ok); Invariants(); v = 0;
		Sent(1, answer);
		Idle()
	   }
	/* a failure report: an export that sent a write without an answer says
	 * outcome_unknown; anything else may be retryable or not */
	:: atomic {
		t != 0 ->
		if
		:: inconclusive -> Fail(j, t, true, C_UNKNOWN)
		:: !inconclusive -> Fail(j, t, true, C_OTHER)
		:: !inconclusive -> Fail(j, t, false, C_OTHER)
		fi;
		Invariants(); v = 0;
		Sent(2, false);
		Idle()
	   }
	/* asked to yield at a renewal (another owner waits, the time slice
	 * passed): the job handed back at a checkpoint */
	:: atomic {
		t != 0 && !is_export(j) && g_yields[j] < MAXYIELD -> Yield(j, t); Invariants(); v = 0;
		Sent(3, false);
		Idle()
	   }
	/* SIGTERM: the attempt handed back */
	:: atomic { t != 0 -> Fail(j, t, true, C_WORKER); Invariants(); v = 0; Idle() }
	/* kill -9 (the next claim is a new incarnation): nothing said, the
	 * lease expires; or a pause past the lease, the same attempt acting
	 * again later (a zombie) is the other branches after the expiry */
	:: atomic { t != 0 -> Idle() }
	od
}

/* The network delivers a worker's last request again, late: after the
 * worker went on, possibly after another attempt took over. */
active proctype Network() {
	byte w, j, t, v, n, k, i;
	bool ok;
	do
	:: atomic {
		g_dups < MAXDUP && (net_kind[0] != 0 || (NW > 1 && net_kind[NW - 1] != 0)) ->
		if
		:: net_kind[0] != 0 -> w = 0
		:: NW > 1 && net_kind[NW - 1] != 0 -> w = NW - 1
		fi;
		g_dups++;
		j = net_job[w]; t = net_tok[w];
		if
		:: net_kind[w] == 1 && !is_export(j) ->
			k = result[j];
			Commit(j, t, ok);
			/* a repeat is true exactly for the call that succeeded */
			assert(ok == (result[j] == t));
			assert(k == 0 || result[j] == k)
		:: net_kind[w] == 1 && is_export(j) -> CommitExport(j, t, net_refs[w], ok)
		:: net_kind[w] == 2 -> Fail(j, t, true, C_OTHER)
		:: net_kind[w] == 3 ->
			k = used[j];
			Yield(j, t);
			/* a late yield changes nothing: the attempt is over */
			assert(used[j] == k)
		fi;
		Invariants();
		/* no further late delivery: forget every copy */
		k = 0;
		do
		:: g_dups == MAXDUP && k < NW ->
			net_kind[k] = 0; net_job[k] = 0; net_tok[k] = 0; net_refs[k] = false; k++
		:: else -> break
		od;
		w = 0; j = 0; t = 0; v = 0; k = 0; ok = false
	   }
	od
}

/* remora.reconcile, run every second by the launcher */
active proctype Reconciler() {
	byte v, n, k, i;
	do
	:: atomic { Reconcile(); Invariants() }
	od
}

/* Abstract time: a live lease expires when its attempt did not renew in
 * time (a dead worker, a paused zombie, a renewal that came late). */
active proctype Clock() {
	do
	:: atomic { lease[0] == L_LIVE -> lease[0] = L_EXPIRED }
	:: atomic { NJ > 1 && lease[1] == L_LIVE -> lease[1] = L_EXPIRED }
	od
}

/* remora._coordination_lost (kind 1: TRUNCATE remora.leases, 2: TRUNCATE
 * remora.queue), or crash recovery / failover (kind 0), which empties the
 * marker's table with the others */
inline CoordinationLost(kind) {
	k = 0;
	do
	:: k < NJ ->
		if :: kind != 2 -> lease[k] = L_NONE :: else -> skip fi;
		if :: kind != 1 -> q[k] = false :: else -> skip fi;
		k++
	:: else -> break
	od;
	k = 0;
	marker = false
}

/* remora.staging_cleaned: the worker deleted the attempt's staging */
inline StagingCleaned(j, t) {
	g_cleaned[AT(j, t)] = true
}

/* remora.staging_to_clean hands out the staging of every attempt of a
 * finished job that did not commit (the committed one keeps its manifest
 * and members), and remora.staging_cleaned records it gone.  The delay of
 * one lease after the end (for zombies still writing) is time, abstracted
 * away: the property is that nothing cleaned can be committed. */
inline StagingToClean() {
	i = 0;
	do
	:: i < NJ ->
		if
		:: js[i] == SUCCEEDED || js[i] == FAILED || js[i] == CANCELLED ->
			k = 1;
			do
			:: k <= ftok[i] ->
				if
				:: att[AT(i, k)] != A_RUNNING && result[i] != k -> StagingCleaned(i, k)
				:: else -> skip
				fi;
				k++
			:: else -> break
			od
		:: else -> skip
		fi;
		i++
	:: else -> break
	od;
	i = 0;
	k = 0
}

/* The worker's sweep (remora.staging_to_clean, then remora.staging_cleaned);
 * left out with -DNOCLEAN (the lease-limit configuration) */
#ifndef NOCLEAN
active proctype Cleaner() {
	byte i, k, n;
	do
	:: atomic { StagingToClean(); Invariants() }
	od
}
#endif

/* Coordination loss: crash recovery or a failover to a synchronous standby
 * (every UNLOGGED table emptied), or a TRUNCATE of the leases or of the
 * queue (the trigger remora._coordination_lost removes the marker). */
active proctype Chaos() {
	byte k, a;
	do
	:: atomic {
		g_losses < MAXLOSS -> g_losses++;
		if
		:: a = 0
		:: a = 1
		:: a = 2
		fi;
		CoordinationLost(a);
		a = 0
	   }
	od
}

/* A user cancels each job at most once, at any moment. */
active proctype User() {
	byte n, k;
	bool done0, done1;
	do
	:: atomic { !done0 -> done0 = true; Cancel(0); Invariants() }
	:: atomic { NJ > 1 && !done1 -> done1 = true; Cancel(1); Invariants() }
	od
}

/* An admin decides on an export in outcome_unknown: verify, retry, fail. */
active proctype Admin() {
	byte n, k, a;
	do
	:: atomic {
		EXPORTJOB < NJ && g_resolves < MAXRESOLVE && js[EXPORTJOB] == UNKNOWN -> g_resolves++;
		if
		:: a = 0	/* verify (the owner may too) */
		:: a = 1	/* retry */
		:: a = 2	/* fail */
		fi;
		Resolve(EXPORTJOB, a);
		Invariants()
	   }
	od
}

/* remora._submit (remora_submit): a queued job with its queue entry */
inline Submit(j) {
	js[j] = QUEUED; maxa[j] = MAXATT; q[j] = true
}

/* remora._export (remora_export): an export of a succeeded job is a job of
 * its own, queued in dispatch mode (the exported job is not modelled: its
 * result is immutable) */
inline Export(j) {
	js[j] = QUEUED; maxa[j] = MAXATT; q[j] = true; mode[j] = M_DISPATCH
}

/* remora_submit and remora_export: every job starts queued, with its queue
 * entry and the marker (coordination state whole). */
init {
	byte k, w;
	atomic {
		k = 0;
		do
		:: k < NJ ->
			if
			:: is_export(k) -> Export(k)
			:: else -> Submit(k)
			fi;
			k++
		:: else -> break
		od;
		marker = true;
		w = 0;
		do
		:: w < NW -> run Worker(w); w++
		:: else -> break
		od
	}
}

/* Liveness (checked with weak fairness, spin -a -f): with finitely many
 * coordination losses, duplicates and decisions, and workers that keep
 * running, every job ends: succeeded, failed, cancelled, or (an export)
 * outcome_unknown awaiting a decision. */
ltl eventually_ended { <> [] all_ended }
