/*-------------------------------------------------------------------------
 *
 * main.c
 *	  remora-worker: a Remora worker outside the database server.  It runs
 *	  the same transfer engine as the background workers and talks to
 *	  PostgreSQL only through the SQL worker protocol, as a role that is a
 *	  member of remora_worker (doc/operator-guide.md, "Scaling out").
 *
 *	  remora-worker [--concurrency N] [--label TEXT] [--poll-only]
 *	                [--allow-plaintext] [CONNINFO]
 *
 * The loop waits on the engine's descriptor, the connection's socket (a
 * NOTIFY on remora_jobs: a job was queued or cancelled) and a pipe its
 * signal handlers write to, and then, each round:
 *
 *	  engine      move bytes (no transaction is open)
 *	  fence       abort attempts whose lease could not be renewed in time
 *	  connection  made again (backoff) when lost; the incarnation goes on,
 *	              or a new one starts if the old one was ended meanwhile
 *	  renew       every third of the lease, or at once after a cancel
 *	  finish      commit what succeeded, report what failed
 *	  checkpoint  at most once a second
 *	  claim       when there is room and a job was queued, or every 5 s
 *	  sweep       delete the staging of attempts that can no longer commit
 *	              and the objects of hard-deleted jobs, one at a time
 *
 * SIGTERM or SIGINT: hand the attempts back (remora.fail, retryable), end
 * the incarnation, exit 0.  SIGHUP: read the settings again (a new engine
 * once the current one is idle).
 *
 * Exit status: 0 stopped by a signal; 1 cannot run (settings refused,
 * engine); 2 usage; 3 the server was unreachable for GIVE_UP_MS; 4 the
 * connection string names another host without sslmode=require or
 * stricter, or a connection was TCP to another host without encryption
 * (conn.c), unless --allow-plaintext.
 *
 *-------------------------------------------------------------------------
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "engine/engine.h"
#include "worker/calls.h"
#include "worker/conn.h"
#include "worker/log.h"
#include "worker/runner.h"
#include "worker/settings.h"

#define EXIT_STOPPED     0
#define EXIT_CANNOT_RUN  1
#define EXIT_USAGE       2
#define EXIT_UNREACHABLE 3
#define EXIT_PLAINTEXT   4

#define CLAIM_POLL_MS 5000
#define CHECKPOINT_MS 1000
#define SWEEP_MS      5000
#define GIVE_UP_MS    (10 * 60 * 1000)

static int                   signal_pipe[2] = {-1, -1};
static volatile sig_atomic_t got_stop, got_reload;

static RemoraConn           conn;
static RemoraWorkerSettings settings;
static RemoraEngine        *engine;
static char                 incarnation[REMORA_UUID_LEN];
static bool                 incarnation_recorded;
static char                 host[256];
static const char          *label;
static int                  concurrency;  /* 0: the server's setting */
static bool                 more_waiting; /* the last claim found no room,
										   * or filled it */

/* the sweep in progress */
static RemoraTask *sweep_task;
static char        sweep_attempt[REMORA_UUID_LEN];
static int64_t     sweep_job;

static void
usage(FILE *out)
{
	fprintf(out,
			"remora-worker runs Remora's transfers outside the database "
			"server.\n\n"
			"Usage:\n"
			"  remora-worker [OPTION]... [CONNINFO]\n\n"
			"Options:\n"
			"  -c, --concurrency=N  attempts run at once (default: "
			"remora.worker_concurrency)\n"
			"  -l, --label=TEXT     a label shown in remora_workers\n"
			"      --poll-only      no LISTEN (behind a transaction pooler); "
			"look for jobs every %d s\n"
			"      --allow-plaintext  accept TCP without TLS to a host that "
			"is not this one\n"
			"                       (the settings carry the target store's "
			"credentials)\n"
			"  -V, --version        print the version and exit\n"
			"  -h, --help           show this help and exit\n\n"
			"CONNINFO is a libpq connection string or URI (PG* environment "
			"variables apply);\nthe role must be a member of remora_worker. "
			"Use sslmode=verify-full.\n\n"
			"Exit status: 0 stopped by SIGTERM or SIGINT, 1 cannot run, 2 "
			"usage error,\n3 the server was unreachable for %d minutes, 4 "
			"the connection was not TLS\n(and not to this host) without "
			"--allow-plaintext.\n",
			CLAIM_POLL_MS / 1000, GIVE_UP_MS / 60000);
}

