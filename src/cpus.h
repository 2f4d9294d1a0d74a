/*
 * What nthreads = 0 means: the CPUs this process may use, read from its
 * affinity and its cgroup v2 quota.
 */
#ifndef EACHOBS_CPUS_H
#define EACHOBS_CPUS_H

#include <stddef.h>

/* The CPUs the calling thread may run on (its affinity), at most a cgroup
 * v2 quota's worth; 1 .. EACHOBS_MAX_THREADS. Reads them at every call. */
unsigned eachobs__default_threads(void);
/* A cgroup v2 cpu.max file's text, "QUOTA PERIOD" or "max PERIOD": the
 * quota in whole CPUs, ceil(QUOTA / PERIOD), or 0 for none (and for text
 * it cannot read). */
unsigned eachobs__cpu_max_parse(const char *text);
/* The cgroup v2 path ("0::PATH") in /proc/self/cgroup's text, copied into
 * path; -ENOENT when there is none, it does not fit, or it lies outside
 * the process's cgroup namespace. */
int eachobs__cgroup2_path(const char *text, char *path, size_t size);

#endif /* EACHOBS_CPUS_H */
