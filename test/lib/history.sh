# Files the repository no longer holds, from its history (source this file).
#
# sql/ holds the install script of the version under way (in parts), the
# last release's, and the upgrade scripts; a test that installs an
# earlier release takes that release's install script from the commit
# before the one that removed it.  A shallow clone (CI may check out one
# commit) is deepened from its remote first; a history that still lacks
# the file is an error that says so, never a test skipped.

# history_show PATH DEST: write PATH, as the last commit holds it or, if
# it holds it no more, as it was before the commit that removed it, to
# DEST (a new file: a link there is replaced, not followed); or say why
# not, as TAP comments, and fail.
history_show() {
	local path=$1 dest=$2 commit=""
	rm -f "$dest"
	git show "HEAD:$path" >"$dest" 2>/dev/null && return 0
	if [ "$(git rev-parse --is-shallow-repository 2>/dev/null)" = true ]; then
		git fetch -q --unshallow 2>/dev/null || true
	fi
	commit=$(git log -1 --format=%H --diff-filter=D -- "$path" 2>/dev/null) || commit=""
	rm -f "$dest"
	if [ -z "$commit" ] || ! git show "$commit^:$path" >"$dest" 2>/dev/null; then
		rm -f "$dest"
		echo "# $path is not in this checkout's history (a shallow clone with no"
		echo "# remote to deepen from?): fetch the history (git fetch --unshallow)"
		echo "# and run the test again"
		return 1
	fi
}
