/*
 * Shared test machinery: an instrumented dataset and a checking consumer.
 *
 * The dataset (struct td) records everything the tests assert about getobs:
 * how often each index was loaded, on which thread, into which slot, how
 * many observations were live at once, and whether any call broke a rule
 * (a NULL or misaligned slot, a second call for one index, a call after
 * eachobs_close returned). getobs runs on library threads where Criterion
 * assertions must not be used, so it only records; the first violation is
 * kept as a message that the test asserts on from its own thread.
 *
 * Live observations: `live` goes up when getobs starts and down when the
 * consumer moves past the observation (right before its next eachobs_next
 * call, see struct cons) or when getobs fails. The increment happens after
 * the library chose a slot and the decrement before the library may reuse
 * it, so `max_live` never exceeds the number of slots in use; the tests
 * compare it with buffersize + nthreads + 1.
 */
#ifndef EACHOBS_TEST_HELPERS_H
#define EACHOBS_TEST_HELPERS_H

#include "eachobs.h"

/* Shared with the benchmarks (bench/): executor_name(), the clocks,
 * check_index(). */
#include "support.h"
#include "support_eachobs.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TD_NONE SIZE_MAX

struct td {
	/* Set up by the test before eachobs_parallel; read-only afterwards. */
	size_t n;
	size_t obs_size;
	uint64_t seed;          /* for the slot pattern and random sleeps */
	unsigned sleep_us;      /* every getobs below sleep_below sleeps
				 * this long */
	size_t sleep_below;     /* TD_NONE (all indices) by default */
	unsigned rand_sleep_us; /* some getobs also sleep up to this long */
	size_t fail_idx;        /* TD_NONE, or the index whose getobs fails */
	int fail_code;          /* what it returns then */
	bool fill;              /* write the pattern into every slot byte */
	bool write_idx;         /* store idx as a size_t in the slot */
	bool check_threads;     /* classify getobs calls by thread */
	pthread_t consumer;     /* valid when check_threads */
	pthread_t creator;      /* the thread that calls eachobs_parallel */
	size_t track_n;         /* per-index records for idx < track_n */
	size_t slow_idx;        /* TD_NONE, or an index whose getobs ... */
	unsigned slow_us;       /* ... sleeps this long */
	size_t window;          /* 0, or: getobs(idx) must not start before
				 * idx < released + window (ordered mode) */

	/* Written by the callbacks. */
	atomic_long numobs_calls;
	atomic_long numobs_off_creator;
	atomic_long getobs_calls;
	atomic_long in_getobs;    /* getobs calls running now */
	atomic_long live;
	atomic_long max_live;
	atomic_long on_consumer;  /* getobs calls on the consumer thread */
	atomic_long off_consumer; /* ... on any other thread */
	atomic_bool closing;      /* set by the test before eachobs_close */
	atomic_long after_closing; /* getobs calls that started after that */
	atomic_bool closed;       /* set by the test once close returned */
	atomic_size_t released;   /* observations the consumer moved past */
	atomic_uint *calls;       /* per index: getobs calls */
	_Atomic(void *) *slot_of; /* per index: the slot getobs wrote */
	atomic_int violated;
	char violation[256];
};

/* Prepare a dataset over n observations of obs_size bytes with every
 * instrument zeroed; per-index records when n <= track_n_max. */
