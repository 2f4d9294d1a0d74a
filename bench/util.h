/*
 * Helpers shared by the benchmark programs: error exits, argument
 * parsing, the monotonic clock, the consumer's checks and the output
 * files.
 *
 * Each program calls bench_set_name() once, first thing in main, so that
 * die() and bad_usage() can name it and --help can print its usage.
 * Everything here exits the process on failure: a benchmark that cannot
 * measure has nothing useful to return to. The progress line is
 * progress.h's.
 */
#ifndef EACHOBS_BENCH_UTIL_H
#define EACHOBS_BENCH_UTIL_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <eachobs.h>

#include "progress.h"

#define NS_PER_S 1000000000ull
#define BENCH_MAX_REPS 1000
#define BENCH_MAX_THREAD_COUNTS 32

/* The options every benchmark takes. The caller sets the defaults before
 * bench_parse_args(); the _set flags say what the command line gave. */
struct bench_args {
	unsigned reps; /* --reps, 1..BENCH_MAX_REPS */
	bool reps_set;
	unsigned threads[BENCH_MAX_THREAD_COUNTS]; /* --threads */
	size_t nthread_counts;
	bool threads_set;
	bool quick;	      /* --quick: a smoke run */
	const char *csv_path; /* --csv; NULL: no CSV */
};

/* Prints the program's usage to f; prog is argv[0]. */
typedef void bench_usage_fn(FILE *f, const char *prog);

/* Set the name that prefixes every message ("timedataset"), argv[0] for
 * the usage text, and the usage printer that --help calls. */
void bench_set_name(const char *name, const char *argv0,
		    bench_usage_fn *usage);

/* Print "name: message" and exit with status 1: a failure at run time. */
_Noreturn void die(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

/* Print "name: message" and a one-line hint to try --help, and exit with
 * status 2: the command line was wrong. */
_Noreturn void bad_usage(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

/* Parse the value arg of option name ("--n") as a whole decimal number
 * in [min, max]; anything else is a bad_usage(). */
unsigned long long parse_option(const char *name, const char *arg,
				unsigned long long min,
				unsigned long long max);

/* Handles one of the program's own options: ch is its struct option's
 * val, arg its value (NULL when it takes none). */
typedef void bench_option_fn(int ch, const char *arg, void *ctx);

/* Parse argv: --reps, --threads, --quick and --csv into *a, and each of
 * the program's own options (own, ended by a zero entry, with vals other
 * than 'r', 't', 'q', 'o' and 'h') by calling fn(val, optarg, ctx).
 * --help (or -h) prints the usage on stdout and exits 0; an unknown
 * option, a bad value or a stray argument prints what was wrong and a
 * one-line hint on stderr and exits 2. */
void bench_parse_args(int argc, char **argv, struct bench_args *a,
		      const struct option *own, bench_option_fn *fn,
		      void *ctx);

/* CLOCK_MONOTONIC in ns. */
uint64_t now_ns(void);

/* User + system CPU time of the whole process so far (every thread,
 * joined ones included), in ns. */
uint64_t cpu_ns(void);

/* Sleep ns, finishing the remainder after a signal. Returns 0 or -errno
 * (clock_nanosleep returns its error instead of setting errno). */
int sleep_ns(uint64_t ns);

/* --cases LIST style options: set use[c] for each comma-separated name in
 * arg that equals the name of case c, clearing the others. names points to
 * the first case's name field and stride is the size of one case, so that
 * a table of structs can be passed as it is. An unknown name is a
 * bad_usage() naming opt. */
void parse_name_list(const char *opt, const char *arg,
		     const char *const *names, size_t stride, size_t n,
		     bool *use);

/* Run fn(ctx, out) in a forked child and copy its size bytes of out back
 * (a fresh process: nothing of this one's threads or freed memory).
 * False when the child failed or wrote short. */
bool run_in_child(void (*fn)(void *ctx, void *out), void *ctx, void *out,
		  size_t size);

/* qsort comparator for uint64_t. */
int cmp_u64(const void *a, const void *b);

/* Drain it, whose slots hold a size_t each, and die() unless the indices
 * are a permutation of [0, n) (the identity when ordered), every slot is
 * non-NULL and holds its index. seen: n zeroed bytes. */
void consume(eachobs_iter *it, size_t n, bool ordered, unsigned char *seen);

/* Open path for writing and write the CSV header line to it; NULL when
 * path is NULL (no --csv). Dies if it cannot be opened, so that a bad path
 * fails before any measurement. */
FILE *open_csv(const char *path, const char *header);

/* Close the CSV file (if any) and flush stdout, dying on a write error. */
void close_outputs(FILE *csv, const char *csv_path);

#endif
