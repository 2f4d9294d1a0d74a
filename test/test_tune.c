/*
 * Autotune's controller (src/tune.c) alone, fed made-up measurements: a
 * model loader whose throughput follows the loaders allowed, and a
 * consumer that waits or not. Every decision is counted, none timed.
 */
#define _GNU_SOURCE
#include "tune.h"
#include "helpers.h"

#include <criterion/criterion.h>

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

/* A model run: each interval of 50 ms (or what the controller asks for),
 * `rate(active)` loads per second,
 * each taking g_ns of wall time and cpu_share of it on a CPU; the
 * consumer waits `starved` of the time. */
struct model {
	double (*rate)(const struct model *m, unsigned active);
	double g_ns, cpu_share, starved;
	double cap;   /* for the rates that saturate */
	double fixed; /* the consumer's rate, for a fed consumer */
	double room;  /* the loaders' share of time waiting for room */
	/* Noise: the first interval judged at or past lucky_from loaders
	 * is lucky_by faster than the rate says (0: none). */
	unsigned lucky_from;
	double lucky_by;
	bool lucky_spent;
	struct eachobs__tune_sample s;
};

static double linear(const struct model *m, unsigned a)
{
	return a * 1e9 / m->g_ns;
}

static double saturating(const struct model *m, unsigned a)
{
	double r = a * 1e9 / m->g_ns;

	return r < m->cap ? r : m->cap;
}

static double consumer(const struct model *m, unsigned a)
{
	(void)a;
	return m->fixed;
}

/* A getobs that computes (all of its time on a CPU), g_ns a load, the
 * rate saturating at cap, and a consumer that always waits. */
static struct model computing(double g_ns, double cap)
{
	return (struct model){ .rate = saturating, .g_ns = g_ns,
			       .cpu_share = 1.0, .starved = 1.0, .cap = cap };
}

/* One interval at the active count: returns what decide() wants, then
 * commits it (as the owner does, with every thread it asks for). */
static unsigned step(struct eachobs__tune *t, struct model *m)
{
	uint64_t ns = 50000000, due = atomic_load(&t->next_ns);
	unsigned a = eachobs__tune_active(t);

	if (due > m->s.now_ns + ns) /* the controller asked for longer */
		ns = due - m->s.now_ns;
	double loads = m->rate(m, a) * ns / 1e9;

	if (m->lucky_from && a >= m->lucky_from && !m->lucky_spent &&
	    !t->settling) {
		loads *= 1 + m->lucky_by;
		m->lucky_spent = true;
	}

	m->s.now_ns += ns;
	m->s.loaded += (uint64_t)loads;
	m->s.worker_loaded += (uint64_t)loads;
	m->s.getobs_ns += (uint64_t)(loads * m->g_ns);
	m->s.cpu_ns += (uint64_t)(loads * m->g_ns * m->cpu_share);
	m->s.starved_ns += (uint64_t)(m->starved * ns);
	m->s.waited_ns += (uint64_t)(m->starved * ns);
	m->s.room_ns += (uint64_t)(m->room * a * ns);
	cr_assert(eachobs__tune_due(t, m->s.now_ns),
		  "a decision is due after an interval");
	unsigned want = eachobs__tune_decide(t, &m->s);
	eachobs__tune_commit(t, want);
	return want;
}

static void start(struct eachobs__tune *t, struct model *m, unsigned bound,
		  unsigned cpus, unsigned first)
{
	/* The library's unbatched defaults, within a buffer of 256. */
	struct eachobs__tune_depth dp = { 256, 4, 16 };

	m->s = (struct eachobs__tune_sample){ .now_ns = 1000000000 };
	eachobs__tune_init(t, bound, cpus, first, &m->s, &dp);
}

/* k intervals; the loaders active after them. */
static unsigned run(struct eachobs__tune *t, struct model *m, int k)
{
	for (int i = 0; i < k; i++)
		step(t, m);
	return eachobs__tune_active(t);
}

