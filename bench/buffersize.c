/*
 * buffersize: what the buffer costs in memory and buys in throughput.
 *
 * getobs sleeps t (1 ms by default: a read from a disk or a network
 * filesystem) and then fills its observation (150528 bytes by default, a
 * 224 x 224 x 3 image of bytes) with memset, so that every slot the
 * iterator uses becomes resident. For each buffersize, one iteration over
 * n observations on P threads, with every other option at its default,
 * runs unordered and ordered, each repetition in a child process forked
 * for it. The child reports the wall time from before eachobs_parallel to
 * after eachobs_close and the peak resident memory the iteration added:
 * VmHWM at the end less VmRSS before the start, both from
 * /proc/self/status. A fresh process per run, so that pages an earlier
 * iterator freed cannot be reused unseen, and the peak starts at the
 * child's own resident set (fork sets it so).
 *
 * Beside the measurement, the slot memory the header documents:
 * (buffersize + P + 1) slots of obs_size rounded up to 64 bytes. The
 * list of buffersizes always includes the defaults the library picks for
 * this obs_size and P, unordered and ordered (marked in the table),
 * computed from the header's documented rule.
 *
 * The consumer checks every index (exactly once, in order when ordered)
 * and touches one byte of each observation.
 *
 * Usage: buffersize [--sizes LIST] [--t-us T] [--obs-bytes B] [--n N]
 *                   [--reps R] [--threads P] [--quick] [--csv FILE]
 */
#define _GNU_SOURCE

#include <eachobs.h>

#include "util.h"
#include "../test/buffer_rule.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_SIZES 32
#define QUICK_DIVISOR 10

struct options {
	struct bench_args args; /* --reps, --threads, --quick, --csv */
	size_t sizes[MAX_SIZES + 2]; /* room for the two defaults */
	size_t nsizes;
	uint64_t t_ns;
	size_t obs_bytes, n;
	bool n_set;
};

/* The dataset's ctx: read-only once the iterator starts. */
struct data {
	size_t n, obs_bytes;
	uint64_t t_ns;
};

/* What one child measured. */
struct sample {
	uint64_t wall_ns;
	long peak_kib;
};

static void usage(FILE *f, const char *prog)
{
	fprintf(f,
		"usage: %s [--sizes LIST] [--t-us T] [--obs-bytes B] [--n N]\n"
		"          [--reps R] [--threads P] [--quick] [--csv FILE]\n"
		"\n"
		"Memory and throughput against buffersize: getobs sleeps T, then\n"
		"fills B bytes; for each buffersize, one iteration over N\n"
		"observations on P threads, unordered and ordered, each run in a\n"
		"fresh child process. Prints the observations per second, the peak\n"
		"resident memory the run added and the slot memory the header\n"
		"documents, (buffersize + P + 1) * B. The default buffersizes for\n"
		"B and P (unordered, ordered) are always included, marked with\n"
		"a *.\n"
		"\n"
		"  --sizes LIST    buffersizes (default 1,2,4,8,16,32,64,128,256,1024)\n"
		"  --t-us T        microseconds getobs sleeps (default 1000)\n"
		"  --obs-bytes B   bytes of an observation (default 150528,\n"
		"                  a 224 x 224 x 3 image of bytes)\n"
		"  --n N           observations per run (default P * 250 ms / T,\n"
		"                  a quarter second's loading at full speed)\n"
		"  --reps R        runs per configuration, median (default 3)\n"
		"  --threads P     worker threads, one count (default 16)\n"
		"  --quick         smoke mode: n / %d, one run\n"
		"  --csv FILE      also write the results as CSV to FILE\n"
		"  --help          print this and exit\n",
		prog, QUICK_DIVISOR);
}

static void parse_sizes(struct options *o, const char *arg)
{
	unsigned v[MAX_SIZES];

	o->nsizes = parse_list("--sizes", arg, 1, EACHOBS_MAX_SLOTS / 2, v,
			       MAX_SIZES);
	for (size_t i = 0; i < o->nsizes; i++)
		o->sizes[i] = v[i];
}

/* The options of our own: a bench_option_fn. */
static void parse_own(int ch, const char *arg, void *ctx)
{
	struct options *o = ctx;

	switch (ch) {
	case 's':
		parse_sizes(o, arg);
		break;
	case 'T':
		o->t_ns = parse_option("--t-us", arg, 0, 10000000) * 1000;
		break;
	case 'b':
		o->obs_bytes = parse_option("--obs-bytes", arg, 1, 1u << 30);
		break;
	default: /* 'n' */
		o->n = parse_option("--n", arg, 1, 100000000);
		o->n_set = true;
		break;
	}
}

