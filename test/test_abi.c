/*
 * Versions and the binary interface, seen from a program built against the
 * current header. test/abi_old_binary.c is the other side: a program built
 * against the 0.1.0 header.
 *
 * PROJECT_VERSION is meson's project version, passed by test/meson.build,
 * so that the header's hand-written macros cannot drift from it.
 */
#define _GNU_SOURCE
#include "eachobs.h"
#include "helpers.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

TestSuite(version, .init = deadline, .timeout = 60);

Test(version, macros_match_the_project_version)
{
	char v[64];

	snprintf(v, sizeof(v), "%d.%d.%d", EACHOBS_VERSION_MAJOR,
		 EACHOBS_VERSION_MINOR, EACHOBS_VERSION_PATCH);
	cr_assert_str_eq(v, PROJECT_VERSION, "eachobs.h says %s, meson.build "
			 "says %s: update the header's version macros", v,
			 PROJECT_VERSION);
}

Test(version, hex_is_major_minor_patch)
{
	cr_assert_eq(EACHOBS_VERSION_HEX,
		     (EACHOBS_VERSION_MAJOR << 16) |
			     (EACHOBS_VERSION_MINOR << 8) |
			     EACHOBS_VERSION_PATCH);
}

Test(version, library_reports_the_header_it_was_built_with)
{
	cr_assert_eq(eachobs_version(), (unsigned)EACHOBS_VERSION_HEX,
		     "eachobs_version() = %#x, EACHOBS_VERSION_HEX = %#x",
		     eachobs_version(), (unsigned)EACHOBS_VERSION_HEX);
}

Test(version, string_is_the_project_version)
{
	cr_assert_not_null(eachobs_version_string());
	cr_assert_str_eq(eachobs_version_string(), PROJECT_VERSION);
}
