/*-------------------------------------------------------------------------
 *
 * loop.c
 *	  The engine's event loop: one libcurl multi handle whose sockets live
 *	  in an epoll set, so that the host can wait on that one descriptor
 *	  together with its own events.
 *
 * curl tells us which sockets to watch (CURLMOPT_SOCKETFUNCTION) and when
 * to call it back without socket activity (CURLMOPT_TIMERFUNCTION).
 * remora_engine_run() takes what epoll reports ready, hands it to
 * curl_multi_socket_action(), and completes the requests that ended.  It
 * never blocks.
 *
 * A Request is one HTTP exchange.  It captures the response status, the
 * headers the engine needs (ETag, Last-Modified, Content-Range,
 * Content-Length, Retry-After) and, unless its owner streams the body
 * itself, up to REQ_BODY_LIMIT bytes of body for parsing.
 *
 *-------------------------------------------------------------------------
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "engine/engine_int.h"
#include "engine/source_uri.h"

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
	RemoraEngine      *engine = userp;
	struct epoll_event ev;

	(void) easy;
	memset(&ev, 0, sizeof(ev));
	ev.data.fd = s;
	if (what == CURL_POLL_REMOVE)
	{
		epoll_ctl(engine->epfd, EPOLL_CTL_DEL, s, NULL);
		curl_multi_assign(engine->multi, s, NULL);
		return 0;
	}
	ev.events = ((what & CURL_POLL_IN) ? EPOLLIN : 0) |
				((what & CURL_POLL_OUT) ? EPOLLOUT : 0);
	if (socketp == NULL)
	{
		/* first time: add, and remember that we did */
		if (epoll_ctl(engine->epfd, EPOLL_CTL_ADD, s, &ev) != 0 &&
			errno == EEXIST)
			epoll_ctl(engine->epfd, EPOLL_CTL_MOD, s, &ev);
		curl_multi_assign(engine->multi, s, engine);
	}
	else if (epoll_ctl(engine->epfd, EPOLL_CTL_MOD, s, &ev) != 0 &&
			 errno == ENOENT)
		epoll_ctl(engine->epfd, EPOLL_CTL_ADD, s, &ev);
	return 0;
}

/* curl: call me back in timeout_ms (-1: never) */
static int
timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
	RemoraEngine *engine = userp;

	(void) multi;
	engine->timer_ms = timeout_ms;
	engine->timer_deadline = timeout_ms < 0 ? -1 : remora_now_ms() + timeout_ms;
	return 0;
}

