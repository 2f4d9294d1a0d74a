/*
 * Messages for the codes eachobs returns. The library's own failures are
 * negative errno values, but getobs may return any negative code, so every
 * code gets some readable text and none gets NULL.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <string.h>

const char *eachobs_strerror(int code)
{
	switch (code) {
	case 1:
		return "an observation was yielded";
	case 0:
		return "success (or: every observation has been yielded)";
	case -EINVAL:
		return "invalid argument: a required pointer or callback is "
		       "NULL, an option is out of range, or the slots would "
		       "not fit in memory";
	case -E2BIG:
		return "an option this library does not know was set (the "
		       "program was built against a newer eachobs.h)";
	case -ENOMEM:
		return "out of memory while allocating the iterator or its "
		       "slots";
	case -EAGAIN:
		return "could not create a worker thread (resource limit)";
	case -ERANGE:
		return "getobs returned a positive value; it must return 0 or "
		       "a negative code";
	case -EIO:
		return "input/output error (returned by getobs)";
	case -ENOENT:
		return "no such file or directory (returned by getobs)";
	case -ENOBUFS:
		return "no buffer space available";
	case -ECANCELED:
		return "operation canceled";
	}
	if (code < 0) {
#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 32)
		/* A static string (unlike strerror's), so safe from any
		 * thread: getobs codes are often plain negative errno. Codes
		 * past -4096 are no errno (and -INT_MIN would overflow). */
		const char *desc = code > -4096 ? strerrordesc_np(-code) : NULL;
		if (desc)
			return desc;
#endif
		return "getobs failed with a code eachobs does not know";
	}
	return "not an eachobs error code";
}
