/*
 * The lender alone (src/lender.h), without an iterator: loans of a pool's
 * threads running a probe job. Every job of a loan runs exactly once, on
 * a thread of the pool; a thread is lent to one loan at a time; wait
 * returns only after every job has returned; a loan gets at most the idle
 * threads; a lent thread runs its job on the loan's CPUs and nice value;
 * CPUs the system refuses are told before the loan starts.
 *
 * Jobs run on the pool's threads, where Criterion assertions must not be
 * used: they record what they saw under the probe's lock, and the test
 * asserts on the record from its own thread.
 */
#define _GNU_SOURCE
#include "helpers.h"
#include "lender.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

TestSuite(lender, .init = deadline, .timeout = 60);

#define MAXJ 32

/* What the jobs of one loan saw. */
struct probe {
	pthread_mutex_t lock;
	pthread_cond_t cond;   /* started, returned or release changed */
	bool hold;             /* jobs wait for release before returning */
	bool release;
	unsigned started;
	unsigned returned;     /* the last thing a job does */
	unsigned runs[MAXJ];
	pthread_t thread[MAXJ];
	pthread_t caller;      /* the test's thread */
	unsigned on_caller;    /* jobs run on it */
	const cpu_set_t *want_cpus; /* NULL: not checked */
	int want_nice;         /* INT_MIN: not checked */
	unsigned wrong_cpus, wrong_nice;
	struct thread_set *seen; /* NULL, or every thread a job ran on */
};

static void probe_init(struct probe *pr, bool hold)
{
	memset(pr, 0, sizeof(*pr));
	pthread_mutex_init(&pr->lock, NULL);
	pthread_cond_init(&pr->cond, NULL);
	pr->hold = hold;
	pr->caller = pthread_self();
	pr->want_nice = INT_MIN;
}

static void probe_fini(struct probe *pr)
{
	pthread_cond_destroy(&pr->cond);
	pthread_mutex_destroy(&pr->lock);
}

static bool cpus_wrong(const struct probe *pr)
{
	cpu_set_t set;

	return pr->want_cpus && (sched_getaffinity(0, sizeof(set), &set) != 0 ||
				 !CPU_EQUAL(&set, pr->want_cpus));
}

static bool nice_wrong(const struct probe *pr)
{
	if (pr->want_nice == INT_MIN)
		return false;
	errno = 0;
	int n = getpriority(PRIO_PROCESS, (id_t)gettid());
	return errno != 0 || n != pr->want_nice;
}

static void job(void *arg, unsigned j)
{
	struct probe *pr = arg;
	bool bad_cpus = cpus_wrong(pr), bad_nice = nice_wrong(pr);

	if (pr->seen)
		thread_set_add(pr->seen, pthread_self());
	pthread_mutex_lock(&pr->lock);
	if (j < MAXJ) {
		pr->runs[j]++;
		pr->thread[j] = pthread_self();
	}
	pr->on_caller += pthread_equal(pthread_self(), pr->caller);
	pr->wrong_cpus += bad_cpus;
	pr->wrong_nice += bad_nice;
	pr->started++;
	pthread_cond_broadcast(&pr->cond);
	while (pr->hold && !pr->release)
		pthread_cond_wait(&pr->cond, &pr->lock);
	pr->returned++;
	pthread_cond_broadcast(&pr->cond);
	pthread_mutex_unlock(&pr->lock);
}

static struct eachobs__loan loan_of(struct probe *pr)
{
	return (struct eachobs__loan){ .fn = job, .arg = pr };
}

/* Wait, up to a deadline, until n jobs of pr have started. */
static void wait_started(struct probe *pr, unsigned n)
{
	struct timespec end;

	clock_gettime(CLOCK_REALTIME, &end);
	end.tv_sec += 10;
	pthread_mutex_lock(&pr->lock);
	int rc = 0;
	while (pr->started < n && rc == 0)
		rc = pthread_cond_timedwait(&pr->cond, &pr->lock, &end);
	unsigned started = pr->started;
	pthread_mutex_unlock(&pr->lock);
	cr_assert_geq(started, n, "only %u of %u jobs started in 10 s",
		      started, n);
}

