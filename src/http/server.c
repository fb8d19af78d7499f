/*-------------------------------------------------------------------------
 *
 * server.c
 *	  libmicrohttpd glue of the remora HTTP server: listening, TLS,
 *	  connections and their deadlines, request bodies, the static web
 *	  client, and handing each request to the API.
 *
 * A thread per connection (at most remora.http_max_connections), each
 * idle connection closed after remora.http_client_timeout.  A client
 * that trickles its request a byte at a time is never idle, so besides,
 * a request must arrive whole (TLS handshake, headers and body) within
 * remora.http_client_timeout of the connection's start or of the end of
 * the connection's previous answer: the worker's tick shuts down the
 * sockets of the connections past that deadline (see "connections"
 * below).  One client address holds at most the connection limit less a
 * reserve (a quarter), so that other addresses can still be served while
 * one fills its share with slow connections.  A request body is refused
 * with 413 when its Content-Length is above remora.http_max_body, and when
 * a chunked body grows past it (read to its end, unkept; the connection
 * closed past eight times the limit).  Who asks is decided by auth.c once
 * the request has arrived whole; then /api/ goes to api.c, /metrics to
 * api_admin.c, anything else to the static files.  Static files come from
 * a table compiled into the library (assets.c): there is no file system
 * path to escape from.
 *
 * The top of the folder: it calls the others, none calls it.  Nothing
 * here calls PostgreSQL's server code; see http.h.
 *
 *-------------------------------------------------------------------------
 */
#include "http/request.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/*
 * A client connection, from its accept to its close: reading_since is
 * when the request now being read began to arrive (0: none is being read,
 * an answer is being made or sent).
 */
typedef struct Connection
{
	int                fd;
	time_t             reading_since;
	struct Connection *prev;
	struct Connection *next;
} Connection;

static struct MHD_Daemon *daemon_handle = NULL;
static pthread_mutex_t    connections_lock = PTHREAD_MUTEX_INITIALIZER;
static Connection        *connections = NULL;

/* --- the static web client -------------------------------------------------
 */

static void
serve_static(RemoraRequest *req)
{
	const char *path = strcmp(req->path, "/") == 0 ? "/index.html" : req->path;

	if (strcmp(req->method, "GET") != 0 && strcmp(req->method, "HEAD") != 0)
	{
		remora_respond(req, 405, "text/plain; charset=utf-8",
					   "method not allowed\n", 19, NULL, NULL, NULL);
		return;
	}
	for (const RemoraAsset *a = remora_assets; a->path; a++)
	{
		if (strcmp(a->path, path) == 0)
		{
			struct MHD_Response *response = MHD_create_response_from_buffer(
				a->len, (void *) a->data, MHD_RESPMEM_PERSISTENT);

			if (response == NULL)
				return;
			MHD_add_response_header(response, "Content-Type", a->type);
			MHD_add_response_header(response, "Cache-Control", "no-cache");
			remora_add_security_headers(req, response,
										strncmp(a->type, "text/html", 9) == 0);
			remora_respond_response(req, 200, response);
			return;
		}
	}
	remora_respond(req, 404, "text/plain; charset=utf-8", "not found\n", 10,
				   NULL, NULL, NULL);
}

/* --- the client's address --------------------------------------------------
 */

static enum MHD_Result
join_forwarded(void *cls, enum MHD_ValueKind kind, const char *key,
			   const char *value)
{
	RemoraBuf *all = cls;

	if (key && value && strcasecmp(key, "X-Forwarded-For") == 0)
	{
		if (all->len > 0)
			remora_buf_puts(all, ",");
		remora_buf_puts(all, value);
	}
	return MHD_YES;
}

/*
 * req->address: the peer's address, or the client's as X-Forwarded-For
 * gives it when the peer is a trusted proxy (forwarded.c).  Every
 * X-Forwarded-For header counts, in order: a proxy may add its own line
 * rather than extend the one it received.
 */
static void
client_address(RemoraRequest *req, const struct sockaddr *peer)
{
	RemoraBuf forwarded = {0};

	MHD_get_connection_values(req->conn, MHD_HEADER_KIND, join_forwarded,
							  &forwarded);
	remora_http_client_address(
		peer, forwarded.len > 0 && !forwarded.failed ? forwarded.data : NULL,
		req->address, sizeof(req->address));
	remora_buf_free(&forwarded);
}

