/*
 * libFuzzer target: source parsing and the outbound policy.  Any input is
 * a source string; whatever parses must have a canonical form that parses
 * again to itself, an http display form without a query, and a policy decision
 * that does not crash; the same for a webhook's URL, which need not name a
 * file.  The first byte picks a policy.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/common/netpolicy.h"
#include "engine/common/source_uri.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const allow[] = {"", "127.0.0.1/32", "10.0.0.0/8 ::1"};
	char                    *text;
	RemoraSourceUri          u, again;
	char                     err[REMORA_ERRBUF_LEN];
	RemoraNetPolicy         *p;

	if (size == 0 || size > 16384)
		return 0;
	text = malloc(size);
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';
	p = remora_netpolicy_new(allow[data[0] % 3], "", "", err, sizeof(err));
	if (remora_source_uri_parse(text, &u, err, sizeof(err)))
	{
		/* the canonical form is stable; an http display form has no query */
		if (!remora_source_uri_parse(u.canonical, &again, err, sizeof(err)) ||
			strcmp(again.canonical, u.canonical) != 0 ||
			(u.kind == REMORA_SOURCE_HTTP && strchr(u.display, '?') != NULL))
			abort();
		if (u.host)
			(void) remora_netpolicy_allows_text(p, u.host, err, sizeof(err));
		remora_source_uri_free(&again);
		remora_source_uri_free(&u);
	}
	if (remora_http_url_parse(text, &u, err, sizeof(err)))
	{
		/* a webhook URL: http(s), its canonical form stable too */
		if (u.kind != REMORA_SOURCE_HTTP || u.host == NULL ||
			!remora_http_url_parse(u.canonical, &again, err, sizeof(err)) ||
			strcmp(again.canonical, u.canonical) != 0)
			abort();
		(void) remora_netpolicy_allows_text(p, u.host, err, sizeof(err));
		remora_source_uri_free(&again);
		remora_source_uri_free(&u);
	}
	{
		/* the same bytes as a CIDR list, a port list, a bucket and a prefix */
		RemoraCidr      *list;
		RemoraPortRange *ports;
		int              n;
		char            *norm;

		if (remora_cidr_list_parse(text, &list, &n, err, sizeof(err)))
			free(list);
		if (remora_port_list_parse(text, &ports, &n, err, sizeof(err)))
			free(ports);
		(void) remora_bucket_name_valid(text, err, sizeof(err));
		norm = remora_prefix_normalize(text, err, sizeof(err));
		free(norm);
	}
	remora_netpolicy_free(p);
	free(text);
	return 0;
}