static void
on_signal(int sig)
{
	int  save = errno;
	char c = 0;

	if (sig == SIGHUP)
		got_reload = true;
	else
		got_stop = true;
	if (write(signal_pipe[1], &c, 1) < 0)
		(void) 0; /* the pipe is full: a wake-up is pending anyway */
	errno = save;
}

static void
setup_signals(void)
{
	struct sigaction sa;

	if (pipe(signal_pipe) != 0)
	{
		remora_wlog("cannot make a pipe: %s", strerror(errno));
		exit(EXIT_CANNOT_RUN);
	}
	for (int i = 0; i < 2; i++)
		fcntl(signal_pipe[i], F_SETFL, O_NONBLOCK);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

static void
new_incarnation(void)
{
	unsigned char b[16];

	if (getrandom(b, sizeof(b), 0) != (ssize_t) sizeof(b))
	{
		remora_wlog("cannot read random bytes: %s", strerror(errno));
		exit(EXIT_CANNOT_RUN);
	}
	b[6] = (b[6] & 0x0f) | 0x40;
	b[8] = (b[8] & 0x3f) | 0x80;
	snprintf(incarnation, sizeof(incarnation),
			 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
			 "%02x%02x%02x%02x%02x%02x",
			 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10],
			 b[11], b[12], b[13], b[14], b[15]);
	incarnation_recorded = false;
}

/* ----------------------------------------------------------- settings */

/* What the attempts take from the settings (pointers into settings). */
static void
configure_runner(void)
{
	RemoraRunnerConfig rc;

	rc.lease_ms = settings.lease_ms;
	rc.hub_url = remora_setting(&settings, "hf_endpoint");
	rc.hf_token = remora_setting(&settings, "hf_token");
	rc.connections = atoi(remora_setting(&settings, "object_connections"));
	remora_runner_init(&conn, &rc);
}

static RemoraEngine *
make_engine(void)
{
	RemoraEngineConfig cfg;
	char               err[256];
	RemoraEngine      *e;

	remora_settings_engine_config(&settings, &cfg);
	e = remora_engine_new(&cfg, err, sizeof(err));
	if (e == NULL)
	{
		remora_wlog("cannot start the transfer engine: %s", err);
		exit(EXIT_CANNOT_RUN);
	}
	configure_runner();
	return e;
}

/* ------------------------------------------------------------- sweep */

static void
sweep(bool start)
{
	char *bucket = NULL, *prefix = NULL;
	char  err[256];

	if (sweep_task)
	{
		RemoraTaskState st = remora_task_state(sweep_task);
		bool            ok = st == REMORA_TASK_SUCCEEDED;

		if (st == REMORA_TASK_RUNNING)
			return;
		if (!ok)
			remora_wlog("job %" PRId64 ": could not delete %s: %s; tried again "
						"later",
						sweep_job,
						sweep_attempt[0] ? "staging objects" : "its objects",
						remora_task_error(sweep_task)->message);
		else
			remora_wlog("job %" PRId64 ": %s%s deleted", sweep_job,
						sweep_attempt[0] ? "staging of attempt "
										 : "its objects",
						sweep_attempt);
		remora_call_cleanup_done(&conn, sweep_attempt, sweep_job, ok);
		remora_task_free(sweep_task);
		sweep_task = NULL;
	}
	if (!start || !remora_call_next_cleanup(&conn, sweep_attempt, &sweep_job,
											&bucket, &prefix))
		return;
	sweep_task = remora_cleanup_start(engine, bucket, prefix, err, sizeof(err));
	if (sweep_task == NULL)
		remora_wlog("job %" PRId64 ": could not start a cleanup: %s", sweep_job,
					err);
	free(bucket);
	free(prefix);
}

