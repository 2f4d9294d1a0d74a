/*
 * The benchmark programs' harness; see util.h.
 */
#define _GNU_SOURCE

#include "util.h"

#include <errno.h>
#include <getopt.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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
		a->nthread_counts = parse_list("--threads", arg, 1,
					       EACHOBS_MAX_THREADS, a->threads,
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
