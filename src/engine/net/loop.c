/*-------------------------------------------------------------------------
 *
 * loop.c
 *	  The engine's event loop: one libcurl multi handle whose sockets live
 *	  in an epoll set, so that the host can wait on that one descriptor
 *	  together with its own events.
 *
 * curl tells us which sockets to watch (CURLMOPT_SOCKETFUNCTION) and when
 * to call it back without socket activity (CURLMOPT_TIMERFUNCTION).
 * remora_loop_run() takes what epoll reports ready, hands it to
 * curl_multi_socket_action(), completes the requests that ended, then
 * calls the hooks its clients registered (the engine pumps its jobs
 * there).  It never blocks.
 *
 * A Request is one HTTP exchange.  It captures the response status, the
 * headers (parsed by http_headers.c) and, unless its owner streams the body
 * itself, up to REQ_BODY_LIMIT bytes of body for parsing.  The loop knows
 * nothing of S3, transfers, sets or the Hub.
 *
 * Every request verifies its peer's certificate and host name against the
 * configured CAs (remora.ca_file, remora.ca_path, or the system's bundle)
 * with TLS 1.2 at least, and goes direct unless its owner asks for the
 * egress proxy (remora_req_set_source_options, remora_req_set_proxy): no
 * proxy is ever taken from the environment.
 *
 *-------------------------------------------------------------------------
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem, strcasestr */
#endif
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "engine/net/loop.h"

static void rate_resume(RemoraLoop *loop);

int64_t
remora_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* curl: watch (or stop watching) a socket (the type is curl's callback's) */
static int
/* cppcheck-suppress constParameter */
socket_cb(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
	RemoraLoop        *loop = userp;
	struct epoll_event ev;

	(void) easy;
	memset(&ev, 0, sizeof(ev));
	ev.data.fd = s;
	if (what == CURL_POLL_REMOVE)
	{
		epoll_ctl(loop->epfd, EPOLL_CTL_DEL, s, NULL);
		curl_multi_assign(loop->multi, s, NULL);
		return 0;
	}
	ev.events = ((what & CURL_POLL_IN) ? EPOLLIN : 0) |
				((what & CURL_POLL_OUT) ? EPOLLOUT : 0);
	if (socketp == NULL)
	{
		/* first time: add, and remember that we did */
		if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, s, &ev) != 0 &&
			errno == EEXIST)
			epoll_ctl(loop->epfd, EPOLL_CTL_MOD, s, &ev);
		curl_multi_assign(loop->multi, s, loop);
	}
	else if (epoll_ctl(loop->epfd, EPOLL_CTL_MOD, s, &ev) != 0 &&
			 errno == ENOENT)
		epoll_ctl(loop->epfd, EPOLL_CTL_ADD, s, &ev);
	return 0;
}

/* curl: call me back in timeout_ms (-1: never) */
static int
timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
	RemoraLoop *loop = userp;

	(void) multi;
	loop->timer_ms = timeout_ms;
	loop->timer_deadline = timeout_ms < 0 ? -1 : remora_now_ms() + timeout_ms;
	return 0;
}

