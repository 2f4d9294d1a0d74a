#!/bin/sh
# Runs one program against two libraries, alternating: the program and
# the library built from revision REV, and the same program with this
# tree's library put in its place (LD_LIBRARY_PATH; a program built
# against an older 0.x header runs on a newer library). Only the library
# differs between the two runs of a round, so the difference is the
# library's, not the program's. Each output line is prefixed with
# "old," or "new," and the round.
#
# Usage: tools/compare_library.sh [--help] [--rounds R] REV PROGRAM [ARG]...
#   REV      a git revision, e.g. 457640d (built once in /tmp)
#   PROGRAM  a program of REV's release build, e.g. bench/timedataset or
#            bench/peers/peer_eachobs
#   --rounds R  pairs of runs (default 5)
# Example:
#   tools/compare_library.sh 457640d bench/peers/peer_eachobs --case noop \
#       --n 1000000 --threads 2 --batch 1,64 --reps 5
set -eu

rounds=5
case "${1-}" in
-h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
--rounds)
	rounds=${2-}
	case "$rounds" in
	'' | *[!0-9]* | 0)
		echo "compare_library.sh: --rounds needs a count (try --help)" >&2
		exit 2 ;;
	esac
	shift 2 ;;
esac
if [ $# -lt 2 ]; then
	echo "compare_library.sh: needs REV and PROGRAM (try --help)" >&2
	exit 2
fi
rev=$1 prog=$2
shift 2
cd "$(dirname "$0")/.."
sha=$(git rev-parse --short "$rev")
old=/tmp/eachobs-$sha
if [ ! -x "$old/build/$prog" ]; then
	rm -rf "$old"
	git worktree add --detach "$old" "$sha" >/dev/null 2>&1
	meson setup "$old/build" "$old" --buildtype=release \
		-Dtests=disabled >/dev/null
	ninja -C "$old/build" >/dev/null
fi
if [ -d build-release ]; then
	meson setup --reconfigure build-release -Dbuildtype=release \
		-Dtests=disabled >/dev/null
else
	meson setup build-release -Dbuildtype=release -Dtests=disabled >/dev/null
fi
ninja -C build-release >/dev/null
new=$(mktemp -d)
trap 'rm -rf "$new"' EXIT
cp -L build-release/libeachobs.so.0 "$new/"
r=1
while [ "$r" -le "$rounds" ]; do
	"$old/build/$prog" "$@" | sed "s/^/old,$r,/"
	LD_LIBRARY_PATH="$new" "$old/build/$prog" "$@" | sed "s/^/new,$r,/"
	r=$((r + 1))
done
