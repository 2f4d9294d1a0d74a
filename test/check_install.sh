#!/bin/sh
# Install the build into a temporary DESTDIR, then build a program against
# that copy with nothing but the installed eachobs.pc in pkg-config's
# search path (no ck.pc, no system .pc file) and run it: the .pc must
# require nothing else, and its flags alone must build and link. A
# PROGRAM.cpp is built as C++17 (with a C++ compiler as CC), against the
# installed eachobs.hpp.
#
# Usage: test/check_install.sh MESON BUILD_DIR PROGRAM.c|PROGRAM.cpp CC [CC_ARG]...
set -eu
case "${1-}" in
-h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
esac
if [ $# -lt 4 ]; then
	echo "usage: check_install.sh MESON BUILD_DIR PROGRAM.c|PROGRAM.cpp CC [CC_ARG]..." \
		"(try --help)" >&2
	exit 2
fi
meson=$1
build=$2
src=$3
shift 3

tmp=$(mktemp -d "${TMPDIR:-/tmp}/eachobs-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# --no-rebuild: meson test has built everything, and a second ninja in the
# same build directory while tests run could race it.
"$meson" install -C "$build" --no-rebuild --quiet --destdir "$tmp/root"

pc=$(find "$tmp/root" -name eachobs.pc)
lib=$(find "$tmp/root" -name 'libeachobs.so' -o -name 'libeachobs.a' |
	head -n 1)
if [ -z "$pc" ] || [ -z "$lib" ]; then
	echo "check_install.sh: eachobs.pc or the library not installed" >&2
	exit 1
fi
echo "installed: ${pc#"$tmp/root"}, ${lib#"$tmp/root"}"
# A static-only build (-Ddefault_library=static) links with --static.
static=""
case "$lib" in *.a) static=--static ;; esac
# The sysroot maps the .pc's prefix into the DESTDIR; PKG_CONFIG_LIBDIR
# replaces the default search path, so a Requires of any other package
# fails here as it would where that package is not installed.
flags=$(PKG_CONFIG_LIBDIR=$(dirname "$pc") PKG_CONFIG_PATH= \
	PKG_CONFIG_SYSROOT_DIR="$tmp/root" \
	pkg-config $static --cflags --libs eachobs)
echo "pkg-config ${static:+$static }--cflags --libs eachobs: $flags"
std=-std=c11
case "$src" in *.cpp) std=-std=c++17 ;; esac
# shellcheck disable=SC2086
"$@" $std -o "$tmp/app" "$src" $flags
LD_LIBRARY_PATH=$(dirname "$lib") "$tmp/app"
