/*
 * The support library of the tests, the benchmarks and the peers; see
 * support.h.
 */
#define _GNU_SOURCE

#include "support.h"
#include "progress.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

/* ---- the program and its exits ----------------------------------- */

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

void die(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	clear_progress();
	va_start(ap, fmt);
	vmessage(fmt, ap);
	va_end(ap);
	exit(1);
}

void help_exit(void)
{
	if (prog_usage)
		prog_usage(stdout, prog_argv0);
	exit(0);
}

/* One line, as GNU tools do: the full usage would bury the error. */
void hint_exit(void)
{
	fprintf(stderr, "Try '%s --help' for more information.\n",
		prog_argv0);
	exit(2);
}

/* No clear_progress(): parsing happens before any progress line. */
void bad_usage(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmessage(fmt, ap);
	va_end(ap);
	hint_exit();
}

/* ---- options ----------------------------------------------------- */

/* strtoull alone would accept "-1" (as ULLONG_MAX), "", "8x" and leading
 * blanks; hence the digit check up front and the *end check after. */
unsigned long long parse_option(const char *name, const char *arg,
				unsigned long long min, unsigned long long max)
{
	unsigned long long v;
	char *end;

	if (*arg >= '0' && *arg <= '9') {
		errno = 0;
		v = strtoull(arg, &end, 10);
		if (errno == 0 && *end == '\0' && v >= min && v <= max)
			return v;
	}
	bad_usage("%s: '%s' is not in %llu..%llu", name, arg, min, max);
}

/* Call item(tok, i, ctx) for the i-th comma-separated item of arg and
 * return how many there were. strtok_r would silently skip empty items
 * ("2,,8"); strsep does not, so an empty item reaches item() and is
 * refused there. */
static size_t split_list(const char *arg,
			 void (*item)(const char *tok, size_t i, void *ctx),
			 void *ctx)
{
	char *list = strdup(arg), *save, *tok;
	size_t i = 0;

	if (list == NULL)
		die("out of memory");
	for (save = list; (tok = strsep(&save, ",")) != NULL;)
		item(tok, i++, ctx);
	free(list);
	return i;
}

struct number_list {
	const char *name;
	unsigned min, max;
	unsigned *out;
	size_t cap;
};

static void number_item(const char *tok, size_t i, void *ctx)
{
	const struct number_list *l = ctx;

	if (i == l->cap)
		bad_usage("%s: at most %zu values", l->name, l->cap);
	l->out[i] = (unsigned)parse_option(l->name, tok, l->min, l->max);
}

size_t parse_list(const char *name, const char *arg, unsigned min,
		  unsigned max, unsigned *out, size_t cap)
{
	struct number_list l = { name, min, max, out, cap };

	return split_list(arg, number_item, &l);
}

struct name_list {
	const char *opt;
	const char *const *names;
	size_t stride, n;
	bool *use;
};

static void name_item(const char *tok, size_t i, void *ctx)
{
	const struct name_list *l = ctx;
	size_t c;

	(void)i;
	for (c = 0; c < l->n; c++) {
		const char *const *name = (const char *const *)(
			(const char *)l->names + c * l->stride);

		if (strcmp(tok, *name) == 0)
			break;
	}
	if (c == l->n)
		bad_usage("%s: unknown case '%s'", l->opt, tok);
	l->use[c] = true;
}

void parse_name_list(const char *opt, const char *arg,
		     const char *const *names, size_t stride, size_t n,
		     bool *use)
{
	struct name_list l = { opt, names, stride, n, use };

	memset(use, 0, n * sizeof(*use));
	split_list(arg, name_item, &l);
}

/* ---- clocks ------------------------------------------------------ */

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

/* ---- medians ----------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

uint64_t median_u64(uint64_t *v, size_t n)
{
	if (n == 0)
		return 0;
	qsort(v, n, sizeof(v[0]), cmp_u64);
	return v[(n - 1) / 2];
}

double median_double(double *v, size_t n)
{
	if (n == 0)
		return 0;
	qsort(v, n, sizeof(v[0]), cmp_double);
	return v[(n - 1) / 2];
}

/* ---- checks ------------------------------------------------------ */

bool check_index(unsigned char *seen, size_t n, bool ordered, size_t pos,
		 size_t idx, char *msg, size_t len)
{
	if (idx >= n) {
		snprintf(msg, len, "index %zu yielded, but n is %zu", idx, n);
		return false;
	}
	if (seen && seen[idx]) {
		snprintf(msg, len, "index %zu yielded twice", idx);
		return false;
	}
	if (ordered && idx != pos) {
		snprintf(msg, len, "ordered: index %zu yielded at position %zu",
			 idx, pos);
		return false;
	}
	if (seen)
		seen[idx] = 1;
	return true;
}