static void release(struct probe *pr)
{
	pthread_mutex_lock(&pr->lock);
	pr->release = true;
	pthread_cond_broadcast(&pr->cond);
	pthread_mutex_unlock(&pr->lock);
}

/* After wait: job j ran once for every j < k, none other, none on the
 * caller's thread, and no two on one thread. */
static void check_ran_once(const struct probe *pr, unsigned k)
{
	/* Each read once, so that a message names what was checked even
	 * when a broken lender lets jobs run on. */
	for (unsigned j = 0; j < MAXJ; j++) {
		unsigned runs = pr->runs[j];
		cr_assert_eq(runs, j < k ? 1u : 0u, "job %u of %u ran %u times",
			     j, k, runs);
	}
	unsigned returned = pr->returned;
	cr_assert_eq(returned, k, "%u of %u jobs returned", returned, k);
	cr_assert_eq(pr->on_caller, 0, "a job ran on the caller's thread");
	for (unsigned a = 0; a < k; a++)
		for (unsigned b = a + 1; b < k; b++)
			cr_assert(!pthread_equal(pr->thread[a], pr->thread[b]),
				  "jobs %u and %u ran on one thread", a, b);
}

/* Whether *flag, set under lock with a broadcast of cond, came within ms
 * milliseconds. */
static bool set_within(pthread_mutex_t *lock, pthread_cond_t *cond,
		       const bool *flag, long ms)
{
	struct timespec end;

	clock_gettime(CLOCK_REALTIME, &end);
	end.tv_nsec += ms * 1000 * 1000;
	end.tv_sec += end.tv_nsec / 1000000000;
	end.tv_nsec %= 1000000000;
	pthread_mutex_lock(lock);
	while (!*flag && pthread_cond_timedwait(cond, lock, &end) == 0)
		;
	bool set = *flag;
	pthread_mutex_unlock(lock);
	return set;
}

static eachobs_pool *make_pool(unsigned n)
{
	eachobs_pool *pool;

	cr_assert_eq(eachobs_pool_create(&pool, n), 0);
	cr_assert_eq(eachobs__lender_size(pool), n);
	return pool;
}

Test(lender, every_job_runs_exactly_once_on_a_thread_of_the_pool)
{
	const unsigned sizes[] = { 1, 2, 3, 5, 8, 13, 16 };
	eachobs_pool *pool = make_pool(16);
	struct thread_set seen;

	thread_set_init(&seen);
	for (int round = 0; round < 20; round++) {
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			struct probe pr;
			probe_init(&pr, false);
			pr.seen = &seen;
			struct eachobs__loan loan = loan_of(&pr);
			unsigned k = eachobs__lender_reserve(pool, &loan,
							     sizes[s]);
			cr_assert_eq(k, sizes[s], "an idle pool of 16 lent %u "
				     "threads of %u", k, sizes[s]);
			/* One wake-up starts them all (the tree). */
			eachobs__lender_wake(&loan);
			eachobs__lender_wait(pool, &loan);
			check_ran_once(&pr, k);
			probe_fini(&pr);
		}
	}
	/* Threads of the pool, not new ones per loan. */
	cr_assert_leq(seen.n, 16, "jobs ran on %u threads, the pool has 16",
		      seen.n);
	thread_set_fini(&seen);
	eachobs_pool_destroy(pool);
}

/* Loans a and b of three threads each on a pool of six, both reserved
 * before either starts, or b reserved while a's jobs run; then all six
 * run at once, each on its own thread, and a third loan gets none. */