/* --------------------------------------------------------------- claim */

/* attempts this incarnation runs at most */
static int
claim_limit(void)
{
	int limit = concurrency > 0 ? concurrency : settings.concurrency;

	if (limit < 1)
		limit = 1;
	return limit > REMORA_WORKER_MAX_ATTEMPTS ? REMORA_WORKER_MAX_ATTEMPTS
											  : limit;
}

static void
claim(void)
{
	int            limit = claim_limit();
	int            room;
	RemoraClaimRow rows[REMORA_WORKER_MAX_ATTEMPTS];
	int64_t        sent = remora_wclock_ms();
	int            n;

	if (!incarnation_recorded)
		return; /* claims only in a recorded incarnation */
	room = limit - remora_runner_count();
	if (room <= 0)
	{
		more_waiting = true; /* claim again once there is room */
		return;
	}
	n = remora_call_claim(&conn, incarnation, room, rows);
	for (int i = 0; i < n; i++)
	{
		remora_runner_start(engine, &rows[i], sent);
		free(rows[i].spec);
		free(rows[i].resume);
	}
	/* a full batch: there may be more */
	more_waiting = n == room;
}

/* ------------------------------------------------------- the connection */

/*
 * Connected, with an incarnation recorded?  After a new connection the
 * heartbeat tells whether the incarnation goes on; one ended meanwhile
 * (by an administrator, say) is replaced by a new one.
 */
static bool
ready(void)
{
	static uint64_t seen_generation;

	if (!remora_conn_ensure(&conn))
	{
		if (conn.plaintext_refused)
			exit(EXIT_PLAINTEXT); /* its leases lapse; said in the log */
		return false;
	}
	if (conn.generation != seen_generation && incarnation_recorded)
	{
		int hb = remora_call_heartbeat(&conn, incarnation);

		if (hb < 0)
			return false;
		if (hb == 0)
		{
			remora_wlog("incarnation %s was ended meanwhile", incarnation);
			new_incarnation();
		}
	}
	seen_generation = conn.generation;
	if (!incarnation_recorded)
	{
		incarnation_recorded =
			remora_call_start_incarnation(&conn, incarnation, host, label);
		if (!incarnation_recorded)
			return false;
		remora_wlog("incarnation %s started (host %s%s%s, concurrency %d)",
					incarnation, host, label ? ", label " : "",
					label ? label : "",
					concurrency > 0 ? concurrency : settings.concurrency);
	}
	return true;
}

static void
reload_settings(bool *changed)
{
	RemoraWorkerSettings s;

	if (!remora_settings_load(&conn, &s))
		return;
	if (remora_settings_equal(&s, &settings))
	{
		remora_settings_free(&s);
		return;
	}
	*changed = true;
	remora_settings_free(&settings);
	settings = s;
	remora_conn_set_lease(&conn, settings.lease_ms);
	configure_runner();
}

/* ---------------------------------------------------------------- stop */

static void
shut_down(void)
{
	const char *params[1] = {"500"};
	PGresult   *res;

	/* an attempt whose job row someone holds is left to its lease */
	res = remora_conn_exec(&conn, "setting a short lock_timeout",
						   "SELECT pg_catalog.set_config('lock_timeout', $1, "
						   "false)",
						   1, params);
	PQclear(res);
	remora_runner_hand_back();
	if (sweep_task)
		remora_task_free(sweep_task);
	if (incarnation_recorded)
		remora_call_end_incarnation(&conn, incarnation);
	remora_engine_free(engine);
	remora_wlog("stopped, incarnation %s", incarnation);
	remora_settings_free(&settings);
	if (conn.pg)
		PQfinish(conn.pg);
}

