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
#include <dirent.h>
#include <errno.h>
#include <linux/capability.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

TestSuite(placement, .init = deadline, .timeout = 60);

#define MAX_TIDS 64

struct probe {
	pthread_t consumer;
	int want_cpu;       /* -1: do not check */
	const cpu_set_t *want_set; /* NULL, or the exact affinity to see */
	int want_nice;
	atomic_int wrong_cpus, wrong_nice, worker_calls;
	/* The workers' thread ids (a few may be listed twice). */
	atomic_int tids[MAX_TIDS];
	atomic_uint ntids;
};

static void note_tid(struct probe *p)
{
	int me = gettid();
	unsigned n = atomic_load(&p->ntids);

	for (unsigned i = 0; i < n && i < MAX_TIDS; i++)
		if (atomic_load(&p->tids[i]) == me)
			return;
	unsigned k = atomic_fetch_add(&p->ntids, 1);
	if (k < MAX_TIDS)
		atomic_store(&p->tids[k], me);
}

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
	note_tid(p);
	if (p->want_cpu >= 0 &&
	    (sched_getaffinity(0, sizeof(set), &set) != 0 ||
	     CPU_COUNT(&set) != 1 || !CPU_ISSET(p->want_cpu, &set)))
		atomic_fetch_add(&p->wrong_cpus, 1);
	if (p->want_set &&
	    (pthread_getaffinity_np(pthread_self(), sizeof(set), &set) != 0 ||
	     !CPU_EQUAL(&set, p->want_set)))
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

/* ---- placement on a pool's threads ------------------------------------ */

/* The first two CPUs the calling thread may run on; false with fewer. */
static bool two_cpus(int *a, int *b)
{
	cpu_set_t set;
	int found = 0;

	cr_assert_eq(sched_getaffinity(0, sizeof(set), &set), 0);
	for (int c = 0; c < CPU_SETSIZE && found < 2; c++)
		if (CPU_ISSET(c, &set))
			*(found++ ? b : a) = c;
	return found == 2;
}

static void *try_renice_back(void *arg)
{
	bool *ok = arg;

	errno = 0;
	int n = getpriority(PRIO_PROCESS, (id_t)gettid());
	*ok = errno == 0 &&
	      setpriority(PRIO_PROCESS, (id_t)gettid(), n + 1) == 0 &&
	      setpriority(PRIO_PROCESS, (id_t)gettid(), n) == 0;
	return NULL;
}

/* Whether a thread created now may lower its nice value again. */
static bool can_lower_nice(void)
{
	pthread_t t;
	bool ok = false;

	cr_assert_eq(pthread_create(&t, NULL, try_renice_back, &ok), 0);
	pthread_join(t, NULL);
	return ok;
}

/* The ids of the test's pool threads: those that appeared in
 * /proc/self/task while it was created (a thread joined a moment before
 * may still be listed, so counting would not do). */
static struct {
	int tid[MAX_TIDS];
	unsigned n;
} pool_threads;

static unsigned list_tids(int *tids, unsigned max)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	unsigned n = 0;

	cr_assert_not_null(d);
	while ((e = readdir(d)) != NULL && n < max)
		if (e->d_name[0] != '.')
			tids[n++] = atoi(e->d_name);
	closedir(d);
	return n;
}

static bool is_pool_thread(int tid)
{
	for (unsigned i = 0; i < pool_threads.n; i++)
		if (pool_threads.tid[i] == tid)
			return true;
	return false;
}

/* Note as the pool's the threads listed now that were not in before[0..nb). */
static void note_pool_threads(const int *before, unsigned nb)
{
	int after[MAX_TIDS];
	unsigned na = list_tids(after, MAX_TIDS);

	pool_threads.n = 0;
	for (unsigned i = 0; i < na; i++) {
		bool old = false;
		for (unsigned j = 0; j < nb; j++)
			old |= after[i] == before[j];
		if (!old)
			pool_threads.tid[pool_threads.n++] = after[i];
	}
}

static void create_pool(eachobs_pool **pool, unsigned nthreads)
{
	int before[MAX_TIDS];
	unsigned nb = list_tids(before, MAX_TIDS);

	cr_assert_eq(eachobs_pool_create(pool, nthreads), 0);
	note_pool_threads(before, nb);
	cr_assert_eq(pool_threads.n, nthreads);
}

/* Whether every worker thread the probe saw is one of the pool's (true)
 * or none is (false); fails the test when they are mixed. */
