/*
 * TimeDataset: the throughput benchmark from MLUtils.jl pull request #33
 * ("Implement parallel data iterator using FLoops.jl"), on eachobs.
 *
 * getobs(idx) sleeps t and then returns idx, so a perfect loader with P
 * threads finishes n observations in ceil(n / P) sleeps. The sleep itself
 * is the unit of work; what we measure is how much of it the library
 * loses to scheduling, hand-off and waiting. Linux sleeps some tens of
 * microseconds longer than asked (timer slack plus wake-up latency), so
 * the ideal time is computed from the measured mean sleep, t_sleep, and
 * not from t, or the 10 us case would look four times slower than it is.
 *
 * With --work cpu, getobs computes instead of sleeping: it spins until
 * its own thread has used t of CPU time (CLOCK_THREAD_CPUTIME_ID), so a
 * thread that is not running does not advance. Then at most as many
 * threads as there are cores make progress, and efficiency falls as
 * cores / P beyond them: what a CPU-bound getobs (decoding, augmenting)
 * can expect.
 *
 * The consumer checks every index: it must arrive exactly once, in order
 * when ordered, and the slot must hold the index it is yielded with. A
 * wrong result is a failure (exit status 1), not a number in the table.
 *
 * Usage: timedataset [--reps R] [--threads LIST] [--cases LIST]
 *                    [--work sleep|cpu] [--ordered no|yes|both] [--quick]
 *                    [--csv FILE] [--help]
 */
#define _GNU_SOURCE

#include <eachobs.h>

#include "util.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NS_PER_MS 1000000.0

/* The four datasets of MLUtils.jl PR #33. --quick divides n by QUICK_DIVISOR. */
struct bench_case {
	const char *name;
	size_t n;
	uint64_t t_ns;
};

static const struct bench_case all_cases[] = {
	{ "100ms", 100, 100000000 },
	{ "1ms", 10000, 1000000 },
	{ "100us", 10000, 100000 },
	{ "10us", 10000, 10000 },
};
#define NCASES (sizeof(all_cases) / sizeof(all_cases[0]))
#define QUICK_DIVISOR 10

static const eachobs_executor executors[] = { EACHOBS_THREADED,
					      EACHOBS_BACKGROUND };
#define NEXECUTORS (sizeof(executors) / sizeof(executors[0]))

struct options {
	struct bench_args args; /* --reps, --threads, --quick, --csv */
	bool use_case[NCASES];
	bool cpu;	    /* --work cpu: getobs spins on thread CPU time */
	bool orders[2]; /* --ordered: [0] unordered runs, [1] ordered */
};

/* The dataset's ctx: read-only once the iterator starts, so getobs needs
 * no synchronization. */
struct timedata {
	size_t n;
	uint64_t t_ns;
	bool cpu;
};

/* One configuration's outcome over all repetitions. */
struct result {
	double median_ms, min_ms, max_ms, ideal_ms, efficiency;
	double vs_bare; /* bare threads' median / this median */
	double cores;   /* process CPU time over wall time, all reps */
};

static void usage(FILE *f, const char *prog)
{
	fprintf(f,
		"usage: %s [--reps R] [--threads LIST] [--cases LIST]\n"
		"          [--work sleep|cpu] [--ordered no|yes|both] [--quick]\n"
		"          [--csv FILE] [--help]\n"
		"\n"
		"The TimeDataset benchmark of MLUtils.jl PR #33: getobs sleeps t\n"
		"and returns its index. Each case runs at every thread count, with\n"
		"the THREADED and BACKGROUND executors, unordered and ordered, and\n"
		"reports the median wall time against ceil(n/P) * t_sleep.\n"
		"\n"
		"  --reps R        repetitions per configuration (1..%d; default 3)\n"
		"  --threads LIST  comma-separated thread counts (default 2,8,16)\n"
		"  --cases LIST    subset of 100ms,1ms,100us,10us (default all)\n"
		"  --work W        sleep (default): getobs sleeps t; cpu: getobs\n"
		"                  spins until its thread has used t of CPU time\n"
		"  --ordered O     no, yes or both (default): which orders to run\n"
		"  --quick         smoke mode: n divided by %d, reps 1 unless\n"
		"                  --reps is given\n"
		"  --csv FILE      also write the results as CSV to FILE\n"
		"  --help          print this and exit\n",
		prog, BENCH_MAX_REPS, QUICK_DIVISOR);
}

