/*
 * The benchmark programs' harness: the options every one of them takes,
 * the output files and a run in a fresh process. What they share with the
 * tests and the peers (exits, parsing, clocks, medians, the checking
 * consumer, executor names) is the support library's: support.h and
 * support_eachobs.h, included here.
 *
 * Each program calls bench_set_name() once, first thing in main, so that
 * die() and bad_usage() can name it and --help can print its usage.
 * Everything here exits the process on failure. The progress line is
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
#include "support.h"
#include "support_eachobs.h"

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

/* Run fn(ctx, out) in a forked child and copy its size bytes of out back
 * (a fresh process: nothing of this one's threads or freed memory).
 * False when the child failed or wrote short. */
bool run_in_child(void (*fn)(void *ctx, void *out), void *ctx, void *out,
		  size_t size);

/* Open path for writing and write the CSV header line to it; NULL when
 * path is NULL (no --csv). Dies if it cannot be opened, so that a bad path
 * fails before any measurement. */
FILE *open_csv(const char *path, const char *header);

/* Close the CSV file (if any) and flush stdout, dying on a write error. */
void close_outputs(FILE *csv, const char *csv_path);

#endif
