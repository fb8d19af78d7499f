/*
 * Unit tests of the engine's egress rules (src/engine/net/egress.c): which
 * transport failures are TLS failures, which hosts no_proxy names, and
 * proxy credentials kept out of messages.
 */
#include <stdio.h>
#include <string.h>

#include <curl/curl.h>

#include "engine/core/engine_int.h"
#include "unit.h"

/*
 * Which transport failures are TLS failures (class tls, not retried): the
 * certificate and protocol ones; a handshake the network cut is not.
 */
static void
test_tls_classes(void)
{
	CHECK(
		remora_curl_is_tls_failure(
			CURLE_PEER_FAILED_VERIFICATION,
			"SSL certificate problem: unable to get local issuer certificate"),
		"an unknown CA is a TLS failure");
	CHECK(remora_curl_is_tls_failure(CURLE_PEER_FAILED_VERIFICATION,
									 "SSL: no alternative certificate subject "
									 "name matches target host name 'x'"),
		  "a host name mismatch is a TLS failure");
	CHECK(remora_curl_is_tls_failure(CURLE_SSL_CACERT_BADFILE, ""),
		  "an unreadable CA file is a TLS failure");
	CHECK(remora_curl_is_tls_failure(CURLE_SSL_CIPHER, NULL),
		  "no shared cipher is a TLS failure");
	CHECK(remora_curl_is_tls_failure(CURLE_SSL_CONNECT_ERROR,
									 "error:0A00010B:SSL routines::wrong "
									 "version number"),
		  "TLS to a plain-HTTP port is a TLS failure");
	CHECK(remora_curl_is_tls_failure(CURLE_SSL_CONNECT_ERROR,
									 "error:0A00042E:SSL routines::tlsv1 "
									 "alert protocol version"),
		  "a protocol version mismatch is a TLS failure");
	CHECK(!remora_curl_is_tls_failure(CURLE_SSL_CONNECT_ERROR,
									  "OpenSSL SSL_connect: Connection reset "
									  "by peer in connection to x:443"),
		  "a handshake reset by the network is retried");
	CHECK(!remora_curl_is_tls_failure(
			  CURLE_SSL_CONNECT_ERROR,
			  "OpenSSL SSL_connect: SSL_ERROR_SYSCALL in connection to x:443"),
		  "a handshake cut by the network is retried");
	CHECK(!remora_curl_is_tls_failure(CURLE_SSL_CONNECT_ERROR, NULL),
		  "a handshake failure without a reason is retried");
	CHECK(!remora_curl_is_tls_failure(CURLE_COULDNT_CONNECT, "certificate"),
		  "a refused connection is not a TLS failure");
	CHECK(!remora_curl_is_tls_failure(CURLE_OPERATION_TIMEDOUT, ""),
		  "a timeout is not a TLS failure");

	/* and what its message advises */
	CHECK(remora_tls_failure_kind(
			  CURLE_PEER_FAILED_VERIFICATION,
			  "SSL certificate problem: unable to get local issuer "
			  "certificate") == REMORA_TLS_CERTIFICATE,
		  "an unknown CA: trust it");
	CHECK(remora_tls_failure_kind(CURLE_SSL_CONNECT_ERROR,
								  "error:0A000086:SSL routines::certificate "
								  "verify failed") == REMORA_TLS_CERTIFICATE,
		  "a certificate refused in the handshake: trust its CA");
	CHECK(remora_tls_failure_kind(CURLE_SSL_CONNECT_ERROR,
								  "error:0A00010B:SSL routines::wrong "
								  "version number") == REMORA_TLS_PLAIN,
		  "TLS to a plain-HTTP port: check the URL, not the CA");
	CHECK(remora_tls_failure_kind(CURLE_SSL_CONNECT_ERROR,
								  "error:0A00042E:SSL routines::tlsv1 "
								  "alert protocol version") ==
			  REMORA_TLS_PROTOCOL,
		  "a protocol version mismatch: nothing in common");
	CHECK(remora_tls_failure_kind(CURLE_SSL_CIPHER, NULL) ==
			  REMORA_TLS_PROTOCOL,
		  "no shared cipher: nothing in common");
}

/* no_proxy: names with their subdomains, addresses, '*'. */
static void
test_no_proxy(void)
{
	const char *np = "internal.example, .corp.example,10.0.0.1,[::1]";

	CHECK(remora_no_proxy_matches(np, "internal.example"), "a name itself");
	CHECK(remora_no_proxy_matches(np, "s3.Internal.Example"),
		  "a subdomain, in any case");
	CHECK(remora_no_proxy_matches(np, "corp.example"),
		  "a leading dot names the domain too");
	CHECK(remora_no_proxy_matches(np, "a.corp.example."), "a trailing dot");
	CHECK(!remora_no_proxy_matches(np, "notinternal.example"),
		  "not a suffix that is no subdomain");
	CHECK(remora_no_proxy_matches(np, "10.0.0.1"), "an address");
	CHECK(!remora_no_proxy_matches(np, "10.0.0.10"), "not another address");
	CHECK(remora_no_proxy_matches(np, "::1") &&
			  remora_no_proxy_matches(np, "[::1]"),
		  "an IPv6 address, bracketed or not");
	CHECK(remora_no_proxy_matches("*", "anything.example"), "'*' is all");
	CHECK(!remora_no_proxy_matches("", "a.example") &&
			  !remora_no_proxy_matches(NULL, "a.example"),
		  "nothing is nothing");
}

/* Proxy credentials never survive in a message. */
static void
test_redact_userinfo(void)
{
	char msg[200];

	snprintf(msg, sizeof(msg), "via http://bob:s3cret-pass@proxy:3128 failed");
	remora_redact_userinfo(msg, "http://bob:s3cret-pass@proxy:3128");
	CHECK_STR(msg, "via http://(redacted)@proxy:3128 failed",
			  "user:password is redacted");
	snprintf(msg, sizeof(msg), "x a:b@p y a:b");
	remora_redact_userinfo(msg, "http://a:b@p:1");
	CHECK_STR(msg, "x ***@p y ***", "short credentials are blanked");
	snprintf(msg, sizeof(msg), "no credentials here");
	remora_redact_userinfo(msg, "http://proxy:3128");
	CHECK_STR(msg, "no credentials here", "a proxy without credentials");
}

int
main(void)
{
	test_tls_classes();
	test_no_proxy();
	test_redact_userinfo();
	return unit_done();
}