/* The default the library picks for unbatched observations of obs_bytes
 * on p threads, as the header states it (test/buffer_rule.h, the tests'
 * statement of the rule: one place to change when the rule does). */
static size_t default_buffersize(unsigned p, size_t obs_bytes, bool ordered)
{
	return rule_default_buffersize(false, ordered, p,
				       rule_unit_bytes(1, obs_bytes));
}

static int cmp_size(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;

	return (x > y) - (x < y);
}

static void parse_args(int argc, char **argv, struct options *o)
{
	static const struct option own[] = {
		{ "sizes", required_argument, NULL, 's' },
		{ "t-us", required_argument, NULL, 'T' },
		{ "obs-bytes", required_argument, NULL, 'b' },
		{ "n", required_argument, NULL, 'n' },
		{ NULL, 0, NULL, 0 },
	};
	static const size_t sizes[] = { 1, 2, 4, 8, 16, 32, 64, 128, 256,
					1024 };

	*o = (struct options){ .args = { .reps = 3, .threads = { 16 },
					 .nthread_counts = 1 },
			       .t_ns = 1000000,
			       .obs_bytes = 224 * 224 * 3 };
	memcpy(o->sizes, sizes, sizeof(sizes));
	o->nsizes = sizeof(sizes) / sizeof(sizes[0]);
	bench_parse_args(argc, argv, &o->args, own, parse_own, o);
	if (o->args.nthread_counts != 1)
		bad_usage("--threads: one count only");
	if (o->args.quick && !o->args.reps_set)
		o->args.reps = 1;
	unsigned p = o->args.threads[0];
	if (!o->n_set) {
		/* A quarter second at P / t observations per second. */
		uint64_t t = o->t_ns ? o->t_ns : 1000;
		o->n = (size_t)((uint64_t)p * (NS_PER_S / 4) / t);
		if (o->n > 1000000)
			o->n = 1000000;
	}
	if (o->args.quick)
		o->n = o->n / QUICK_DIVISOR ? o->n / QUICK_DIVISOR : 1;

	for (int ord = 0; ord <= 1; ord++) {
		size_t def = default_buffersize(p, o->obs_bytes, ord);
		bool have = false;
		for (size_t i = 0; i < o->nsizes; i++)
			have = have || o->sizes[i] == def;
		if (!have)
			o->sizes[o->nsizes++] = def;
	}
	qsort(o->sizes, o->nsizes, sizeof(o->sizes[0]), cmp_size);
}

static size_t data_numobs(void *ctx)
{
	return ((const struct data *)ctx)->n;
}

static int data_getobs(void *ctx, size_t idx, void *obs)
{
	const struct data *d = ctx;
	int rc = d->t_ns ? sleep_ns(d->t_ns) : 0;

	if (rc < 0)
		return rc;
	memset(obs, (int)(idx & 0xff), d->obs_bytes);
	return 0;
}

/* A field of /proc/self/status ("VmRSS:"), in KiB. */
static long status_kib(const char *field)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	size_t len = strlen(field);
	long v = -1;

	if (f == NULL)
		die("/proc/self/status: %s", strerror(errno));
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, field, len) == 0) {
			v = strtol(line + len, NULL, 10);
			break;
		}
	fclose(f);
	if (v < 0)
		die("/proc/self/status: no %s", field);
	return v;
}

/* The consumer: every index once (in order when ordered), one byte of
 * each observation read. */
static void drain(eachobs_iter *it, const struct data *d, bool ordered,
		  unsigned char *seen)
{
	const void *obs;
	size_t idx = SIZE_MAX, count = 0;
	unsigned sink = 0;
	int rc;

	while ((rc = eachobs_next(it, &obs, &idx)) == 1) {
		if (idx >= d->n || seen[idx])
			die("index %zu yielded twice or out of range", idx);
		if (ordered && idx != count)
			die("ordered: index %zu at position %zu", idx, count);
		if (*(const unsigned char *)obs != (idx & 0xff))
			die("index %zu: its slot holds another observation",
			    idx);
		sink += *(const unsigned char *)obs;
		seen[idx] = 1;
		count++;
	}
	if (rc < 0)
		die("eachobs_next (index %zu): %s", idx, eachobs_strerror(rc));
	if (count != d->n)
		die("ended after %zu of %zu observations", count, d->n);
	(void)sink;
}

