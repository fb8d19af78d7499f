# Helpers shared by the benchmark scripts (source this file; ROOT is the
# repository).

# What the benchmarks need beyond the tests' packages (install_deps from
# test/lib/deps.sh installs them): the peer rclone, gnuplot for the plots,
# /usr/bin/time for CPU seconds.
REMORA_DEB_PACKAGES="${REMORA_DEB_PACKAGES:-} rclone gnuplot-nox time"

# median: the median of the numbers on standard input ("nan" if none)
median() {
	sort -g | awk '{ v[NR] = $1 } END {
		if (NR == 0) { print "nan"; exit }
		if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# ratio A B: A / B with two decimals, "-" when B is zero or not a number
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 == 0) print "-"; else printf "%.2f", a / b }'; }

# put_section FILE: replace the section FILE begins with in
# doc/benchmarks.md (up to the next "## " heading), or append it
put_section() {
	python3 - "$ROOT/doc/benchmarks.md" "$1" <<'PY'
import sys
path, rep = sys.argv[1:]
doc = open(path).read()
new = open(rep).read().rstrip('\n') + '\n'
section = new.split('\n', 1)[0]
if section + '\n' in doc:
    i = doc.index(section + '\n')
    j = doc.find('\n## ', i + len(section))
    doc = doc[:i] + new + (doc[j:] if j >= 0 else '')
else:
    doc = doc.rstrip('\n') + '\n\n' + new
open(path, 'w').write(doc)
PY
}

# Remora's background workers (the scripts set remora.max_workers = 1).
# fresh_worker stops them and waits for the launcher's next one, which
# reads the configuration anew (q and wait_for from test/lib/e2e.sh; the
# script's die)
worker_pids() { q "SELECT pid FROM pg_stat_activity WHERE backend_type = 'remora worker'"; }
worker_pid() { worker_pids | head -1; }
fresh_worker() {
	local old p
	old=" $(worker_pids | tr '\n' ' ') "
	for p in $old; do kill "$p" 2>/dev/null || true; done	# SIGTERM: the launcher starts a fresh one
	fresh() {
		local ps
		ps=$(worker_pids)
		[ "$(echo "$ps" | grep -c .)" = 1 ] || return 1
		case $old in *" $ps "*) return 1 ;; esac
	}
	wait_for 60 fresh || die "no fresh worker"
}
