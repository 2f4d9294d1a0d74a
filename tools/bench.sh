#!/bin/sh
# The main job, from a fresh Debian 12 machine: installs what is missing,
# builds eachobs optimized, and runs the TimeDataset benchmark (the cases
# of MLUtils.jl pull request #33).
#
# Usage: tools/bench.sh [--help] [OPTION]...
# The options go to the benchmark (build-release/bench/timedataset --help
# lists them), e.g. --quick, --threads 2,8,16,64, --reps 5, --csv out.csv.
set -eu
# --help anywhere: the other arguments are the benchmark's, but this usage
# comes before anything is installed.
for arg; do
	case "$arg" in
	-h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
	esac
done
cd "$(dirname "$0")/.."
tools/deps.sh gcc meson ninja-build pkg-config libck-dev
if [ -d build-release ]; then
	meson setup --reconfigure build-release -Dbuildtype=release -Dtests=disabled >/dev/null
else
	meson setup build-release -Dbuildtype=release -Dtests=disabled >/dev/null
fi
ninja -C build-release bench/timedataset >/dev/null
exec ./build-release/bench/timedataset "$@"
