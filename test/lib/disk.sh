# A small file system of the test's own under PostgreSQL's data directory,
# and a filler that takes every free byte of it (source this file after
# e2e.sh): test/e2e/full_disk.sh fills it twice by hand, the chaos run's
# soak draws it as a nemesis (fill_disk).
#
#     disk_mount DATA SIZE   DATA a tmpfs of SIZE (e.g. 160m), owned by
#                            postgres; unmounted at exit, after the
#                            cluster on it stopped
#     disk_fill FILE         FILE takes every free byte (dd stops at ENOSPC)
#     disk_free DIR          the bytes free on DIR's file system
#
# The server log stays outside DATA ($T/pg/server.log), as an operator's
# would: what the server says about the full disk can still be written.

# disk_mount DATA SIZE: DATA must be the data directory of the cluster in
# its parent (cluster_init "${DATA%/data}" creates it there later)
disk_mount() {
	local data=$1 size=$2
	mkdir -p "$data"
	mount -t tmpfs -o "size=$size,mode=0700,uid=$(id -u postgres),gid=$(id -g postgres)" \
		remora_disk "$data" || return 1
	e2e_at_exit "cluster_stop '${data%/data}' immediate; umount '$data' || umount -l '$data'"
}

disk_fill() { dd if=/dev/zero of="$1" bs=1M status=none 2>/dev/null || true; }

disk_free() { df -B1 --output=avail "$1" | tail -1 | tr -d ' '; }
