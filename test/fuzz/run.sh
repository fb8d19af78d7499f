#!/usr/bin/env bash
#
# Build the libFuzzer targets (clang, with AddressSanitizer and UBSan) and
# run each for FUZZ_SECONDS (default 30) from its kept seed corpus, two at
# a time.  New inputs go to a scratch corpus; a crash is kept as a
# reproducer under test/fuzz/crashes/.  Prints "ok - …" / "not ok - …" per target.
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
# (two compilers at a time: the suite's machine has two cores)
export SANITIZE OUT
make -s --no-print-directory print-engine-srcs | tr ' ' '\n' | grep . |
	xargs -P 2 -I{} sh -c 'clang $SANITIZE -fsanitize=fuzzer-no-link,address,undefined -c \
		-o "$OUT/obj/$(basename {} .c).o" {} 2>>"$OUT/engine.build.$$"' || failed=1
cat "$OUT"/engine.build.* >"$OUT/engine.build" 2>/dev/null || true
ar rcs "$OUT/libengine.a" "$OUT"/obj/*.o 2>>"$OUT/engine.build" || failed=1
if [ "$failed" -ne 0 ]; then
	echo "not ok - fuzz: the engine does not build"
	cat "$OUT/engine.build"
	exit 1
fi

# fuzz_one TARGET: build and run one target; its lines in $OUT/TARGET.tap,
# and a status file $OUT/TARGET.failed if it failed
fuzz_one() {
	local t=$1
	# shellcheck disable=SC2086
	if ! clang $SANITIZE -fsanitize=fuzzer,address,undefined -o "$OUT/fuzz_$t" "test/fuzz/fuzz_$t.c" \
		"$OUT/libengine.a" $LIBS 2>"$OUT/$t.build"; then
		{ echo "not ok - fuzz $t: does not build"; cat "$OUT/$t.build"; } >"$OUT/$t.tap"
		touch "$OUT/$t.failed"
		return
	fi
	mkdir -p "$OUT/corpus_$t" test/fuzz/crashes
	if (cd "$OUT" && ASAN_OPTIONS=detect_leaks=1 "./fuzz_$t" -max_total_time="$SECS" -timeout=5 \
		-rss_limit_mb=2048 -artifact_prefix="$OUT/$t-" \
		"corpus_$t" "$OLDPWD/test/fuzz/corpus/$t") >"$OUT/$t.log" 2>&1; then
		echo "ok - fuzz $t: $(grep -oP 'Done \K\d+ runs' "$OUT/$t.log" || echo "$SECS s") without a finding" >"$OUT/$t.tap"
	else
		{
			echo "not ok - fuzz $t found a problem"
			grep -E "ERROR|SUMMARY|Test unit written" "$OUT/$t.log" | head -5
		} >"$OUT/$t.tap"
		cp "$OUT/$t"-crash-* "$OUT/$t"-leak-* "$OUT/$t"-timeout-* test/fuzz/crashes/ 2>/dev/null || true
		touch "$OUT/$t.failed"
	fi
}

# two targets at a time, one a core; their lines in a fixed order
TARGETS=(source_uri s3xml sigv4 hub)
for ((i = 0; i < ${#TARGETS[@]}; i += 2)); do
	fuzz_one "${TARGETS[i]}" &
	[ -z "${TARGETS[i + 1]:-}" ] || fuzz_one "${TARGETS[i + 1]}" &
	wait
done
for t in "${TARGETS[@]}"; do
	cat "$OUT/$t.tap"
	[ ! -e "$OUT/$t.failed" ] || failed=1
done
exit $failed