static void share_nothing(eachobs_pool *pool, bool a_runs_first)
{
	struct probe a, b, c;

	probe_init(&a, true);
	probe_init(&b, true);
	probe_init(&c, false);
	struct eachobs__loan la = loan_of(&a), lb = loan_of(&b),
			     lc = loan_of(&c);
	cr_assert_eq(eachobs__lender_reserve(pool, &la, 3), 3);
	if (a_runs_first) {
		eachobs__lender_wake(&la);
		wait_started(&a, 3);
	}
	cr_assert_eq(eachobs__lender_reserve(pool, &lb, 3), 3);
	unsigned k = eachobs__lender_reserve(pool, &lc, 1);
	cr_assert_eq(k, 0, "%u thread lent while all six were", k);
	if (!a_runs_first)
		eachobs__lender_wake(&la);
	eachobs__lender_wake(&lb);
	wait_started(&a, 3);
	wait_started(&b, 3);
	for (unsigned i = 0; i < 3; i++)
		for (unsigned j = 0; j < 3; j++)
			cr_assert(!pthread_equal(a.thread[i], b.thread[j]),
				  "job %u of one loan and %u of the other ran "
				  "on one thread", i, j);
	release(&a);
	release(&b);
	eachobs__lender_wait(pool, &la);
	eachobs__lender_wait(pool, &lb);
	eachobs__lender_wait(pool, &lc);
	check_ran_once(&a, 3);
	check_ran_once(&b, 3);
	check_ran_once(&c, 0);
	probe_fini(&a);
	probe_fini(&b);
	probe_fini(&c);
}

Test(lender, two_loans_never_share_a_thread)
{
	eachobs_pool *pool = make_pool(6);

	share_nothing(pool, false);
	share_nothing(pool, true);
	eachobs_pool_destroy(pool);
}

struct waiter {
	eachobs_pool *pool;
	struct eachobs__loan *loan;
	struct probe *pr;
	unsigned returned_then; /* jobs returned when wait returned */
	bool done;
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;

	eachobs__lender_wait(w->pool, w->loan);
	pthread_mutex_lock(&w->pr->lock);
	w->returned_then = w->pr->returned;
	w->done = true;
	pthread_cond_broadcast(&w->pr->cond);
	pthread_mutex_unlock(&w->pr->lock);
	return NULL;
}

Test(lender, wait_returns_only_after_every_job_returned)
{
	eachobs_pool *pool = make_pool(4);
	struct probe pr;
	struct waiter w = { .pool = pool };
	pthread_t t;

	probe_init(&pr, true);
	struct eachobs__loan loan = loan_of(&pr);
	w.loan = &loan;
	w.pr = &pr;
	cr_assert_eq(eachobs__lender_reserve(pool, &loan, 4), 4);
	eachobs__lender_wake(&loan);
	wait_started(&pr, 4);
	cr_assert_eq(pthread_create(&t, NULL, waiter_main, &w), 0);
	/* The jobs are held: a wait that returned now would be early. Give
	 * it 200 ms to do so: a deadline for something that must not
	 * happen, not a synchronization (a correct wait passes either way). */
	bool early = set_within(&pr.lock, &pr.cond, &w.done, 200);
	release(&pr);
	pthread_join(t, NULL);
	cr_assert(!early, "wait returned while every job was still running");
	cr_assert_eq(w.returned_then, 4,
		     "wait returned when %u of 4 jobs had returned",
		     w.returned_then);
	check_ran_once(&pr, 4);
	probe_fini(&pr);

	/* The loan may be used again once wait returned. */
	probe_init(&pr, false);
	loan = loan_of(&pr);
	cr_assert_eq(eachobs__lender_reserve(pool, &loan, 4), 4);
	eachobs__lender_wake(&loan);
	eachobs__lender_wait(pool, &loan);
	check_ran_once(&pr, 4);
	probe_fini(&pr);
	eachobs_pool_destroy(pool);
}

