/*
 * The support library the tests, the benchmarks and the peers share
 * (bench/support.h, bench/support_eachobs.h): medians, the index check,
 * the option parsers and executor names. Not the exits: a test that
 * exits from inside Criterion's worker leaves Criterion's own buffers
 * behind, which memcheck reports. test/check_help.py checks, outside
 * memcheck, that every program exits 2 on an unknown option.
 */
#define _GNU_SOURCE
#include "helpers.h"

#include <criterion/criterion.h>

TestSuite(support, .init = deadline, .timeout = 60);

Test(support, median_of_an_odd_count_is_the_middle_and_sorts)
{
	uint64_t v[] = { 9, 1, 5, 7, 3 };

	cr_assert_eq(median_u64(v, 5), 5);
	for (size_t i = 1; i < 5; i++)
		cr_assert_leq(v[i - 1], v[i], "not sorted at %zu", i);
}

Test(support, median_of_an_even_count_is_the_lower_middle)
{
	uint64_t v[] = { 40, 10, 30, 20 };
	double d[] = { 0.4, 0.1, 0.3, 0.2 };

	cr_assert_eq(median_u64(v, 4), 20);
	cr_assert_eq(median_double(d, 4), 0.2);
	cr_assert_eq(d[0], 0.1);
	cr_assert_eq(d[3], 0.4);
}

Test(support, median_of_nothing_is_zero)
{
	uint64_t v[1] = { 7 };
	double d[1] = { 7 };

	cr_assert_eq(median_u64(v, 0), 0);
	cr_assert_eq(median_double(d, 0), 0);
}

Test(support, check_index_accepts_a_permutation_and_marks_it_seen)
{
	static const size_t order[] = { 3, 0, 4, 1, 2 };
	unsigned char seen[5] = { 0 };
	char why[128];

	for (size_t k = 0; k < 5; k++)
		cr_assert(check_index(seen, 5, false, k, order[k], why,
				      sizeof(why)),
			  "%zu: %s", order[k], why);
	for (size_t i = 0; i < 5; i++)
		cr_assert_eq(seen[i], 1);
}

Test(support, check_index_refuses_an_index_past_n)
{
	unsigned char seen[4] = { 0 };
	char why[128];

	cr_assert_not(check_index(seen, 4, false, 0, 4, why, sizeof(why)));
	cr_assert_str_eq(why, "index 4 yielded, but n is 4");
}

Test(support, check_index_refuses_an_index_twice)
{
	unsigned char seen[4] = { 0 };
	char why[128];

	cr_assert(check_index(seen, 4, false, 0, 2, why, sizeof(why)));
	cr_assert_not(check_index(seen, 4, false, 1, 2, why, sizeof(why)));
	cr_assert_str_eq(why, "index 2 yielded twice");
}

Test(support, check_index_wants_the_identity_when_ordered)
{
	unsigned char seen[4] = { 0 };
	char why[128];

	cr_assert(check_index(seen, 4, true, 0, 0, why, sizeof(why)));
	cr_assert_not(check_index(seen, 4, true, 1, 2, why, sizeof(why)));
	cr_assert_str_eq(why, "ordered: index 2 yielded at position 1");
	cr_assert_eq(seen[2], 0, "a refused index is not marked");
}

Test(support, check_index_without_flags_checks_range_and_order_only)
{
	char why[128];

	cr_assert(check_index(NULL, 4, false, 0, 1, why, sizeof(why)));
	cr_assert(check_index(NULL, 4, false, 1, 1, why, sizeof(why)));
	cr_assert_not(check_index(NULL, 4, false, 2, 9, why, sizeof(why)));
	cr_assert_not(check_index(NULL, 4, true, 2, 3, why, sizeof(why)));
}

Test(support, parse_option_takes_a_whole_number_in_range)
{
	cr_assert_eq(parse_option("--n", "0", 0, 10), 0);
	cr_assert_eq(parse_option("--n", "10", 0, 10), 10);
	cr_assert_eq(parse_option("--n", "18446744073709551615", 0,
				  UINT64_MAX),
		     UINT64_MAX);
}

Test(support, parse_list_takes_each_item_in_order)
{
	unsigned v[4];

	cr_assert_eq(parse_list("--threads", "2,8,16", 1, 1024, v, 4), 3);
	cr_assert_eq(v[0], 2);
	cr_assert_eq(v[1], 8);
	cr_assert_eq(v[2], 16);
	cr_assert_eq(parse_list("--threads", "5", 1, 1024, v, 4), 1);
	cr_assert_eq(v[0], 5);
}

Test(support, parse_name_list_sets_only_the_named_cases)
{
	static const struct {
		const char *name;
		int other;
	} cases[] = { { "a", 0 }, { "bb", 0 }, { "c", 0 } };
	bool use[3] = { true, true, true };

	parse_name_list("--cases", "c,a", &cases[0].name, sizeof(cases[0]),
			3, use);
	cr_assert(use[0]);
	cr_assert_not(use[1]);
	cr_assert(use[2]);
}

Test(support, executor_name_names_every_executor)
{
	cr_assert_str_eq(executor_name(EACHOBS_THREADED), "threaded");
	cr_assert_str_eq(executor_name(EACHOBS_BACKGROUND), "background");
	cr_assert_str_eq(executor_name(EACHOBS_SERIAL), "serial");
	cr_assert_str_eq(executor_name((eachobs_executor)99), "?");
}