/* --- connections -------------------------------------------------------------
 *
 * libmicrohttpd resets a connection's idle timeout at every byte, and has
 * no deadline for a whole request, so this file keeps one: each
 * connection is listed from its start to its close (notify_connection),
 * the time its current request began to arrive is noted, and the
 * worker's tick (remora_http_tick, once a second) shuts down the socket of
 * any connection still reading a request after remora.http_client_timeout.
 * The connection's own thread then sees the end of its input and closes
 * the connection as if the client had gone.
 *
 * The descriptor is shut down, never closed, and only while the
 * connection is listed: libmicrohttpd reports the close (and the entry is
 * unlisted under connections_lock) before it closes the descriptor, so a
 * descriptor number reused by a newer connection is never touched.
 */

static void
notify_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
				  enum MHD_ConnectionNotificationCode toe)
{
	Connection *c;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED)
	{
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);

		*socket_context = NULL;
		if (ci == NULL)
			return;
		c = calloc(1, sizeof(Connection));
		if (c == NULL)
		{
			/* a connection without a deadline is not served */
			shutdown(ci->connect_fd, SHUT_RDWR);
			return;
		}
		c->fd = ci->connect_fd;
		c->reading_since = time(NULL);
		pthread_mutex_lock(&connections_lock);
		c->next = connections;
		if (connections)
			connections->prev = c;
		connections = c;
		pthread_mutex_unlock(&connections_lock);
		*socket_context = c;
	}
	else if (toe == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context)
	{
		c = *socket_context;
		pthread_mutex_lock(&connections_lock);
		if (c->prev)
			c->prev->next = c->next;
		else
			connections = c->next;
		if (c->next)
			c->next->prev = c->prev;
		pthread_mutex_unlock(&connections_lock);
		free(c);
		*socket_context = NULL;
	}
}

/*
 * The connection has read its request whole (reading: false), or is free
 * to read the next one (reading: true): stop or restart its deadline.
 */
static void
connection_reading(struct MHD_Connection *conn, bool reading)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	Connection *c = ci ? ci->socket_context : NULL;

	if (c == NULL)
		return;
	pthread_mutex_lock(&connections_lock);
	c->reading_since = reading ? time(NULL) : 0;
	pthread_mutex_unlock(&connections_lock);
}

/* Cut off the connections that have been reading a request for too long. */
static void
connections_expire(void)
{
	time_t now = time(NULL);
	int    limit = remora_http_config.client_timeout_s;

	pthread_mutex_lock(&connections_lock);
	for (Connection *c = connections; c; c = c->next)
	{
		if (c->reading_since != 0 && now - c->reading_since >= limit)
		{
			shutdown(c->fd, SHUT_RDWR);
			c->reading_since = 0;
		}
	}
	pthread_mutex_unlock(&connections_lock);
}

/* --- libmicrohttpd callbacks ------------------------------------------------
 */

static void
request_free(RemoraRequest *req)
{
	if (req->db)
		remora_pool_release(req->pool, req->db);
	remora_pool_unref(req->pool);
	remora_buf_free(&req->body);
	free(req->path);
	free(req);
}

static void
completed(void *cls, struct MHD_Connection *conn, void **con_cls,
		  enum MHD_RequestTerminationCode toe)
{
	if (*con_cls)
		request_free(*con_cls);
	*con_cls = NULL;
	/* a kept-alive connection has as long for its next request */
	connection_reading(conn, true);
}

/* --- requests RFC 9112 calls ambiguous -----------------------------------
 *
 * A request that a proxy in front of us could read another way is answered
 * 400 and its connection closed (RFC 9112, section 6.3): two
 * Content-Length headers (libmicrohttpd takes the first), Content-Length
 * with Transfer-Encoding (it takes the chunks), a NUL in the request line
 * (it ends the URI there, and takes the rest as absent).  (A NUL in a
 * header's value ends it too, and leaves no trace to find: the value is
 * taken as it ends.)
 * libmicrohttpd 0.9.75 hands out the request line's URI as a C string, so
 * a NUL in it shows only as a gap: the URI (as the URI log callback sees
 * it, before decoding) ends before the space that precedes the version,
 * both pointers into the request as read.
 */