Test(lender, a_loan_gets_at_most_the_idle_threads)
{
	eachobs_pool *pool = make_pool(3);
	struct probe a, b, none;

	/* More than the pool has: all of it. */
	probe_init(&a, false);
	struct eachobs__loan la = loan_of(&a);
	cr_assert_eq(eachobs__lender_reserve(pool, &la, 5), 3);
	eachobs__lender_wake(&la);
	eachobs__lender_wait(pool, &la);
	check_ran_once(&a, 3);
	probe_fini(&a);

	/* Two held, then five asked: the one left idle. */
	probe_init(&a, true);
	probe_init(&b, false);
	la = loan_of(&a);
	struct eachobs__loan lb = loan_of(&b);
	cr_assert_eq(eachobs__lender_reserve(pool, &la, 2), 2);
	eachobs__lender_wake(&la);
	wait_started(&a, 2);
	unsigned k = eachobs__lender_reserve(pool, &lb, 5);
	cr_assert_eq(k, 1, "two of three threads busy: %u lent, not 1", k);
	eachobs__lender_wake(&lb);
	eachobs__lender_wait(pool, &lb);
	check_ran_once(&b, 1);
	release(&a);
	eachobs__lender_wait(pool, &la);
	check_ran_once(&a, 2);

	/* None asked, none lent: wait returns at once. */
	probe_init(&none, false);
	struct eachobs__loan ln = loan_of(&none);
	cr_assert_eq(eachobs__lender_reserve(pool, &ln, 0), 0);
	cr_assert_null(ln.first);
	eachobs__lender_wake(&ln);
	eachobs__lender_wait(pool, &ln);
	check_ran_once(&none, 0);
	probe_fini(&a);
	probe_fini(&b);
	probe_fini(&none);
	eachobs_pool_destroy(pool);
}

/* A CPU this process may run on, other than the first if it has two. */
static int usable_cpu(const cpu_set_t *all)
{
	int first = -1;

	for (int c = 0; c < CPU_SETSIZE; c++) {
		if (!CPU_ISSET(c, all))
			continue;
		if (first >= 0)
			return c;
		first = c;
	}
	return first;
}

/* One loan of all n threads with that placement, checked inside the jobs. */
static void run_placed(eachobs_pool *pool, unsigned n, const cpu_set_t *cpus,
		       int nice, const cpu_set_t *want_cpus, int want_nice,
		       unsigned *k)
{
	struct probe pr;

	probe_init(&pr, false);
	pr.want_cpus = want_cpus;
	pr.want_nice = want_nice;
	struct eachobs__loan loan = loan_of(&pr);
	loan.cpus = cpus;
	loan.nice = nice;
	*k = eachobs__lender_reserve(pool, &loan, n);
	cr_assert_eq(eachobs__lender_check_cpus(&loan), 0);
	eachobs__lender_wake(&loan);
	eachobs__lender_wait(pool, &loan);
	check_ran_once(&pr, *k);
	cr_assert_eq(pr.wrong_cpus, 0, "%u of %u jobs ran on other CPUs",
		     pr.wrong_cpus, *k);
	cr_assert_eq(pr.wrong_nice, 0, "%u of %u jobs ran at another nice "
		     "value than %d", pr.wrong_nice, *k, want_nice);
	probe_fini(&pr);
}

Test(lender, jobs_run_on_the_loans_cpus_then_the_pools_again)
{
	cpu_set_t home, one;
	unsigned k;

	cr_assert_eq(sched_getaffinity(0, sizeof(home), &home), 0);
	CPU_ZERO(&one);
	CPU_SET(usable_cpu(&home), &one);
	eachobs_pool *pool = make_pool(4);
	for (int round = 0; round < 3; round++) {
		run_placed(pool, 4, &one, 0, &one, INT_MIN, &k);
		cr_assert_eq(k, 4);
		run_placed(pool, 4, NULL, 0, &home, INT_MIN, &k);
		cr_assert_eq(k, 4);
	}
	eachobs_pool_destroy(pool);
}