static int64_t
min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

/* Wait for the engine, the server or a signal, until deadline. */
static void
wait_events(int64_t deadline)
{
	struct pollfd p[3];
	int           n = 0;
	int64_t       left = deadline - remora_wclock_ms();
	char          buf[64];
	short         events;
	int           fd = remora_conn_wait_events(&conn, &events);

	p[n++] = (struct pollfd){signal_pipe[0], POLLIN, 0};
	p[n++] = (struct pollfd){remora_engine_fd(engine), POLLIN, 0};
	if (fd >= 0)
		p[n++] = (struct pollfd){fd, events, 0};
	if (left < 0)
		left = 0;
	(void) poll(p, n, (int) min64(left, 1000));
	while (read(signal_pipe[0], buf, sizeof(buf)) > 0)
		;
	if (n == 3 && !conn.connecting &&
		(p[2].revents & (POLLIN | POLLHUP | POLLERR)))
		remora_conn_read_notifies(&conn);
}

static void
run(void)
{
	int64_t next_renew = 0, next_checkpoint = 0, next_poll = 0;
	int64_t next_sweep = 0;
	bool    config_changed = false;

	while (!got_stop)
	{
		int64_t now, deadline;
		long    engine_timeout;
		bool    up;

		remora_engine_run(engine);
		remora_runner_fence();
		up = ready();
		/* unanswered while disconnected: those members move again */
		remora_runner_answer_lookups(engine);
		now = remora_wclock_ms();
		if (!up && conn.down_since_ms && now - conn.down_since_ms > GIVE_UP_MS)
		{
			remora_wlog("the server was unreachable for %d minutes; giving up",
						GIVE_UP_MS / 60000);
			exit(EXIT_UNREACHABLE);
		}
		if (up && got_reload)
		{
			got_reload = false;
			reload_settings(&config_changed);
			next_renew = 0;
		}
		if (up && (conn.cancelled || now >= next_renew))
		{
			conn.cancelled = false;
			next_renew = now + settings.lease_ms / 3;
			if (remora_call_heartbeat(&conn, incarnation) == 0)
			{
				/* its leases lapse, its attempts stop; claim anew */
				remora_wlog("incarnation %s was ended: its attempts stop",
							incarnation);
				new_incarnation();
				up = ready(); /* records the new one */
			}
			remora_runner_renew();
		}
		if (up)
			remora_runner_finish();
		now = remora_wclock_ms();
		if (up && now >= next_checkpoint)
		{
			remora_runner_checkpoint();
			next_checkpoint = now + CHECKPOINT_MS;
		}
		if (config_changed && remora_runner_count() == 0 && sweep_task == NULL)
		{
			remora_engine_free(engine);
			engine = make_engine();
			config_changed = false;
			remora_wlog("new settings in effect, incarnation %s", incarnation);
		}
		if (up && !config_changed &&
			(conn.woken || now >= next_poll ||
			 (more_waiting && remora_runner_count() < claim_limit())))
		{
			conn.woken = false;
			next_poll = now + CLAIM_POLL_MS;
			claim();
		}
		if (up && now >= next_sweep && (!config_changed || sweep_task))
		{
			sweep(!config_changed);
			next_sweep = now + (sweep_task ? 100 : SWEEP_MS);
		}

		now = remora_wclock_ms();
		deadline = now + 1000;
		if (up)
		{
			deadline = min64(deadline, next_renew);
			deadline = min64(deadline, next_poll);
			deadline = min64(deadline, next_sweep);
			if (conn.woken ||
				(more_waiting && remora_runner_count() < claim_limit()))
				deadline = now;
			if (remora_runner_count() > 0)
				deadline = min64(deadline, next_checkpoint);
		}
		else if (conn.connecting)
			deadline = min64(deadline, conn.connect_deadline_ms);
		else
			deadline = min64(deadline, conn.next_try_ms);
		deadline = min64(deadline, remora_runner_next_fence_ms());
		engine_timeout = remora_engine_timeout_ms(engine);
		if (engine_timeout >= 0)
			deadline = min64(deadline, now + engine_timeout);
		wait_events(deadline);
	}
}