/* In the child: one iteration, measured. */
static struct sample child_run(const struct data *d, unsigned p,
			       size_t buffersize, bool ordered)
{
	const eachobs_dataset data = { .ctx = (void *)d,
				       .numobs = data_numobs,
				       .getobs = data_getobs,
				       .obs_size = d->obs_bytes };
	const eachobs_options opts = { .nthreads = p,
				       .buffersize = buffersize,
				       .ordered = ordered };
	unsigned char *seen = calloc(d->n, 1);
	struct sample s;
	eachobs_iter *it;
	int rc;

	if (seen == NULL)
		die("out of memory");
	long before = status_kib("VmRSS:");
	uint64_t t0 = now_ns();
	if ((rc = eachobs_parallel(&it, &data, &opts)) < 0)
		die("eachobs_parallel: %s", eachobs_strerror(rc));
	drain(it, d, ordered, seen);
	eachobs_close(it);
	s.wall_ns = now_ns() - t0;
	s.peak_kib = status_kib("VmHWM:") - before;
	free(seen);
	return s;
}

struct run_args {
	const struct data *d;
	unsigned p;
	size_t buffersize;
	bool ordered;
};

static void run_child(void *ctx, void *out)
{
	const struct run_args *a = ctx;

	*(struct sample *)out = child_run(a->d, a->p, a->buffersize,
					  a->ordered);
}

/* One run in a fresh child process, its sample read back. */
static struct sample run(const struct data *d, unsigned p,
			 size_t buffersize, bool ordered)
{
	struct run_args a = { d, p, buffersize, ordered };
	struct sample s;

	if (!run_in_child(run_child, &a, &s, sizeof(s)))
		die("the run with buffersize %zu failed", buffersize);
	return s;
}

int main(int argc, char **argv)
{
	struct options o;

	bench_set_name("buffersize", argv[0], usage);
	parse_args(argc, argv, &o);
	FILE *csv = open_csv(o.args.csv_path,
			     "buffersize,default,nthreads,ordered,obs_bytes,"
			     "t_ns,n,reps,wall_median_ms,obs_per_s,"
			     "peak_rss_kib,slot_kib\n");
	unsigned p = o.args.threads[0], reps = o.args.reps;
	size_t def[2] = { default_buffersize(p, o.obs_bytes, false),
			  default_buffersize(p, o.obs_bytes, true) };
	size_t slot = (o.obs_bytes + 63) / 64 * 64;
	struct data d = { .n = o.n, .obs_bytes = o.obs_bytes, .t_ns = o.t_ns };

	printf("# buffersize: getobs sleeps %.0f us then fills %zu bytes; "
	       "P = %u, n = %zu, median of %u; online CPUs %ld\n",
	       (double)o.t_ns / 1e3, o.obs_bytes, p, o.n, reps,
	       sysconf(_SC_NPROCESSORS_ONLN));
	printf("# peak_MiB: resident memory the run added at its peak; "
	       "slots_MiB: (buffersize + P + 1) * obs_size; * the default\n");
	printf("%11s %-9s %10s %12s %10s %10s\n", "buffersize", "order",
	       "wall_ms", "obs/s", "peak_MiB", "slots_MiB");
	for (size_t i = 0; i < o.nsizes; i++) {
		for (int ord = 0; ord <= 1; ord++) {
			uint64_t wall[BENCH_MAX_REPS];
			/* KiB, exact in a double. */
			double peak[BENCH_MAX_REPS];

			for (unsigned r = 0; r < reps; r++) {
				show_progress("buffersize %zu %s rep %u/%u",
					      o.sizes[i],
					      ord ? "ordered" : "unordered",
					      r + 1, reps);
				struct sample s = run(&d, p, o.sizes[i], ord);
				wall[r] = s.wall_ns;
				peak[r] = (double)s.peak_kib;
			}
			double ms = (double)median_u64(wall, reps) / 1e6;
			double rate = (double)o.n / (ms / 1e3);
			long pk = (long)median_double(peak, reps);
			double slots_kib = (double)((o.sizes[i] + p + 1) * slot) /
					   1024.0;
			bool is_def = o.sizes[i] == def[ord];

			clear_progress();
			printf("%10zu%s %-9s %10.1f %12.0f %10.1f %10.1f\n",
			       o.sizes[i], is_def ? "*" : " ",
			       ord ? "ordered" : "unordered", ms, rate,
			       (double)pk / 1024.0, slots_kib / 1024.0);
			fflush(stdout);
			if (csv)
				fprintf(csv,
					"%zu,%d,%u,%d,%zu,%llu,%zu,%u,%.3f,"
					"%.1f,%ld,%.1f\n",
					o.sizes[i], is_def, p, ord, o.obs_bytes,
					(unsigned long long)o.t_ns, o.n, reps,
					ms, rate, pk, slots_kib);
		}
	}
	close_outputs(csv, o.args.csv_path);
	return 0;
}
