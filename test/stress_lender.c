/*
 * The lender under threads: several callers, started on a barrier, take
 * loans of one pool's threads at random sizes and placements, at once.
 * Every job of every loan must run exactly once, with the loan's
 * placement in force, and what a job wrote must be there once wait
 * returns. A plain main(), so that it also runs under ThreadSanitizer,
 * which then checks that reserve publishes the loan to its threads and
 * wait publishes what the jobs wrote back to the caller (the jobs' plain
 * reads and writes below rely on nothing else).
 *
 * A watchdog turns a hang (a job that never runs, so a wait that never
 * returns) into a failure with a message.
 *
 * usage: stress_lender [LOANS [POOL [CALLERS [SEED]]]]
 *        (default 2000 loans per caller, 6 threads, 3 callers, seed 1)
 */
#define _GNU_SOURCE
#include "lender.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define MAX_POOL 62
#define MAX_CALLERS 16
#define MAXK (MAX_POOL + 2)

static eachobs_pool *pool;
static unsigned pool_size;
static unsigned long long loans_per_caller, seed;
static int home_nice;
static pthread_barrier_t barrier;
static _Atomic unsigned long long lent; /* threads lent in all */
static _Atomic unsigned long long done; /* loans waited for */
/* One set per CPU the process may use: loans pick theirs from here. */
static cpu_set_t cpu_sets[CPU_SETSIZE];
static unsigned ncpu_sets;

static _Noreturn void fail(unsigned caller, unsigned long long n,
			   const char *what)
{
	fprintf(stderr, "stress_lender: FAIL (seed %llu, caller %u, loan %llu): "
		"%s\n", seed, caller, n, what);
	exit(1);
}

static uint64_t next_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* One loan and what its jobs saw. Plain fields are written by the caller
 * before reserve and read by the jobs, or written by job j alone and read
 * by the caller after wait. */
struct state {
	struct eachobs__loan loan;
	uint64_t magic;
	int want_nice;
	uint64_t wrote[MAXK];
	_Atomic unsigned runs[MAXK];
	_Atomic unsigned wrong_cpus, wrong_nice;
};

static void job(void *arg, unsigned j)
{
	struct state *st = arg;
	cpu_set_t set;

	atomic_fetch_add(&st->runs[j < MAXK ? j : MAXK - 1], 1);
	if (st->loan.cpus &&
	    (sched_getaffinity(0, sizeof(set), &set) != 0 ||
	     !CPU_EQUAL(&set, st->loan.cpus)))
		atomic_fetch_add(&st->wrong_cpus, 1);
	errno = 0;
	if (getpriority(PRIO_PROCESS, (id_t)gettid()) != st->want_nice ||
	    errno)
		atomic_fetch_add(&st->wrong_nice, 1);
	if (j < MAXK)
		st->wrote[j] = st->magic + j;
}

static void one(struct state *st, unsigned caller, unsigned long long n,
		uint64_t *rng)
{
	unsigned want = (unsigned)(next_rand(rng) % (pool_size + 3));
	uint64_t r = next_rand(rng);

	memset(st, 0, sizeof(*st));
	st->magic = next_rand(rng);
	st->loan.fn = job;
	st->loan.arg = st;
	if (r % 3 == 0)
		st->loan.cpus = &cpu_sets[(r >> 8) % ncpu_sets];
	/* Rarely a higher nice value: without CAP_SYS_NICE the pool's
	 * threads would then serve only loans as nice. */
	st->loan.nice = r % 16 == 1 ? home_nice + 2 : 0;
	st->want_nice = st->loan.nice ? st->loan.nice : home_nice;
	unsigned k = eachobs__lender_reserve(pool, &st->loan, want);
	if (k > want)
		fail(caller, n, "more threads lent than asked");
	atomic_fetch_add(&lent, k);
	if (eachobs__lender_check_cpus(&st->loan) != 0)
		fail(caller, n, "a usable CPU refused");
	eachobs__lender_wake(&st->loan);
	eachobs__lender_wait(pool, &st->loan);
	for (unsigned j = 0; j < MAXK; j++) {
		if (atomic_load(&st->runs[j]) != (j < k))
			fail(caller, n, "a job ran other than once");
		if (j < k && st->wrote[j] != st->magic + j)
			fail(caller, n, "a job's write missing after wait");
	}
	if (atomic_load(&st->wrong_cpus))
		fail(caller, n, "a job ran on other CPUs than its loan's");
	if (atomic_load(&st->wrong_nice))
		fail(caller, n, "a job ran at another nice value");
	atomic_fetch_add(&done, 1);
}

