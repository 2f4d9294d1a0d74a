/*
 * What nthreads = 0 means: the CPUs this process may actually use, not the
 * CPUs of the machine.
 *
 * A job under taskset, Slurm's --cpus-per-task or a container CPU limit
 * sees every core of the node in sysconf(_SC_NPROCESSORS_ONLN); one loader
 * per node core then oversubscribes the few it was given. Two limits
 * count, the smaller wins:
 *
 *   - the calling thread's CPU affinity (sched_getaffinity), which
 *     taskset, numactl, Slurm and MPI launchers set, and which the worker
 *     threads inherit;
 *   - a cgroup v2 CPU quota (cpu.max, "QUOTA PERIOD": QUOTA / PERIOD CPUs
 *     of time, rounded up), which Docker's --cpus, Kubernetes' CPU limits
 *     and systemd's CPUQuota set. Every cgroup from the process's own up
 *     to the root may hold one; the smallest counts.
 *
 * The affinity is read at every call, on the thread that calls
 * eachobs_parallel (one system call), so a program that changes it gets
 * the new count at its next iterator. The quota costs more:
 * /proc/self/cgroup and one cpu.max per level of the cgroup path, a
 * sizeable part of starting an iterator (docs/design.md, Start). So it is
 * cached for the whole process and read again when the cached value is
 * more than a second old: a limit changed at run time (docker update,
 * a Kubernetes resize) counts from the next iterator a second later, and
 * a program that opens many short iterators pays for the read once a
 * second. A cached fact of the machine, not a setting: nothing here is
 * read from the environment. Only iterators with nthreads = 0, no pool
 * and a thread to start ask for it.
 *
 * Not counted: cgroup v1 quotas (cpu.cfs_quota_us), and a cgroup v2
 * hierarchy mounted anywhere but /sys/fs/cgroup (in hybrid systems the
 * v2 tree at /sys/fs/cgroup/unified carries no cpu controller anyway).
 */
#define _GNU_SOURCE
#include "cpus.h"
#include "base.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define CGROUP_ROOT "/sys/fs/cgroup"

/* Parse an unsigned decimal number at *s, moving *s past it; false when
 * there is none or it overflows. */
static bool parse_u64(const char **s, unsigned long long *v)
{
	const char *p = *s;
	unsigned long long x = 0;

	if (*p < '0' || *p > '9')
		return false;
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');
		if (x > (ULLONG_MAX - d) / 10)
			return false;
		x = x * 10 + d;
	}
	*s = p;
	*v = x;
	return true;
}

unsigned eachobs__cpu_max_parse(const char *text)
{
	unsigned long long quota, period;
	const char *s = text;

	/* "max" (with or without a period) is no limit; so is anything we
	 * cannot read: a wrong guess would cost parallelism, not safety. */
	if (!parse_u64(&s, &quota) || *s++ != ' ' || !parse_u64(&s, &period))
		return 0;
	if (*s != '\0' && *s != '\n')
		return 0;
	if (period == 0)
		return 0;
	unsigned long long cpus = quota / period + (quota % period != 0);
	if (cpus == 0)
		cpus = 1; /* quota 0 is refused by the kernel; be safe */
	return cpus > UINT_MAX ? UINT_MAX : (unsigned)cpus;
}

int eachobs__cgroup2_path(const char *text, char *path, size_t size)
{
	/* One line per hierarchy, "ID:CONTROLLERS:PATH"; cgroup v2's is
	 * "0::PATH", and is the only one on a pure v2 system. */
	for (const char *line = text; *line;) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);

		if (len > 3 && memcmp(line, "0::", 3) == 0) {
			const char *p = line + 3;
			len -= 3;
			/* A cgroup outside our namespace reads "/../x":
			 * nothing under CGROUP_ROOT is ours to read. */
			if (p[0] != '/' || len >= size ||
			    memmem(p, len, "/..", 3) != NULL)
				return -ENOENT;
			memcpy(path, p, len);
			path[len] = '\0';
			return 0;
		}
		line += len + (end != NULL);
	}
	return -ENOENT;
}

/* Read up to size - 1 bytes of a small file (procfs, cgroupfs) into buf,
 * NUL-terminated; false when it cannot be read. */
static bool read_small(const char *file, char *buf, size_t size)
{
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	size_t got = 0;

	if (fd < 0)
		return false;
	while (got < size - 1) {
		ssize_t r = read(fd, buf + got, size - 1 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	buf[got] = '\0';
	return got > 0;
}

/* The smallest cgroup v2 CPU quota from the process's cgroup up to the
 * root, in whole CPUs; 0 when there is none. */
static unsigned cgroup_cpu_limit(void)
{
	char text[4096], path[PATH_MAX], file[PATH_MAX + 32];
	unsigned best = 0;

	if (read_small("/proc/self/cgroup", text, sizeof(text)) &&
	    eachobs__cgroup2_path(text, path, sizeof(path)) == 0) {
		for (;;) {
			char line[64];
			unsigned c;

			snprintf(file, sizeof(file), CGROUP_ROOT "%s/cpu.max",
				 strcmp(path, "/") == 0 ? "" : path);
			if (read_small(file, line, sizeof(line)) &&
			    (c = eachobs__cpu_max_parse(line)) != 0 &&
			    (best == 0 || c < best))
				best = c;
			char *slash = strrchr(path, '/');
			if (!slash || slash == path) {
				if (strcmp(path, "/") == 0)
					break;
				strcpy(path, "/"); /* the root last */
			} else {
				*slash = '\0';
			}
		}
	}
	return best;
}

/* The quota as last read (0: none) and when (CLOCK_MONOTONIC ns; 0:
 * never). Two threads may refresh it at once; each stores what it read,
 * and a reader that sees one's time with the other's value still gets a
 * value read within the last second or so. */
static _Atomic unsigned quota_cached;
static _Atomic uint64_t quota_read_ns;

#define QUOTA_MAX_AGE_NS 1000000000ull

static unsigned cgroup_cpu_limit_cached(void)
{
	uint64_t now = eachobs__now_ns();
	uint64_t then = atomic_load_explicit(&quota_read_ns,
					     memory_order_acquire);

	if (then != 0 && now - then < QUOTA_MAX_AGE_NS)
		return atomic_load_explicit(&quota_cached,
					    memory_order_relaxed);
	unsigned q = cgroup_cpu_limit();
	atomic_store_explicit(&quota_cached, q, memory_order_relaxed);
	atomic_store_explicit(&quota_read_ns, now ? now : 1,
			      memory_order_release);
	return q;
}

/* CPUs in the calling thread's affinity mask; 0 when it cannot be read
 * (a kernel with more possible CPUs than a cpu_set_t holds). */
static unsigned affinity_cpus(void)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return 0;
	return (unsigned)CPU_COUNT(&set);
}

unsigned eachobs__default_threads(void)
{
	unsigned n = affinity_cpus();

	if (n == 0) {
		long online = sysconf(_SC_NPROCESSORS_ONLN);
		n = online > 0 ? (online > (long)UINT_MAX ? UINT_MAX
							  : (unsigned)online)
			       : 1;
	}
	unsigned quota = cgroup_cpu_limit_cached();
	if (quota && quota < n)
		n = quota;
	if (n < 1)
		n = 1;
	return n > EACHOBS_MAX_THREADS ? EACHOBS_MAX_THREADS : n;
}
