/*
 * What keeps programs built against an older header working with this
 * library: the version it reports.
 */
#include "internal.h"

#define STR(x) #x
#define XSTR(x) STR(x)

unsigned eachobs_version(void)
{
	return EACHOBS_VERSION_HEX;
}

const char *eachobs_version_string(void)
{
	return XSTR(EACHOBS_VERSION_MAJOR) "." XSTR(EACHOBS_VERSION_MINOR) "."
		XSTR(EACHOBS_VERSION_PATCH);
}
