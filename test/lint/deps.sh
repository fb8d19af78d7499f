#!/usr/bin/env bash
#
# The dependency check of src/: dependencies go one way, between the files
# of a folder and between folders.
#
#     test/lint/deps.sh          (after make: it reads the objects of src/)
#
# A folder is src/X/, or a layer of the engine, src/engine/L/; src/engine/
# itself holds only the engine's public API, engine.h (folder "engine").
#
# (a) includes: in each folder, the graph of its files' includes of the
#     folder's own headers has no cycle.  A header's node is its module
#     (foo.h and foo.c are one node), except the header a folder's files
#     all share (public_header below), its own node "foo.h".
# (b) calls: over every object, an edge A -> B when A's object references
#     a name B's object defines (nm: T, D, B or R); the graph has no
#     cycle, within a folder or across folders.
# (c) folders: the engine's layers, from the bottom up, are common, net,
#     s3, core, then transfer, and sets, export and chores above it (those
#     three side by side); a layer depends only on layers below it and on
#     engine.h, and on nothing outside the engine.  The runner
#     (src/runner) depends only on the engine; the hosts (src/pg,
#     src/worker) on the runner, the engine and each other; src/http on
#     the engine's common layer alone.  No cycle between folders.  A folder
#     these rules do not name is an error, so that a new one gets its rule.
# (d) src/pg/: each header declares the functions of the file of its name.
# (e) every folder has a README.md and at most 25 C files of its own.
#
# tsort finds the cycles; the script prints each, with the names behind
# its edges, prints every forbidden edge, and exits 1.  Prints "ok - ..."
# lines on success, TAP-style, for test/run.
#
set -Euo pipefail
cd "$(dirname "$0")/../.." || exit 1

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0

fail() {
	echo "not ok - $*"
	status=1
}

# The engine's layers, from the bottom up: a layer may depend on a lower
# rank only (sets, export and chores share one: none uses another).
layer_rank() {
	case "$1" in
	engine/common) echo 1 ;;
	engine/net) echo 2 ;;
	engine/s3) echo 3 ;;
	engine/core) echo 4 ;;
	engine/transfer) echo 5 ;;
	engine/sets | engine/export | engine/chores) echo 6 ;;
	*) echo 0 ;;
	esac
}

# What a folder may depend on; "host" folders may also depend on each
# other (the folder graph's cycle check still applies).
allowed() {	# allowed FROM TO
	case "$1:$2" in
	engine:*) return 1 ;;
	engine/*:engine) return 0 ;;
	engine/*:engine/*)
		[ "$(layer_rank "$2")" -lt "$(layer_rank "$1")" ]
		return
		;;
	engine/*:*) return 1 ;;
	runner:engine | runner:engine/*) return 0 ;;
	runner:*) return 1 ;;
	http:engine | http:engine/common) return 0 ;;
	http:*) return 1 ;;
	pg:* | worker:*)
		case "$2" in
		runner | engine | engine/* | pg | worker | http) return 0 ;;
		esac
		return 1
		;;
	esac
	return 1
}

# The header every file of a folder may include, whatever its layer: the
# extension's and the HTTP server's shared declarations.  It is a node of
# its own, apart from the .c of its name.
public_header() {
	case "$1" in
	pg) echo remora.h ;;
	http) echo http.h ;;
	*) echo none ;;
	esac
}

known_folder() {
	case "$1" in
	engine | runner | pg | worker | http) return 0 ;;
	engine/*) [ "$(layer_rank "$1")" != 0 ] ;;
	*) return 1 ;;
	esac
}

# the folders, as names: "pg", "engine", "engine/s3"
folders() {
	local d
	for d in src/*/ src/engine/*/; do
		d=${d#src/}
		echo "${d%/}"
	done
}

# tsort_check TITLE EDGES DETAILS: no cycle in EDGES ("A B" lines); for a
# cycle, print its nodes and the DETAILS lines ("A B what") among them.
tsort_check() {
	local title=$1 edges=$2 details=$3 loops
	if tsort "$edges" >/dev/null 2>"$tmp/tsort.err"; then
		return 0
	fi
	loops=$(sed -n 's/^tsort: \([^ ]*\)$/\1/p' "$tmp/tsort.err" | grep -v ':$' || true)
	fail "$title: a cycle through $(echo "$loops" | sort -u | tr '\n' ' ')"
	# the edges among the cycle's nodes, with what makes each
	echo "$loops" | sort -u >"$tmp/loop"
	awk 'NR == FNR { in_loop[$1] = 1; next }
		 in_loop[$1] && in_loop[$2] {
			 a = $1; b = $2; $1 = ""; $2 = ""; sub(/^ +/, "")
			 printf "#   %s -> %s: %s\n", a, b, $0 }' \
		"$tmp/loop" "$details" | sort -u | head -40
	return 1
}

for f in $(folders); do
	known_folder "$f" || fail "src/$f/ is a folder the dependency rules do not name (test/lint/deps.sh)"
done

# ---------------------------------------------------------------- (a)
: >"$tmp/folder_inc"
for f in $(folders); do
	d=src/$f/
	pub=$(public_header "$f")
	: >"$tmp/inc"
	for src in "$d"*.c "$d"*.h; do
		[ -e "$src" ] || continue
		name=$(basename "$src")
		from=${name%.*}
		[ "$name" = "$pub" ] && from=$pub
		# "folder/x.h", "engine/layer/x.h", or "x.h" of this folder
		sed -nE 's|^#include "([^"]+)".*|\1|p' "$src" | while read -r inc; do
			case "$inc" in
			*/*)
				to_folder=${inc%/*}
				hdr=${inc##*/}
				;;
			*)
				[ -e "$d$inc" ] || continue
				to_folder=$f
				hdr=$inc
				;;
			esac
			[ -d "src/$to_folder" ] || continue
			if [ "$to_folder" != "$f" ]; then
				echo "$f $to_folder $src includes $inc" >>"$tmp/folder_inc"
				continue
			fi
			to=${hdr%.h}
			[ "$hdr" = "$pub" ] && to=$pub
			[ "$from" != "$to" ] && echo "$from $to $name includes $inc"
		done >>"$tmp/inc"
	done
	cut -d' ' -f1,2 "$tmp/inc" | sort -u >"$tmp/inc_edges"
	if tsort_check "src/$f/: its includes" "$tmp/inc_edges" "$tmp/inc"; then
		echo "ok - src/$f/: the includes between its files have no cycle"
	fi
