/*
 * Spin budgets (src/event.c): counts of pauses measured on one CPU,
 * scaled once per process to this CPU's pause, so that a spin lasts about
 * as long in time on any CPU.
 */
#include "base.h"
#include "helpers.h"

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <limits.h>

TestSuite(spins, .init = deadline, .timeout = 60);

/* A pause as dear as the one measured keeps the count; twice as dear
 * halves it, half as dear doubles it. */
Test(spins, a_budget_lasts_as_long_whatever_a_pause_costs)
{
	uint64_t ref = EACHOBS__PAUSE_NS * 256;

	cr_assert_eq(eachobs__spins_scaled(128, ref), 128);
	cr_assert_eq(eachobs__spins_scaled(128, 2 * ref), 64);
	cr_assert_eq(eachobs__spins_scaled(128, ref / 2), 256);
	cr_assert_eq(eachobs__spins_scaled(32, 5 * ref), 6);
}

/* A run of pauses lengthened by preemptions, or pauses that cost nothing,
 * move a budget no further than 1/8 and 8 times its count, never to 0
 * and never past UINT_MAX. */
Test(spins, a_budget_stays_within_an_eighth_and_eight_times_its_count)
{
	cr_assert_eq(eachobs__spins_scaled(128, UINT64_MAX), 16);
	cr_assert_eq(eachobs__spins_scaled(128, 0), 128 * 8);
	cr_assert_eq(eachobs__spins_scaled(128, 1), 128 * 8);
	cr_assert_eq(eachobs__spins_scaled(4, UINT64_MAX), 1);
	cr_assert_eq(eachobs__spins_scaled(1, 1000000), 1);
	cr_assert_eq(eachobs__spins_scaled(UINT_MAX, 1), UINT_MAX);
}

static bool measured(void)
{
	return atomic_load(&eachobs__spins.measured);
}

/* Until it is calibrated, the budgets are the counts. */
Test(spins, before_calibration_the_budgets_are_the_counts)
{
	cr_assert_not(measured());
	cr_assert_eq(eachobs__consumer_spins(), EACHOBS__CONSUMER_SPINS);
	cr_assert_eq(eachobs__loader_spins(), EACHOBS__LOADER_SPINS);
	cr_assert_eq(eachobs__room_spins(), EACHOBS__ROOM_SPINS);
}

/* Calibrated, the budgets keep their proportions (one measure of a pause
 * scales all three) within their bounds, and a second call measures
 * nothing again. */
Test(spins, calibration_scales_all_budgets_alike_once)
{
	eachobs__spins_calibrate();
	cr_assert(measured());
	unsigned c = eachobs__consumer_spins(), l = eachobs__loader_spins(),
		 r = eachobs__room_spins();

	cr_assert(c >= EACHOBS__CONSUMER_SPINS / 8 &&
		  c <= EACHOBS__CONSUMER_SPINS * 8, "consumer %u", c);
	/* 128 : 32 : 256, each rounded down on its own. */
	cr_assert(l * 4 <= c && c < (l + 1) * 4, "consumer %u, loader %u", c,
		  l);
	cr_assert(c * 2 <= r && r < (c + 1) * 2, "consumer %u, room %u", c, r);
	cr_log_info("budgets: consumer %u, loader %u, room %u pauses", c, l, r);
	/* A value no measure gives (past 8 times the count) survives a
	 * second call: it measures nothing again. */
	atomic_store(&eachobs__spins.consumer, 7777u);
	eachobs__spins_calibrate();
	cr_assert_eq(eachobs__consumer_spins(), 7777u, "calibrated again");
	cr_assert_eq(eachobs__loader_spins(), l);
	cr_assert_eq(eachobs__room_spins(), r);
}

static size_t numobs(void *ctx)
{
	(void)ctx;
	return 64;
}

/* Counts the getobs that ran before the budgets were scaled. */
static int getobs(void *ctx, size_t idx, void *obs)
{
	(void)idx;
	(void)obs;
	if (!measured())
		atomic_fetch_add((atomic_int *)ctx, 1);
	return 0;
}

static struct criterion_test_params executor_params(void)
{
	static eachobs_executor executors[] = {
		EACHOBS_THREADED, EACHOBS_BACKGROUND, EACHOBS_SERIAL
	};

	return cr_make_param_array(eachobs_executor, executors,
				   sizeof(executors) / sizeof(executors[0]));
}

ParameterizedTestParameters(spins, an_iterator_calibrates_before_its_threads_spin)
{
	return executor_params();
}

/* An iterator's threads spin on the calibrated budgets: it calibrates
 * before it starts them, whatever the executor (each in a process of its
 * own, the first iterator there). */
ParameterizedTest(eachobs_executor *ex, spins,
		  an_iterator_calibrates_before_its_threads_spin)
{
	atomic_int early = 0;
	eachobs_dataset data = { &early, numobs, getobs, 8 };
	eachobs_options o = { .nthreads = 2, .executor = *ex };
	eachobs_iter *it;
	int rc;

	cr_assert_not(measured());
	cr_assert_eq(eachobs_parallel(&it, &data, &o), 0);
	while ((rc = eachobs_next(it, NULL, NULL)) == 1)
		;
	cr_assert_eq(rc, 0);
	eachobs_close(it);
	cr_assert(measured());
	cr_assert_eq(atomic_load(&early), 0, "executor %d: %d getobs before "
		     "calibration", (int)*ex, atomic_load(&early));
}