/* Wait until connected: -1, or the exit status (stopped, unreachable). */
static int
connect_first(void)
{
	while (!remora_conn_ensure(&conn))
	{
		short         events;
		struct pollfd p = {remora_conn_wait_events(&conn, &events), 0, 0};

		if (conn.plaintext_refused)
			return EXIT_PLAINTEXT;
		if (got_stop)
			return EXIT_STOPPED;
		if (remora_wclock_ms() - conn.down_since_ms > GIVE_UP_MS)
		{
			remora_wlog("the server was unreachable for %d minutes; giving up",
						GIVE_UP_MS / 60000);
			return EXIT_UNREACHABLE;
		}
		p.events = events;
		(void) poll(&p, p.fd >= 0 ? 1 : 0, 100);
	}
	return -1;
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"concurrency", required_argument, NULL, 'c'},
		{"label", required_argument, NULL, 'l'},
		{"poll-only", no_argument, NULL, 'p'},
		{"allow-plaintext", no_argument, NULL, 'P'},
		{"version", no_argument, NULL, 'V'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0}};
	bool poll_only = false;
	int  c;

	while ((c = getopt_long(argc, argv, "c:l:Vh", opts, NULL)) != -1)
	{
		char *end;

		switch (c)
		{
			case 'c':
				concurrency = (int) strtol(optarg, &end, 10);
				if (*end != '\0' || concurrency < 1 ||
					concurrency > REMORA_WORKER_MAX_ATTEMPTS)
				{
					fprintf(stderr,
							"remora-worker: --concurrency must be a whole "
							"number from 1 to %d\n",
							REMORA_WORKER_MAX_ATTEMPTS);
					return EXIT_USAGE;
				}
				break;
			case 'l':
				label = optarg;
				break;
			case 'p':
				poll_only = true;
				break;
			case 'P':
				conn.allow_plaintext = true;
				break;
			case 'V':
				printf("remora-worker %s\n", REMORA_VERSION);
				return EXIT_STOPPED;
			case 'h':
				usage(stdout);
				return EXIT_STOPPED;
			default:
				fprintf(stderr, "Try \"remora-worker --help\".\n");
				return EXIT_USAGE;
		}
	}
	if (argc - optind > 1)
	{
		fprintf(stderr, "remora-worker: one connection string at most\n"
						"Try \"remora-worker --help\".\n");
		return EXIT_USAGE;
	}

	setup_signals();
	if (gethostname(host, sizeof(host)) != 0)
		snprintf(host, sizeof(host), "unknown");
	host[sizeof(host) - 1] = '\0';
	conn.conninfo = optind < argc ? argv[optind] : NULL;
	conn.listen = !poll_only;
	conn.lease_ms = 30000; /* until the settings are read */
	remora_wlog("remora-worker %s starting%s", REMORA_VERSION,
				poll_only ? " (poll only)" : "");

	/*
	 * The settings, once connected: a refusal (the connection stands) is
	 * final, a connection lost meanwhile is made again.
	 */
	do
	{
		int rc = connect_first();

		if (rc >= 0)
			return rc;
		if (remora_settings_load(&conn, &settings))
			break;
		if (conn.pg != NULL)
		{
			remora_wlog("cannot read the settings: the role must be a member "
						"of remora_worker, and the extension installed and up "
						"to date");
			return EXIT_CANNOT_RUN;
		}
	} while (true);
	remora_conn_set_lease(&conn, settings.lease_ms);
	engine = make_engine();
	new_incarnation();
	run();
	shut_down();
	return EXIT_STOPPED;
}
