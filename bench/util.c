/*
 * Helpers shared by the benchmark programs; see util.h.
 */
#define _GNU_SOURCE

#include "util.h"

#include <eachobs.h>

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Set once by main before anything can fail; read only after that. */
static const char *prog_name = "bench";
static const char *prog_argv0 = "bench";
static bench_usage_fn *prog_usage;

void bench_set_name(const char *name, const char *argv0,
		    bench_usage_fn *usage)
{
	prog_name = name;
	prog_argv0 = argv0;
	prog_usage = usage;
}

static void vmessage(const char *fmt, va_list ap)
{
	fprintf(stderr, "%s: ", prog_name);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

_Noreturn void die(const char *fmt, ...)
{
	va_list ap;

	clear_progress();
	va_start(ap, fmt);
	vmessage(fmt, ap);
	va_end(ap);
	exit(1);
}

static _Noreturn void help_exit(void)
{
	if (prog_usage)
		prog_usage(stdout, prog_argv0);
	exit(0);
}

/* One line, as GNU tools do: the full usage would bury the error. */
static _Noreturn void hint_exit(void)
{
	fprintf(stderr, "Try '%s --help' for more information.\n",
		prog_argv0);
	exit(2);
}

/* No clear_progress(): parsing happens before any progress line. */
_Noreturn void bad_usage(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmessage(fmt, ap);
	va_end(ap);
	hint_exit();
}

/* strtoull alone would accept "-1" (as ULLONG_MAX), "", "8x" and leading
 * blanks; hence the digit check up front and the *end check after. */
static bool parse_ull(const char *s, unsigned long long min,
		      unsigned long long max, unsigned long long *out)
{
	char *end;
	unsigned long long v;

	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < min || v > max)
		return false;
	*out = v;
	return true;
}

unsigned long long parse_option(const char *name, const char *arg,
				unsigned long long min, unsigned long long max)
{
	unsigned long long v;

	if (!parse_ull(arg, min, max, &v))
		bad_usage("%s: '%s' is not in %llu..%llu", name, arg, min,
			  max);
	return v;
}

/* Parse a comma-separated list of thread counts into out[0..cap) and
 * return how many there were. */
static size_t parse_threads(const char *arg, unsigned *out, size_t cap)
{
	char *list = strdup(arg), *save, *tok;
	size_t count = 0;

	if (list == NULL)
		die("out of memory");
	/* strtok_r would silently skip empty items ("2,,8"); strsep does
	 * not. */
	for (save = list; (tok = strsep(&save, ",")) != NULL;) {
		unsigned long long v;

		if (count == cap)
			bad_usage("--threads: at most %zu counts", cap);
		if (!parse_ull(tok, 1, EACHOBS_MAX_THREADS, &v))
			bad_usage("--threads: '%s' is not a count in 1..%u",
				  tok, EACHOBS_MAX_THREADS);
		out[count++] = (unsigned)v;
	}
	free(list);
	return count;
}

/* The options every benchmark takes; bench_parse_args() appends the
 * program's own. */
static const struct option common_options[] = {
	{ "reps", required_argument, NULL, 'r' },
	{ "threads", required_argument, NULL, 't' },
	{ "quick", no_argument, NULL, 'q' },
	{ "csv", required_argument, NULL, 'o' },
	{ "help", no_argument, NULL, 'h' },
};
#define NCOMMON (sizeof(common_options) / sizeof(common_options[0]))
#define MAX_OWN_OPTIONS 8

/* Returns false for an option that is not a common one. */
static bool common_option(int ch, const char *arg, struct bench_args *a)
{
	switch (ch) {
	case 'r':
		a->reps = (unsigned)parse_option("--reps", arg, 1,
						 BENCH_MAX_REPS);
		a->reps_set = true;
		return true;
	case 't':
		a->nthread_counts = parse_threads(arg, a->threads,
						  BENCH_MAX_THREAD_COUNTS);
		a->threads_set = true;
		return true;
	case 'q': a->quick = true; return true;
	case 'o': a->csv_path = arg; return true;
	case 'h': help_exit();
	default: return false;
	}
}