/* Fails the run when no loan completed for 10 s. */
static void *watchdog(void *arg)
{
	unsigned long long last = ~0ull;

	(void)arg;
	for (;;) {
		sleep(10); /* a deadline, not a synchronization */
		unsigned long long now = atomic_load(&done);
		if (now == last) {
			fprintf(stderr, "stress_lender: FAIL (seed %llu): no "
				"loan completed for 10 s after %llu: a job "
				"that never ran?\n", seed, now);
			_exit(1);
		}
		last = now;
	}
	return NULL;
}

static void *caller_main(void *arg)
{
	unsigned caller = (unsigned)(uintptr_t)arg;
	uint64_t rng = seed * 1000003 + caller;
	struct state *st = malloc(sizeof(*st));

	if (!st)
		fail(caller, 0, "out of memory");
	eachobs__lender_attach(pool);
	pthread_barrier_wait(&barrier);
	for (unsigned long long n = 0; n < loans_per_caller; n++)
		one(st, caller, n, &rng);
	eachobs__lender_detach(pool);
	free(st);
	return NULL;
}

static void usable_cpus(void)
{
	cpu_set_t all;

	if (sched_getaffinity(0, sizeof(all), &all) != 0)
		fail(0, 0, "sched_getaffinity");
	for (int c = 0; c < CPU_SETSIZE; c++) {
		if (!CPU_ISSET(c, &all))
			continue;
		CPU_ZERO(&cpu_sets[ncpu_sets]);
		CPU_SET(c, &cpu_sets[ncpu_sets]);
		ncpu_sets++;
	}
}

int main(int argc, char **argv)
{
	if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		printf("usage: %s [LOANS [POOL [CALLERS [SEED]]]]\n"
		       "Callers taking loans of one pool's threads at once; "
		       "every job runs once,\nplaced, and its writes are seen "
		       "after wait.\n", argv[0]);
		return 0;
	}
	if (argc > 1 && argv[1][0] == '-') {
		fprintf(stderr, "usage: %s [LOANS [POOL [CALLERS [SEED]]]] "
			"(try --help)\n", argv[0]);
		return 2;
	}
	loans_per_caller = argc > 1 ? strtoull(argv[1], NULL, 10) : 2000;
	pool_size = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 6;
	unsigned ncallers = argc > 3 ? (unsigned)strtoul(argv[3], NULL, 10) : 3;
	seed = argc > 4 ? strtoull(argv[4], NULL, 10) : 1;
	if (pool_size < 1 || pool_size > MAX_POOL || ncallers < 1 ||
	    ncallers > MAX_CALLERS) {
		fprintf(stderr, "stress_lender: POOL 1..%u, CALLERS 1..%u\n",
			MAX_POOL, MAX_CALLERS);
		return 2;
	}
	errno = 0;
	home_nice = getpriority(PRIO_PROCESS, (id_t)gettid());
	if (errno)
		home_nice = 0;
	usable_cpus();
	if (eachobs_pool_create(&pool, pool_size) != 0)
		fail(0, 0, "eachobs_pool_create");

	pthread_t t[MAX_CALLERS], wd;
	if (pthread_create(&wd, NULL, watchdog, NULL) != 0 ||
	    pthread_detach(wd) != 0)
		fail(0, 0, "the watchdog's pthread_create");
	pthread_barrier_init(&barrier, NULL, ncallers);
	for (unsigned i = 0; i < ncallers; i++)
		if (pthread_create(&t[i], NULL, caller_main,
				   (void *)(uintptr_t)i) != 0)
			fail(i, 0, "pthread_create");
	for (unsigned i = 0; i < ncallers; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&barrier);
	eachobs_pool_destroy(pool);
	printf("stress_lender: %llu loans on each of %u callers, pool of %u, "
	       "%llu threads lent, seed %llu: ok\n", loans_per_caller,
	       ncallers, pool_size, atomic_load(&lent), seed);
	return 0;
}