/* --cases LIST: the named cases only. */
static void parse_cases(struct options *o, const char *arg)
{
	parse_name_list("--cases", arg, &all_cases[0].name, sizeof(all_cases[0]), NCASES,
			o->use_case);
}

/* The options of our own: a bench_option_fn. */
static void parse_own(int ch, const char *arg, void *ctx)
{
	struct options *o = ctx;

	switch (ch) {
	case 'c':
		parse_cases(o, arg);
		break;
	case 'w':
		if (strcmp(arg, "sleep") != 0 && strcmp(arg, "cpu") != 0)
			bad_usage("--work: '%s' is not sleep or cpu", arg);
		o->cpu = strcmp(arg, "cpu") == 0;
		break;
	default: /* 'O', --ordered */
		if (strcmp(arg, "no") == 0)
			o->orders[0] = true, o->orders[1] = false;
		else if (strcmp(arg, "yes") == 0)
			o->orders[0] = false, o->orders[1] = true;
		else if (strcmp(arg, "both") == 0)
			o->orders[0] = o->orders[1] = true;
		else
			bad_usage("--ordered: '%s' is not no, yes or both",
				  arg);
		break;
	}
}

static void parse_args(int argc, char **argv, struct options *o)
{
	static const struct option own[] = {
		{ "cases", required_argument, NULL, 'c' },
		{ "work", required_argument, NULL, 'w' },
		{ "ordered", required_argument, NULL, 'O' },
		{ NULL, 0, NULL, 0 },
	};

	*o = (struct options){ .args = { .reps = 3,
					 .threads = { 2, 8, 16 },
					 .nthread_counts = 3 },
			       .orders = { true, true } };
	for (size_t c = 0; c < NCASES; c++)
		o->use_case[c] = true;
	bench_parse_args(argc, argv, &o->args, own, parse_own, o);
	if (o->args.quick && !o->args.reps_set)
		o->args.reps = 1;
}

static size_t timedata_numobs(void *ctx)
{
	return ((const struct timedata *)ctx)->n;
}

/* Spin until this thread has used ns of CPU time. Time the thread spends
 * descheduled does not count, so P spinning threads on fewer cores take
 * longer in wall time, as real computation would. */
static int thread_cpu_ns(uint64_t *ns)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
		return -errno;
	*ns = (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
	return 0;
}

static int spin_cpu_ns(uint64_t ns)
{
	/* Zeroed only for gcc, which cannot tell that a 0 return sets them. */
	uint64_t start = 0, now = 0;
	int rc = thread_cpu_ns(&start);

	if (rc < 0)
		return rc;
	do {
		if ((rc = thread_cpu_ns(&now)) < 0)
			return rc;
	} while (now - start < ns);
	return 0;
}

/* The unit of work: a sleep, or t of CPU time with --work cpu. */
static int work(const struct timedata *d)
{
	return d->cpu ? spin_cpu_ns(d->t_ns) : sleep_ns(d->t_ns);
}

static int timedata_getobs(void *ctx, size_t idx, void *obs)
{
	const struct timedata *d = ctx;
	int rc = work(d);

	if (rc < 0)
		return rc;
	memcpy(obs, &idx, sizeof(idx));
	return 0;
}

/* Mean wall duration of one unit of work (a sleep, or a spin) on one
 * thread, through the same work() that getobs calls, so that t_sleep
 * measures exactly what the workers do. Enough units to spend about a
 * quarter second (a twentieth in quick mode), at least 3 so that one
 * late wake-up does not decide the result. */
static double calibrate_work(const struct timedata *d, bool quick)
{
	uint64_t budget = quick ? NS_PER_S / 20 : NS_PER_S / 4;
	uint64_t k = budget / d->t_ns, start;
	int rc;

	k = k < 3 ? 3 : k > 2000 ? 2000 : k;
	/* One unmeasured unit first: the first wake-up pays for page faults
	 * and timer setup that the workers do not. */
	if ((rc = work(d)) < 0)
		die("getobs work: %s", strerror(-rc));
	start = now_ns();
	for (uint64_t i = 0; i < k; i++)
		if ((rc = work(d)) < 0)
			die("getobs work: %s", strerror(-rc));
	return (double)(now_ns() - start) / (double)k;
}

