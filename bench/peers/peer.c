/*
 * The peers' shared harness; see peer.h.
 */
#define _GNU_SOURCE

#include "peer.h"
#include "progress.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NS_PER_MS 1000000.0
#define MAX_REPS 100

static void usage(FILE *f, const char *prog)
{
	fprintf(f,
		"usage: %s [--case sleep|noop|first] [--t-us T] [--n N]\n"
		"          [--threads LIST] [--batch LIST] [--ordered] [--reps R]\n"
		"          [--budget-ms B] [--calibrate] [--help]\n"
		"\n"
		"One peer of bench/peers: loads n observations whose getobs\n"
		"sleeps T us (sleep) or does nothing (noop, first) on P threads\n"
		"and prints CSV rows\n"
		"peer,variant,case,t_us,P,n,batch,ordered,reps,median_ms,min_ms,"
		"max_ms,note\n"
		"(first: time to the first item). Repetitions stop once a cell\n"
		"has used B ms (default 1000). --calibrate prints\n"
		"t_us,t_sleep_ns, the mean duration of one sleep of T us.\n",
		prog);
}

void peer_parse_args(int argc, char **argv, struct peer_args *a,
		     const char *name)
{
	static const struct option opts[] = {
		{ "case", required_argument, NULL, 'c' },
		{ "t-us", required_argument, NULL, 't' },
		{ "n", required_argument, NULL, 'n' },
		{ "threads", required_argument, NULL, 'p' },
		{ "batch", required_argument, NULL, 'b' },
		{ "ordered", no_argument, NULL, 'o' },
		{ "reps", required_argument, NULL, 'r' },
		{ "budget-ms", required_argument, NULL, 'B' },
		{ "calibrate", no_argument, NULL, 'C' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int ch;

	/* The name stands for argv0 too: the usage and the hint say
	 * "peer_tbb", wherever the program is. */
	bench_set_name(name, name, usage);
	*a = (struct peer_args){ .kase = PEER_SLEEP,
				 .t_ns = 100000,
				 .n = 10000,
				 .threads = { 2 },
				 .nthreads = 1,
				 .batch = { 1 },
				 .nbatch = 1,
				 .reps = 3,
				 .budget_ns = NS_PER_S };
	/* '+': stop at the first non-option, reported below. */
	while ((ch = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (ch) {
		case 'c':
			if (strcmp(optarg, "sleep") == 0)
				a->kase = PEER_SLEEP;
			else if (strcmp(optarg, "noop") == 0)
				a->kase = PEER_NOOP;
			else if (strcmp(optarg, "first") == 0)
				a->kase = PEER_FIRST;
			else
				bad_usage("--case: unknown case '%s'",
					  optarg);
			break;
		case 't':
			a->t_ns = parse_option("--t-us", optarg, 0,
					      10000000) *
				  1000u;
			break;
		case 'n':
			a->n = (size_t)parse_option("--n", optarg, 1,
						    1ull << 32);
			break;
		case 'p':
			a->nthreads = parse_list("--threads", optarg, 1, 1024,
						 a->threads, PEER_MAX_LIST);
			break;
		case 'b':
			a->nbatch = parse_list("--batch", optarg, 1, 1u << 20,
					       a->batch, PEER_MAX_LIST);
			break;
		case 'o': a->ordered = true; break;
		case 'r':
			a->reps = (unsigned)parse_option("--reps", optarg, 1,
							 MAX_REPS);
			break;
		case 'B':
			a->budget_ns = parse_option("--budget-ms", optarg, 0,
						    3600000) *
				       1000000u;
			break;
		case 'C': a->calibrate = true; break;
		case 'h': help_exit();
		/* '?': getopt has already said what was wrong. */
		default: hint_exit();
		}
	}
	if (optind < argc)
		bad_usage("unexpected argument '%s'", argv[optind]);
	if (a->kase != PEER_SLEEP)
		a->t_ns = 0;
	if (a->calibrate) {
		printf("%llu,%.0f\n", (unsigned long long)(a->t_ns / 1000),
		       peer_calibrate(a->t_ns));
		exit(0);
	}
}

size_t peer_getobs(uint64_t t_ns, size_t idx)
{
	/* Its only error is EINTR, which sleep_ns() resumes after. */
	if (t_ns != 0)
		sleep_ns(t_ns);
	return idx;
}

/* As bench/timedataset.c calibrates: one unmeasured sleep (page faults,
 * timer setup), then enough sleeps to fill a quarter second, 3..2000. */
double peer_calibrate(uint64_t t_ns)
{
	uint64_t k, start;

	if (t_ns == 0)
		return 0;
	k = NS_PER_S / 4 / t_ns;
	k = k < 3 ? 3 : k > 2000 ? 2000 : k;
	peer_getobs(t_ns, 0);
	start = now_ns();
	for (uint64_t i = 0; i < k; i++)
		peer_getobs(t_ns, i);
	return (double)(now_ns() - start) / (double)k;
}

void peer_seen_init(struct peer_seen *s, size_t n, bool ordered)
{
	s->seen = calloc(n ? n : 1, 1);
	if (s->seen == NULL)
		die("out of memory for %zu seen flags", n);
	s->n = n;
	s->count = 0;
	s->ordered = ordered;
}

void peer_seen_take(struct peer_seen *s, size_t idx)
{
	char why[128];

	if (!check_index(s->seen, s->n, s->ordered, s->count, idx, why,
			 sizeof(why)))
		die("%s", why);
	s->count++;
}

void peer_seen_done(struct peer_seen *s)
{
	if (s->count != s->n)
		die("the loader ended after %zu of %zu observations",
		    s->count, s->n);
	peer_seen_free(s);
}

void peer_seen_free(struct peer_seen *s)
{
	free(s->seen);
	s->seen = NULL;
}

uint64_t peer_seen_finish(struct peer_seen *s, bool first, uint64_t t_first,
			  uint64_t t0)
{
	if (first) {
		peer_seen_free(s);
		return t_first;
	}
	uint64_t t = now_ns() - t0;
	peer_seen_done(s);
	return t;
}

static const char *case_name(enum peer_case c)
{
	return c == PEER_SLEEP ? "sleep" : c == PEER_NOOP ? "noop" : "first";
}

static void measure_cell(const struct peer_args *a, const char *peer,
			 const char *variant, unsigned p, unsigned batch,
			 const char *note, peer_run_fn *fn, void *ctx)
{
	uint64_t t[MAX_REPS], used = 0, median;
	unsigned reps = 0;
	char b[32] = "";

	if (batch)
		snprintf(b, sizeof(b), " batch %u", batch);
	while (reps < a->reps && (reps == 0 || used < a->budget_ns)) {
		show_progress("%s %s %s P=%u%s rep %u/%u", peer, variant,
			      case_name(a->kase), p, b, reps + 1, a->reps);
		t[reps] = fn(a, p, batch, ctx);
		used += t[reps++];
	}
	/* median_u64 sorts: t[0] and t[reps - 1] are then min and max. */
	median = median_u64(t, reps);
	clear_progress();
	printf("%s,%s,%s,%llu,%u,%zu,%u,%d,%u,%.4f,%.4f,%.4f,%s\n", peer,
	       variant, case_name(a->kase),
	       (unsigned long long)(a->t_ns / 1000), p, a->n, batch,
	       a->ordered, reps, (double)median / NS_PER_MS,
	       (double)t[0] / NS_PER_MS, (double)t[reps - 1] / NS_PER_MS,
	       note);
	fflush(stdout);
}

void peer_measure(const struct peer_args *a, const char *peer,
		  const char *variant, bool batched, const char *note,
		  peer_run_fn *fn, void *ctx)
{
	for (size_t i = 0; i < a->nthreads; i++) {
		if (!batched) {
			measure_cell(a, peer, variant, a->threads[i], 0, note,
				     fn, ctx);
			continue;
		}
		for (size_t b = 0; b < a->nbatch; b++)
			measure_cell(a, peer, variant, a->threads[i],
				     a->batch[b], note, fn, ctx);
	}
}
