/*-------------------------------------------------------------------------
 *
 * server.c
 *	  libmicrohttpd glue of the remora HTTP server: listening, TLS, request
 *	  bodies, who the caller is, the static web client, responses.
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
 * one fills its share with slow connections.  A request
 * body is refused with 413 when its Content-Length is above
 * remora.http_max_body, and the connection dropped when a chunked body
 * grows past it.  Who asks:
 *	  - the session cookie "remora_session", if it names a live session;
 *		then every method but GET and HEAD must carry the session's CSRF
 *		token in the header X-CSRF-Token (403 otherwise);
 *	  - else, on /api/ only, HTTP Basic credentials, checked like a
 *		sign-in (and throttled the same way).  No answer ever asks for Basic
 *		(no WWW-Authenticate: Basic), so a browser never stores such
 *		credentials for a page to reuse.
 *	  - a state-changing request whose Origin header names another site is
 *		refused whatever it carries.
 * Static files come from a table compiled into the library (assets.c):
 * there is no file system path to escape from.
 *
 * Nothing here calls PostgreSQL's server code; see http.h.
 *
 *-------------------------------------------------------------------------
 */
#include "http/request.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/evp.h>

RemoraHttpConfig remora_http_config;

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
static atomic_bool        stopping = false;
static pthread_mutex_t    stop_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t     stop_cond = PTHREAD_COND_INITIALIZER;

/* --- the listening address ---------------------------------------------- */

/*
 * Parse remora.http_listen ("host:port", "[v6]:port"); the host must be an
 * address or a name that resolves.  *loopback: every address it stands for
 * is a loopback address (127.0.0.0/8, ::1).
 */
bool
remora_http_parse_listen(const char *listen, RemoraHttpConfig *cfg,
						 bool *loopback, char *err, size_t errlen)
{
	char            host[256];
	const char     *colon, *port;
	struct addrinfo hints, *res = NULL;
	int             rc;
	char           *end;
	long            portno;

	*loopback = false;
	if (listen[0] == '[')
	{
		const char *close = strchr(listen, ']');

		if (close == NULL || close[1] != ':' ||
			(size_t) (close - listen - 1) >= sizeof(host))
		{
			snprintf(err, errlen, "expected \"[address]:port\"");
			return false;
		}
		memcpy(host, listen + 1, close - listen - 1);
		host[close - listen - 1] = '\0';
		port = close + 2;
	}
	else
	{
		colon = strrchr(listen, ':');
		if (colon == NULL || (size_t) (colon - listen) >= sizeof(host))
		{
			snprintf(err, errlen, "expected \"host:port\"");
			return false;
		}
		memcpy(host, listen, colon - listen);
		host[colon - listen] = '\0';
		port = colon + 1;
	}
	portno = strtol(port, &end, 10);
	if (*port == '\0' || *end != '\0' || portno < 1 || portno > 65535)
	{
		snprintf(err, errlen, "invalid port \"%s\"", port);
		return false;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE;
	rc = getaddrinfo(host[0] && strcmp(host, "*") != 0 ? host : NULL, port,
					 &hints, &res);
	if (rc != 0 || res == NULL)
	{
		snprintf(err, errlen, "could not resolve \"%s\": %s", host,
				 gai_strerror(rc));
		return false;
	}
	memcpy(&cfg->addr, res->ai_addr, res->ai_addrlen);
	cfg->addrlen = res->ai_addrlen;
	*loopback = true;
	for (struct addrinfo *a = res; a; a = a->ai_next)
	{
		if (a->ai_family == AF_INET)
		{
			const struct sockaddr_in *in =
				(const struct sockaddr_in *) a->ai_addr;

			if ((ntohl(in->sin_addr.s_addr) >> 24) != 127)
				*loopback = false;
		}
		else if (a->ai_family == AF_INET6)
		{
			const struct sockaddr_in6 *in6 =
				(const struct sockaddr_in6 *) a->ai_addr;

			if (!IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr))
				*loopback = false;
		}
		else
			*loopback = false;
	}
	freeaddrinfo(res);
	return true;
}

/* --- responses ----------------------------------------------------------- */

