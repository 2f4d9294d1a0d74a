/*
 * A training run that survives being killed: every K steps it saves the
 * loader's checkpoint together with the "model" (here, how often each
 * observation was trained on), atomically, and when started again it
 * continues where the saved state says, mid-epoch. Killed and restarted
 * any number of times, the run trains on every observation of the epoch
 * exactly once, as a run that was never interrupted does.
 *
 * usage: resume STATE [--n N] [--every K] [--sleep-us T] [--check]
 *   STATE        the state file (created, then replaced at each save)
 *   --n N        observations (default 20000)
 *   --every K    save every K batches (default 10)
 *   --sleep-us T each getobs sleeps T microseconds (default 0)
 *   --check      after the epoch, exit 1 unless every observation was
 *                trained on exactly once
 *
 * Under Slurm, run it with `sbatch --requeue` (or `--signal=B:USR1@60`
 * and a handler that saves): a preempted job starts again from its last
 * save instead of from the start of the epoch.
 */
#define _POSIX_C_SOURCE 200809L
#include <eachobs.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAGIC 0x52534d31u /* the state file's first word */

struct state {
	size_t n;
	unsigned char *visits; /* the stand-in for model weights */
	size_t steps;
	void *ckpt;            /* the loader's checkpoint */
	size_t ckpt_len;
};

static unsigned sleep_us;

static size_t numobs(void *ctx)
{
	return ((struct state *)ctx)->n;
}

static int getobs(void *ctx, size_t idx, void *obs)
{
	struct timespec t = { 0, (long)sleep_us * 1000 };

	(void)ctx;
	if (sleep_us)
		nanosleep(&t, NULL);
	memcpy(obs, &idx, sizeof(idx));
	return 0;
}

/* Write the whole state to a temporary file, then rename it over the old
 * one: a kill at any moment leaves either the old state or the new. */
static int save(const char *path, struct state *s, eachobs_iter *it)
{
	size_t len = 0;
	char tmp[4096];

	if (eachobs_checkpoint(it, NULL, &len) != -ENOSPC)
		return -1;
	void *ck = malloc(len);
	if (!ck || eachobs_checkpoint(it, ck, &len) != 0)
		return free(ck), -1;
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = fopen(tmp, "wb");
	uint32_t magic = MAGIC;
	int ok = f && fwrite(&magic, sizeof(magic), 1, f) == 1 &&
		 fwrite(&s->n, sizeof(s->n), 1, f) == 1 &&
		 fwrite(&s->steps, sizeof(s->steps), 1, f) == 1 &&
		 fwrite(s->visits, 1, s->n, f) == s->n &&
		 fwrite(&len, sizeof(len), 1, f) == 1 &&
		 fwrite(ck, 1, len, f) == len && fflush(f) == 0 &&
		 fsync(fileno(f)) == 0;
	if (f)
		ok = fclose(f) == 0 && ok;
	free(ck);
	return ok && rename(tmp, path) == 0 ? 0 : -1;
}

/* Read a saved state, if there is one: 1, 0 (none), or -1. */
static int load(const char *path, struct state *s)
{
	FILE *f = fopen(path, "rb");
	uint32_t magic;
	size_t n;

	if (!f)
		return errno == ENOENT ? 0 : -1;
	int ok = fread(&magic, sizeof(magic), 1, f) == 1 && magic == MAGIC &&
		 fread(&n, sizeof(n), 1, f) == 1 && n == s->n &&
		 fread(&s->steps, sizeof(s->steps), 1, f) == 1 &&
		 fread(s->visits, 1, s->n, f) == s->n &&
		 fread(&s->ckpt_len, sizeof(s->ckpt_len), 1, f) == 1 &&
		 (s->ckpt = malloc(s->ckpt_len)) != NULL &&
		 fread(s->ckpt, 1, s->ckpt_len, f) == s->ckpt_len;
	fclose(f);
	return ok ? 1 : -1;
}

static int usage(FILE *f, const char *prog, int status)
{
	fprintf(f, "usage: %s STATE [--n N] [--every K] [--sleep-us T] "
		   "[--check]\n", prog);
	if (status == 0)
		fputs("Trains one shuffled epoch in batches, saving the loader's\n"
		      "checkpoint with the model every K batches; started again,\n"
		      "it continues from the last save.\n", f);
	return status;
}

int main(int argc, char **argv)
{
	struct state s = { .n = 20000 };
	size_t every = 10;
	int check = 0;

	if (argc < 2 || argv[1][0] == '-') {
		int help = argc > 1 && (!strcmp(argv[1], "--help") ||
					!strcmp(argv[1], "-h"));
		return usage(help ? stdout : stderr, argv[0], help ? 0 : 2);
	}
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--check"))
			check = 1;
		else if (i + 1 < argc && !strcmp(argv[i], "--n"))
			s.n = strtoull(argv[++i], NULL, 10);
		else if (i + 1 < argc && !strcmp(argv[i], "--every"))
			every = strtoull(argv[++i], NULL, 10);
		else if (i + 1 < argc && !strcmp(argv[i], "--sleep-us"))
			sleep_us = (unsigned)strtoul(argv[++i], NULL, 10);
		else
			return usage(stderr, argv[0], 2);
	}
	if (s.n == 0 || every == 0)
		return usage(stderr, argv[0], 2);
	s.visits = calloc(s.n, 1);
	int found = s.visits ? load(argv[1], &s) : -1;
	if (found < 0) {
		fprintf(stderr, "%s: cannot read it as a saved state\n", argv[1]);
		return 1;
	}

	eachobs_dataset data = { &s, numobs, getobs, sizeof(size_t) };
	eachobs_options o = { .batchsize = 32, .shuffle = true, .seed = 42,
			      .resume = s.ckpt, .resume_len = s.ckpt_len };
	eachobs_iter *it;
	eachobs_batch b;
	int rc = eachobs_parallel(&it, &data, &o);

	if (rc < 0) {
		fprintf(stderr, "start: %s\n", eachobs_strerror(rc));
		return 1;
	}
	printf("%s at step %zu, %zu batches to go\n",
	       found ? "resuming" : "starting", s.steps, eachobs_length(it));
	while ((rc = eachobs_next_batch(it, &b)) == 1) {
		for (size_t j = 0; j < b.count; j++)
			s.visits[b.idx[j]]++; /* the training step */
		if (++s.steps % every == 0 && save(argv[1], &s, it) < 0) {
			rc = -EIO;
			break;
		}
	}
	if (rc == 0 && save(argv[1], &s, it) < 0)
		rc = -EIO;
	eachobs_close(it);
	if (rc < 0) {
		fprintf(stderr, "epoch: %s\n", eachobs_strerror(rc));
		return 1;
	}
	size_t once = 0;
	for (size_t i = 0; i < s.n; i++)
		once += s.visits[i] == 1;
	printf("epoch done at step %zu: %zu of %zu observations trained on "
	       "once\n", s.steps, once, s.n);
	free(s.visits);
	free(s.ckpt);
	return check && once != s.n ? 1 : 0;
}
