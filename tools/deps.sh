#!/bin/sh
# Install, with apt-get, whichever of the named Debian packages are missing.
#
# Usage: tools/deps.sh [--help] PACKAGE...
set -eu
case "${1-}" in
-h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
esac
for p in "$@"; do
	case "$p" in
	-*) echo "deps.sh: unknown option '$p' (try --help)" >&2; exit 2 ;;
	esac
done
missing=""
for p in "$@"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "installing:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
