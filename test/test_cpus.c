/*
 * What nthreads = 0 means (src/cpus.c): the CPUs this process may use,
 * from its affinity and a cgroup v2 quota, not the machine's CPUs.
 */
#define _GNU_SOURCE
#include "eachobs.h"
#include "fault.h"
#include "helpers.h"
#include "internal.h"

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <string.h>

TestSuite(cpus, .init = deadline, .timeout = 60);

Test(cpus, cpu_max_max_is_no_limit)
{
	cr_assert_eq(eachobs__cpu_max_parse("max 100000\n"), 0);
	cr_assert_eq(eachobs__cpu_max_parse("max 100000"), 0);
	cr_assert_eq(eachobs__cpu_max_parse("max"), 0);
}

Test(cpus, cpu_max_quota_is_rounded_up_to_whole_cpus)
{
	cr_assert_eq(eachobs__cpu_max_parse("200000 100000\n"), 2);
	cr_assert_eq(eachobs__cpu_max_parse("100000 100000\n"), 1);
	cr_assert_eq(eachobs__cpu_max_parse("150000 100000\n"), 2);
	cr_assert_eq(eachobs__cpu_max_parse("50000 100000\n"), 1);
	cr_assert_eq(eachobs__cpu_max_parse("1000 100000\n"), 1);
	cr_assert_eq(eachobs__cpu_max_parse("1600000 100000"), 16);
	cr_assert_eq(eachobs__cpu_max_parse("300001 100000\n"), 4);
	cr_assert_eq(eachobs__cpu_max_parse("18446744073709551615 1\n"),
		     UINT_MAX, "a huge quota saturates");
}

Test(cpus, cpu_max_text_it_cannot_read_is_no_limit)
{
	const char *bad[] = { "", "\n", "100000", "100000\n", "x 100000",
			      "100000 0\n", "100000  100000", "-1 100000",
			      "100000 100000 7", "100000 1000x",
			      "99999999999999999999 100000" };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(eachobs__cpu_max_parse(bad[i]), 0, "\"%s\"",
			     bad[i]);
}

Test(cpus, cgroup_path_is_the_v2_line)
{
	char path[64];

	cr_assert_eq(eachobs__cgroup2_path("0::/user.slice/a.scope\n", path,
					   sizeof(path)), 0);
	cr_assert_str_eq(path, "/user.slice/a.scope");
	/* Hybrid systems list the v1 hierarchies too, the v2 line anywhere. */
	cr_assert_eq(eachobs__cgroup2_path("12:cpu,cpuacct:/x\n"
					   "1:name=systemd:/y\n0::/\n",
					   path, sizeof(path)), 0);
	cr_assert_str_eq(path, "/");
	cr_assert_eq(eachobs__cgroup2_path("0::/k/pod1", path, sizeof(path)),
		     0, "no final newline");
	cr_assert_str_eq(path, "/k/pod1");
}

Test(cpus, cgroup_path_missing_foreign_or_too_long_is_none)
{
	char path[16];

	cr_assert_eq(eachobs__cgroup2_path("", path, sizeof(path)), -ENOENT);
	cr_assert_eq(eachobs__cgroup2_path("4:memory:/a\n3:cpu:/b\n", path,
					   sizeof(path)), -ENOENT, "v1 only");
	cr_assert_eq(eachobs__cgroup2_path("10::/a\n", path, sizeof(path)),
		     -ENOENT, "hierarchy 10 is not 0");
	cr_assert_eq(eachobs__cgroup2_path("0::/../../other\n", path,
					   sizeof(path)), -ENOENT,
		     "outside the cgroup namespace");
	cr_assert_eq(eachobs__cgroup2_path("0::relative\n", path,
					   sizeof(path)), -ENOENT);
	cr_assert_eq(eachobs__cgroup2_path("0::/a/very/long/cgroup/path\n",
					   path, sizeof(path)), -ENOENT,
		     "does not fit");
}

Test(cpus, default_threads_is_within_the_affinity_and_the_limits)
{
	cpu_set_t set;

	cr_assert_eq(sched_getaffinity(0, sizeof(set), &set), 0);
	unsigned n = eachobs__default_threads();
	cr_assert_geq(n, 1);
	cr_assert_leq(n, (unsigned)CPU_COUNT(&set));
	cr_assert_leq(n, EACHOBS_MAX_THREADS);
}

static size_t numobs(void *ctx)
{
	(void)ctx;
	return 1000;
}

static int getobs(void *ctx, size_t idx, void *obs)
{
	(void)ctx;
	memcpy(obs, &idx, sizeof(idx));
	return 0;
}

/* Under taskset -c K (or a launcher's binding), nthreads = 0 starts one
 * worker, not one per CPU of the machine; the buffer follows. */
ParameterizedTestParameters(cpus,
			    a_default_iterator_under_one_cpu_starts_one_worker)
{
	return worker_mode_params();
}

ParameterizedTest(const struct mode *m, cpus,
		  a_default_iterator_under_one_cpu_starts_one_worker)
{
	eachobs_dataset data = { NULL, numobs, getobs, sizeof(size_t) };
	cpu_set_t before, one;

	cr_assert_eq(sched_getaffinity(0, sizeof(before), &before), 0);
	int cpu = -1;
	for (int c = 0; c < CPU_SETSIZE && cpu < 0; c++)
		if (CPU_ISSET(c, &before))
			cpu = c;
	cr_assert_geq(cpu, 0);
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	cr_assert_eq(sched_setaffinity(0, sizeof(one), &one), 0);
	eachobs_options o = { .executor = m->executor,
			      .ordered = m->ordered };
	eachobs_iter *it;
	eachobs_stats st;
	size_t got = 0;

	cr_assert_eq(eachobs_parallel(&it, &data, &o), 0);
	while (eachobs_next(it, NULL, NULL) == 1)
		got++;
	cr_assert_eq(eachobs_get_stats(it, &st), 0);
	eachobs_close(it);
	cr_assert_eq(got, 1000);
	cr_assert_eq(st.nworkers, 1, "%s, ordered %d: %u workers "
		     "on one CPU", executor_name(m->executor),
		     m->ordered, st.nworkers);
	cr_assert_eq(sched_setaffinity(0, sizeof(before), &before), 0);
	cr_assert_eq(eachobs__alloc_live(), 0);
}

/* Back on every CPU it had, the default grows again: the affinity is read
 * per iterator, not once per process. */
Test(cpus, the_affinity_is_read_at_every_start)
{
	eachobs_dataset data = { NULL, numobs, getobs, sizeof(size_t) };
	eachobs_options o = { .executor = EACHOBS_BACKGROUND };
	cpu_set_t before, one;
	eachobs_iter *it;
	eachobs_stats st;

	cr_assert_eq(sched_getaffinity(0, sizeof(before), &before), 0);
	unsigned all = eachobs__default_threads();
	if (all < 2)
		cr_skip_test("this process may use %u CPU (2 needed)", all);
	CPU_ZERO(&one);
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &before)) {
			CPU_SET(c, &one);
			break;
		}
	cr_assert_eq(sched_setaffinity(0, sizeof(one), &one), 0);
	cr_assert_eq(eachobs__default_threads(), 1);
	cr_assert_eq(sched_setaffinity(0, sizeof(before), &before), 0);
	cr_assert_eq(eachobs_parallel(&it, &data, &o), 0);
	while (eachobs_next(it, NULL, NULL) == 1)
		;
	cr_assert_eq(eachobs_get_stats(it, &st), 0);
	eachobs_close(it);
	cr_assert_eq(st.nworkers, all);
}