static bool workers_were_borrowed(struct probe *p)
{
	unsigned n = atomic_load(&p->ntids), in = 0;

	n = n < MAX_TIDS ? n : MAX_TIDS;
	cr_assert_gt(n, 0, "no getobs ran on a worker");
	for (unsigned i = 0; i < n; i++)
		in += is_pool_thread(atomic_load(&p->tids[i]));
	cr_assert(in == 0 || in == n, "%u of %u workers were the pool's", in,
		  n);
	return in == n;
}

/* Run an iterator on pool to its end and check, from inside getobs on the
 * workers, that they run on exactly `cpus` at nice `nice`; nthreads
 * workers, the pool's when `borrowed`, else threads of the iterator's
 * own. BACKGROUND, so that the workers load. */
static void run_on_pool(eachobs_pool *pool, const eachobs_options *base,
			const cpu_set_t *cpus, int nice, bool borrowed)
{
	struct probe p = { .want_cpu = -1, .want_set = cpus,
			   .want_nice = nice };
	eachobs_dataset data = { &p, numobs, getobs, sizeof(size_t) };
	eachobs_options o = *base;
	eachobs_iter *it;
	eachobs_stats st;
	int rc;

	o.pool = pool;
	p.consumer = pthread_self();
	cr_assert_eq(eachobs_parallel(&it, &data, &o), 0);
	if (o.batchsize) {
		eachobs_batch b;
		while ((rc = eachobs_next_batch(it, &b)) == 1)
			;
	} else {
		while ((rc = eachobs_next(it, NULL, NULL)) == 1)
			;
	}
	cr_assert_eq(eachobs_get_stats(it, &st), 0);
	eachobs_close(it);
	cr_assert_eq(rc, 0);
	cr_assert_eq(st.nworkers, o.nthreads);
	cr_assert_eq(workers_were_borrowed(&p), borrowed,
		     "the iterator %s its workers",
		     borrowed ? "created" : "borrowed");
	cr_assert_eq(atomic_load(&p.wrong_cpus), 0,
		     "%d getobs calls ran on other CPUs",
		     atomic_load(&p.wrong_cpus));
	cr_assert_eq(atomic_load(&p.wrong_nice), 0,
		     "%d getobs calls ran at another nice value than %d",
		     atomic_load(&p.wrong_nice), nice);
}

static cpu_set_t one_cpu(int c)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(c, &set);
	return set;
}

/* worker_cpus and worker_nice apply to borrowed threads too, ordered or
 * not, batched or not, alone or together. */
Test(placement, borrowed_threads_run_on_the_iterators_cpus_and_nice)
{
	const unsigned cpu0[] = { 0 };
	cpu_set_t home, only0 = one_cpu(0);
	eachobs_pool *pool;

	cr_assert_eq(sched_getaffinity(0, sizeof(home), &home), 0);
	if (!CPU_ISSET(0, &home))
		cr_skip_test("this process may not run on CPU 0");
	create_pool(&pool, 2);
	for (int ordered = 0; ordered < 2; ordered++) {
		{
			eachobs_options o = { .nthreads = 2,
					      .executor = EACHOBS_BACKGROUND,
					      .ordered = ordered };
			o.worker_cpus = cpu0;
			o.nworker_cpus = 1;
			run_on_pool(pool, &o, &only0, 0, true);
			o.worker_cpus = NULL;
			o.nworker_cpus = 0;
			o.worker_nice = 10;
			run_on_pool(pool, &o, &home, 10, true);
			o.worker_cpus = cpu0;
			o.nworker_cpus = 1;
			o.batchsize = 7;
			run_on_pool(pool, &o, &only0, 10, true);
		}
	}
	eachobs_pool_destroy(pool);
	cr_assert_eq(eachobs__alloc_live(), 0);
}

/* A validation iterator without placement, after a training iterator
 * with some: the pool's threads run where the pool's creator did. */