done

# ---------------------------------------------------------------- (b)
objs=(src/*/*.o src/engine/*/*.o)
if [ ! -e "${objs[0]}" ]; then
	fail "no object in src/: build first (make)"
	exit 1
fi
: >"$tmp/defs"
: >"$tmp/uses"
for o in "${objs[@]}"; do
	m=${o%.o}
	m=${m#src/}
	nm --defined-only "$o" | awk -v m="$m" '$2 ~ /^[TDBR]$/ { print $3, m }' >>"$tmp/defs"
	nm --undefined-only "$o" | awk -v m="$m" '{ print $2, m }' >>"$tmp/uses"
done
sort -k1,1 "$tmp/defs" >"$tmp/d"
sort -k1,1 "$tmp/uses" >"$tmp/u"
# "user definer symbol"
join "$tmp/u" "$tmp/d" | awk '$2 != $3 { print $2, $3, $1 }' | sort -u >"$tmp/calls"
cut -d' ' -f1,2 "$tmp/calls" | sort -u >"$tmp/call_edges"
awk '{ d[$1 " " $2] = d[$1 " " $2] (d[$1 " " $2] ? "," : "") $3 }
	 END { for (k in d) print k, d[k] }' "$tmp/calls" >"$tmp/call_details"
if tsort_check "the call graph of the objects of src/" "$tmp/call_edges" "$tmp/call_details"; then
	echo "ok - no call cycle between the files of src/ ($(wc -l <"$tmp/call_edges") edges)"
fi

# ---------------------------------------------------------------- (c)
# a module's folder: its path without the file's name
awk 'function folder(m) { sub(/\/[^\/]*$/, "", m); return m }
	 { a = folder($1); b = folder($2)
	   if (a != b) print a, b, $1 " calls " $3 " of " $2 }' \
	"$tmp/calls" >"$tmp/folder_calls"
cat "$tmp/folder_calls" "$tmp/folder_inc" >"$tmp/folder_all"
forbidden=0
while read -r from to what; do
	if ! allowed "$from" "$to"; then
		fail "src/$from/ may not depend on src/$to/: $what"
		forbidden=1
	fi
done <"$tmp/folder_all"
[ $forbidden = 0 ] && echo "ok - every folder depends only on the folders its rule allows (the engine's layers downwards)"
cut -d' ' -f1,2 "$tmp/folder_all" | sort -u >"$tmp/folder_edges"
awk '{ k = $1 " " $2; if (!(k in d)) d[k] = $0 } END { for (k in d) print d[k] }' \
	"$tmp/folder_all" >"$tmp/folder_details"
if tsort_check "the folders of src/" "$tmp/folder_edges" "$tmp/folder_details"; then
	echo "ok - no cycle between the folders of src/"
fi

# ---------------------------------------------------------------- (d)
# src/pg/: a header declares the functions of the file of its name, so
# that no header is a catch-all for others' (remora.h declares none)
misplaced=$(for h in src/pg/*.h; do
	own=${h%.h}.c
	tr '\n' ' ' <"$h" | grep -oE 'extern [^;]*\(' | grep -oE 'remora_[a-z_0-9]+ *\($' |
		tr -d '( ' | while read -r fn; do
			def=$(grep -lE "^$fn\(" src/pg/*.c | head -1)
			[ "$def" = "$own" ] || echo "$h declares $fn of ${def:-no file}"
		done
done)
if [ -z "$misplaced" ]; then
	echo "ok - each header of src/pg/ declares the functions of the file of its name"
else
	fail "a header of src/pg/ declares another file's functions: $(paste -sd ';' <<<"$misplaced")"
fi

# ---------------------------------------------------------------- (e)
crowded=""
for f in $(folders); do
	[ -e "src/$f/README.md" ] || crowded="$crowded src/$f/ (no README.md)"
	n=$(find "src/$f" -maxdepth 1 -name '*.c' ! -name assets.c | wc -l)
	[ "$n" -le 25 ] || crowded="$crowded src/$f/ ($n)"
done
if [ -z "$crowded" ]; then
	echo "ok - every folder of src/ has a README.md and at most 25 C files"
else
	fail "folders without a README.md or with more than 25 C files:$crowded"
fi

exit $status
