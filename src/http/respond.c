/*-------------------------------------------------------------------------
 *
 * respond.c
 *	  Answers of the remora HTTP server, and what a request carries.
 *
 * Every answer goes through remora_respond_response, exactly once per
 * request (later ones are dropped), with the security headers: no
 * sniffing, no referrer, no framing, same-origin resources, a strict
 * Content-Security-Policy on HTML and HSTS over TLS.  Answers under /api/
 * are never cached.  Errors are JSON {"error", "sqlstate", "detail"?,
 * "hint"?, "field"?}, each string escaped for HTML as well, so that no
 * message a user wrote can become markup.
 *
 * Calls no other file of the folder (only the engine's buffers).
 *
 *-------------------------------------------------------------------------
 */
#include "http/request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

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
	if (req->close)
		MHD_add_response_header(response, "Connection", "close");
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
	if (strncmp(req->path, "/api/", 5) == 0 ||
		strcmp(req->path, "/metrics") == 0)
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
