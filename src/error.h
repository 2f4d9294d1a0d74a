/*
 * The messages of eachobs_last_error (error.c), for every failure site.
 *
 * A header of its own, apart from internal.h, so that the mechanisms at the
 * bottom (sampler.c) report their failures without depending on the
 * iterator's internals.
 */
#ifndef EACHOBS_ERROR_H
#define EACHOBS_ERROR_H

#include <stddef.h>

/* Format the calling thread's eachobs_last_error message and return code:
 * every failure site of the public API returns through it (error.c says
 * in which style). Only on failure paths: it costs a vsnprintf. */
int eachobs__fail(int code, const char *fmt, ...)
	__attribute__((format(printf, 2, 3), cold));
/* The same with a static message, no formatting: async-signal-safe. */
int eachobs__fail_static(int code, const char *msg) __attribute__((cold));
/* A getobs failure that fn (the public function) reports: code at idx. */
int eachobs__fail_getobs(int code, const char *fn, size_t idx)
	__attribute__((cold));

/* A callback failure that fn reports: call names it ("open(shard 3)"). */
int eachobs__fail_call(int code, const char *fn, const char *call)
	__attribute__((cold));

#endif