void td_init(struct td *td, size_t n, size_t obs_size, size_t track_n_max);
void td_fini(struct td *td);
/* The dataset vtable for td. */
eachobs_dataset td_dataset(struct td *td);
/* The violation message recorded by a callback, or NULL. */
const char *td_violation(struct td *td);
/* Record a violation (the first one wins); safe on any thread. */
void td_violate(struct td *td, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* The byte pattern getobs writes for idx when td->fill is set. */
void td_pattern_fill(const struct td *td, size_t idx, void *obs);
bool td_pattern_ok(const struct td *td, size_t idx, const void *obs);

/*
 * A checking consumer. cons_next gives up the held observation (checking
 * first that its bytes are unchanged), calls eachobs_next and checks what
 * it yields: a fresh index below n, the slot getobs wrote, its pattern, and
 * the order when `ordered`. A broken rule sets err; the test asserts on it.
 */
struct cons {
	eachobs_iter *it;
	struct td *td;
	bool ordered;
	unsigned char *seen; /* per index, when td->track_n covers n */
	size_t yielded;
	size_t last_idx;
	bool held;
	size_t held_idx;
	const void *held_obs;
	char err[320];
};

void cons_init(struct cons *c, eachobs_iter *it, struct td *td, bool ordered);
void cons_fini(struct cons *c);
int cons_next(struct cons *c, const void **obs, size_t *idx);
/* Give up the held observation and close the iterator; then check that no
 * getobs is still running. */
void cons_close(struct cons *c);
/* Every index below n seen exactly once (needs per-index records). */
bool cons_all_seen(struct cons *c);

/*
 * Abort the process with a message naming `name` if it still runs after
 * `seconds`. Tests start it from their suite's .init so that a deadlock
 * fails the test (as a crash, with this message on stderr) instead of
 * hanging the suite: Criterion 2.4.1's own .timeout does not fire when tests
 * run with --jobs 2 (the runner itself blocks), so it is only a backup.
 */
void watchdog_start(double seconds, const char *name);

/*
 * Threads of this process (entries of /proc/self/task), or -1. A thread
 * that pthread_join has returned for may stay listed for a moment while the
 * kernel reaps it, so threads_settle waits, up to a deadline, for the count
 * to drop to `want`, and returns the count it saw last.
 */
int threads_now(void);
int threads_settle(int want, double deadline_s);

/* Utilities. */
uint64_t splitmix64(uint64_t *state);
uint64_t mix64(uint64_t x);
double now_s(void);
void sleep_us(unsigned us);
/* What nthreads = 0 means without a pool: the CPUs this process may use
 * (src/cpus.c), as eachobs_parallel would count them now. */
unsigned default_nthreads(void);
/* Upper bound on slots for these options and observations of obs_size
 * bytes, as documented in eachobs.h. */
size_t slot_bound(const eachobs_options *o, size_t obs_size);

/* Distinct threads seen, safe to add to from any thread. */
#define THREAD_SET_MAX 64
struct thread_set {
	pthread_mutex_t lock;
	pthread_t tids[THREAD_SET_MAX];
	unsigned n;
};
void thread_set_init(struct thread_set *s);
void thread_set_fini(struct thread_set *s);
/* Add t unless it is in s already (or s is full). */
void thread_set_add(struct thread_set *s, pthread_t t);

/*
 * One point of the option space a promise is checked over: executor x
 * ordered x batchsize x hold (0 or 2) x pool (none, or one shared).
 */
struct point {
	eachobs_executor ex;
	bool ordered;
	size_t batchsize;
	unsigned hold;
	bool pool;
};
/* "BACKGROUND ordered batch 16 hold 2 pool", for messages. */
void point_name(const struct point *p, char *buf, size_t len);
/* Call f for every point with a batchsize from sizes[0..nsizes) (0:
 * single observations), in a fixed order, passing a pool of pool_threads
 * threads that every point with .pool shares. 0, or -1 when the pool
 * cannot be made. */
int points_each(const size_t *sizes, size_t nsizes, unsigned pool_threads,
		void (*f)(const struct point *, eachobs_pool *));

/* Every executor, for tests that loop over all of them. */
extern const eachobs_executor executors[];
#define NEXECUTORS 3

/*
 * The modes a promise is checked in, as the one parameter of a Criterion
 * parameterized test; each mode runs in a process of its own and passes
 * or fails on its own:
 *
 *   ParameterizedTestParameters(suite, name) { return mode_params(); }
 *   ParameterizedTest(const struct mode *m, suite, name) { ... }
 *
 * THREADED, BACKGROUND and SERIAL, each unordered and ordered: every
 * combination a user can pass. (The library reads .ordered only for the
 * executors with workers, and SERIAL yields in index order either way;
 * SERIAL ordered holds it to the checks that depend on `ordered` too.)
 * Plain data, no pointers: each entry must mean the same in the process
 * that runs the test as in the runner that listed it.
 */
struct mode {
	eachobs_executor executor;
	bool ordered;
};
/* Criterion's parameter list: the callers include
 * <criterion/parameterized.h>, which defines it. */
struct criterion_test_params;
/* All six modes. */
struct criterion_test_params mode_params(void);
/* The four with worker threads (SERIAL left out), for promises about
 * workers. */
struct criterion_test_params worker_mode_params(void);
/* "THREADED", "BACKGROUND ordered", "SERIAL", ..., for messages. */
const char *mode_name(const struct mode *m);
/* points_each for the points of one mode: every batchsize from sizes,
 * hold 0 and 2, without and with a pool of pool_threads threads, which
 * every point with .pool shares. */
int points_of_mode(const struct mode *m, const size_t *sizes, size_t nsizes,
		   unsigned pool_threads,
		   void (*f)(const struct point *, eachobs_pool *));

/* Threads of the test process when the running test started. */
extern int threads_base;

/*
 * A Criterion suite's .init: every test gets a deadline, the watchdog
 * aborting it with a message after 40 s (Criterion's own .timeout does not
 * fire under --jobs 2), and notes threads_base.
 */
void deadline(void);
/* The same with another deadline. */
void deadline_after(double seconds);

/*
 * The contract suites both ways: with EACHOBS_TEST_AUTOTUNE=1 in the
 * environment (meson's `autotune` suite), every iterator a test starts
 * through eachobs_parallel() is autotuned, with the test's nthreads (or
 * the default bound) as the most threads that load; what it yields must
 * not change. helpers.c calls the library's own.
 */
int test_parallel(eachobs_iter **it, const eachobs_dataset *data,
		  const eachobs_options *opts);
bool test_autotuned(void);
/* Under valgrind memcheck (test/memcheck.sh): threads run one at a time,
 * tens of times slower, so a test may skip what depends on the speed. */
bool test_under_memcheck(void);
#ifndef TEST_HELPERS_OWN
#undef eachobs_parallel
#define eachobs_parallel(it, data, ...) test_parallel(it, data, __VA_ARGS__)
#endif

#endif