static __thread const char *request_uri;
static __thread size_t      request_uri_len;

static void *
log_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
	request_uri = uri;
	request_uri_len = strlen(uri);
	return NULL;
}

typedef struct Framing
{
	int  lengths;  /* Content-Length headers */
	bool transfer; /* a Transfer-Encoding header */
} Framing;

static enum MHD_Result
framing_of(void *cls, enum MHD_ValueKind kind, const char *key,
		   const char *value)
{
	Framing *f = cls;

	if (strcasecmp(key, "Content-Length") == 0)
		f->lengths++;
	else if (strcasecmp(key, "Transfer-Encoding") == 0)
		f->transfer = true;
	return MHD_YES;
}

/* Why the request is ambiguous, or NULL. */
static const char *
ambiguous(struct MHD_Connection *conn, const char *version)
{
	Framing f = {0};

	if (request_uri && version > request_uri &&
		(size_t) (version - request_uri) < 65536 &&
		(size_t) (version - request_uri) != request_uri_len + 1)
		return "The request line holds a NUL byte.";
	MHD_get_connection_values(conn, MHD_HEADER_KIND, framing_of, &f);
	if (f.lengths > 1)
		return "The request has more than one Content-Length header.";
	if (f.lengths > 0 && f.transfer)
		return "The request has both Content-Length and Transfer-Encoding.";
	return NULL;
}

static enum MHD_Result
handle(void *cls, struct MHD_Connection *conn, const char *url,
	   const char *method, const char *version, const char *upload_data,
	   size_t *upload_data_size, void **con_cls)
{
	RemoraRequest *req = *con_cls;
	int            max_body = atomic_load(&remora_http_config.max_body);

	if (req == NULL)
	{
		const union MHD_ConnectionInfo *ci;
		const char                     *length;
		const char                     *why;

		req = calloc(1, sizeof(RemoraRequest));
		if (req == NULL)
			return MHD_NO;
		req->conn = conn;
		/* HEAD is answered as GET is; libmicrohttpd sends no body */
		req->method = strcmp(method, "HEAD") == 0 ? "GET" : method;
		req->path = strdup(url);
		req->tls = remora_http_config.tls_cert_pem != NULL;
		if (req->path == NULL)
		{
			free(req);
			return MHD_NO;
		}
		ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
		client_address(req, ci ? ci->client_addr : NULL);
		*con_cls = req;
		if ((why = ambiguous(conn, version)) != NULL)
		{
			req->close = true;
			remora_respond_error(req, 400, "08P01", "ambiguous request", why,
								 "Send one framing of the body, and no NUL "
								 "byte.",
								 NULL);
			return MHD_YES;
		}
		length = remora_req_header(req, "Content-Length");
		if (length &&
			strtoull(length, NULL, 10) > (unsigned long long) max_body)
		{
			req->too_large = true;
			remora_respond_error(req, 413, "54000", "request body too large",
								 NULL, "Send at most remora.http_max_body.",
								 NULL);
		}
		return MHD_YES;
	}
	if (*upload_data_size > 0)
	{
		/*
		 * A body past the limit (chunked, or longer than declared) is read
		 * to its end and dropped, then answered 413: libmicrohttpd queues
		 * no answer before the request has arrived whole.  One that goes
		 * on past eight times the limit is hung up on: reading it would
		 * only cost us, up to remora.http_client_timeout.
		 */
		if (req->too_large ||
			req->body.len + *upload_data_size > (size_t) max_body)
		{
			req->too_large = true;
			req->dropped += *upload_data_size;
		}
		else
			remora_buf_append(&req->body, upload_data, *upload_data_size);
		*upload_data_size = 0;
		if (req->dropped > 8 * (size_t) max_body)
			return MHD_NO;
		return req->body.failed ? MHD_NO : MHD_YES;
	}
	if (req->too_large)
		remora_respond_error(req, 413, "54000", "request body too large", NULL,
							 "Send at most remora.http_max_body.", NULL);
	if (req->answered)
		return MHD_YES;

	/* the request has arrived whole: its answer may take its time */
	connection_reading(conn, false);
	if (remora_http_authenticate(req))
	{
		if (strncmp(req->path, "/api/", 5) == 0 ||
			strcmp(req->path, "/api") == 0)
			remora_api_dispatch(req);
		else if (strcmp(req->path, "/metrics") == 0)
			remora_api_metrics(req);
		else
			serve_static(req);
	}
	if (!req->answered)
		remora_respond_error(req, 500, "XX000", "no answer", NULL, NULL, NULL);
	return MHD_YES;
}

