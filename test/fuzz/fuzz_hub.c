/*
 * libFuzzer target: the Hub's answers as the engine reads them (a revision
 * object, a page of the tree listing), then every listed path through the
 * member path rules.  Nothing may crash, leak or take long; a path the
 * rules accept must be relative and free of "." and ".." segments.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/common/json.h"
#include "engine/common/source_uri.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_path(const char *path)
{
	if (!remora_member_path_valid(path))
		return;
	if (path[0] == '/' || strstr(path, "//") || strcmp(path, "..") == 0 ||
		strncmp(path, "../", 3) == 0 || strstr(path, "/../") ||
		strchr(path, '\\'))
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char        err[200];
	RemoraJson *doc =
		remora_json_parse((const char *) data, size, err, sizeof(err));

	if (doc == NULL)
		return 0;
	(void) remora_json_string(doc, "sha");
	if (doc->type == RJ_ARRAY)
		for (const RemoraJson *f = doc->child; f; f = f->next)
		{
			const char       *path = remora_json_string(f, "path");
			const RemoraJson *lfs = remora_json_get(f, "lfs");

			(void) remora_json_string(f, "type");
			(void) remora_json_int(f, "size");
			if (lfs)
				(void) remora_json_string(lfs, "oid");
			if (path)
				check_path(path);
		}
	remora_json_free(doc);
	return 0;
}
