/*
 * Image classification input on eachobs: a folder of JPEGs, one
 * sub-folder per class, decoded on worker threads into shuffled batches
 * of 32 normalized 224 x 224 float images. What a PyTorch user writes as
 * ImageFolder, RandomResizedCrop(224), RandomHorizontalFlip, Normalize
 * and DataLoader(batch_size=32, shuffle=True):
 *
 *   - getobs reads and decodes one JPEG, crops, flips and normalizes it,
 *     and writes the floats straight into the image's place in the
 *     batch: no copy after getobs;
 *   - the crop and the flip are drawn from eachobs_seed(seed, epoch, idx),
 *     so an image gets the same ones whichever thread loads it;
 *   - the labels are not in the batch: the loop looks them up from the
 *     batch's indices;
 *   - the training thread never decodes (EACHOBS_BACKGROUND), and shows a
 *     progress line on a terminal;
 *   - Ctrl-C stops it within a batch, also while it waits for one.
 *
 * jpeg_folder.c lists the folder, decodes and augments: nothing there is
 * about eachobs. bench/imagefolder.c times this pipeline under every
 * executor and beside PyTorch's DataLoader (docs/imagefolder.md).
 *
 *   - with --autotune the loader picks how many threads decode, each
 *     epoch starting where the last ended, and says why.
 *
 *   example_imagefolder FOLDER [--epochs E] [--threads T] [--seed S]
 *                      [--autotune]
 */
#define _GNU_SOURCE
#include <eachobs.h>

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "jpeg_folder.h"

#define BATCH 32

/* The dataset: the folder, and what this epoch augments with. */
struct images {
	const struct jpeg_folder *folder;
	unsigned long long seed, epoch;
};

static size_t images_numobs(void *ctx)
{
	return ((const struct images *)ctx)->folder->n;
}

/* Runs on the worker threads, several at once: obs is image idx's place
 * in a batch, IMAGE_FLOATS floats. A negative errno fails the epoch. */
static int images_getobs(void *ctx, size_t idx, void *obs)
{
	const struct images *im = ctx;
	unsigned char *rgb;
	int w, h;

	if (eachobs_cancelled()) /* closing (Ctrl-C): skip the decode */
		return -ECANCELED;
	int rc = jpeg_read_rgb(im->folder->paths[idx], &rgb, &w, &h);
	if (rc < 0)
		return rc;
	/* Augmentation from (seed, epoch, idx) only: any thread, any order. */
	augment_to_chw(rgb, w, h, eachobs_seed(im->seed, im->epoch, idx), obs);
	free(rgb);
	return 0;
}

/*
 * Ctrl-C: the handler sets `interrupted` for the loop between epochs and
 * interrupts the running iterator, whose loop may be asleep waiting for a
 * batch (eachobs_interrupt is async-signal-safe; eachobs_close is not).
 * The loop clears `running` before it closes the iterator.
 */
static atomic_int interrupted;
static eachobs_iter *_Atomic running;