Test(tune, a_starved_consumer_gets_loaders_while_they_pay_up_to_the_bound)
{
	struct eachobs__tune t;
	struct model m = {
		.rate = linear,
		.g_ns = 5e6,
		.cpu_share = 0.01,
		.starved = 1.0,
	};

	start(&t, &m, 64, 2, 2);
	cr_assert_eq(run(&t, &m, 40), 64);
	cr_assert_eq(atomic_load(&t.reason), EACHOBS_TUNE_AT_BOUND);
	cr_assert_eq(atomic_load(&t.most), 64);
}

Test(tune, loaders_stop_where_more_stop_raising_throughput)
{
	struct eachobs__tune t;
	/* 10 loaders reach the most this model gives. */
	struct model m = {
		.rate = saturating,
		.g_ns = 5e6,
		.cpu_share = 0.01,
		.starved = 1.0,
		.cap = 2000,
	};

	start(&t, &m, 64, 2, 2);
	unsigned a = run(&t, &m, 40);
	cr_assert(a >= 10 && a < 20, "%u loaders for a rate that stops "
		  "rising at 10", a);
	cr_assert_eq(atomic_load(&t.reason), EACHOBS_TUNE_PLATEAU);
}

Test(tune, a_fed_consumer_keeps_the_fewest_loaders_that_feed_it)
{
	struct eachobs__tune t;
	/* The consumer takes 1000 a second; a load takes 0.5 ms: one
	 * loader does. */
	struct model m = {
		.rate = consumer,
		.g_ns = 5e5,
		.cpu_share = 0.02,
		.starved = 0.0,
		.fixed = 1000,
	};

	start(&t, &m, 64, 2, 16);
	for (int i = 0; i < 40; i++) {
		unsigned a = eachobs__tune_active(&t);
		cr_assert_leq(step(&t, &m), a, "a fed consumer got loaders");
	}
	cr_assert_eq(eachobs__tune_active(&t), 1);
	cr_assert_eq(atomic_load(&t.reason), EACHOBS_TUNE_CONSUMER_BOUND);
}

Test(tune, a_fed_consumer_never_gets_more_loaders)
{
	struct eachobs__tune t;
	/* Little's law asks for more than run: still none is added. */
	struct model m = {
		.rate = consumer,
		.g_ns = 5e6,
		.cpu_share = 0.02,
		.starved = 0.0,
		.fixed = 100000,
	};

	start(&t, &m, 64, 2, 4);
	for (int i = 0; i < 10; i++)
		cr_assert_leq(step(&t, &m), 4);
}

Test(tune, a_computing_getobs_that_gains_nothing_stays_at_the_cpus)
{
	struct eachobs__tune t;
	/* Two CPUs: two loaders give all there is. */
	struct model m = computing(1e6, 2000);

	start(&t, &m, 64, 2, 2);
	cr_assert_eq(run(&t, &m, 40), 2);
	cr_assert_eq(atomic_load(&t.reason), EACHOBS_TUNE_CPU_BOUND);
}

Test(tune, a_step_past_the_cpus_that_paid_once_by_chance_is_undone)
{
	struct eachobs__tune t;
	/* One CPU for loaders; more give nothing, but the first interval
	 * judged at 2 or more is 6 % faster by chance. */
	struct model m = computing(1e5, 10000);

	m.lucky_from = 2;
	m.lucky_by = 0.06;

	start(&t, &m, 64, 1, 1);
	unsigned a = run(&t, &m, 60);
	cr_assert(m.lucky_spent, "the model's lucky interval was judged");
	cr_assert_eq(a, 1, "%u loaders for a getobs that gains nothing past "
		     "one CPU", a);
	cr_assert_eq(atomic_load(&t.reason), EACHOBS_TUNE_CPU_BOUND);
}

Test(tune, loaders_past_the_cpus_that_do_not_pay_are_given_back)
{
	struct eachobs__tune t;
	/* Two CPUs, started at 8: the rate is the same from 2 on. */
	struct model m = computing(1e6, 2000);

	start(&t, &m, 64, 2, 8);
	unsigned a = run(&t, &m, 60);
	cr_assert_eq(a, 2, "%u loaders where 2 give the same rate as 8", a);
}

