/*-------------------------------------------------------------------------
 *
 * names.c
 *	  The names an object is stored under: S3 bucket names, target
 *	  prefixes and member paths from a listing (declared in source_uri.h).
 *
 * Each check refuses rather than repairs: a name is used as given or not
 * at all (a prefix only loses its trailing slashes).  Error messages name
 * the rule that is broken.
 *
 *-------------------------------------------------------------------------
 */
#include "engine/common/source_uri.h"
#include "engine/common/util.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/*
 * S3 general-purpose bucket naming rules: 3-63 characters of lower-case
 * letters, digits, '.' and '-'; starts and ends with a letter or digit; no
 * "..", not an IPv4 address, none of the reserved prefixes and suffixes.
 */
bool
remora_bucket_name_valid(const char *name, char *errbuf, size_t errlen)
{
	size_t                   len;
	static const char *const bad_prefix[] = {"xn--", "sthree-",
											 "amzn-s3-demo-"};
	static const char *const bad_suffix[] = {"-s3alias", "--ol-s3", ".mrap",
											 "--x-s3", "--table-s3"};
	int                      dots = 0;
	bool                     all_digits_dots = true;

	if (name == NULL || (len = strlen(name)) < 3 || len > 63)
	{
		remora_errbuf_set(errbuf, errlen,
						  "a bucket name must be 3 to 63 characters long");
		return false;
	}
	for (size_t i = 0; i < len; i++)
	{
		char c = name[i];

		if (!(islower((unsigned char) c) || isdigit((unsigned char) c) ||
			  c == '.' || c == '-') ||
			(c & 0x80))
		{
			remora_errbuf_set(
				errbuf, errlen,
				"a bucket name may contain only lower-case letters, digits, "
				"'.' and '-'");
			return false;
		}
		if (c == '.')
		{
			dots++;
			if (i > 0 && name[i - 1] == '.')
			{
				remora_errbuf_set(
					errbuf, errlen,
					"a bucket name must not contain two adjacent periods");
				return false;
			}
		}
		else if (!isdigit((unsigned char) c))
			all_digits_dots = false;
	}
	if (!isalnum((unsigned char) name[0]) ||
		!isalnum((unsigned char) name[len - 1]))
	{
		remora_errbuf_set(
			errbuf, errlen,
			"a bucket name must begin and end with a letter or digit");
		return false;
	}
	if (all_digits_dots && dots == 3)
	{
		remora_errbuf_set(errbuf, errlen,
						  "a bucket name must not look like an IP address");
		return false;
	}
	for (size_t i = 0; i < sizeof(bad_prefix) / sizeof(bad_prefix[0]); i++)
		if (strncmp(name, bad_prefix[i], strlen(bad_prefix[i])) == 0)
		{
			remora_errbuf_set(errbuf, errlen,
							  "a bucket name must not begin with \"%s\"",
							  bad_prefix[i]);
			return false;
		}
	for (size_t i = 0; i < sizeof(bad_suffix) / sizeof(bad_suffix[0]); i++)
	{
		size_t sl = strlen(bad_suffix[i]);

		if (len > sl && strcmp(name + len - sl, bad_suffix[i]) == 0)
		{
			remora_errbuf_set(errbuf, errlen,
							  "a bucket name must not end with \"%s\"",
							  bad_suffix[i]);
			return false;
		}
	}
	return true;
}

/*
 * Normalise a target prefix: trailing slashes are dropped; a leading slash,
 * empty, "." or ".." segments, control characters and backslashes are
 * refused.  Returns a malloc'd string (possibly "") or NULL with errbuf set.
 */
char *
remora_prefix_normalize(const char *prefix, char *errbuf, size_t errlen)
{
	size_t      len = strlen(prefix);
	const char *seg;

	if (len > REMORA_MAX_PREFIX_LEN)
	{
		remora_errbuf_set(errbuf, errlen,
						  "a prefix must be at most %d bytes long",
						  REMORA_MAX_PREFIX_LEN);
		return NULL;
	}
	if (!remora_utf8_valid(prefix, len))
	{
		remora_errbuf_set(errbuf, errlen, "a prefix must be valid UTF-8");
		return NULL;
	}
	if (remora_has_ctrl(prefix, true))
	{
		remora_errbuf_set(errbuf, errlen,
						  "a prefix must not contain control characters");
		return NULL;
	}
	if (strchr(prefix, '\\') != NULL)
	{
		remora_errbuf_set(errbuf, errlen,
						  "a prefix must not contain backslashes");
		return NULL;
	}
	if (prefix[0] == '/')
	{
		remora_errbuf_set(errbuf, errlen, "a prefix must not begin with '/'");
		return NULL;
	}
	while (len > 0 && prefix[len - 1] == '/')
		len--;

	seg = prefix;
	while (seg < prefix + len)
	{
		const char *slash = memchr(seg, '/', prefix + len - seg);
		size_t      sl = (slash ? slash : prefix + len) - seg;

		/* cppcheck-suppress knownConditionTrueFalse ; "//" gives sl == 0 */
		if (sl == 0)
		{
			remora_errbuf_set(
				errbuf, errlen,
				"a prefix must not contain empty segments (\"//\")");
			return NULL;
		}
		if ((sl == 1 && seg[0] == '.') ||
			(sl == 2 && seg[0] == '.' && seg[1] == '.'))
		{
			remora_errbuf_set(
				errbuf, errlen,
				"a prefix must not contain \".\" or \"..\" segments");
			return NULL;
		}
		seg += sl + 1;
	}
	return remora_xstrndup(prefix, len);
}

/*
 * A member path from a listing (an S3 key below a prefix, a Hub file): is
 * it safe to place under a staging prefix?
 */
bool
remora_member_path_valid(const char *path)
{
	size_t      len = strlen(path);
	const char *seg = path;

	if (len == 0 || len > 1024 || !remora_utf8_valid(path, len))
		return false;
	for (const char *p = path;; p++)
	{
		if (*p == '/' || *p == '\0')
		{
			size_t slen = p - seg;

			if (slen == 0 || (slen == 1 && seg[0] == '.') ||
				(slen == 2 && seg[0] == '.' && seg[1] == '.'))
				return false;
			if (*p == '\0')
				return true;
			seg = p + 1;
		}
		else if (*p == '\\' || (unsigned char) *p < 0x20 || *p == 0x7f)
			return false;
	}
}