/* One timed iteration: from before eachobs_parallel to after close. */
static uint64_t run_once(struct timedata *d, unsigned nthreads,
			 eachobs_executor ex, bool ordered, unsigned char *seen)
{
	const eachobs_dataset data = { .ctx = d,
				       .numobs = timedata_numobs,
				       .getobs = timedata_getobs,
				       .obs_size = sizeof(size_t) };
	const eachobs_options opts = { .nthreads = nthreads,
				       .executor = ex,
				       .ordered = ordered };
	eachobs_iter *it;
	uint64_t start, end;
	int rc;

	memset(seen, 0, d->n);
	start = now_ns();
	rc = eachobs_parallel(&it, &data, &opts);
	if (rc < 0)
		die("eachobs_parallel: %s", eachobs_strerror(rc));
	consume(it, d->n, ordered, seen);
	eachobs_close(it);
	end = now_ns();
	return end - start;
}

/* The reference: P bare threads taking indices from an atomic counter and
 * doing getobs's work (a sleep or a spin), with no hand-off at all. What the machine itself allows; the
 * vs_bare column compares each eachobs row with it, in the same run. */
struct bare {
	const struct timedata *d;
	atomic_size_t next;
};

static void *bare_worker(void *arg)
{
	struct bare *b = arg;

	while (atomic_fetch_add(&b->next, 1) < b->d->n)
		if (work(b->d) != 0)
			die("getobs work failed");
	return NULL;
}