Test(tune, loaders_past_the_cpus_that_pay_are_kept)
{
	struct eachobs__tune t;
	/* Past the CPUs the rate still rises (the hand-off sleeps less):
	 * 16 reach the most, and fewer are clearly slower. */
	struct model m = computing(1e5, 160000);

	start(&t, &m, 64, 2, 2);
	unsigned a = run(&t, &m, 80);
	cr_assert(a >= 16 && a < 32, "%u loaders for a rate that rises "
		  "up to 16", a);
}

Test(tune, the_depth_follows_the_loaders_within_its_bound)
{
	struct eachobs__tune t;
	struct model m = {
		.rate = linear,
		.g_ns = 5e6,
		.cpu_share = 0.01,
		.starved = 1.0,
	};

	start(&t, &m, 64, 2, 2);
	cr_assert_eq(eachobs__tune_depth(&t), 16, "the least depth at 2");
	for (int i = 0; i < 40; i++) {
		step(&t, &m);
		size_t d = eachobs__tune_depth(&t);
		cr_assert_leq(d, 256, "a depth past its bound");
		cr_assert_geq(d, 16, "a depth below its least");
	}
	cr_assert_eq(eachobs__tune_active(&t), 64);
	cr_assert_eq(eachobs__tune_depth(&t), 256, "4 units a loader");
}

Test(tune, a_consumer_that_waits_while_loaders_wait_for_room_gets_depth)
{
	struct eachobs__tune t;
	/* Ordered with a slow unit now and then: the loaders wait for room
	 * behind it a third of the time, and the consumer waits too. */
	struct model m = {
		.rate = saturating,
		.g_ns = 5e6,
		.cpu_share = 0.01,
		.starved = 0.5,
		.cap = 100,
		.room = 0.3,
	};

	start(&t, &m, 64, 2, 2);
	size_t before = eachobs__tune_depth(&t);
	run(&t, &m, 40);
	cr_assert_eq(eachobs__tune_depth(&t), 256, "the depth went from %zu "
		     "to %zu, not to its bound", before,
		     eachobs__tune_depth(&t));
	cr_assert_eq(atomic_load(&t.reason), EACHOBS_TUNE_MEMORY_BOUND);
	/* No room waits any more: the depth stays what was learnt. */
	m.room = 0;
	run(&t, &m, 10);
	cr_assert_eq(eachobs__tune_depth(&t), 256);
}

/* In the interval that holds the start, the consumer waits for the first
 * units and the loaders then wait for room behind the depth they filled:
 * one after the other, so no depth is learnt from it. */
Test(tune, the_interval_that_holds_the_start_never_deepens)
{
	struct eachobs__tune t;
	struct model m = {
		.rate = linear,
		.g_ns = 5e6,
		.cpu_share = 0.01,
		.starved = 0.5,
		.room = 0.3,
	};

	start(&t, &m, 2, 2, 2); /* at the bound: the depth moves alone */
	cr_assert_eq(eachobs__tune_depth(&t), 16);
	step(&t, &m);
	cr_assert_eq(eachobs__tune_depth(&t), 16, "a depth learnt from the "
		     "start");
	step(&t, &m);
	cr_assert_eq(eachobs__tune_depth(&t), 32, "both waits again past the "
		     "start: the depth doubles");
}

Test(tune, a_getobs_that_changes_cost_is_followed)
{
	struct eachobs__tune t;
	struct model m = {
		.rate = saturating,
		.g_ns = 5e6,
		.cpu_share = 0.01,
		.starved = 1.0,
		.cap = 2000,
	};

	start(&t, &m, 64, 2, 2);
	unsigned before = run(&t, &m, 40);
	/* A second phase: loads take four times as long, and the rate
	 * they reach rises with the loaders again. */
	m.g_ns = 20e6;
	m.cap = 1e9;
	cr_assert_gt(run(&t, &m, 40), before,
		     "%u loaders after the cost rose, %u before",
		     eachobs__tune_active(&t), before);
}

