/*
 * What the tests, the benchmarks and the peer programs share, written
 * once: a program's name and its error exits, whole-number and list
 * options, the clocks, medians, and the check every consumer makes on the
 * indices it is handed.
 *
 * Plain C11 and POSIX, without eachobs: the peers that time other loaders
 * (two of them C++) link it and not the library. What needs eachobs.h is
 * in support_eachobs.h. The exits are for programs: a benchmark that
 * cannot measure has nothing useful to return to, so everything here that
 * can fail exits the process. The tests use only the clocks and the index
 * check, which do not exit (now_ns() dies only if CLOCK_MONOTONIC is
 * missing).
 */
#ifndef EACHOBS_BENCH_SUPPORT_H
#define EACHOBS_BENCH_SUPPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NS_PER_S 1000000000ull

/* ---- the program and its exits ----------------------------------- */

/* Prints the program's usage to f; prog is what bench_set_name() got as
 * argv0. */
typedef void bench_usage_fn(FILE *f, const char *prog);

/* Set the name that prefixes every message ("timedataset"), the argv0
 * that --help and the hint name, and the usage printer that help_exit()
 * calls. Once, first thing in main; until then messages say "bench". */
void bench_set_name(const char *name, const char *argv0,
		    bench_usage_fn *usage);

/* Print "name: message" on stderr and exit with status 1: a failure at
 * run time. Clears the progress line first and flushes stdout, so that
 * the rows already printed come out before the message. */
void die(const char *fmt, ...)
	__attribute__((noreturn, format(printf, 1, 2)));

/* Print "name: message" and a one-line hint to try --help, and exit with
 * status 2: the command line was wrong. */
void bad_usage(const char *fmt, ...)
	__attribute__((noreturn, format(printf, 1, 2)));

/* The hint alone, status 2: for getopt's '?', which has already said
 * what was wrong. */
void hint_exit(void) __attribute__((noreturn));

/* The usage on stdout, status 0: --help and -h. */
void help_exit(void) __attribute__((noreturn));

/* ---- options ----------------------------------------------------- */

/* Parse the value arg of option name ("--n") as a whole decimal number in
 * [min, max]; anything else ("-1", "", "8x", " 8") is a bad_usage(). */
unsigned long long parse_option(const char *name, const char *arg,
				unsigned long long min,
				unsigned long long max);

/* A comma-separated list of numbers in [min, max] into out[0..cap);
 * returns how many. An empty item ("2,,8"), a bad number or more than cap
 * items is a bad_usage() naming name. */
size_t parse_list(const char *name, const char *arg, unsigned min,
		  unsigned max, unsigned *out, size_t cap);

/* --cases LIST style options: set use[c] for each comma-separated name in
 * arg that equals the name of case c, clearing the others. names points to
 * the first case's name field and stride is the size of one case, so that
 * a table of structs can be passed as it is. An unknown name is a
 * bad_usage() naming opt. */
void parse_name_list(const char *opt, const char *arg,
		     const char *const *names, size_t stride, size_t n,
		     bool *use);

/* ---- clocks ------------------------------------------------------ */

/* CLOCK_MONOTONIC in ns. */
uint64_t now_ns(void);

/* User + system CPU time of the whole process so far (every thread,
 * joined ones included), in ns. */
uint64_t cpu_ns(void);

/* Sleep ns on CLOCK_MONOTONIC, finishing the remainder after a signal.
 * Returns 0 or -errno (clock_nanosleep returns its error instead of
 * setting errno). */
int sleep_ns(uint64_t ns);

/* ---- medians ----------------------------------------------------- */

/* Sort v[0..n) in place (so that v[0] and v[n - 1] are then the minimum
 * and the maximum) and return its median; 0 when n is 0. With an even n,
 * the lower middle: a value that was measured, not a mean of two. */
uint64_t median_u64(uint64_t *v, size_t n);
double median_double(double *v, size_t n);

/* ---- checks ------------------------------------------------------ */

/*
 * The consumer's check of one index it was handed, the pos-th (from 0):
 * it must be below n, not seen before, and equal to pos when ordered, so
 * that a run that hands over n indices hands over a permutation of
 * [0, n), the identity when ordered. seen holds n flags, zeroed before
 * the run (NULL: no duplicate check); a good index is marked in it.
 * Returns true, or false with why in msg[0..len).
 */
bool check_index(unsigned char *seen, size_t n, bool ordered, size_t pos,
		 size_t idx, char *msg, size_t len);

#ifdef __cplusplus
}
#endif

#endif