static uint64_t run_bare(const struct timedata *d, unsigned nthreads)
{
	pthread_t th[EACHOBS_MAX_THREADS];
	struct bare b = { .d = d };
	uint64_t start = now_ns();

	atomic_init(&b.next, 0);
	for (unsigned i = 0; i < nthreads; i++)
		if (pthread_create(&th[i], NULL, bare_worker, &b) != 0)
			die("pthread_create failed");
	for (unsigned i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	return now_ns() - start;
}

/* -1 stands for the bare-threads reference. */
static const char *ex_name(int ex)
{
	return ex < 0 ? "bare-thr" : executor_name((eachobs_executor)ex);
}

/* Everything that stays fixed while one case runs. */
struct case_run {
	const struct options *o;
	const struct bench_case *c;
	struct timedata data;
	double t_sleep;
	unsigned char *seen;
	size_t *done, total;
};

/* One status line on a terminal, rewritten in place; nothing otherwise,
 * so that logs and pipes get only the table. */
static void progress(const struct case_run *cr, unsigned p, int ex,
		     bool ordered, unsigned rep)
{
	show_progress("[%zu/%zu] n=%zu t=%s P=%u %s %s rep %u/%u",
		      *cr->done + 1, cr->total, cr->data.n, cr->c->name, p,
		      ex_name(ex), ordered ? "ordered" : "unordered",
		      rep + 1, cr->o->args.reps);
}

/* The ideal wall time, in ns, of n sleeps spread perfectly over P
 * threads. */
static double ideal_ns(size_t n, unsigned p, double t_sleep_ns)
{
	return (double)((n + p - 1) / p) * t_sleep_ns;
}

/* t_sleep: what the ideal counts per getobs; spin_wall, with --work cpu,
 * what one spin took on one thread (t_sleep is then t itself). */
static void print_header(const struct options *o, const double *t_sleep,
			 const double *spin_wall)
{
	printf("# eachobs TimeDataset benchmark (MLUtils.jl PR #33): getobs "
	       "%s t, returns idx\n",
	       o->cpu ? "spins for (thread CPU time)" : "sleeps");
	printf("# online CPUs %ld, reps %u (median wall time)%s\n",
	       sysconf(_SC_NPROCESSORS_ONLN), o->args.reps,
	       o->args.quick ? ", quick mode: n / 10" : "");
	if (o->cpu)
		printf("# t_sleep = t: the ideal gives every thread a core of its "
		       "own\n# wall time of one spin, one thread (above t when "
		       "other programs share the core):");
	else
		printf("# t_sleep (mean of one sleep, one thread):");
	for (size_t c = 0; c < NCASES; c++) {
		double v = o->cpu ? spin_wall[c] : t_sleep[c];

		if (!o->use_case[c])
			continue;
		if (v >= NS_PER_MS)
			printf("  %s -> %.3f ms", all_cases[c].name,
			       v / NS_PER_MS);
		else
			printf("  %s -> %.1f us", all_cases[c].name, v / 1e3);
	}
	printf("\n# ideal = ceil(n/P) * t_sleep; efficiency = ideal / wall "
	       "(THREADED: the consumer loads too, so up to (P+1)/P)\n");
	printf("# bare-thr: P plain threads doing getobs's work from an atomic "
	       "counter, no hand-off;\n#   vs_bare = its wall / the row's wall, "
	       "measured in this run (the machine's own limit)\n"
	       "# cores: process CPU time (user + system) over wall time\n");
}

/* How many of unordered and ordered run. */
static unsigned norders(const struct options *o)
{
	return (unsigned)o->orders[0] + (unsigned)o->orders[1];
}

static void print_estimate(const struct options *o, const double *t_sleep,
			   const size_t *n)
{
	double s = 0;

	for (size_t c = 0; c < NCASES; c++) {
		if (!o->use_case[c])
			continue;
		for (size_t i = 0; i < o->args.nthread_counts; i++)
			s += ideal_ns(n[c], o->args.threads[i], t_sleep[c]);
	}
	s *= (double)((NEXECUTORS * norders(o) + 1) * o->args.reps) / 1e9;
	printf("# estimated runtime: about %.0f s (sum of ideal times)\n", s);
}

static void print_table_head(void)
{
	printf("%7s %6s %5s  %-10s  %-7s %12s %12s %10s %8s %6s\n", "n", "t",
	       "P", "executor", "ordered", "wall_ms", "ideal_ms", "efficiency",
	       "vs_bare", "cores");
}

static void print_row(const struct bench_case *c, size_t n, unsigned p,
		      int ex, bool ordered, const struct result *r)
{
	printf("%7zu %6s %5u  %-10s  %-7s %12.2f %12.2f %10.3f %8.3f %6.2f\n",
	       n, c->name, p, ex_name(ex),
	       ex < 0 ? "-" : ordered ? "yes" : "no", r->median_ms,
	       r->ideal_ms, r->efficiency, r->vs_bare, r->cores);
}

static void csv_row(FILE *csv, const struct bench_case *c, size_t n,
		    double t_sleep, unsigned p, int ex, bool ordered,
		    unsigned reps, bool cpu, const struct result *r)
{
	fprintf(csv,
		"%zu,%" PRIu64
		",%.0f,%u,%s,%d,%u,%.3f,%.3f,%.3f,%.3f,%.4f,%.4f,%.3f,%s\n",
		n, c->t_ns, t_sleep, p, ex_name(ex), ordered, reps,
		r->median_ms, r->min_ms, r->max_ms, r->ideal_ms, r->efficiency,
		r->vs_bare, r->cores, cpu ? "cpu" : "sleep");
}

static struct result run_config(struct case_run *cr, unsigned p, int ex,
				bool ordered, double bare_ms)
{
	uint64_t wall[BENCH_MAX_REPS], cpu = 0, sum = 0;
	unsigned reps = cr->o->args.reps;
	struct result r;

	for (unsigned i = 0; i < reps; i++) {
		progress(cr, p, ex, ordered, i);
		uint64_t c0 = cpu_ns();
		wall[i] = ex < 0 ? run_bare(&cr->data, p)
				 : run_once(&cr->data, p, (eachobs_executor)ex,
					    ordered, cr->seen);
		cpu += cpu_ns() - c0;
		sum += wall[i];
	}
	/* The loader's CPU beside bare threads' doing the same sleeps. */
	r.cores = sum ? (double)cpu / (double)sum : 0;
	/* median_u64 sorts: wall[0] and wall[reps - 1] are then min and
	 * max. */
	r.median_ms = (double)median_u64(wall, reps) / NS_PER_MS;
	r.min_ms = (double)wall[0] / NS_PER_MS;
	r.max_ms = (double)wall[reps - 1] / NS_PER_MS;
	r.ideal_ms = ideal_ns(cr->data.n, p, cr->t_sleep) / NS_PER_MS;
	r.efficiency = r.ideal_ms / r.median_ms;
	r.vs_bare = (bare_ms > 0 ? bare_ms : r.median_ms) / r.median_ms;
	return r;
}

static void report(struct case_run *cr, FILE *csv, unsigned p, int ex,
		   bool ordered, const struct result *r)
{
	(*cr->done)++;
	clear_progress();
	print_row(cr->c, cr->data.n, p, ex, ordered, r);
	fflush(stdout);
	if (csv)
		csv_row(csv, cr->c, cr->data.n, cr->t_sleep, p, ex, ordered,
			cr->o->args.reps, cr->o->cpu, r);
}

static void run_case(struct case_run *cr, FILE *csv)
{
	const struct options *o = cr->o;

	for (size_t i = 0; i < o->args.nthread_counts; i++) {
		unsigned p = o->args.threads[i];
		struct result bare = run_config(cr, p, -1, false, 0);

		report(cr, csv, p, -1, false, &bare);
		for (size_t e = 0; e < NEXECUTORS; e++) {
			for (int ord = 0; ord <= 1; ord++) {
				if (!o->orders[ord])
					continue;
				struct result r = run_config(cr, p,
							     (int)executors[e],
							     ord,
							     bare.median_ms);
				report(cr, csv, p, (int)executors[e], ord, &r);
			}
		}
	}
}

int main(int argc, char **argv)
{
	struct options o;
	double t_sleep[NCASES] = { 0 }, spin_wall[NCASES] = { 0 };
	size_t n[NCASES], nmax = 0, done = 0, total = 0;
	uint64_t start;
	unsigned char *seen;
	FILE *csv;

	bench_set_name("timedataset", argv[0], usage);
	start = now_ns();
	parse_args(argc, argv, &o);
	/* Before the calibration, so that a bad path fails at once. */
	csv = open_csv(o.args.csv_path,
		       "n,t_ns,t_sleep_ns,nthreads,executor,ordered,reps,"
		       "wall_median_ms,wall_min_ms,wall_max_ms,ideal_ms,"
		       "efficiency,vs_bare,cores,work\n");
	for (size_t c = 0; c < NCASES; c++) {
		n[c] = all_cases[c].n / (o.args.quick ? QUICK_DIVISOR : 1);
		if (!o.use_case[c])
			continue;
		nmax = n[c] > nmax ? n[c] : nmax;
		total += o.args.nthread_counts * (NEXECUTORS * norders(&o) + 1);
		show_progress("measuring t_sleep for %s", all_cases[c].name);
		t_sleep[c] = calibrate_work(&(struct timedata){
			.n = n[c], .t_ns = all_cases[c].t_ns, .cpu = o.cpu },
					    o.args.quick);
		/* A spin's wall time depends on how much of the core other
		 * programs leave it, which changes during the run; the work
		 * itself is t of CPU, so the ideal counts t. */
		if (o.cpu) {
			spin_wall[c] = t_sleep[c];
			t_sleep[c] = (double)all_cases[c].t_ns;
		}
	}
	clear_progress();
	seen = malloc(nmax ? nmax : 1);
	if (seen == NULL)
		die("out of memory");
	print_header(&o, t_sleep, spin_wall);
	print_estimate(&o, t_sleep, n);
	print_table_head();
	fflush(stdout);
	for (size_t c = 0; c < NCASES; c++) {
		struct case_run cr = { .o = &o, .c = &all_cases[c],
				       .data = { n[c], all_cases[c].t_ns,
						 o.cpu },
				       .t_sleep = t_sleep[c], .seen = seen,
				       .done = &done, .total = total };

		if (o.use_case[c])
			run_case(&cr, csv);
	}
	printf("# total runtime %.1f s\n", (double)(now_ns() - start) / 1e9);
	close_outputs(csv, o.args.csv_path);
	free(seen);
	return 0;
}
