/*-------------------------------------------------------------------------
 *
 * main.c
 *	  remora-worker: a Remora worker outside the database server.  It runs
 *	  the same transfer engine as the background workers and talks to
 *	  PostgreSQL only through the SQL worker protocol, as a role that is a
 *	  member of remora_worker (doc/operator-guide.md,
 *	  "Scaling out: workers on other hosts").
 *
 *	  remora-worker [--concurrency N] [--label TEXT] [--poll-only]
 *	                [--allow-plaintext] [CONNINFO]
 *
 * The loop waits on the engine's descriptor, the connection's socket (a
 * NOTIFY on remora_jobs: a job was queued or cancelled) and a pipe its
 * signal handlers write to, makes the connection again (with backoff) when
 * it was lost, and runs the runner's round (src/runner/round.c: renew,
 * finish, checkpoint, claim, sweep), telling it whether it is connected
 * and what it heard.
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
#include "runner/runner.h"
#include "worker/conn.h"
#include "worker/log.h"
#include "worker/pq_host.h"
#include "worker/settings.h"

#define EXIT_STOPPED     0
#define EXIT_CANNOT_RUN  1
#define EXIT_USAGE       2
#define EXIT_UNREACHABLE 3
#define EXIT_PLAINTEXT   4

#define CLAIM_POLL_MS 5000 /* the runner's, said in --help */
#define GIVE_UP_MS    (10 * 60 * 1000)

static int                   signal_pipe[2] = {-1, -1};
static volatile sig_atomic_t got_stop, got_reload;

static RemoraConn           conn;
static RemoraWorkerSettings settings;
static PqHost               pq_host = {&conn, &settings};
static char                 host[256];
static const char          *label;
static int                  concurrency; /* 0: the server's setting */

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

/* ----------------------------------------------------------- settings */

/* What the runner takes from the settings (it copies them). */
static RemoraRunnerConfig
runner_config(void)
{
	RemoraRunnerConfig rc;

	memset(&rc, 0, sizeof(rc));
	rc.lease_ms = settings.lease_ms;
	rc.concurrency = concurrency > 0 ? concurrency : settings.concurrency;
	rc.connections = atoi(remora_setting(&settings, "object_connections"));
	rc.hub_url = remora_setting(&settings, "hf_endpoint");
	rc.hf_token = remora_setting(&settings, "hf_token");
	rc.kind = "external";
	rc.host_name = host;
	rc.label = label;
	return rc;
}

static void
reload_settings(void)
{
	RemoraWorkerSettings s;
	RemoraRunnerConfig   rc;

	if (!remora_settings_load(&conn, &s))
		return;
	if (remora_settings_equal(&s, &settings))
	{
		remora_settings_free(&s);
		return;
	}
	remora_settings_free(&settings);
	settings = s;
	remora_conn_set_lease(&conn, settings.lease_ms);
	rc = runner_config();
	remora_runner_reconfigure(&rc, true);
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
	remora_runner_stop();
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
	int64_t       left = deadline - remora_clock_ms();
	char          buf[64];
	short         events;
	int           fd = remora_conn_wait_events(&conn, &events);

	p[n++] = (struct pollfd){signal_pipe[0], POLLIN, 0};
	p[n++] =
		(struct pollfd){remora_engine_fd(remora_runner_engine()), POLLIN, 0};
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
	uint64_t seen_generation = conn.generation;

	while (!got_stop)
	{
		RemoraRound in;
		int64_t     now, deadline;

		memset(&in, 0, sizeof(in));
		in.connected = remora_conn_ensure(&conn);
		if (conn.plaintext_refused)
			exit(EXIT_PLAINTEXT); /* its leases lapse; said in the log */
		in.reconnected = in.connected && conn.generation != seen_generation;
		seen_generation = conn.generation;
		now = remora_clock_ms();
		if (!in.connected && conn.down_since_ms &&
			now - conn.down_since_ms > GIVE_UP_MS)
		{
			remora_wlog("the server was unreachable for %d minutes; giving up",
						GIVE_UP_MS / 60000);
			exit(EXIT_UNREACHABLE);
		}
		if (in.connected && got_reload)
		{
			got_reload = false;
			reload_settings();
		}
		in.renew_now = conn.cancelled;
		in.claim_now = conn.woken;
		conn.cancelled = conn.woken = false;
		deadline = remora_runner_round(&in);
		if (!in.connected && conn.connecting)
			deadline = min64(deadline, conn.connect_deadline_ms);
		else if (!in.connected)
			deadline = min64(deadline, conn.next_try_ms);
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
		if (remora_clock_ms() - conn.down_since_ms > GIVE_UP_MS)
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
	bool               poll_only = false;
	int                c;
	RemoraRunnerConfig rc;

	while ((c = getopt_long(argc, argv, "c:l:Vh", opts, NULL)) != -1)
	{
		char *end;

		switch (c)
		{
			case 'c':
				concurrency = (int) strtol(optarg, &end, 10);
				if (*end != '\0' || concurrency < 1 ||
					concurrency > REMORA_RUNNER_MAX_ATTEMPTS)
				{
					fprintf(stderr,
							"remora-worker: --concurrency must be a whole "
							"number from 1 to %d\n",
							REMORA_RUNNER_MAX_ATTEMPTS);
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
		int status = connect_first();

		if (status >= 0)
			return status;
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
	rc = runner_config();
	remora_runner_init(&remora_pq_host_ops, &pq_host, &rc);
	run();
	shut_down();
	return EXIT_STOPPED;
}