void
remora_add_security_headers(RemoraRequest *req, struct MHD_Response *response,
							bool html)
{
	MHD_add_response_header(response, "X-Content-Type-Options", "nosniff");
	MHD_add_response_header(response, "Referrer-Policy", "no-referrer");
	MHD_add_response_header(response, "X-Frame-Options", "DENY");
	MHD_add_response_header(response, "Cross-Origin-Resource-Policy",
							"same-origin");
	if (html)
		MHD_add_response_header(
			response, "Content-Security-Policy",
			"default-src 'self'; script-src 'self'; style-src 'self'; "
			"img-src 'self' data:; connect-src 'self'; object-src 'none'; "
			"base-uri 'none'; form-action 'self'; frame-ancestors 'none'");
	if (req->tls)
		MHD_add_response_header(response, "Strict-Transport-Security",
								"max-age=31536000");
}

void
remora_respond_response(RemoraRequest *req, int status,
						struct MHD_Response *response)
{
	if (req->answered || response == NULL)
	{
		if (response)
			MHD_destroy_response(response);
		return;
	}
	req->answered = true;
	MHD_queue_response(req->conn, status, response);
	MHD_destroy_response(response);
}

void
remora_respond(RemoraRequest *req, int status, const char *type,
			   const char *body, size_t len, const char *etag,
			   const char *set_cookie, const char *location)
{
	struct MHD_Response *response;

	response = MHD_create_response_from_buffer(len, (void *) body,
											   MHD_RESPMEM_MUST_COPY);
	if (response == NULL)
		return;
	if (type)
		MHD_add_response_header(response, "Content-Type", type);
	if (etag)
		MHD_add_response_header(response, "ETag", etag);
	if (set_cookie)
		MHD_add_response_header(response, "Set-Cookie", set_cookie);
	if (location)
		MHD_add_response_header(response, "Location", location);
	if (strncmp(req->path, "/api/", 5) == 0)
		MHD_add_response_header(response, "Cache-Control", "no-store");
	remora_add_security_headers(req, response,
								type && strncmp(type, "text/html", 9) == 0);
	remora_respond_response(req, status, response);
}

/*
 * A JSON answer; a GET's 200 carries an ETag (a digest of the body), and is
 * answered 304 without a body when the client already has it.
 */
void
remora_respond_json(RemoraRequest *req, int status, const RemoraBuf *body)
{
	char etag[48] = "";

	if (body->failed)
	{
		remora_respond_error(req, 500, "53200", "out of memory", NULL, NULL,
							 NULL);
		return;
	}
	if (status == 200 && strcmp(req->method, "GET") == 0)
	{
		unsigned char md[EVP_MAX_MD_SIZE];
		unsigned int  mdlen = 0;
		const char   *inm = remora_req_header(req, "If-None-Match");

		EVP_Digest(body->data ? body->data : "", body->len, md, &mdlen,
				   EVP_sha256(), NULL);
		etag[0] = '"';
		for (int i = 0; i < 20; i++)
			snprintf(etag + 1 + 2 * i, 3, "%02x", md[i]);
		strcat(etag, "\"");
		if (inm && strstr(inm, etag) != NULL)
		{
			remora_respond(req, 304, NULL, "", 0, etag, NULL, NULL);
			return;
		}
	}
	remora_respond(req, status, "application/json; charset=utf-8",
				   body->data ? body->data : "", body->len,
				   etag[0] ? etag : NULL, NULL, NULL);
}

void
remora_respond_error(RemoraRequest *req, int status, const char *sqlstate,
					 const char *message, const char *detail, const char *hint,
					 const char *field)
{
	RemoraBuf            b = {0};
	struct MHD_Response *response;

	remora_buf_puts(&b, "{\"error\":");
	remora_buf_json_string_html(&b, message);
	remora_buf_puts(&b, ",\"sqlstate\":");
	remora_buf_json_string_html(&b, sqlstate);
	if (detail)
	{
		remora_buf_puts(&b, ",\"detail\":");
		remora_buf_json_string_html(&b, detail);
	}
	if (hint)
	{
		remora_buf_puts(&b, ",\"hint\":");
		remora_buf_json_string_html(&b, hint);
	}
	if (field)
	{
		remora_buf_puts(&b, ",\"field\":");
		remora_buf_json_string_html(&b, field);
	}
	remora_buf_puts(&b, "}");
	if (b.failed)
	{
		remora_buf_free(&b);
		return;
	}
	response =
		MHD_create_response_from_buffer(b.len, b.data, MHD_RESPMEM_MUST_COPY);
	remora_buf_free(&b);
	if (response == NULL)
		return;
	MHD_add_response_header(response, "Content-Type",
							"application/json; charset=utf-8");
	MHD_add_response_header(response, "Cache-Control", "no-store");
	if (status == 503 || status == 429)
	{
		char secs[16];

		snprintf(secs, sizeof(secs), "%d",
				 req->retry_after > 0 ? req->retry_after : 5);
		MHD_add_response_header(response, "Retry-After", secs);
	}
	remora_add_security_headers(req, response, false);
	remora_respond_response(req, status, response);
}

