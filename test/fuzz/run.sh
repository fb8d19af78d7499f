#!/usr/bin/env bash
#
# Build the libFuzzer targets (clang, with AddressSanitizer and UBSan) and
# run each for FUZZ_SECONDS (default 30) from its kept seed corpus.  New
# inputs go to a scratch corpus; a crash is kept as a reproducer under
# test/fuzz/crashes/.  Prints "ok - …" / "not ok - …" per target.
#
set -Euo pipefail
cd "$(dirname "$0")/../.."
SECS=${FUZZ_SECONDS:-30}
OUT=$(mktemp -d /tmp/remora-fuzz.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
FLAGS="-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Isrc $(pkg-config --cflags libcurl openssl libxml-2.0)"
LIBS=$(pkg-config --libs libcurl openssl libxml-2.0)
declare -A SRCS=(
	[source_uri]="src/engine/source_uri.c src/engine/netpolicy.c"
	[s3xml]="src/engine/s3xml.c"
	[sigv4]="src/engine/sigv4.c"
	[hub]="src/engine/json.c src/engine/source_uri.c src/engine/netpolicy.c"
)
failed=0
for t in source_uri s3xml sigv4 hub; do
	# shellcheck disable=SC2086
	if ! clang $FLAGS -o "$OUT/fuzz_$t" "test/fuzz/fuzz_$t.c" ${SRCS[$t]} $LIBS 2>"$OUT/$t.build"; then
		echo "not ok - fuzz $t: does not build"
		cat "$OUT/$t.build"
		failed=1
		continue
	fi
	mkdir -p "$OUT/corpus_$t" test/fuzz/crashes
	if (cd "$OUT" && ASAN_OPTIONS=detect_leaks=1 "./fuzz_$t" -max_total_time="$SECS" -timeout=5 \
		-rss_limit_mb=2048 -artifact_prefix="$PWD/../$(basename "$OUT")/" \
		"corpus_$t" "$OLDPWD/test/fuzz/corpus/$t") >"$OUT/$t.log" 2>&1; then
		echo "ok - fuzz $t: $(grep -oP 'Done \K\d+ runs' "$OUT/$t.log" || echo "$SECS s") without a finding"
	else
		echo "not ok - fuzz $t found a problem"
		grep -E "ERROR|SUMMARY|Test unit written" "$OUT/$t.log" | head -5
		cp "$OUT"/crash-* "$OUT"/leak-* "$OUT"/timeout-* test/fuzz/crashes/ 2>/dev/null || true
		failed=1
	fi
done
exit $failed