Test(tune, no_decision_before_the_interval_and_one_at_a_time)
{
	struct eachobs__tune t;
	struct model m = {
		.rate = linear,
		.g_ns = 5e6,
		.cpu_share = 0.01,
		.starved = 1.0,
	};

	start(&t, &m, 8, 2, 2);
	cr_assert_not(eachobs__tune_due(&t, m.s.now_ns + 1000));
	cr_assert(eachobs__tune_due(&t, m.s.now_ns + 1000000000));
	cr_assert_not(eachobs__tune_due(&t, m.s.now_ns + 1000000000),
		      "a second decider while the first holds the ticket");
	eachobs__tune_commit(&t, 2);
	cr_assert(eachobs__tune_due(&t, m.s.now_ns + 1000000000));
}

/* ---- parking ---------------------------------------------------------- */

struct parker {
	struct eachobs__tune *t;
	unsigned self;
	_Atomic bool stop;
	_Atomic int result; /* -1: still parked */
	clockid_t clock;
	_Atomic bool ready;
};

static bool parker_stop(const void *arg)
{
	return atomic_load(&((const struct parker *)arg)->stop);
}

static void *park_main(void *arg)
{
	struct parker *p = arg;

	pthread_getcpuclockid(pthread_self(), &p->clock);
	atomic_store(&p->ready, true);
	atomic_store(&p->result,
		     eachobs__tune_park(p->t, p->self, parker_stop, p) ? 1 : 0);
	return NULL;
}

static uint64_t thread_cpu(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { 0, (long)ms * 1000000 };

	nanosleep(&ts, NULL);
}

/* Waits for the parked thread's answer, with a deadline. */
static int answer(struct parker *p)
{
	for (int i = 0; i < 5000 && atomic_load(&p->result) < 0; i++)
		sleep_ms(1);
	return atomic_load(&p->result);
}

static void park_one(struct eachobs__tune *t, struct parker *p,
		     pthread_t *th, unsigned self)
{
	struct eachobs__tune_sample s = { .now_ns = 1 };

	eachobs__tune_init(t, 8, 2, 1, &s, NULL);
	*p = (struct parker){ .t = t, .self = self, .result = -1 };
	cr_assert_eq(pthread_create(th, NULL, park_main, p), 0);
	while (!atomic_load(&p->ready))
		sleep_ms(1);
}

Test(tune, a_parked_loader_sleeps_until_it_is_among_the_active)
{
	struct eachobs__tune t;
	struct parker p;
	pthread_t th;

	park_one(&t, &p, &th, 3);
	sleep_ms(20);
	uint64_t c0 = thread_cpu(p.clock);
	sleep_ms(200);
	uint64_t used = thread_cpu(p.clock) - c0;
	cr_assert_eq(atomic_load(&p.result), -1, "loader 3 of 1 active left");
	cr_assert_lt(used, 5000000, "a parked loader used %llu ns of CPU in "
		     "200 ms", (unsigned long long)used);
	cr_assert(eachobs__tune_due(&t, UINT64_MAX / 2));
	eachobs__tune_commit(&t, 2); /* loader 3 still parked */
	sleep_ms(20);
	cr_assert_eq(atomic_load(&p.result), -1);
	cr_assert(eachobs__tune_due(&t, UINT64_MAX / 2));
	eachobs__tune_commit(&t, 4);
	cr_assert_eq(answer(&p), 1, "loader 3 of 4 active may load");
	pthread_join(th, NULL);
}

Test(tune, a_parked_loader_leaves_on_stop_or_when_the_work_is_done)
{
	struct eachobs__tune t;
	struct parker p;
	pthread_t th;

	park_one(&t, &p, &th, 5);
	atomic_store(&p.stop, true);
	eachobs__tune_wake(&t);
	cr_assert_eq(answer(&p), 0, "stopped: it must not load");
	pthread_join(th, NULL);

	park_one(&t, &p, &th, 5);
	eachobs__tune_finish(&t);
	cr_assert_eq(answer(&p), 1, "done: it goes on to find no work");
	pthread_join(th, NULL);
}
