#!/bin/sh
# The distributed example, as CI runs it: installs Open MPI if missing,
# builds build-mpi (tests enabled) and runs the meson suite `mpi`, which
# is examples/mpi_shards.c under `mpirun -np 4` (docs/distributed.md).
# About 2 seconds after the build. Exits non-zero when a step fails, and
# also when the build found no MPI, so that a skipped example never
# passes for a run one.
#
# Usage: tools/mpi_example.sh [--help]
set -u
if [ $# -gt 0 ]; then
	case "$1" in
	-h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
	*)
		echo "mpi_example.sh: unknown argument '$1' (try --help)" >&2
		exit 2 ;;
	esac
fi
cd "$(dirname "$0")/.."
tools/deps.sh gcc meson ninja-build pkg-config libck-dev libcriterion-dev \
	libopenmpi-dev openmpi-bin || exit 1

if ! meson setup build-mpi -Dtests=enabled >build-mpi.setup.log 2>&1 &&
   ! meson setup --reconfigure build-mpi -Dtests=enabled \
	>build-mpi.setup.log 2>&1; then
	cat build-mpi.setup.log
	exit 1
fi
ninja -C build-mpi example_mpi_shards >build-mpi.build.log 2>&1 ||
	{ cat build-mpi.build.log; exit 1; }
if ! meson test -C build-mpi --list 2>/dev/null |
     grep -q "example_mpi_shards"; then
	grep -i mpi build-mpi.setup.log
	echo "mpi_example.sh: no MPI test was configured" >&2
	exit 1
fi
meson test -C build-mpi --suite mpi --print-errorlogs --verbose