const char *
remora_req_arg(RemoraRequest *req, const char *name)
{
	return MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, name);
}

const char *
remora_req_header(RemoraRequest *req, const char *name)
{
	return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

void
remora_session_cookie(RemoraRequest *req, char *out, size_t len, const char *id)
{
	if (id)
		snprintf(out, len,
				 "remora_session=%s; Path=/; HttpOnly; SameSite=Strict%s", id,
				 req->tls ? "; Secure" : "");
	else
		snprintf(out, len,
				 "remora_session=; Path=/; HttpOnly; SameSite=Strict; "
				 "Max-Age=0%s",
				 req->tls ? "; Secure" : "");
}

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

/* --- who asks --------------------------------------------------------------
 */

static bool
state_changing(const char *method)
{
	return strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0 &&
		   strcmp(method, "OPTIONS") != 0;
}

/*
 * Does the Origin header, if any, name this server?  Browsers send it with
 * every cross-site state-changing request.
 */
static bool
same_origin(RemoraRequest *req)
{
	const char *origin = remora_req_header(req, "Origin");
	const char *host = remora_req_header(req, "Host");
	const char *rest;

	if (origin == NULL)
		return true;
	if (host == NULL)
		return false;
	if (strncmp(origin, "http://", 7) == 0 && !req->tls)
		rest = origin + 7;
	else if (strncmp(origin, "https://", 8) == 0 && req->tls)
		rest = origin + 8;
	else
		return false;
	return strcmp(rest, host) == 0;
}

/* Basic credentials from the Authorization header: user and password. */
static bool
basic_credentials(RemoraRequest *req, char *user, size_t ulen, char *password,
				  size_t plen)
{
	const char   *h = remora_req_header(req, "Authorization");
	unsigned char decoded[1200];
	size_t        inlen;
	int           n;
	char         *colon;

	if (h == NULL || strncasecmp(h, "Basic ", 6) != 0)
		return false;
	h += 6;
	while (*h == ' ')
		h++;
	inlen = strlen(h);
	if (inlen == 0 || inlen % 4 != 0 || inlen / 4 * 3 >= sizeof(decoded))
		return false;
	n = EVP_DecodeBlock(decoded, (const unsigned char *) h, (int) inlen);
	if (n < 0)
		return false;
	/* EVP_DecodeBlock counts the padding as zero bytes */
	if (inlen >= 1 && h[inlen - 1] == '=')
		n--;
	if (inlen >= 2 && h[inlen - 2] == '=')
		n--;
	decoded[n] = '\0';
	colon = strchr((char *) decoded, ':');
	if (strlen((char *) decoded) != (size_t) n || /* a NUL inside */
		colon == NULL || (size_t) (colon - (char *) decoded) >= ulen ||
		strlen(colon + 1) >= plen)
	{
		OPENSSL_cleanse(decoded, sizeof(decoded)); /* a password, maybe */
		return false;
	}
	*colon = '\0';
	/* both fit: their lengths were checked above */
	memcpy(user, decoded, colon - (char *) decoded + 1);
	memcpy(password, colon + 1, strlen(colon + 1) + 1);
	OPENSSL_cleanse(decoded, sizeof(decoded));
	return true;
}

/*
 * The request's HTTP Basic credentials (see basic_credentials), for an
 * event stream that checks them again while it lasts.  The caller wipes
 * the password when done.
 */
bool
remora_req_basic(RemoraRequest *req, char *user, size_t ulen, char *password,
				 size_t plen)
{
	return basic_credentials(req, user, ulen, password, plen);
}

/*
 * Decide who the caller is (req->pool); false when the request has been
 * answered already (refused).
 */
static bool
authenticate(RemoraRequest *req)
{
	const char *cookie = MHD_lookup_connection_value(req->conn, MHD_COOKIE_KIND,
													 "remora_session");
	char        user[128], password[1100];
	bool        api = strncmp(req->path, "/api/", 5) == 0;

	if (api && state_changing(req->method) && !same_origin(req))
	{
		remora_respond_error(req, 403, "42501", "cross-origin request refused",
							 NULL, NULL, NULL);
		return false;
	}
	if (cookie && cookie[0])
	{
		char csrf[REMORA_SESSION_ID_LEN + 1];

		req->pool = remora_session_lookup(cookie, true, csrf);
		if (req->pool)
		{
			const char *token = remora_req_header(req, "X-CSRF-Token");

			req->by_session = true;
			snprintf(req->session_id, sizeof(req->session_id), "%s", cookie);
			if (state_changing(req->method) &&
				!(token && remora_equal_secret(token, csrf)))
			{
				/* signing in again needs no token: a new session is made */
				if (!(strcmp(req->path, "/api/session") == 0 &&
					  strcmp(req->method, "POST") == 0))
				{
					remora_respond_error(
						req, 403, "42501", "missing or wrong CSRF token",
						"Every request that changes something must carry the "
						"session's token in the X-CSRF-Token header.",
						"Sign in again to get a new token.", NULL);
					return false;
				}
			}
			return true;
		}
	}
	if (api &&
		basic_credentials(req, user, sizeof(user), password, sizeof(password)))
	{
		RemoraAuthResult r;
		int              retry_after;
		char             err[256];

		r = remora_http_login(user, password, req->address, &req->pool,
							  &retry_after, err, sizeof(err));
		OPENSSL_cleanse(password, sizeof(password));
		if (r != REMORA_AUTH_OK)
		{
			req->retry_after = retry_after;
			remora_respond_error(req,
								 r == REMORA_AUTH_THROTTLED     ? 429
								 : r == REMORA_AUTH_UNAVAILABLE ? 503
																: 401,
								 r == REMORA_AUTH_UNAVAILABLE ? "57P03"
															  : "28P01",
								 err, NULL, NULL, NULL);
			return false;
		}
	}
	return true;
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

		req = calloc(1, sizeof(RemoraRequest));
		if (req == NULL)
			return MHD_NO;
		req->conn = conn;
		req->method = method;
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
		if (req->body.len + *upload_data_size > (size_t) max_body)
			return MHD_NO; /* a chunked body past the limit: hang up */
		remora_buf_append(&req->body, upload_data, *upload_data_size);
		*upload_data_size = 0;
		return req->body.failed ? MHD_NO : MHD_YES;
	}
	if (req->answered)
		return MHD_YES;

	/* the request has arrived whole: its answer may take its time */
	connection_reading(conn, false);
	if (authenticate(req))
	{
		if (strncmp(req->path, "/api/", 5) == 0 ||
			strcmp(req->path, "/api") == 0)
			remora_api_dispatch(req);
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
	opts[n++] = (struct MHD_OptionItem){MHD_OPTION_EXTERNAL_LOGGER,
										(intptr_t) log_error, NULL};
	opts[n++] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};

	atomic_store(&stopping, false);
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

bool
remora_http_stopping(void)
{
	return atomic_load(&stopping);
}

/* Sleep ms milliseconds, or less if the server is stopping. */
void
remora_http_sleep(int ms)
{
	struct timespec deadline;

	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += ms / 1000;
	deadline.tv_nsec += (long) (ms % 1000) * 1000000L;
	if (deadline.tv_nsec >= 1000000000L)
	{
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&stop_lock);
	while (!atomic_load(&stopping))
		if (pthread_cond_timedwait(&stop_cond, &stop_lock, &deadline) ==
			ETIMEDOUT)
			break;
	pthread_mutex_unlock(&stop_lock);
}

void
remora_http_stop(void)
{
	if (daemon_handle == NULL)
		return;
	pthread_mutex_lock(&stop_lock);
	atomic_store(&stopping, true);
	pthread_cond_broadcast(&stop_cond);
	pthread_mutex_unlock(&stop_lock);
	MHD_stop_daemon(daemon_handle);
	daemon_handle = NULL;
	remora_sessions_shutdown();
}

void
remora_http_tick(void)
{
	connections_expire();
	remora_sessions_tick();
}
