#!/usr/bin/env bash
#
# META.json, the distribution's metadata for PGXN: valid against the
# meta-spec 1.0.0 (test/lint/meta/pgxn-meta-1.0.0.schema.json, checked
# with Ajv, pinned in test/lint/meta/package.json), and its version the
# one of remora.control, the Makefile and the Debian package
# (debian/changelog).  Broken copies must be refused, so that a validator
# that accepts anything cannot pass.  TAP lines on standard output.
#
set -uo pipefail
cd "$(dirname "$0")/../.."
M=test/lint/meta
T=$(mktemp -d /tmp/remora-meta.XXXXXX)
trap 'rm -rf "$T"' EXIT

ok() { echo "ok - $1"; }
nok() { echo "not ok - $1"; shift; [ $# -eq 0 ] || printf '  %s\n' "$@"; }

if [ ! -d "$M/node_modules/ajv" ] &&
	! (cd "$M" && npm ci --no-audit --no-fund --loglevel=error >/dev/null 2>"$T/npm.log"); then
	nok "npm ci in $M" "$(cat "$T/npm.log")"
	exit 1
fi
validate() { node "$M/validate.js" "$M/pgxn-meta-1.0.0.schema.json" "$@"; }

if out=$(validate META.json); then
	ok "META.json is valid PGXN meta-spec 1.0.0"
else
	nok "META.json is valid PGXN meta-spec 1.0.0" "$out"
fi

# each broken copy differs from META.json in one way the spec forbids
broken() {	# broken NAME JQ-FILTER
	jq "$2" META.json >"$T/$1.json"
	validate "$T/$1.json" >/dev/null && echo "$1"
}
accepted=$(
	broken no-provides 'del(.provides)'
	broken no-license 'del(.license)'
	broken bad-license '.license = "gpl"'
	broken bad-version '.version = "0.5"'
	broken spec-2 '."meta-spec".version = "2.0.0"'
	broken name-space '.name = "re mora"'
	broken provides-no-file 'del(.provides.remora.file)'
	broken bad-range '.prereqs.runtime.requires.PostgreSQL = "~> 15"'
	broken bad-phase '.prereqs.install = {"requires": {"PostgreSQL": "15.0.0"}}'
	broken unknown-key '.homepage = "https://example.org/"'
	broken bad-uri '."meta-spec".url = "not a uri"'
)
if [ -z "$accepted" ]; then
	ok "the validator refuses META.json broken in eleven ways"
else
	nok "the validator refuses META.json broken in eleven ways" "accepted: $accepted"
fi

control=$(sed -n "s/^default_version = '\(.*\)'$/\1/p" remora.control)
make=$(sed -n 's/^EXTVERSION = //p' Makefile)
deb=$(dpkg-parsechangelog -l debian/changelog -S Version 2>/dev/null || echo "?")
meta=$(jq -r .version META.json)
provided=$(jq -r .provides.remora.version META.json)
if [ -n "$control" ] && [ "$meta $provided $make $deb" = "$control $control $control $control" ]; then
	ok "META.json's version ($meta) is remora.control's, the Makefile's and the package's"
else
	nok "one version everywhere" "remora.control $control, META.json $meta (provides $provided), Makefile $make, debian/changelog $deb"
fi

# one license everywhere: the PostgreSQL License (LICENSE, META.json,
# debian/copyright's every Files paragraph)
license=$(jq -r .license META.json)
if [ "$license" = postgresql ] && head -1 LICENSE 2>/dev/null | grep -qx 'PostgreSQL License' &&
	! awk '/^Files:/ { f = 1 } f && /^License:/ { print; f = 0 }' debian/copyright | grep -vqx 'License: PostgreSQL'; then
	ok "LICENSE, META.json and debian/copyright give the PostgreSQL License"
else
	nok "LICENSE, META.json and debian/copyright give the PostgreSQL License" "META.json: $license"
fi
