/*
 * Keeping workers off the training thread's core: worker_cpus restricts
 * where workers run, worker_nice lowers their priority; the consumer's own
 * thread is left alone.
 */
#define _GNU_SOURCE
#include "eachobs.h"
#include "fault.h"
#include "helpers.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <unistd.h>

TestSuite(placement, .init = deadline, .timeout = 60);

struct probe {
	pthread_t consumer;
	int want_cpu;       /* -1: do not check */
	int want_nice;
	atomic_int wrong_cpus, wrong_nice, worker_calls;
};

static size_t numobs(void *ctx)
{
	(void)ctx;
	return 200;
}

static int getobs(void *ctx, size_t idx, void *obs)
{
	struct probe *p = ctx;
	cpu_set_t set;

	*(size_t *)obs = idx;
	if (pthread_equal(pthread_self(), p->consumer))
		return 0;
	atomic_fetch_add(&p->worker_calls, 1);
	if (p->want_cpu >= 0 &&
	    (sched_getaffinity(0, sizeof(set), &set) != 0 ||
	     CPU_COUNT(&set) != 1 || !CPU_ISSET(p->want_cpu, &set)))
		atomic_fetch_add(&p->wrong_cpus, 1);
	errno = 0;
	if (getpriority(PRIO_PROCESS, (id_t)gettid()) != p->want_nice ||
	    errno != 0)
		atomic_fetch_add(&p->wrong_nice, 1);
	return 0;
}

static void run(struct probe *p, const eachobs_options *o)
{
	eachobs_dataset data = { p, numobs, getobs, sizeof(size_t) };
	eachobs_iter *it;
	const void *obs;
	size_t idx;
	int rc;

	p->consumer = pthread_self();
	cr_assert_eq(eachobs_parallel(&it, &data, o), 0);
	while ((rc = eachobs_next(it, &obs, &idx)) == 1)
		;
	eachobs_close(it);
	cr_assert_eq(rc, 0);
	cr_assert_gt(atomic_load(&p->worker_calls), 0);
}

Test(placement, workers_run_only_on_the_given_cpus)
{
	const unsigned cpus[] = { 0 };
	struct probe p = { .want_cpu = 0, .want_nice = 0 };
	eachobs_options o = { .nthreads = 3, .executor = EACHOBS_BACKGROUND,
			      .worker_cpus = cpus, .nworker_cpus = 1 };
	cpu_set_t before, after;

	cr_assert_eq(sched_getaffinity(0, sizeof(before), &before), 0);
	run(&p, &o);
	cr_assert_eq(atomic_load(&p.wrong_cpus), 0,
		     "%d getobs calls ran outside worker_cpus",
		     atomic_load(&p.wrong_cpus));
	cr_assert_eq(sched_getaffinity(0, sizeof(after), &after), 0);
	cr_assert(CPU_EQUAL(&before, &after), "the consumer was pinned too");
}

Test(placement, workers_run_at_the_given_nice_value)
{
	struct probe p = { .want_cpu = -1, .want_nice = 10 };
	eachobs_options o = { .nthreads = 3, .executor = EACHOBS_BACKGROUND,
			      .worker_nice = 10 };

	errno = 0;
	int before = getpriority(PRIO_PROCESS, (id_t)gettid());
	cr_assert_eq(errno, 0);
	cr_assert_leq(before, 10, "the test already runs at nice %d", before);
	run(&p, &o);
	cr_assert_eq(atomic_load(&p.wrong_nice), 0,
		     "%d getobs calls ran at another nice value",
		     atomic_load(&p.wrong_nice));
	cr_assert_eq(getpriority(PRIO_PROCESS, (id_t)gettid()), before,
		     "the consumer's priority changed");
}

Test(placement, rejects_bad_placement_options)
{
	const unsigned too_high[] = { EACHOBS_MAX_CPU };
	struct probe p = { .want_cpu = -1 };
	eachobs_dataset data = { &p, numobs, getobs, sizeof(size_t) };
	eachobs_options bad[] = {
		{ .nthreads = 2, .worker_nice = -1 },
		{ .nthreads = 2, .worker_nice = 20 },
		{ .nthreads = 2, .nworker_cpus = 1 },
		{ .nthreads = 2, .worker_cpus = too_high, .nworker_cpus = 1 },
	};
	eachobs_iter *it;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_eq(eachobs_parallel(&it, &data, &bad[i]), -EINVAL,
			     "case %zu", i);
		cr_assert_null(it);
	}
	cr_assert_eq(eachobs__alloc_live(), 0);
	cr_assert_eq(atomic_load(&p.worker_calls), 0);
}

Test(placement, a_cpu_the_system_cannot_use_gives_eagain)
{
	const unsigned absent[] = { EACHOBS_MAX_CPU - 1 };
	struct probe p = { .want_cpu = -1 };
	eachobs_dataset data = { &p, numobs, getobs, sizeof(size_t) };
	eachobs_options o = { .nthreads = 2, .worker_cpus = absent,
			      .nworker_cpus = 1 };
	eachobs_iter *it;

	if (sysconf(_SC_NPROCESSORS_CONF) >= (long)EACHOBS_MAX_CPU)
		cr_skip_test("this machine has CPU %u", EACHOBS_MAX_CPU - 1);
	cr_assert_eq(eachobs_parallel(&it, &data, &o), -EAGAIN);
	cr_assert_null(it);
	cr_assert_eq(eachobs__alloc_live(), 0);
	cr_assert_eq(atomic_load(&p.worker_calls), 0);
}

/* SERIAL ignores placement: a NULL list with a count, or CPU numbers out of
 * range, must neither fail nor be read (the fuzzer found a NULL read). */
Test(placement, serial_ignores_placement_options_without_reading_them)
{
	static const unsigned far[] = { EACHOBS_MAX_CPU + 5 };
	eachobs_options o = { .executor = EACHOBS_SERIAL, .nworker_cpus = 3 };
	struct td td;
	eachobs_dataset data;
	eachobs_iter *it;
	size_t got = 0;

	td_init(&td, 5, 8, 5);
	data = td_dataset(&td);
	cr_assert_eq(eachobs_parallel(&it, &data, &o), 0, "NULL list, count 3");
	while (eachobs_next(it, NULL, NULL) == 1)
		got++;
	cr_assert_eq(got, 5);
	eachobs_close(it);
	o.worker_cpus = far;
	o.nworker_cpus = 1;
	cr_assert_eq(eachobs_parallel(&it, &data, &o), 0, "CPU out of range");
	eachobs_close(it);
	td_fini(&td);
	cr_assert_eq(eachobs__alloc_live(), 0);
}