Test(placement, given_back_threads_have_the_pools_placement_again)
{
	const unsigned cpu0[] = { 0 };
	cpu_set_t home, only0 = one_cpu(0);
	eachobs_pool *pool;

	cr_assert_eq(sched_getaffinity(0, sizeof(home), &home), 0);
	if (!CPU_ISSET(0, &home))
		cr_skip_test("this process may not run on CPU 0");
	errno = 0;
	int nice = getpriority(PRIO_PROCESS, (id_t)gettid());
	cr_assert_eq(errno, 0);
	cr_assert_leq(nice, 10, "the test already runs at nice %d", nice);
	/* Without the privilege to lower a nice value again, the threads
	 * stay at 10 and the plain iterator creates its own (next test). */
	bool lowers = can_lower_nice();
	create_pool(&pool, 2);
	eachobs_options train = { .nthreads = 2,
				  .executor = EACHOBS_BACKGROUND,
				  .worker_cpus = cpu0, .nworker_cpus = 1,
				  .worker_nice = 10 };
	eachobs_options val = { .nthreads = 2, .executor = EACHOBS_BACKGROUND };
	for (int epoch = 0; epoch < 3; epoch++) {
		run_on_pool(pool, &train, &only0, 10, true);
		run_on_pool(pool, &val, &home, nice, lowers);
	}
	eachobs_pool_destroy(pool);
	cr_assert_eq(eachobs__alloc_live(), 0);
}

struct capability {
	struct __user_cap_header_struct head;
	struct __user_cap_data_struct data[2];
};

/* Drop CAP_SYS_NICE from the calling thread (capabilities are per thread,
 * and threads it creates inherit them) and forbid raising priority
 * through RLIMIT_NICE: this test process then cannot lower a nice value
 * again, as an ordinary user's cannot. */
static void drop_nice_privilege(void)
{
	struct capability c = { { _LINUX_CAPABILITY_VERSION_3, 0 }, { { 0 } } };
	struct rlimit none = { 0, 0 };

	cr_assert_eq(syscall(SYS_capget, &c.head, c.data), 0);
	c.data[CAP_TO_INDEX(CAP_SYS_NICE)].effective &= ~CAP_TO_MASK(CAP_SYS_NICE);
	c.data[CAP_TO_INDEX(CAP_SYS_NICE)].permitted &= ~CAP_TO_MASK(CAP_SYS_NICE);
	cr_assert_eq(syscall(SYS_capset, &c.head, c.data), 0);
	cr_assert_eq(setrlimit(RLIMIT_NICE, &none), 0);
}

/* Unprivileged, a thread that ran at nice 10 cannot go back to the pool's
 * nice value: an iterator without placement must not get it (it creates
 * threads of its own), one asking for nice 10 or more may. */
Test(placement, a_thread_left_reniced_is_lent_only_to_iterators_as_nice)
{
	cpu_set_t home;
	eachobs_pool *pool;

	cr_assert_eq(sched_getaffinity(0, sizeof(home), &home), 0);
	errno = 0;
	int nice = getpriority(PRIO_PROCESS, (id_t)gettid());
	cr_assert_eq(errno, 0);
	if (nice >= 10)
		cr_skip_test("the test already runs at nice %d", nice);
	drop_nice_privilege();
	cr_assert_not(can_lower_nice(), "the nice privilege is still there");
	create_pool(&pool, 2);
	eachobs_options niced = { .nthreads = 2, .executor = EACHOBS_BACKGROUND,
				  .worker_nice = 10 };
	eachobs_options plain = { .nthreads = 2, .executor = EACHOBS_BACKGROUND };
	eachobs_options nicer = { .nthreads = 2, .executor = EACHOBS_BACKGROUND,
				  .worker_nice = 12 };
	run_on_pool(pool, &niced, &home, 10, true);
	run_on_pool(pool, &plain, &home, nice, false);
	run_on_pool(pool, &niced, &home, 10, true);
	run_on_pool(pool, &nicer, &home, 12, true);
	run_on_pool(pool, &niced, &home, 10, false);
	eachobs_pool_destroy(pool);
	cr_assert_eq(eachobs__alloc_live(), 0);
}

/* The caller runs at nice 10 and may not lower a nice value: workers it
 * created would start at 10 and could not go down to worker_nice 5, so
 * the start is refused, with a message and nothing run; worker_nice 12
 * is a raise, and the workers run at it. */
