/*
 * The harness every C and C++ peer shares, so that they differ only in
 * the loader they time: the command line, the getobs they call, the
 * consumer's checks, the repetitions and the CSV rows.
 *
 * Every peer program takes
 *
 *   --case sleep|noop|first  --t-us T  --n N  --threads LIST
 *   [--batch LIST] [--ordered] [--reps R] [--budget-ms B] [--calibrate]
 *
 * and prints CSV rows (no header) on stdout:
 *
 *   peer,variant,case,t_us,P,n,batch,ordered,reps,median_ms,min_ms,max_ms,note
 *
 * sleep: getobs sleeps t and returns its index; the time is from before
 * the loader starts to after it is closed, every item consumed and
 * checked. noop: the same with t = 0 (items/s = n / median). first: the
 * no-op dataset again, timed from before the start to the first item in
 * the consumer's hands; the loader is then closed untimed.
 *
 * Repetitions stop early once a cell has used budget-ms in all, so that
 * the 5-second cells (1 ms, P = 2) run once and the run stays bounded;
 * the reps column says how many ran. Median of an even count is the
 * lower middle: a time that was measured.
 */
#ifndef EACHOBS_PEER_H
#define EACHOBS_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The exits, options, clocks, medians and index check that the tests and
 * the benchmarks use too; plain C, without eachobs. */
#include "support.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PEER_MAX_LIST 16

enum peer_case { PEER_SLEEP, PEER_NOOP, PEER_FIRST };

struct peer_args {
	enum peer_case kase;
	uint64_t t_ns; /* 0 for noop and first */
	size_t n;
	unsigned threads[PEER_MAX_LIST];
	size_t nthreads;
	unsigned batch[PEER_MAX_LIST]; /* peers without batches ignore it */
	size_t nbatch;
	bool ordered;
	unsigned reps;
	uint64_t budget_ns;
	bool calibrate; /* print t_us,t_sleep_ns and exit */
};

/* Parse argv into *a; --help and bad usage exit. name prefixes errors
 * (support.h's die(), which the peers call too). */
void peer_parse_args(int argc, char **argv, struct peer_args *a,
		     const char *name);

/* The getobs every peer calls: sleep t_ns (nothing for 0) and return idx.
 * support.h's sleep_ns(), as bench/timedataset's getobs. */
size_t peer_getobs(uint64_t t_ns, size_t idx);

/* Mean duration of one peer_getobs(t_ns) on this thread. */
double peer_calibrate(uint64_t t_ns);

/* The consumer's checks, the same in every peer: every index in [0, n)
 * exactly once, in order when ordered. One checker per run; not
 * thread-safe (the consumer owns it). */
struct peer_seen {
	unsigned char *seen;
	size_t n, count;
	bool ordered;
};

void peer_seen_init(struct peer_seen *s, size_t n, bool ordered);
/* Dies on an index out of range, a duplicate, or one out of order. */
void peer_seen_take(struct peer_seen *s, size_t idx);
/* Dies unless all n arrived; frees. */
void peer_seen_done(struct peer_seen *s);
/* Frees without the count check (after an early stop). */
void peer_seen_free(struct peer_seen *s);
/* The end of every peer's run: for the first-item case (first), free and
 * return t_first; else check that all arrived, free, and return the time
 * since t0. */
uint64_t peer_seen_finish(struct peer_seen *s, bool first, uint64_t t_first,
			  uint64_t t0);

/* One timed run of a cell: P threads, batch size batch; returns the
 * time in ns (the case says from when to when). */
typedef uint64_t peer_run_fn(const struct peer_args *a, unsigned p,
			     unsigned batch, void *ctx);

/* Run fn for every thread count (and every batch size when batched),
 * repeating within the budget, and print one CSV row per cell. note is
 * written into every row ("" for none); it must not contain commas. */
void peer_measure(const struct peer_args *a, const char *peer,
		  const char *variant, bool batched, const char *note,
		  peer_run_fn *fn, void *ctx);

#ifdef __cplusplus
}
#endif

#endif
