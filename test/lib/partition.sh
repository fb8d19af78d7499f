# Network partitions for one process (source this file after e2e.sh):
# the process runs as a throwaway OS user of the test's own, and a packet
# filter on the loopback drops that user's TCP packets to the ports it
# must not reach; healing flushes the filter.  Everything else on the
# machine, other tests' servers included, still talks on the loopback.
#
#     user=$(partition_name w1)  remora_p<lane>_w1: the lane's own
#     partition_user "$user"      created, removed at exit
#     partition_run "$user" CMD...  exec CMD as that user
#     partition_cut "$user" PORT...
#     partition_heal "$user"
#
# The filter is nftables' (meta skuid: the owner of the sending socket),
# in a table of the script's own, deleted when the script exits, also on
# failure.  It drops only what the user's sockets send: the servers'
# replies are not matched.  That is enough to cut both directions: a new
# connection's SYN never leaves, and on a connection already open the
# user's data and acknowledgements are dropped, so the server's side sees
# nothing and retransmits into silence until one side gives up.  No
# conntrack rule lets established traffic through.

PARTITION_TABLE=remora_partition_$$

# partition_name NAME: the OS user for NAME in this script's port lane
# (test/run's REMORA_PORT_LANE).  Scripts run side by side never share a
# lane, so they never share a user: a shared one would be cut by the other
# script's filter (meta skuid matches the user, not the script) and removed
# by whichever exits first.
partition_name() { echo "remora_p${REMORA_PORT_LANE:-0}_$1"; }

# partition_user NAME: a system user without home or shell for one
# partitioned process, and the filter's table; both removed at exit
partition_user() {
	local user=$1
	if ! nft list table inet "$PARTITION_TABLE" >/dev/null 2>&1; then
		nft add table inet "$PARTITION_TABLE" || return 1
		nft add chain inet "$PARTITION_TABLE" out \
			"{ type filter hook output priority 0; policy accept; }" || return 1
		e2e_at_exit "nft delete table inet $PARTITION_TABLE"
	fi
	# one left by a run that could not remove it is taken over
	id -u "$user" >/dev/null 2>&1 ||
		useradd --system --no-create-home --shell /usr/sbin/nologin "$user" || return 1
	# its processes first (partition_run noted their pids): the user cannot
	# go while one runs, and the servers stop only after this
	e2e_at_exit "partition_kill $user; userdel $user"
	# one chain per user, so that healing one leaves the others cut
	nft add chain inet "$PARTITION_TABLE" "$user" &&
		nft add rule inet "$PARTITION_TABLE" out oifname lo meta skuid "$user" jump "$user"
}

# partition_run USER CMD...: exec CMD as USER (setpriv replaces itself, so
# that $! of a background partition_run is CMD's own pid)
partition_run() {
	local user=$1
	shift
	local me=$BASHPID # (in $(...), BASHPID is the substitution's)
	echo "$me $(pid_start "$me")" >>"$SERVICES_DIR/partition.$user.pids"
	exec setpriv --reuid="$user" --regid="$(id -g "$user")" --clear-groups -- "$@"
}

# partition_kill USER: SIGKILL what partition_run started as USER and
# still runs (kill_if_same: most of it was killed long ago)
partition_kill() {
	local pid start
	[ -f "$SERVICES_DIR/partition.$1.pids" ] || return 0
	while read -r pid start; do
		kill_if_same KILL "$pid" "${start:-}" || continue
		# reaped, so that no zombie of the user's is left (a disowned
		# child bash reaps by itself)
		wait "$pid" 2>/dev/null
		wait_for 10 eval "! kill -0 $pid 2>/dev/null" || true
	done <"$SERVICES_DIR/partition.$1.pids"
}

# partition_cut USER PORT...: drop USER's TCP packets to these loopback ports
partition_cut() {
	local user=$1 ports
	shift
	ports=$(IFS=,; echo "$*")
	nft add rule inet "$PARTITION_TABLE" "$user" tcp dport "{ $ports }" counter drop
}

# partition_heal USER: USER reaches every port again
partition_heal() { nft flush chain inet "$PARTITION_TABLE" "$1"; }

# partition_dropped USER: how many of USER's packets the filter dropped
partition_dropped() {
	nft list chain inet "$PARTITION_TABLE" "$1" |
		awk '/counter/ { for (i = 1; i < NF; i++) if ($i == "packets") n += $(i + 1) } END { print n + 0 }'
}
