#!/bin/sh
# The main job, from a fresh Debian 12 machine: installs what is missing,
# builds eachobs optimized, and runs the TimeDataset benchmark (the seed
# pull request's cases). Arguments go to the benchmark, e.g. --quick,
# --threads 2,8,16,64, --reps 5, --csv out.csv.
set -eu
cd "$(dirname "$0")/.."
tools/deps.sh gcc meson ninja-build pkg-config libck-dev
if [ -d build-release ]; then
	meson setup --reconfigure build-release -Dbuildtype=release -Dtests=disabled >/dev/null
else
	meson setup build-release -Dbuildtype=release -Dtests=disabled >/dev/null
fi
ninja -C build-release bench/timedataset >/dev/null
exec ./build-release/bench/timedataset "$@"