bool
remora_loop_init(RemoraLoop *loop, const char *user_agent,
				 long connect_timeout_ms, long stall_timeout_ms,
				 const RemoraNetPolicy *policy)
{
	memset(loop, 0, sizeof(*loop));
	loop->timer_ms = -1;
	loop->timer_deadline = -1;
	loop->wake_deadline = -1;
	loop->connect_timeout_ms = connect_timeout_ms;
	loop->stall_timeout_ms = stall_timeout_ms;
	loop->policy = policy;
	loop->user_agent = strdup(user_agent ? user_agent : "remora");
	loop->epfd = epoll_create1(EPOLL_CLOEXEC);
	loop->multi = curl_multi_init();
	if (loop->user_agent == NULL || loop->epfd < 0 || loop->multi == NULL)
		return false;
	curl_multi_setopt(loop->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
	curl_multi_setopt(loop->multi, CURLMOPT_SOCKETDATA, loop);
	curl_multi_setopt(loop->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
	curl_multi_setopt(loop->multi, CURLMOPT_TIMERDATA, loop);
	return true;
}

/*
 * Connections to one host at once, across every request of the loop (0: no
 * cap).  Requests above it wait in curl's queue, unconnected: the stall
 * timeout (CURLOPT_LOW_SPEED_*) only counts while a request transfers, and
 * the connect timeout starts when it leaves the queue.
 */
void
remora_loop_set_host_cap(RemoraLoop *loop, int max_per_host)
{
	curl_multi_setopt(loop->multi, CURLMOPT_MAX_HOST_CONNECTIONS,
					  (long) (max_per_host > 0 ? max_per_host : 0));
}

/* Cancel every request (their done() is not called) and close the loop. */
void
remora_loop_destroy(RemoraLoop *loop)
{
	while (loop->requests)
		remora_req_cancel(loop->requests);
	if (loop->multi)
		curl_multi_cleanup(loop->multi);
	if (loop->epfd >= 0)
		close(loop->epfd);
	free(loop->user_agent);
	free(loop->ca_file);
	free(loop->ca_path);
	free(loop->http_proxy);
	free(loop->https_proxy);
	free(loop->no_proxy);
	memset(loop, 0, sizeof(*loop));
	loop->epfd = -1;
}

/* Call hook(arg) after every run, once finished requests are handed over. */
bool
remora_loop_add_hook(RemoraLoop *loop, RemoraLoopHook hook, void *arg)
{
	if (loop->nhooks == REMORA_LOOP_HOOKS)
		return false;
	loop->hooks[loop->nhooks] = hook;
	loop->hook_args[loop->nhooks++] = arg;
	return true;
}

long
remora_loop_timeout_ms(const RemoraLoop *loop)
{
	int64_t deadline = loop->timer_deadline;
	int64_t left;

	if (loop->wake_deadline >= 0 &&
		(deadline < 0 || loop->wake_deadline < deadline))
		deadline = loop->wake_deadline;
	if (deadline < 0)
		return -1;
	left = deadline - remora_now_ms();
	return left < 0 ? 0 : (long) left;
}

/* A client wants to run again at this monotonic time (a retry). */
void
remora_loop_wake_at(RemoraLoop *loop, int64_t when_ms)
{
	if (loop->wake_deadline < 0 || when_ms < loop->wake_deadline)
		loop->wake_deadline = when_ms;
}

/* Take a request off the multi handle and the engine's list. */
static void
unlink_request(Request *req)
{
	RemoraLoop *loop = req->loop;

	if (!req->linked)
		return;
	curl_multi_remove_handle(loop->multi, req->easy);
	if (req->prev)
		req->prev->next = req->next;
	else
		loop->requests = req->next;
	if (req->next)
		req->next->prev = req->prev;
	req->prev = req->next = NULL;
	req->linked = false;
}

static void
free_request(Request *req)
{
	if (req->again_free)
		req->again_free(req->again_arg);
	curl_easy_cleanup(req->easy);
	curl_slist_free_all(req->headers);
	free(req->body);
	remora_http_headers_free(&req->hdr);
	free(req);
}

/* Hand finished transfers to their owners. */
static void
complete_finished(RemoraLoop *loop)
{
	CURLMsg *msg;
	int      left;

	while ((msg = curl_multi_info_read(loop->multi, &left)) != NULL)
	{
		Request *req = NULL;

		if (msg->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **) &req);
		if (req == NULL)
			continue;
		curl_easy_getinfo(req->easy, CURLINFO_RESPONSE_CODE, &req->status);
		if (msg->data.result == CURLE_OK && req->again && req->again(req))
			continue; /* sent again: done() waits for that answer */
		{
			CURLcode    rc = msg->data.result;
			RequestDone done = req->done;

			/*
			 * Off the multi handle and the list first: done() may start new
			 * requests, or cancel every request of its owner.
			 */
			unlink_request(req);
			if (done)
				done(req, rc);
			free_request(req);
		}
	}
}

void
remora_loop_run(RemoraLoop *loop)
{
	struct epoll_event events[64];
	int                n;
	int                running;

	n = epoll_wait(loop->epfd, events, 64, 0);
	for (int i = 0; i < n; i++)
	{
		int flags = 0;

		if (events[i].events & (EPOLLIN | EPOLLHUP))
			flags |= CURL_CSELECT_IN;
		if (events[i].events & EPOLLOUT)
			flags |= CURL_CSELECT_OUT;
		if (events[i].events & EPOLLERR)
			flags |= CURL_CSELECT_ERR;
		curl_multi_socket_action(loop->multi, events[i].data.fd, flags,
								 &running);
	}
	if (loop->timer_deadline >= 0 && remora_now_ms() >= loop->timer_deadline)
	{
		loop->timer_deadline = -1;
		curl_multi_socket_action(loop->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	}
	complete_finished(loop);
	/* the clients say again when they want to be woken */
	loop->wake_deadline = -1;
	rate_resume(loop);
	for (int i = 0; i < loop->nhooks; i++)
		loop->hooks[i](loop->hook_args[i]);
}

/* ---------------------------------------------------------- rate caps */

/*
 * Byte-rate caps are a token bucket of our own, checked where the loop
 * hands a body to its owner, and not libcurl's CURLOPT_MAX_RECV_SPEED_LARGE:
 * that option caps one easy handle, over windows of its own that restart
 * every few seconds, and may overshoot by a receive buffer (ours are 256
 * KiB) each window.  A task's cap is shared by all its connections (its
 * ranged GETs, a set's members), whose number changes as they start and
 * end; split over eight handles the overshoot alone would be a third of a
 * 2 MiB/s cap.  One bucket for all of them holds the sum within a chunk,
 * and a changed cap takes effect at the next chunk.
 */

/* A tenth of a second's worth of bytes may be taken at once. */
static double
rate_burst(const RemoraRate *rate)
{
	return (double) rate->max_rate / 10.0;
}

static void
rate_refill(RemoraRate *rate, int64_t now)
{
	double burst = rate_burst(rate);

	if (now > rate->at_ms)
		rate->tokens +=
			(double) rate->max_rate * (double) (now - rate->at_ms) / 1000.0;
	rate->at_ms = now;
	if (rate->tokens > burst)
		rate->tokens = burst;
}

/*
 * Set a cap (0: none).  The bucket keeps its debt, so that lowering a cap
 * and raising it again never lets more through than either allowed.
 */
void
remora_rate_set(RemoraRate *rate, int64_t max_rate)
{
	int64_t now = remora_now_ms();

	if (max_rate < 0)
		max_rate = 0;
	if (rate->max_rate == 0)
	{
		/* a new cap starts with a full burst */
		rate->max_rate = max_rate;
		rate->tokens = rate_burst(rate);
		rate->at_ms = now;
		return;
	}
	rate_refill(rate, now);
	rate->max_rate = max_rate;
	if (rate->tokens > rate_burst(rate))
		rate->tokens = rate_burst(rate);
}

/* May len bytes be taken now?  If so, they are taken (maybe into debt). */
static bool
rate_take(RemoraRate *rate, size_t len)
{
	if (rate->max_rate <= 0)
		return true;
	rate_refill(rate, remora_now_ms());
	if (rate->tokens <= 0)
		return false;
	rate->tokens -= (double) len;
	return true;
}

/*
 * The first request its cap paused that may go on now; for those that may
 * not yet, be woken when they may.
 */
static Request *
rate_next_resumable(RemoraLoop *loop)
{
	int64_t now = remora_now_ms();

	for (Request *req = loop->requests; req; req = req->next)
	{
		RemoraRate *rate = req->rate;

		if (!req->rate_paused)
			continue;
		if (rate == NULL || rate->max_rate <= 0)
			return req;
		rate_refill(rate, now);
		if (rate->tokens > 0)
			return req;
		remora_loop_wake_at(loop, now + 1 +
									  (int64_t) (-rate->tokens * 1000.0 /
												 (double) rate->max_rate));
	}
	return NULL;
}

/*
 * Resume the requests their cap paused once it has refilled.  Resuming
 * hands a body's held bytes to its owner at once (inside curl_easy_pause),
 * which may pause it again or cancel any request: the list is searched
 * again after each.  Bounded, as a run of the loop must be.
 */
static void
rate_resume(RemoraLoop *loop)
{
	Request *req = NULL;
	int      i;

	for (i = 0; i < 1000 && (req = rate_next_resumable(loop)) != NULL; i++)
	{
		req->rate_paused = false;
		curl_easy_pause(req->easy, CURLPAUSE_CONT);
	}
	if (req != NULL)
		remora_loop_wake_at(loop, remora_now_ms()); /* the rest next run */
}

/* ------------------------------------------------------------ requests */

static size_t
header_cb(char *buf, size_t size, size_t nitems, void *userdata)
{
	Request *req = userdata;

	remora_http_header_line(&req->hdr, buf, size * nitems);
	return size * nitems;
}

static size_t
write_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	Request *req = userdata;
	size_t   len = size * nmemb;

	if (req->rate && !rate_take(req->rate, len))
	{
		/*
		 * curl keeps these bytes and hands them again on resume.  Woken when
		 * the bucket will have refilled: a pause inside a hook (an owner's
		 * resume) comes after the loop's own look at the paused requests.
		 */
		req->rate_paused = true;
		remora_loop_wake_at(req->loop,
							remora_now_ms() + 1 +
								(int64_t) (-req->rate->tokens * 1000.0 /
										   (double) req->rate->max_rate));
		return CURL_WRITEFUNC_PAUSE;
	}
	if (req->on_data)
	{
		size_t taken = req->on_data(req, ptr, len);

		/* the owner paused: these bytes come again, and count then */
		if (taken == CURL_WRITEFUNC_PAUSE && req->rate &&
			req->rate->max_rate > 0)
			req->rate->tokens += (double) len;
		return taken;
	}

	if (req->body_len + len > REQ_BODY_LIMIT)
	{
		req->body_truncated = true;
		len = REQ_BODY_LIMIT - req->body_len;
	}
	if (req->body_len + len + 1 > req->body_cap)
	{
		size_t cap = req->body_cap ? req->body_cap * 2 : 4096;
		char  *grown;

		while (cap < req->body_len + len + 1)
			cap *= 2;
		grown = realloc(req->body, cap);
		if (grown == NULL)
			return 0; /* curl fails the transfer: out of memory */
		req->body = grown;
		req->body_cap = cap;
	}
	memcpy(req->body + req->body_len, ptr, len);
	req->body_len += len;
	req->body[req->body_len] = '\0';
	return size * nmemb;
}

Request *
remora_req_new(RemoraLoop *loop, void *owner, RequestDone done)
{
	Request *req = calloc(1, sizeof(Request));

	if (req == NULL)
		return NULL;
	req->easy = curl_easy_init();
	if (req->easy == NULL)
	{
		free(req);
		return NULL;
	}
	req->loop = loop;
	req->owner = owner;
	req->done = done;
	remora_http_headers_init(&req->hdr);

	curl_easy_setopt(req->easy, CURLOPT_PRIVATE, (char *) req);
	curl_easy_setopt(req->easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(req->easy, CURLOPT_HEADERFUNCTION, header_cb);
	curl_easy_setopt(req->easy, CURLOPT_HEADERDATA, req);
	curl_easy_setopt(req->easy, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(req->easy, CURLOPT_WRITEDATA, req);
	curl_easy_setopt(req->easy, CURLOPT_USERAGENT, loop->user_agent);
	curl_easy_setopt(req->easy, CURLOPT_CONNECTTIMEOUT_MS,
					 loop->connect_timeout_ms);
	/* a transfer that moves no byte for the stall timeout has failed */
	curl_easy_setopt(req->easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(req->easy, CURLOPT_LOW_SPEED_TIME,
					 (loop->stall_timeout_ms + 999) / 1000);
	curl_easy_setopt(req->easy, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(req->easy, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(req->easy, CURLOPT_ERRORBUFFER, req->curl_error);
	curl_easy_setopt(req->easy, CURLOPT_SSLVERSION,
					 (long) CURL_SSLVERSION_TLSv1_2);
	/* the same trust for an https:// proxy as for the servers behind it */
	curl_easy_setopt(req->easy, CURLOPT_PROXY_SSLVERSION,
					 (long) CURL_SSLVERSION_TLSv1_2);
	if (loop->ca_file)
	{
		curl_easy_setopt(req->easy, CURLOPT_CAINFO, loop->ca_file);
		curl_easy_setopt(req->easy, CURLOPT_PROXY_CAINFO, loop->ca_file);
	}
	if (loop->ca_path)
	{
		curl_easy_setopt(req->easy, CURLOPT_CAPATH, loop->ca_path);
		curl_easy_setopt(req->easy, CURLOPT_PROXY_CAPATH, loop->ca_path);
	}
	/* direct unless the owner asks for the proxy; never the environment's */
	curl_easy_setopt(req->easy, CURLOPT_PROXY, "");
	return req;
}

bool
remora_req_start(Request *req)
{
	RemoraLoop *loop = req->loop;

	if (req->headers)
		curl_easy_setopt(req->easy, CURLOPT_HTTPHEADER, req->headers);
	if (curl_multi_add_handle(loop->multi, req->easy) != CURLM_OK)
		return false;
	req->next = loop->requests;
	if (loop->requests)
		loop->requests->prev = req;
	loop->requests = req;
	req->linked = true;
	return true;
}

/*
 * The request again, as it was but with headers (taken over): its answer
 * so far is forgotten.  Its body, if any, is its caller's, still alive
 * since done() has not been called.  False: it could not be, and it is
 * off the loop (the caller ends it).
 */
bool
remora_req_resend(Request *req, struct curl_slist *headers)
{
	RemoraLoop *loop = req->loop;

	curl_multi_remove_handle(loop->multi, req->easy);
	curl_slist_free_all(req->headers);
	req->headers = headers;
	curl_easy_setopt(req->easy, CURLOPT_HTTPHEADER, req->headers);
	remora_http_headers_free(&req->hdr);
	remora_http_headers_init(&req->hdr);
	req->status = 0;
	req->body_len = 0;
	req->body_truncated = false;
	if (req->body)
		req->body[0] = '\0';
	req->curl_error[0] = '\0';
	return curl_multi_add_handle(loop->multi, req->easy) == CURLM_OK;
}

/* Stop a request (if running) and free it.  done() is not called. */
void
remora_req_cancel(Request *req)
{
	unlink_request(req);
	free_request(req);
}

/* Cancel every request of owner (a job that fails, aborts or goes away). */
void
remora_req_cancel_owner(RemoraLoop *loop, const void *owner)
{
	Request *req = loop->requests;

	while (req)
	{
		Request *next = req->next;

		if (req->owner == owner)
			remora_req_cancel(req);
		req = next;
	}
}