Test(lender, jobs_run_at_the_loans_nice_value_or_are_not_lent)
{
	unsigned k;

	errno = 0;
	int home = getpriority(PRIO_PROCESS, (id_t)gettid());
	cr_assert_eq(errno, 0);
	cr_assert_leq(home, 5, "the test already runs at nice %d", home);
	eachobs_pool *pool = make_pool(4);
	run_placed(pool, 4, NULL, 7, NULL, 7, &k);
	cr_assert_eq(k, 4);
	/* Back to the pool's: every thread with CAP_SYS_NICE, none without
	 * (a thread that could not lower its nice value is not lent to a
	 * loan asking for less); never one left at 7. */
	run_placed(pool, 4, NULL, 0, NULL, home, &k);
	cr_assert(k == 0 || k == 4, "%u threads lent", k);
	/* Asking at least as much always gets every thread. */
	run_placed(pool, 4, NULL, 9, NULL, 9, &k);
	cr_assert_eq(k, 4);
	errno = 0;
	cr_assert_eq(getpriority(PRIO_PROCESS, (id_t)gettid()), home,
		     "the caller's nice value changed");
	eachobs_pool_destroy(pool);
}

Test(lender, cpus_the_system_refuses_are_told_before_the_loan_starts)
{
	cpu_set_t home, absent;
	int cpu = -1;

	cr_assert_eq(sched_getaffinity(0, sizeof(home), &home), 0);
	for (int c = CPU_SETSIZE - 1; c >= 0 && cpu < 0; c--)
		if (!CPU_ISSET(c, &home))
			cpu = c;
	cr_assert_geq(cpu, 0, "every CPU of a cpu_set_t is usable here");
	CPU_ZERO(&absent);
	CPU_SET(cpu, &absent);
	eachobs_pool *pool = make_pool(2);
	struct probe pr;
	probe_init(&pr, false);
	pr.want_cpus = &home;
	struct eachobs__loan loan = loan_of(&pr);
	loan.cpus = &absent;
	cr_assert_eq(eachobs__lender_reserve(pool, &loan, 2), 2);
	cr_assert_eq(eachobs__lender_check_cpus(&loan), -EAGAIN);
	/* The loan runs all the same, its threads left where they were. */
	eachobs__lender_wake(&loan);
	eachobs__lender_wait(pool, &loan);
	check_ran_once(&pr, 2);
	cr_assert_eq(pr.wrong_cpus, 0, "a thread moved off the pool's CPUs");
	probe_fini(&pr);
	eachobs_pool_destroy(pool);
}

struct destroyer {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	eachobs_pool *pool;
	bool done;
};

static void *destroyer_main(void *arg)
{
	struct destroyer *d = arg;

	eachobs_pool_destroy(d->pool);
	pthread_mutex_lock(&d->lock);
	d->done = true;
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

Test(lender, destroy_waits_until_every_user_detached)
{
	struct destroyer d = { .pool = make_pool(2) };
	pthread_t t;

	eachobs_pool_destroy(NULL);
	pthread_mutex_init(&d.lock, NULL);
	pthread_cond_init(&d.cond, NULL);
	eachobs__lender_attach(d.pool);
	eachobs__lender_attach(d.pool);
	eachobs__lender_detach(d.pool);
	cr_assert_eq(pthread_create(&t, NULL, destroyer_main, &d), 0);
	/* A deadline for something that must not happen, as for wait. */
	bool early = set_within(&d.lock, &d.cond, &d.done, 200);
	eachobs__lender_detach(d.pool);
	bool late = !set_within(&d.lock, &d.cond, &d.done, 10000);
	pthread_join(t, NULL);
	cr_assert(!early, "destroy returned while a user was attached");
	cr_assert(!late, "destroy still waits 10 s after the last detach");
	pthread_cond_destroy(&d.cond);
	pthread_mutex_destroy(&d.lock);
}