RemoraEngine *
remora_engine_new(const RemoraEngineConfig *cfg, char *errbuf, size_t errlen)
{
	RemoraEngine *engine = calloc(1, sizeof(RemoraEngine));

	if (engine == NULL)
	{
		snprintf(errbuf, errlen, "out of memory");
		return NULL;
	}
	engine->epfd = -1;
	if (!remora_s3_target_parse(&cfg->target, &engine->base_url, &engine->host,
								&engine->https, errbuf, errlen))
	{
		remora_engine_free(engine);
		return NULL;
	}

	engine->path_style = cfg->target.path_style;
	engine->region = remora_xstrdup(cfg->target.region);
	engine->access_key_id = remora_xstrdup(cfg->target.access_key_id);
	engine->secret_access_key = remora_xstrdup(cfg->target.secret_access_key);
	engine->part_size = cfg->part_size;
	if (cfg->part_size < 64 * 1024 || cfg->part_size % 1024 != 0)
	{
		/* a chunk from curl must never span more than one buffer boundary */
		snprintf(errbuf, errlen,
				 "the part size must be a multiple of 1 kB, at least 64 kB");
		remora_engine_free(engine);
		return NULL;
	}
	engine->connect_timeout_ms = cfg->connect_timeout_ms;
	engine->stall_timeout_ms = cfg->stall_timeout_ms;
	engine->user_agent =
		remora_xstrdup(cfg->user_agent ? cfg->user_agent : "remora");
	engine->timer_ms = -1;
	engine->timer_deadline = -1;
	engine->wake_deadline = -1;

	engine->policy =
		remora_netpolicy_new(cfg->allow_networks, cfg->deny_networks,
							 cfg->allow_ports, errbuf, errlen);
	if (engine->policy == NULL)
	{
		remora_engine_free(engine);
		return NULL;
	}

	engine->epfd = epoll_create1(EPOLL_CLOEXEC);
	engine->multi = curl_multi_init();
	if (engine->epfd < 0 || engine->multi == NULL || engine->host == NULL ||
		engine->base_url == NULL || engine->region == NULL)
	{
		snprintf(errbuf, errlen, "could not set up the transfer engine");
		remora_engine_free(engine);
		return NULL;
	}
	curl_multi_setopt(engine->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
	curl_multi_setopt(engine->multi, CURLMOPT_SOCKETDATA, engine);
	curl_multi_setopt(engine->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
	curl_multi_setopt(engine->multi, CURLMOPT_TIMERDATA, engine);
	/* a few connections per host are enough and keep servers polite */
	curl_multi_setopt(engine->multi, CURLMOPT_MAX_HOST_CONNECTIONS, 16L);
	return engine;
}

void
remora_engine_free(RemoraEngine *engine)
{
	if (engine == NULL)
		return;
	remora_task_unlink_all(engine);
	while (engine->requests)
		remora_req_cancel(engine->requests);
	if (engine->multi)
		curl_multi_cleanup(engine->multi);
	if (engine->epfd >= 0)
		close(engine->epfd);
	remora_netpolicy_free(engine->policy);
	free(engine->base_url);
	free(engine->host);
	free(engine->region);
	free(engine->access_key_id);
	if (engine->secret_access_key)
		memset(engine->secret_access_key, 0, strlen(engine->secret_access_key));
	free(engine->secret_access_key);
	free(engine->user_agent);
	free(engine);
}

int
remora_engine_fd(const RemoraEngine *engine)
{
	return engine->epfd;
}

long
remora_engine_timeout_ms(const RemoraEngine *engine)
{
	int64_t deadline = engine->timer_deadline;
	int64_t left;

	if (engine->wake_deadline >= 0 &&
		(deadline < 0 || engine->wake_deadline < deadline))
		deadline = engine->wake_deadline;
	if (deadline < 0)
		return -1;
	left = deadline - remora_now_ms();
	return left < 0 ? 0 : (long) left;
}

void
remora_engine_wake_at(RemoraEngine *engine, int64_t when_ms)
{
	if (engine->wake_deadline < 0 || when_ms < engine->wake_deadline)
		engine->wake_deadline = when_ms;
}

/* Take a request off the multi handle and the engine's list. */
static void
unlink_request(Request *req)
{
	RemoraEngine *engine = req->engine;

	if (!req->linked)
		return;
	curl_multi_remove_handle(engine->multi, req->easy);
	if (req->prev)
		req->prev->next = req->next;
	else
		engine->requests = req->next;
	if (req->next)
		req->next->prev = req->prev;
	req->prev = req->next = NULL;
	req->linked = false;
}

static void
free_request(Request *req)
{
	curl_easy_cleanup(req->easy);
	curl_slist_free_all(req->headers);
	free(req->body);
	free(req->link_next);
	free(req);
}

/* Hand finished transfers to their owners. */
static void
complete_finished(RemoraEngine *engine)
{
	CURLMsg *msg;
	int      left;

	while ((msg = curl_multi_info_read(engine->multi, &left)) != NULL)
	{
		Request *req = NULL;

		if (msg->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **) &req);
		if (req == NULL)
			continue;
		curl_easy_getinfo(req->easy, CURLINFO_RESPONSE_CODE, &req->status);
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
remora_engine_run(RemoraEngine *engine)
{
	struct epoll_event events[64];
	int                n;
	int                running;

	n = epoll_wait(engine->epfd, events, 64, 0);
	for (int i = 0; i < n; i++)
	{
		int flags = 0;

		if (events[i].events & (EPOLLIN | EPOLLHUP))
			flags |= CURL_CSELECT_IN;
		if (events[i].events & EPOLLOUT)
			flags |= CURL_CSELECT_OUT;
		if (events[i].events & EPOLLERR)
			flags |= CURL_CSELECT_ERR;
		curl_multi_socket_action(engine->multi, events[i].data.fd, flags,
								 &running);
	}
	if (engine->timer_deadline >= 0 &&
		remora_now_ms() >= engine->timer_deadline)
	{
		engine->timer_deadline = -1;
		curl_multi_socket_action(engine->multi, CURL_SOCKET_TIMEOUT, 0,
								 &running);
	}
	complete_finished(engine);
	/* the tasks say again when they want to be woken */
	engine->wake_deadline = -1;
	remora_task_pump_all(engine);
}

/* ------------------------------------------------------------ requests */

/* A header value that is a non-negative decimal number. */
static bool
header_number(const char *v, size_t vlen, long long *out)
{
	char  tmp[32];
	char *end;

	if (vlen == 0 || vlen >= sizeof(tmp) || v[0] < '0' || v[0] > '9')
		return false;
	memcpy(tmp, v, vlen);
	tmp[vlen] = '\0';
	*out = strtoll(tmp, &end, 10);
	return *end == '\0' && *out >= 0;
}

/*
 * The target of a Link header's rel="next" (RFC 8288), as the Hugging Face
 * Hub paginates: <https://…?cursor=…>; rel="next".  Only the first link
 * with that relation counts.
 */
static void
link_next(Request *req, const char *v, size_t vlen)
{
	const char *end = v + vlen;

	while (v < end && req->link_next == NULL)
	{
		const char *lt = memchr(v, '<', end - v);
		const char *gt = lt ? memchr(lt, '>', end - lt) : NULL;
		const char *next_lt;
		size_t      plen;

		if (gt == NULL)
			return;
		next_lt = memchr(gt, '<', end - gt);
		plen = (next_lt ? next_lt : end) - gt;
		/* the parameters between '>' and the next link */
		for (const char *p = gt; p + 8 <= gt + plen; p++)
			if ((p + 10 <= gt + plen &&
				 strncasecmp(p, "rel=\"next\"", 10) == 0) ||
				strncasecmp(p, "rel=next", 8) == 0)
			{
				req->link_next = strndup(lt + 1, gt - lt - 1);
				break;
			}
		v = gt + plen;
	}
}

static size_t
header_cb(char *buf, size_t size, size_t nitems, void *userdata)
{
	Request    *req = userdata;
	size_t      len = size * nitems;
	const char *colon = memchr(buf, ':', len);
	size_t      nlen;
	const char *v;
	size_t      vlen;
	char       *dst = NULL;
	size_t      dstlen = 0;

	/* a new response (redirect, 100 Continue): forget the previous one */
	if (len >= 5 && strncmp(buf, "HTTP/", 5) == 0)
	{
		req->etag[0] = req->last_modified[0] = req->content_range[0] = '\0';
		req->content_length = -1;
		req->retry_after = -1;
		return len;
	}
	if (colon == NULL)
		return len;
	nlen = colon - buf;
	v = colon + 1;
	vlen = len - nlen - 1;
	while (vlen > 0 && (*v == ' ' || *v == '\t'))
		v++, vlen--;
	while (vlen > 0 &&
		   (v[vlen - 1] == '\r' || v[vlen - 1] == '\n' || v[vlen - 1] == ' '))
		vlen--;

	if (nlen == 4 && strncasecmp(buf, "etag", 4) == 0)
		dst = req->etag, dstlen = sizeof(req->etag);
	else if (nlen == 13 && strncasecmp(buf, "last-modified", 13) == 0)
		dst = req->last_modified, dstlen = sizeof(req->last_modified);
	else if (nlen == 13 && strncasecmp(buf, "content-range", 13) == 0)
		dst = req->content_range, dstlen = sizeof(req->content_range);
	else if (nlen == 14 && strncasecmp(buf, "content-length", 14) == 0)
	{
		long long cl;

		if (header_number(v, vlen, &cl))
			req->content_length = cl;
	}
	else if (nlen == 4 && strncasecmp(buf, "link", 4) == 0)
		link_next(req, v, vlen);
	else if (nlen == 11 && strncasecmp(buf, "retry-after", 11) == 0)
	{
		/* delta-seconds only; an HTTP-date is treated as absent */
		long long ra;

		if (header_number(v, vlen, &ra))
			req->retry_after = ra > 86400 ? 86400 : (long) ra;
	}
	if (dst && vlen < dstlen)
	{
		/* these travel into checkpoints (jsonb) and messages */
		memcpy(dst, v, vlen);
		dst[vlen] = '\0';
		remora_utf8_scrub(dst);
	}
	return len;
}

static size_t
write_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	Request *req = userdata;
	size_t   len = size * nmemb;

	if (req->on_data)
		return req->on_data(req, ptr, len);

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
remora_req_new(RemoraEngine *engine, void *owner, RequestDone done)
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
	req->engine = engine;
	req->owner = owner;
	req->done = done;
	req->content_length = -1;
	req->retry_after = -1;

	curl_easy_setopt(req->easy, CURLOPT_PRIVATE, (char *) req);
	curl_easy_setopt(req->easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(req->easy, CURLOPT_HEADERFUNCTION, header_cb);
	curl_easy_setopt(req->easy, CURLOPT_HEADERDATA, req);
	curl_easy_setopt(req->easy, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(req->easy, CURLOPT_WRITEDATA, req);
	curl_easy_setopt(req->easy, CURLOPT_USERAGENT, engine->user_agent);
	curl_easy_setopt(req->easy, CURLOPT_CONNECTTIMEOUT_MS,
					 engine->connect_timeout_ms);
	/* a transfer that moves no byte for the stall timeout has failed */
	curl_easy_setopt(req->easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(req->easy, CURLOPT_LOW_SPEED_TIME,
					 (engine->stall_timeout_ms + 999) / 1000);
	curl_easy_setopt(req->easy, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(req->easy, CURLOPT_FOLLOWLOCATION, 0L);
	return req;
}

/*
 * The policy decision on the address actually connected to: every
 * connection of a source request, redirects included, comes through here.
 */
static curl_socket_t
opensocket_cb(void *clientp, curlsocktype purpose,
			  struct curl_sockaddr *address)
{
	Request *req = clientp;

	(void) purpose;
	if (!remora_netpolicy_allows(req->engine->policy, &address->addr,
								 req->policy_why, sizeof(req->policy_why)))
	{
		req->policy_denied = true;
		return CURL_SOCKET_BAD;
	}
	return socket(address->family, address->socktype, address->protocol);
}

/*
 * The same decision again for every request, on the connection it is about
 * to be sent on: curl may hand a request a pooled connection that another
 * request opened (one to the target store, which the policy does not
 * judge), and then no socket is opened for it.
 */
static int
prereq_cb(void *clientp, char *primary_ip, char *local_ip, int primary_port,
		  int local_port)
{
	Request                *req = clientp;
	struct sockaddr_storage ss;
	struct sockaddr_in     *in4 = (struct sockaddr_in *) &ss;
	struct sockaddr_in6    *in6 = (struct sockaddr_in6 *) &ss;

	(void) local_ip;
	(void) local_port;
	memset(&ss, 0, sizeof(ss));
	if (inet_pton(AF_INET, primary_ip, &in4->sin_addr) == 1)
	{
		in4->sin_family = AF_INET;
		in4->sin_port = htons((uint16_t) primary_port);
	}
	else if (inet_pton(AF_INET6, primary_ip, &in6->sin6_addr) == 1)
	{
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t) primary_port);
	}
	if (!remora_netpolicy_allows(req->engine->policy, (struct sockaddr *) &ss,
								 req->policy_why, sizeof(req->policy_why)))
	{
		req->policy_denied = true;
		return CURL_PREREQFUNC_ABORT;
	}
	return CURL_PREREQFUNC_OK;
}

/* Options for requests to user-supplied locations. */
void
remora_req_set_source_options(Request *req)
{
	curl_easy_setopt(req->easy, CURLOPT_OPENSOCKETFUNCTION, opensocket_cb);
	curl_easy_setopt(req->easy, CURLOPT_OPENSOCKETDATA, req);
	curl_easy_setopt(req->easy, CURLOPT_PREREQFUNCTION, prereq_cb);
	curl_easy_setopt(req->easy, CURLOPT_PREREQDATA, req);
	/* a proxy would make the policy judge the proxy, not the source */
	curl_easy_setopt(req->easy, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(req->easy, CURLOPT_PROXY, "");
}

bool
remora_req_start(Request *req)
{
	RemoraEngine *engine = req->engine;

	if (req->headers)
		curl_easy_setopt(req->easy, CURLOPT_HTTPHEADER, req->headers);
	if (curl_multi_add_handle(engine->multi, req->easy) != CURLM_OK)
		return false;
	req->next = engine->requests;
	if (engine->requests)
		engine->requests->prev = req;
	engine->requests = req;
	req->linked = true;
	return true;
}

/* Stop a request (if running) and free it.  done() is not called. */
void
remora_req_cancel(Request *req)
{
	unlink_request(req);
	free_request(req);
}