Test(placement, a_worker_nice_below_the_callers_is_refused_without_the_privilege)
{
	errno = 0;
	int nice = getpriority(PRIO_PROCESS, (id_t)gettid());
	cr_assert_eq(errno, 0);
	if (nice > 10)
		cr_skip_test("the test already runs at nice %d", nice);
	cr_assert_eq(setpriority(PRIO_PROCESS, (id_t)gettid(), 10), 0);
	drop_nice_privilege();
	for (int pooled = 0; pooled < 2; pooled++) {
		struct probe p = { .want_cpu = -1, .want_nice = 12 };
		eachobs_dataset data = { &p, numobs, getobs, sizeof(size_t) };
		eachobs_pool *pool = NULL;
		if (pooled)
			create_pool(&pool, 2);
		eachobs_options o = { .nthreads = 2, .pool = pool,
				      .executor = EACHOBS_BACKGROUND,
				      .worker_nice = 5 };
		eachobs_iter *it = (eachobs_iter *)&p;
		cr_assert_eq(eachobs_parallel(&it, &data, &o), -EACCES,
			     "pool %d: worker_nice 5 from nice 10 was not "
			     "refused", pooled);
		cr_assert_null(it);
		cr_assert_eq(atomic_load(&p.worker_calls), 0);
		cr_assert(strstr(eachobs_last_error(), "worker_nice 5 is below "
				 "the calling thread's nice value 10"),
			  "\"%s\"", eachobs_last_error());
		o.worker_nice = 12;
		run(&p, &o);
		cr_assert_eq(atomic_load(&p.wrong_nice), 0,
			     "pool %d: %d getobs calls ran at another nice "
			     "value than 12", pooled, atomic_load(&p.wrong_nice));
		eachobs_pool_destroy(pool);
	}
	cr_assert_eq(eachobs__alloc_live(), 0);
}

struct pool_at {
	eachobs_pool *pool;
	int rc;
};

/* On a thread of its own, which may raise its nice value to 10 without
 * touching the test's: create the pool there, at 10. */
static void *create_at_nice_10(void *arg)
{
	struct pool_at *a = arg;

	a->rc = setpriority(PRIO_PROCESS, (id_t)gettid(), 10);
	if (a->rc == 0)
		a->rc = eachobs_pool_create(&a->pool, 2);
	return NULL;
}

/* A pool made at nice 10 by a process that may not lower a nice value:
 * its threads cannot go down to worker_nice 5, so an iterator asking for
 * 5 from nice 0 is not lent them, and every getobs of its workers (of
 * its own) runs at 5. */
Test(placement, a_pool_above_worker_nice_lends_only_threads_that_reach_it)
{
	cpu_set_t home;
	struct pool_at a = { NULL, -1 };
	pthread_t t;
	int before[MAX_TIDS];

	errno = 0;
	int nice = getpriority(PRIO_PROCESS, (id_t)gettid());
	cr_assert_eq(errno, 0);
	if (nice >= 5)
		cr_skip_test("the test already runs at nice %d", nice);
	cr_assert_eq(sched_getaffinity(0, sizeof(home), &home), 0);
	drop_nice_privilege();
	unsigned nb = list_tids(before, MAX_TIDS);
	cr_assert_eq(pthread_create(&t, NULL, create_at_nice_10, &a), 0);
	pthread_join(t, NULL);
	cr_assert_eq(a.rc, 0);
	/* The joined creator may still be listed: it runs no getobs. */
	note_pool_threads(before, nb);
	eachobs_options o = { .nthreads = 2, .executor = EACHOBS_BACKGROUND,
			      .worker_nice = 5 };
	run_on_pool(a.pool, &o, &home, 5, false);
	eachobs_pool_destroy(a.pool);
	cr_assert_eq(eachobs__alloc_live(), 0);
}

/* Training and validation at once on one pool, each with its own CPU and
 * nice value: threads are lent to one iterator at a time, so neither
 * undoes the other's placement. */