void bench_parse_args(int argc, char **argv, struct bench_args *a,
		      const struct option *own, bench_option_fn *fn,
		      void *ctx)
{
	/* Zero-filled, so the table ends with the zero entry getopt needs. */
	struct option all[NCOMMON + MAX_OWN_OPTIONS + 1] = { { 0 } };
	size_t n = 0;
	int ch;

	for (size_t i = 0; i < NCOMMON; i++)
		all[n++] = common_options[i];
	for (; own != NULL && own->name != NULL; own++) {
		if (n == NCOMMON + MAX_OWN_OPTIONS)
			die("more than %d options of its own", MAX_OWN_OPTIONS);
		all[n++] = *own;
	}
	/* A leading '+' stops at the first non-option, so stray arguments are
	 * reported below instead of being permuted away; -h is --help. */
	while ((ch = getopt_long(argc, argv, "+h", all, NULL)) != -1) {
		/* On '?' getopt has already said what was wrong. */
		if (ch == '?')
			hint_exit();
		if (!common_option(ch, optarg, a))
			fn(ch, optarg, ctx);
	}
	if (optind < argc)
		bad_usage("unexpected argument '%s'", argv[optind]);
}

uint64_t now_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
		die("clock_gettime: %s", strerror(errno));
	return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

uint64_t cpu_ns(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) != 0)
		die("getrusage: %s", strerror(errno));
	return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) *
		       NS_PER_S +
	       ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) *
		       1000u;
}

int sleep_ns(uint64_t ns)
{
	struct timespec req = { .tv_sec = (time_t)(ns / NS_PER_S),
				.tv_nsec = (long)(ns % NS_PER_S) };
	int rc;

	/* A signal cuts the sleep short; finish the remainder in req. */
	while ((rc = clock_nanosleep(CLOCK_MONOTONIC, 0, &req, &req)) == EINTR)
		;
	return -rc;
}

int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* Drain the iterator, checking that the indices are a permutation of
 * [0, n) (the identity when ordered) and that each slot holds its index. */
void consume(eachobs_iter *it, size_t n, bool ordered,
		    unsigned char *seen)
{
	const void *obs;
	/* SIZE_MAX until a call sets it: eachobs_next leaves idx untouched
	 * on errors that are not a getobs failure. */
	size_t idx = SIZE_MAX, count = 0, stored;
	int rc;

	while ((rc = eachobs_next(it, &obs, &idx)) == 1) {
		if (idx >= n)
			die("index %zu yielded, but n is %zu", idx, n);
		if (obs == NULL)
			die("index %zu yielded with a NULL slot", idx);
		memcpy(&stored, obs, sizeof(stored));
		if (stored != idx)
			die("index %zu yielded, but its slot holds %zu", idx,
			    stored);
		if (seen[idx])
			die("index %zu yielded twice", idx);
		if (ordered && idx != count)
			die("ordered: index %zu yielded at position %zu", idx,
			    count);
		seen[idx] = 1;
		count++;
	}
	if (rc < 0)
		die("eachobs_next (index %zu): %s", idx, eachobs_strerror(rc));
	if (count != n)
		die("eachobs_next ended after %zu of %zu observations", count,
		    n);
}

FILE *open_csv(const char *path, const char *header)
{
	FILE *csv;

	if (path == NULL)
		return NULL;
	csv = fopen(path, "w");
	if (csv == NULL)
		die("%s: %s", path, strerror(errno));
	fputs(header, csv);
	return csv;
}

/* Buffered write errors (a full disk, a closed pipe) surface only here. */
void close_outputs(FILE *csv, const char *csv_path)
{
	if (csv && fclose(csv) != 0)
		die("%s: %s", csv_path, strerror(errno));
	if (fflush(stdout) != 0 || ferror(stdout))
		die("writing stdout failed");
}

void parse_name_list(const char *opt, const char *arg,
		     const char *const *names, size_t stride, size_t n,
		     bool *use)
{
	char *list = strdup(arg), *save, *tok;

	if (list == NULL)
		die("out of memory");
	memset(use, 0, n * sizeof(*use));
	for (save = list; (tok = strsep(&save, ",")) != NULL;) {
		size_t c;

		for (c = 0; c < n; c++)
			if (strcmp(tok, *(const char *const *)(
					       (const char *)names +
					       c * stride)) == 0)
				break;
		if (c == n)
			bad_usage("%s: unknown case '%s'", opt, tok);
		use[c] = true;
	}
	free(list);
}

bool run_in_child(void (*fn)(void *ctx, void *out), void *ctx, void *out,
		  size_t size)
{
	int fd[2], status;
	pid_t pid;
	ssize_t got;

	if (pipe(fd) != 0)
		die("pipe: %s", strerror(errno));
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid == 0) {
		close(fd[0]);
		fn(ctx, out);
		_exit(write(fd[1], out, size) == (ssize_t)size ? 0 : 1);
	}
	close(fd[1]);
	got = read(fd[0], out, size);
	close(fd[0]);
	if (waitpid(pid, &status, 0) != pid)
		die("waitpid: %s", strerror(errno));
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
	       got == (ssize_t)size;
}
