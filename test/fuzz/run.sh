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
SANITIZE="-g -O1 -fno-sanitize-recover=undefined -Isrc $(pkg-config --cflags libcurl openssl libxml-2.0)"
LIBS=$(pkg-config --libs libcurl openssl libxml-2.0)
failed=0

# the engine, from the Makefile's own list of its sources, instrumented
# once into an archive each target links what it uses from
mkdir -p "$OUT/obj"
for c in $(make -s --no-print-directory print-engine-srcs); do
	# shellcheck disable=SC2086
	clang $SANITIZE -fsanitize=fuzzer-no-link,address,undefined -c \
		-o "$OUT/obj/$(basename "${c%.c}").o" "$c" 2>>"$OUT/engine.build" || failed=1
done
ar rcs "$OUT/libengine.a" "$OUT"/obj/*.o 2>>"$OUT/engine.build" || failed=1
if [ "$failed" -ne 0 ]; then
	echo "not ok - fuzz: the engine does not build"
	cat "$OUT/engine.build"
	exit 1
fi

for t in source_uri s3xml sigv4 hub; do
	# shellcheck disable=SC2086
	if ! clang $SANITIZE -fsanitize=fuzzer,address,undefined -o "$OUT/fuzz_$t" "test/fuzz/fuzz_$t.c" \
		"$OUT/libengine.a" $LIBS 2>"$OUT/$t.build"; then
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