Test(placement, two_iterators_on_one_pool_each_run_on_their_own_placement)
{
	int a, b;

	if (!two_cpus(&a, &b))
		cr_skip_test("needs 2 CPUs this process may run on");
	const unsigned ca[] = { (unsigned)a }, cb[] = { (unsigned)b };
	cpu_set_t sa = one_cpu(a), sb = one_cpu(b);
	struct probe pa = { .want_cpu = -1, .want_set = &sa, .want_nice = 5 };
	struct probe pb = { .want_cpu = -1, .want_set = &sb, .want_nice = 10 };
	eachobs_dataset da = { &pa, numobs, getobs, sizeof(size_t) };
	eachobs_dataset db = { &pb, numobs, getobs, sizeof(size_t) };
	eachobs_pool *pool;
	eachobs_iter *ia, *ib;
	eachobs_stats st;
	size_t got = 0;

	create_pool(&pool, 2);
	pa.consumer = pb.consumer = pthread_self();
	eachobs_options oa = { .pool = pool, .nthreads = 1,
			       .executor = EACHOBS_BACKGROUND, .buffersize = 2,
			       .worker_cpus = ca, .nworker_cpus = 1,
			       .worker_nice = 5 };
	eachobs_options ob = { .pool = pool, .nthreads = 1,
			       .executor = EACHOBS_BACKGROUND,
			       .worker_cpus = cb, .nworker_cpus = 1,
			       .worker_nice = 10 };
	cr_assert_eq(eachobs_parallel(&ia, &da, &oa), 0);
	cr_assert_eq(eachobs_next(ia, NULL, NULL), 1);
	cr_assert_eq(eachobs_parallel(&ib, &db, &ob), 0);

	while (eachobs_next(ib, NULL, NULL) == 1)
		got++;
	cr_assert_eq(eachobs_get_stats(ib, &st), 0);
	cr_assert_eq(st.nworkers, 1);
	eachobs_close(ib);
	cr_assert_eq(got, 200);
	for (got = 1; eachobs_next(ia, NULL, NULL) == 1;)
		got++;
	eachobs_close(ia);
	cr_assert_eq(got, 200);
	eachobs_pool_destroy(pool);
	cr_assert(workers_were_borrowed(&pa), "the first created a thread");
	cr_assert(workers_were_borrowed(&pb), "the second created a thread");
	cr_assert_eq(atomic_load(&pa.wrong_cpus) + atomic_load(&pb.wrong_cpus),
		     0, "CPUs: %d wrong calls for the first, %d the second",
		     atomic_load(&pa.wrong_cpus), atomic_load(&pb.wrong_cpus));
	cr_assert_eq(atomic_load(&pa.wrong_nice) + atomic_load(&pb.wrong_nice),
		     0, "nice: %d wrong calls for the first, %d the second",
		     atomic_load(&pa.wrong_nice), atomic_load(&pb.wrong_nice));
	cr_assert_eq(eachobs__alloc_live(), 0);
}

/* A CPU the system refuses fails the start on borrowed threads as on
 * created ones: -EAGAIN, no getobs, nothing left; and the pool's threads
 * come back where they were. */
Test(placement, a_cpu_the_system_cannot_use_on_a_pool_gives_eagain)
{
	const unsigned absent[] = { EACHOBS_MAX_CPU - 1 };
	struct probe p = { .want_cpu = -1 };
	eachobs_dataset data = { &p, numobs, getobs, sizeof(size_t) };
	cpu_set_t home;
	eachobs_pool *pool;
	eachobs_iter *it;

	if (sysconf(_SC_NPROCESSORS_CONF) >= (long)EACHOBS_MAX_CPU)
		cr_skip_test("this machine has CPU %u", EACHOBS_MAX_CPU - 1);
	cr_assert_eq(sched_getaffinity(0, sizeof(home), &home), 0);
	errno = 0;
	int nice = getpriority(PRIO_PROCESS, (id_t)gettid());
	cr_assert_eq(errno, 0);
	create_pool(&pool, 2);
	long live = eachobs__alloc_live();
	/* Every worker lent; then one lent and one created, each refused. */
	unsigned nthreads[] = { 0, 2, 1, 3 };
	for (size_t i = 0; i < sizeof(nthreads) / sizeof(nthreads[0]); i++) {
		for (int ordered = 0; ordered < 2; ordered++) {
			eachobs_options o = { .pool = pool,
					      .nthreads = nthreads[i],
					      .ordered = ordered,
					      .worker_cpus = absent,
					      .nworker_cpus = 1,
					      .worker_nice = 10 };
			it = (eachobs_iter *)1;
			cr_assert_eq(eachobs_parallel(&it, &data, &o), -EAGAIN,
				     "nthreads %u", nthreads[i]);
			cr_assert_null(it);
			cr_assert_eq(eachobs__alloc_live(), live);
			cr_assert_eq(threads_settle(threads_base + 2, 2.0),
				     threads_base + 2);
		}
	}
	cr_assert_eq(atomic_load(&p.worker_calls), 0, "getobs ran");
	eachobs_options plain = { .nthreads = 2, .executor = EACHOBS_BACKGROUND };
	run_on_pool(pool, &plain, &home, nice, true);
	eachobs_pool_destroy(pool);
	cr_assert_eq(eachobs__alloc_live(), 0);
}
