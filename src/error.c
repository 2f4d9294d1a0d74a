/*
 * What went wrong, for people: eachobs_strerror names a code, and
 * eachobs_last_error says what the last failing call on this thread found
 * wrong (the argument, its value, the limit).
 *
 * The library's own failures are negative errno values, but getobs may
 * return any negative code, so every code gets some readable text and none
 * gets NULL.
 *
 * Every failure site of the public API returns through eachobs__fail, which
 * formats its message into a thread-local buffer. Messages share one style:
 * a lower-case start, names as the user writes them (nthreads,
 * data->getobs, worker_cpus[2]), no trailing period. A message about an
 * option or the dataset starts with the field's name; a message about any
 * other call's own arguments or state starts with that function's name
 * ("eachobs_next: ..."). Nothing here runs on a path that succeeds.
 */
#define _GNU_SOURCE
#include "base.h"
#include "error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/*
 * The message and the buffer it is formatted into. `last` points either
 * into `buf` or at a static string: eachobs_interrupt, which may run in a
 * signal handler, sets a static string with one lock-free store and never
 * writes `buf`, so a handler cannot tear a message its thread is reading,
 * and a handler that interrupts eachobs__fail is simply overwritten by it.
 * The default TLS model, not EACHOBS__TLS: 256 bytes would use up much of
 * the static TLS surplus a dlopen()ed library relies on, and failures need
 * no fast access.
 */
enum { MESSAGE_SIZE = 256 };
static _Thread_local char buf[MESSAGE_SIZE];
static _Thread_local _Atomic(const char *) last = "";

const char *eachobs_last_error(void)
{
	return atomic_load_explicit(&last, memory_order_relaxed);
}

int eachobs__fail(int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	atomic_store_explicit(&last, buf, memory_order_relaxed);
	return code;
}

int eachobs__fail_static(int code, const char *msg)
{
	atomic_store_explicit(&last, msg, memory_order_relaxed);
	return code;
}

/* The system's description of errno value e (positive), or NULL. A static
 * string, unlike strerror's, so safe from any thread. Values past 4095 are
 * no errno (and -INT_MIN would overflow). */
static const char *errno_text(int e)
{
#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 32)
	return e > 0 && e < 4096 ? strerrordesc_np(e) : NULL;
#else
	(void)e;
	return NULL;
#endif
}

int eachobs__fail_call(int code, const char *fn, const char *call)
{
	const char *desc = code > -4096 ? errno_text(-code) : NULL;

	if (code == -ERESTART)
		return eachobs__fail(code,
				     "%s: %s returned -EINTR or -ERESTART: a "
				     "signal cut a system call short",
				     fn, call);
	if (code == -ERANGE)
		return eachobs__fail(code, "%s: %s returned a value it may not "
				     "(or -ERANGE)", fn, call);
	if (desc)
		return eachobs__fail(code, "%s: %s failed: %s (%d)", fn, call,
				     desc, code);
	return eachobs__fail(code, "%s: %s failed with code %d", fn, call,
			     code);
}

int eachobs__fail_getobs(int code, const char *fn, size_t idx)
{
	const char *desc = code > -4096 ? errno_text(-code) : NULL;

	/* A getobs returning a positive value is reported as -ERANGE too,
	 * and -EINTR as -ERESTART: which of the two it was is not kept. */
	if (code == -ERANGE)
		return eachobs__fail(code,
				     "%s: getobs(%zu) returned a positive value "
				     "or -ERANGE (it must return 0 or a "
				     "negative code)",
				     fn, idx);
	if (code == -ERESTART)
		return eachobs__fail(code,
				     "%s: getobs(%zu) returned -EINTR or "
				     "-ERESTART: a signal cut a system call "
				     "short (retry it inside getobs, or install "
				     "the handler with SA_RESTART)",
				     fn, idx);
	if (desc)
		return eachobs__fail(code, "%s: getobs(%zu) failed: %s (%d)",
				     fn, idx, desc, code);
	return eachobs__fail(code, "%s: getobs(%zu) failed with code %d", fn,
			     idx, code);
}

/* "7, 9, 12" into out, at most len bytes; the number of CPUs in set. */
static int cpu_list(char *out, size_t len, const cpu_set_t *set)
{
	int count = 0;
	size_t used = 0;

	out[0] = '\0';
	for (int c = 0; c < CPU_SETSIZE; c++) {
		if (!CPU_ISSET(c, set))
			continue;
		if (used < len)
			used += (size_t)snprintf(out + used, len - used,
						 count ? ", %d" : "%d", c);
		count++;
	}
	return count;
}

int eachobs__fail_thread(int err, const char *fn, const char *what,
			 unsigned j, unsigned n, size_t stack_size,
			 const cpu_set_t *cpus)
{
	const char *desc = errno_text(err);
	const char *sep = fn ? ": " : "";
	char list[96];

	if (!fn)
		fn = "";
	/* The attributes hold the signal mask and the CPUs, which glibc
	 * allocates: that is the one allocation of a thread's creation. */
	if (err == ENOMEM)
		return eachobs__fail(-ENOMEM,
				     "%s%sout of memory for the attributes of "
				     "%s %u of %u (its signal mask and CPUs)",
				     fn, sep, what, j + 1, n);
	if (!desc)
		desc = "unknown error";
	/* pthread_create sets the affinity of the new thread: it fails with
	 * EINVAL when no CPU of the set can be used (offline, absent, or
	 * outside the process's cpuset). */
	if (cpus && err == EINVAL) {
		int count = cpu_list(list, sizeof(list), cpus);
		if (count == 1) /* then every entry of worker_cpus is it */
			return eachobs__fail(-EAGAIN,
					     "worker_cpus[0] = %s: CPU %s "
					     "cannot be used (pthread_create: "
					     "%s)",
					     list, list, desc);
		return eachobs__fail(-EAGAIN,
				     "worker_cpus: none of CPUs %s can be used "
				     "(pthread_create: %s)",
				     list, desc);
	}
	return eachobs__fail(-EAGAIN,
			     "%s%s%s %u of %u could not be created "
			     "(stack_size %zu): %s",
			     fn, sep, what, j + 1, n, stack_size, desc);
}

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
		return "out of memory while allocating the iterator, its "
		       "slots, a pool, or a thread's attributes";
	case -EAGAIN:
		return "could not start the worker threads (a resource limit, "
		       "or worker_cpus the system refuses)";
	case -ERANGE:
		return "getobs returned a positive value; it must return 0 or "
		       "a negative code";
	case -ERESTART:
		return "getobs returned -EINTR: a signal cut a system call "
		       "short (retry it inside getobs, or install the handler "
		       "with SA_RESTART)";
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
		/* getobs codes are often plain negative errno. */
		const char *desc = code > -4096 ? errno_text(-code) : NULL;
		if (desc)
			return desc;
		return "getobs failed with a code eachobs does not know";
	}
	return "not an eachobs error code";
}