/*
 * Decode %HH in paths and query arguments, except %00: a NUL would cut a
 * string short ("/app.js%00.html" is not "/app.js"), so it stays as
 * written and matches nothing.
 */
static size_t
unescape(void *cls, struct MHD_Connection *conn, char *s)
{
	char *r = s, *w = s;

	while (*r)
	{
		int hi, lo;

		if (r[0] == '%' && (hi = remora_hex_value(r[1])) >= 0 &&
			(lo = remora_hex_value(r[2])) >= 0 && (hi | lo) != 0)
		{
			*w++ = (char) (hi * 16 + lo);
			r += 3;
		}
		else
			*w++ = *r++;
	}
	*w = '\0';
	return (size_t) (w - s);
}

static void
log_error(void *cls, const char *fmt, va_list ap)
{
	/* libmicrohttpd's own complaints (bad TLS handshakes...): not logged */
}

bool
remora_http_start(char *err, size_t errlen)
{
	RemoraHttpConfig *cfg = &remora_http_config;
	/* poll(), not select(): no limit on descriptor numbers */
	unsigned int flags = MHD_USE_THREAD_PER_CONNECTION |
						 MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
						 MHD_USE_ERROR_LOG;
	struct MHD_OptionItem opts[16];
	int                   n = 0;
	int                   per_address;

	if (cfg->addr.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	if (cfg->tls_cert_pem)
	{
		flags |= MHD_USE_TLS;
		opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0,
											cfg->tls_cert_pem};
		opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0,
											cfg->tls_key_pem};
	}
	opts[n++] = (struct MHD_OptionItem){MHD_OPTION_SOCK_ADDR, 0, &cfg->addr};
	opts[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_TIMEOUT,
										cfg->client_timeout_s, NULL};
	opts[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT,
										cfg->max_connections, NULL};
	/*
	 * One address (or one proxy: every client behind it) may hold all but
	 * a quarter of the connections; 0 would mean no limit.
	 */
	per_address = cfg->max_connections - cfg->max_connections / 4;
	opts[n++] =
		(struct MHD_OptionItem){MHD_OPTION_PER_IP_CONNECTION_LIMIT,
								per_address > 0 ? per_address : 1, NULL};
	opts[n++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_CONNECTION,
										(intptr_t) notify_connection, NULL};
	opts[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_MEMORY_LIMIT,
										64 * 1024, NULL};
	opts[n++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_COMPLETED,
										(intptr_t) completed, NULL};
	opts[n++] = (struct MHD_OptionItem){MHD_OPTION_UNESCAPE_CALLBACK,
										(intptr_t) unescape, NULL};
	opts[n++] = (struct MHD_OptionItem){MHD_OPTION_URI_LOG_CALLBACK,
										(intptr_t) log_uri, NULL};
	opts[n++] = (struct MHD_OptionItem){MHD_OPTION_EXTERNAL_LOGGER,
										(intptr_t) log_error, NULL};
	opts[n++] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};

	remora_http_set_stopping(false);
	daemon_handle = MHD_start_daemon(flags, 0, NULL, NULL, handle, NULL,
									 MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
	if (daemon_handle == NULL)
	{
		snprintf(err, errlen, "%s",
				 cfg->tls_cert_pem
					 ? "could not listen, or the TLS certificate and key "
					   "were not accepted"
					 : "could not listen");
		return false;
	}
	return true;
}

void
remora_http_stop(void)
{
	if (daemon_handle == NULL)
		return;
	remora_http_set_stopping(true);
	MHD_stop_daemon(daemon_handle);
	daemon_handle = NULL;
	remora_sessions_shutdown();
}

void
remora_http_tick(void)
{
	connections_expire();
	remora_sessions_tick();
	remora_signin_save();
}