static void on_sigint(int sig)
{
	(void)sig;
	atomic_store(&interrupted, 1);
	eachobs_iter *it = atomic_load(&running);
	if (it)
		eachobs_interrupt(it);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The progress line on stderr: images so far, rate, time left. */
static void progress(const char *name, size_t done, size_t total, double t0)
{
	double el = now_s() - t0, rate = el > 0 ? done / el : 0;
	double eta = rate > 0 ? (total - done) / rate : 0;
	fprintf(stderr, "\r%-18s %6zu/%zu  %7.1f img/s  ETA %5.1fs ", name,
		done, total, rate, eta);
}

/* A stand-in for the training step, which would hand the model x, count
 * images of IMAGE_FLOATS floats, and y, their classes: it reads every
 * value and returns their mean. */
static double train_step(const float *x, const int *y, size_t count)
{
	double sum = 0;

	(void)y;
	for (size_t i = 0; i < count * IMAGE_FLOATS; i++)
		sum += x[i];
	return sum / ((double)count * IMAGE_FLOATS);
}

/* How many threads decode: nthreads, or with autotune at most nthreads
 * (0: its default), starting with what the last epoch ended with. */
struct threads {
	unsigned nthreads;
	bool autotune;
	unsigned last; /* the last epoch's eachobs_stats.nloading */
};

/* One epoch: 0, 1 on an error, 130 after Ctrl-C. */
static int train_epoch(struct images *im, struct threads *th)
{
	eachobs_dataset data = { im, images_numobs, images_getobs,
				 IMAGE_FLOATS * sizeof(float) };
	eachobs_options o = { .executor = EACHOBS_BACKGROUND,
			      .nthreads = th->nthreads, /* 0: one per CPU */
			      .batchsize = BATCH, .shuffle = true,
			      .seed = im->seed, .epoch = im->epoch,
			      .autotune = th->autotune,
			      .autotune_start = th->last };
	size_t done = 0, total = im->folder->n;
	double t0 = now_s(), shown = 0, mean = 0;
	int tty = isatty(STDERR_FILENO);
	char name[32];
	eachobs_iter *it;
	eachobs_batch b;

	snprintf(name, sizeof name, "epoch %llu", im->epoch + 1);
	int rc = eachobs_parallel(&it, &data, &o);
	if (rc < 0) {
		fprintf(stderr, "%s\n", eachobs_last_error());
		return 1;
	}
	atomic_store(&running, it);
	while ((rc = eachobs_next_batch(it, &b)) == 1) {
		int y[BATCH]; /* the labels, from the batch's indices */
		for (size_t j = 0; j < b.count; j++)
			y[j] = im->folder->labels[b.idx[j]];
		mean += train_step(b.data, y, b.count) * b.count / total;
		done += b.count;
		if (tty && now_s() - shown > 0.1) {
			shown = now_s();
			progress(name, done, total, t0);
		}
	}
	if (tty)
		fprintf(stderr, "\r%60s\r", ""); /* clear the progress line */
	eachobs_stats st;
	eachobs_get_stats(it, &st);
	th->last = st.nloading;
	if (rc < 0 && rc != -EINTR)
		fprintf(stderr, "%s: %s\n", name, eachobs_last_error());
	atomic_store(&running, NULL);
	eachobs_close(it); /* prompt: no new getobs starts */
	if (rc == -EINTR) {
		fprintf(stderr, "%s: interrupted after %zu images\n", name, done);
		return 130;
	}
	if (rc < 0)
		return 1;
	printf("%s: %zu images in %.2f s, mean value %+.3f\n", name, done,
	       now_s() - t0, mean);
	printf("%s: %u threads decoding (at most %u at once), training "
	       "waited %.2f s%s%s\n", name, st.nloading, st.max_loading,
	       st.consumer_wait_ns / 1e9, th->autotune ? ": " : "",
	       th->autotune ? eachobs_tune_reason_string(st.tune_reason) : "");
	return 0;
}

static int usage(int help)
{
	fprintf(help ? stdout : stderr, "usage: example_imagefolder FOLDER "
		"[--epochs E] [--threads T] [--seed S]\n"
		"                           [--autotune]\n");
	if (help)
		puts("\nTrains a stand-in step on FOLDER/CLASS/*.jpg, shuffled "
		     "batches of 32\nrandomly cropped and flipped 224 x 224 "
		     "images; --epochs (default 1),\n--threads (default: one "
		     "per CPU), --seed (default 2024). --autotune lets\n"
		     "the loader choose how many threads decode (--threads: "
		     "the most, default 64)\nand say why. Ctrl-C stops it "
		     "(exit status 130).");
	return help ? 0 : 2;
}

/* A whole number, or -1 for anything else. */
static long long whole_number(const char *arg)
{
	char *end;
	long long v = strtoll(arg, &end, 10);

	return *arg && !*end && v >= 0 ? v : -1;
}

int main(int argc, char **argv)
{
	const char *dir = NULL;
	long long epochs = 1, nthreads = 0, seed = 2024;
	struct threads th = { 0 };
	int status = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		long long *opt = NULL;

		if (!strcmp(a, "--help") || !strcmp(a, "-h"))
			return usage(1);
		if (!strcmp(a, "--autotune")) {
			th.autotune = true;
			continue;
		}
		if (!strcmp(a, "--epochs"))
			opt = &epochs;
		else if (!strcmp(a, "--threads"))
			opt = &nthreads;
		else if (!strcmp(a, "--seed"))
			opt = &seed;
		if (opt && i + 1 < argc)
			*opt = whole_number(argv[++i]);
		else if (a[0] != '-' && !dir)
			dir = a;
		else
			return usage(0);
	}
	if (!dir || epochs < 1 || nthreads < 0 || seed < 0)
		return usage(0);

	struct jpeg_folder folder;
	if (jpeg_folder_load(&folder, dir) < 0) {
		jpeg_folder_free(&folder);
		return 1;
	}
	printf("%zu images in %d classes\n", folder.n, folder.nclasses);
	struct sigaction sa = { .sa_handler = on_sigint,
				.sa_flags = SA_RESTART };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);

	struct images im = { &folder, (unsigned long long)seed, 0 };
	th.nthreads = (unsigned)nthreads;
	for (long long e = 0; e < epochs && status == 0; e++) {
		im.epoch = (unsigned long long)e;
		if (atomic_load(&interrupted)) /* Ctrl-C between epochs */
			status = 130;
		else
			status = train_epoch(&im, &th);
	}
	jpeg_folder_free(&folder);
	return status;
}
