/*
 * The image-classification pipeline of examples/imagefolder.c, timed: a
 * folder of JPEGs, one sub-folder per class, decoded with libturbojpeg,
 * randomly cropped to 224 x 224 and flipped, normalized to float32 CHW and
 * written straight into eachobs' batch buffers (32 images per batch,
 * collated in place), shuffled every epoch; the example's getobs, over
 * the same examples/jpeg_folder.c. A stand-in training step on the
 * consumer thread costs --step-us microseconds per batch and reads every
 * float.
 *
 * The same run is timed under four executors: SERIAL, THREADED,
 * BACKGROUND, and BACKGROUND with the workers kept off the consumer's core
 * (worker_cpus) or below its priority (worker_nice); first the training
 * step alone on one preloaded batch, the rate with no loader; last
 * PyTorch's DataLoader on the same folder (imagefolder_torch.py, beside
 * this file), when /usr/bin/python3 has torch and PIL.
 * docs/imagefolder.md says how to read the report.
 *
 *   bench_imagefolder [FOLDER] [--dir D] [--images N] [--epochs E]
 *                     [--step-us U] [--threads T] [--seed S] [--check]
 *                     [--no-torch] [--torch-script PATH] [--python PY]
 *                     [--generate-only]
 *
 * Without FOLDER, a synthetic folder of N images (default 2000, 10 classes)
 * is generated once under D (default $XDG_CACHE_HOME/eachobs, else
 * ~/.cache/eachobs); --generate-only prints its path and stops there.
 * --check (for CI) also verifies that every image is yielded exactly once
 * per epoch, that the pixels are sane, and that every executor produced
 * the same augmented images; it exits 1 otherwise. Ctrl-C stops the run,
 * prints the partial results and exits 130.
 */
#define _GNU_SOURCE
#include <eachobs.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "jpeg_folder.h"

#define BATCH 32

/*
 * Set by the SIGINT handler, read by the consumer loop. A lock-free atomic
 * is safe to store from a signal handler (C11 7.14.1.1). The handler also
 * interrupts the running iterator, whose consumer may be asleep waiting
 * for a batch: eachobs_interrupt is async-signal-safe, and the loop clears
 * `running` before it closes the iterator.
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

static double cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

/* ---- getobs: the example's, read, decode, crop, flip, normalize. ---- */

struct pipeline {
	const struct jpeg_folder *folder;
	unsigned long long seed, epoch;
};

static size_t pipe_numobs(void *ctx)
{
	return ((const struct pipeline *)ctx)->folder->n;
}

static int pipe_getobs(void *ctx, size_t idx, void *obs)
{
	const struct pipeline *p = ctx;
	unsigned char *rgb;
	int w, h;

	if (eachobs_cancelled()) /* closing: skip the decode */
		return -ECANCELED;
	int rc = jpeg_read_rgb(p->folder->paths[idx], &rgb, &w, &h);
	if (rc < 0)
		return rc;
	/* Augmentation from (seed, epoch, idx) only: any thread, any executor. */
	augment_to_chw(rgb, w, h, eachobs_seed(p->seed, p->epoch, idx), obs);
	free(rgb);
	return 0;
}

/* ---- The consumer: a stand-in training step, checks, progress. ---- */

struct config {
	const char *name;
	eachobs_executor executor;
	int offcore; /* pin the consumer, workers on the other CPUs */
	int nice;
};

struct run {
	size_t images, epochs_done;
	double wall, cpu, wait, epoch_s;
	int interrupted, failed;
	char workers[16]; /* the report's column: who loads */
};

/*
 * The CPUs this process may run on: under taskset, numactl or a
 * launcher's binding, fewer than the machine has. nthreads = 0 counts
 * these too (and a cgroup CPU quota, when one is lower), so with
 * BACKGROUND the count only matters for the report and the PyTorch row;
 * THREADED's CPUs - 1 needs it.
 */
static unsigned usable_cpus(void)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) < 1)
		return 1;
	return (unsigned)CPU_COUNT(&set);
}

/*
 * The workers a configuration starts when --threads is not given.
 * THREADED's consumer is one of the loaders (it decodes whenever no batch
 * is ready, like the primary thread of Julia's eachobsparallel), so with
 * a CPU-bound getobs it gets CPUs - 1 workers: CPUs workers and the
 * consumer put three decoders on two cores, which measured about 6% slower
 * on a quiet 2-core machine (docs/imagefolder.md).
 * BACKGROUND's consumer never decodes: the library's default, the CPUs
 * this process may use. Off-core, the workers get the CPUs the consumer
 * is not pinned to.
 */
static unsigned config_threads(const struct config *cf, unsigned nthreads,
			       unsigned cpus)
{
	if (nthreads)
		return nthreads;
	if (cf->executor == EACHOBS_SERIAL)
		return 0;
	if (cf->executor == EACHOBS_THREADED || cf->offcore)
		return cpus > 1 ? cpus - 1 : 1;
	return cpus;
}

struct checks {
	unsigned char *seen;  /* times each idx was yielded this epoch */
	double *first_sum;    /* per idx, sum of its floats, first config */
	int have_first;
	double sum, sumsq;
	size_t nfloats, nan, dup, mismatch;
};

/* Where the stand-in step leaves its result, so that no compiler drops it. */
static double step_sink;

/* CPU time of the calling thread, in seconds. */
static double thread_cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/*
 * Touch every float, then burn the rest of step_us of this thread's CPU
 * time. CPU time, not wall time: like a real step's arithmetic, it takes
 * longer when a loader thread takes the core from it. A step that waited
 * for the wall clock would end on time however little CPU it got, and
 * hide exactly the competition for cores that off-core workers avoid.
 */
static double train_step(const float *x, size_t n, double step_us)
{
	double t0 = thread_cpu_s(), acc = 0;

	for (size_t i = 0; i < n; i++)
		acc += x[i];
	while ((thread_cpu_s() - t0) * 1e6 < step_us)
		acc += 1e-9;
	return acc;
}

static void check_batch(struct checks *ck, const eachobs_batch *b,
			int first_config)
{
	for (size_t j = 0; j < b->count; j++) {
		const float *x = (const float *)b->data + j * IMAGE_FLOATS;
		size_t idx = b->idx[j];
		double s = 0;
		if (ck->seen[idx]++)
			ck->dup++;
		for (size_t i = 0; i < IMAGE_FLOATS; i++) {
			if (isnan(x[i]))
				ck->nan++;
			s += x[i];
			ck->sumsq += (double)x[i] * x[i];
		}
		ck->sum += s;
		ck->nfloats += IMAGE_FLOATS;
		if (first_config)
			ck->first_sum[idx] = s;
		else if (ck->first_sum[idx] != s)
			ck->mismatch++;
	}
}

static void progress(const char *name, size_t done, size_t total, double t0)
{
	double el = now_s() - t0, rate = el > 0 ? done / el : 0;
	double eta = rate > 0 ? (total - done) / rate : 0;
	fprintf(stderr, "\r%-18s %6zu/%zu  %7.1f img/s  ETA %5.1fs ", name,
		done, total, rate, eta);
}

/* Pin the calling thread to one CPU; fill others with the rest. */
static int pin_consumer(cpu_set_t *saved, unsigned *others, unsigned *nothers)
{
	cpu_set_t one;
	int mine = -1;

	if (pthread_getaffinity_np(pthread_self(), sizeof *saved, saved))
		return -1;
	*nothers = 0;
	for (unsigned c = 0; c < CPU_SETSIZE && c < EACHOBS_MAX_CPU; c++) {
		if (!CPU_ISSET(c, saved))
			continue;
		if (mine < 0)
			mine = (int)c;
		else
			others[(*nothers)++] = c;
	}
	if (mine < 0 || *nothers == 0)
		return -1;
	CPU_ZERO(&one);
	CPU_SET(mine, &one);
	return pthread_setaffinity_np(pthread_self(), sizeof one, &one) ? -1 : 0;
}

static int run_epoch(struct pipeline *p, const struct config *cf,
		     unsigned nthreads, double step_us, struct checks *ck,
		     int first_config, struct run *r, size_t epoch_total,
		     double t_start)
{
	unsigned others[EACHOBS_MAX_CPU], nothers = 0;
	cpu_set_t saved;
	int pinned = cf->offcore && pin_consumer(&saved, others, &nothers) == 0;
	eachobs_dataset data = { p, pipe_numobs, pipe_getobs,
				 IMAGE_FLOATS * sizeof(float) };
	eachobs_options o = { .nthreads = nthreads, .executor = cf->executor,
			      .batchsize = BATCH, .shuffle = true,
			      .seed = p->seed, .epoch = p->epoch,
			      .worker_nice = cf->nice,
			      .worker_cpus = pinned ? others : NULL,
			      .nworker_cpus = pinned ? nothers : 0 };
	int tty = isatty(STDERR_FILENO);
	double last = 0;
	eachobs_iter *it;
	eachobs_batch b;
	eachobs_stats st;

	if (cf->offcore && !pinned) {
		fprintf(stderr, "%s: needs 2 CPUs to pin, skipped\n", cf->name);
		return 1;
	}
	int rc = eachobs_parallel(&it, &data, &o);
	if (rc < 0) {
		fprintf(stderr, "%s: %s\n", cf->name, eachobs_strerror(rc));
		goto unpin;
	}
	if (ck)
		memset(ck->seen, 0, p->folder->n);
	atomic_store(&running, it);
	while ((rc = eachobs_next_batch(it, &b)) == 1 || rc == -EINTR) {
		if (atomic_load(&interrupted)) {
			r->interrupted = 1; /* Ctrl-C: stop mid-epoch */
			rc = 0;
			break;
		}
		/* Labels come from the indices: folder->labels[b.idx[j]]. */
		step_sink += train_step(b.data, b.count * IMAGE_FLOATS, step_us);
		step_sink += p->folder->labels[b.idx[0]];
		if (ck)
			check_batch(ck, &b, first_config);
		r->images += b.count;
		if (tty && now_s() - last > 0.1) {
			last = now_s();
			progress(cf->name, r->images, epoch_total, t_start);
		}
	}
	atomic_store(&running, NULL);
	eachobs_get_stats(it, &st);
	r->wait += (double)st.consumer_wait_ns * 1e-9;
	eachobs_close(it);
	if (rc < 0) {
		fprintf(stderr, "%s: %s\n", cf->name, eachobs_strerror(rc));
		goto unpin;
	}
	if (r->interrupted) {
		rc = 0;
		goto unpin;
	}
	r->epochs_done++;
	if (ck)
		for (size_t i = 0; i < p->folder->n; i++)
			if (ck->seen[i] != 1)
				ck->dup++; /* missed or repeated */
unpin:
	if (pinned)
		pthread_setaffinity_np(pthread_self(), sizeof saved, &saved);
	return rc < 0 ? -1 : 0;
}

static void report_header(void)
{
	printf("%-18s %7s %6s %8s %8s %7s %8s %8s\n", "config", "workers",
	       "images", "img/s", "cpu", "wait", "s/epoch", "vs alone");
}

/*
 * One row. vs alone: this row's img/s over the training step's alone
 * (alone_rate 0: not measured, or a free step, where the ratio would
 * compare decoding against summing floats and mean nothing).
 */
static void report(const char *name, const struct run *r, double alone_rate)
{
	double rate = r->wall > 0 ? r->images / r->wall : 0;
	char vs[16] = "-";

	if (alone_rate > 0)
		snprintf(vs, sizeof vs, "%.2f", rate / alone_rate);
	printf("%-18s %7s %6zu %8.1f %7.0f%% %6.1f%% %8.2f %8s%s\n", name,
	       r->workers, r->images, rate,
	       r->wall > 0 ? 100 * r->cpu / r->wall : 0,
	       r->wall > 0 ? 100 * r->wait / r->wall : 0,
	       r->epochs_done ? r->epoch_s : r->wall, vs,
	       r->interrupted ? "  (interrupted)" : "");
	fflush(stdout);
}

/*
 * The baseline: the training step alone, over one batch decoded up front,
 * as many times and with as many images as an epoch has batches. Its
 * img/s is the most any loader can deliver to this step; 0 on success,
 * 1 when interrupted.
 */
static int run_alone(struct pipeline *p, unsigned epochs, double step_us,
		     struct run *r)
{
	size_t n = p->folder->n;
	float *batch = malloc((size_t)BATCH * IMAGE_FLOATS * sizeof *batch);

	snprintf(r->workers, sizeof r->workers, "-");
	if (!batch)
		return -1;
	p->epoch = 0;
	for (size_t j = 0; j < BATCH; j++)
		if (pipe_getobs(p, j % n, batch + j * IMAGE_FLOATS) < 0) {
			free(batch);
			return -1;
		}
	double t0 = now_s(), c0 = cpu_s();
	for (unsigned e = 0; e < epochs && !r->interrupted; e++) {
		for (size_t done = 0; done < n; done += BATCH) {
			size_t count = n - done < BATCH ? n - done : BATCH;
			if (atomic_load(&interrupted)) {
				r->interrupted = 1;
				break;
			}
			step_sink += train_step(batch, count * IMAGE_FLOATS,
						step_us);
			step_sink += p->folder->labels[done];
			r->images += count;
		}
		r->epochs_done += !r->interrupted;
	}
	r->wall = now_s() - t0;
	r->cpu = cpu_s() - c0;
	r->epoch_s = r->epochs_done ? r->wall / r->epochs_done : 0;
	free(batch);
	return r->interrupted;
}

static int run_config(struct pipeline *p, const struct config *cf,
		      unsigned nthreads, unsigned epochs, double step_us,
		      struct checks *ck, int first_config, double alone_rate)
{
	struct run r = { 0 };
	double t0 = now_s(), c0 = cpu_s();
	size_t total = (size_t)epochs * p->folder->n;
	int rc = 0;

	if (cf->executor == EACHOBS_SERIAL)
		snprintf(r.workers, sizeof r.workers, "0");
	else
		snprintf(r.workers, sizeof r.workers, "%u%s", nthreads,
			 cf->executor == EACHOBS_THREADED ? "+c" : "");
	for (unsigned e = 0; e < epochs && !r.interrupted; e++) {
		p->epoch = e;
		rc = run_epoch(p, cf, nthreads, step_us, ck,
			       first_config && e == 0, &r, total, t0);
		if (rc)
			break;
	}
	r.wall = now_s() - t0;
	r.cpu = cpu_s() - c0;
	r.epoch_s = r.epochs_done ? r.wall / r.epochs_done : 0;
	if (isatty(STDERR_FILENO))
		fprintf(stderr, "\r%60s\r", "");
	if (rc == 1)
		return 0; /* skipped */
	report(cf->name, &r, alone_rate);
	/* A Ctrl-C after the last batch still ends the run here. */
	return rc < 0 ? -1 : r.interrupted || atomic_load(&interrupted);
}

/* ---- The PyTorch peer: imagefolder_torch.py, a row in the same table. ---- */

/*
 * Start argv[0] with its stdout on a pipe (*out), or with stdout and
 * stderr on /dev/null when out is NULL. The child only execs: no lock
 * another thread held at fork can matter to it.
 */
static pid_t spawn(char *const argv[], int *out)
{
	int fds[2] = { -1, -1 };

	if (out && pipe(fds) < 0)
		return -1;
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		int fd = out ? fds[1] : open("/dev/null", O_WRONLY);
		if (fd >= 0) {
			dup2(fd, STDOUT_FILENO);
			if (!out)
				dup2(fd, STDERR_FILENO);
		}
		execv(argv[0], argv);
		_exit(127);
	}
	if (out) {
		close(fds[1]);
		if (pid < 0)
			close(fds[0]);
		else
			*out = fds[0];
	}
	return pid;
}

static int wait_ok(pid_t pid)
{
	int wst;

	while (waitpid(pid, &wst, 0) < 0)
		if (errno != EINTR)
			return 0;
	return WIFEXITED(wst) && WEXITSTATUS(wst) == 0;
}

struct torch_args {
	const char *python, *script, *folder;
	unsigned epochs, workers;
	double step_us;
	unsigned long long seed;
};

/*
 * Run PyTorch's DataLoader on the same folder, epochs, step and seed, and
 * print its row from the totals the script reports ("raw images=..."):
 * the same columns, computed the same way. Skipped, with one line saying
 * why, when the script is unknown or python lacks torch or PIL.
 */
static int run_torch(const struct torch_args *a, double alone_rate)
{
	char ep[32], st[32], sd[32], wk[32], line[512];
	char *probe[] = { (char *)a->python, "-c", "import torch, PIL", NULL };
	struct run r = { 0 };
	unsigned long images = 0, epochs = 0;
	int fd, parsed = 0;

	if (!a->script) {
		printf("# torch: skipped, no --torch-script given\n");
		return 0;
	}
	pid_t pid = spawn(probe, NULL);
	if (pid < 0 || !wait_ok(pid)) {
		printf("# torch: skipped, %s cannot import torch and PIL "
		       "(apt-get install python3-torch python3-pil)\n",
		       a->python);
		return 0;
	}
	snprintf(ep, sizeof ep, "%u", a->epochs);
	snprintf(st, sizeof st, "%.0f", a->step_us);
	snprintf(sd, sizeof sd, "%llu", a->seed);
	snprintf(wk, sizeof wk, "%u", a->workers);
	/* It runs for as long as the rows above, saying nothing. */
	if (isatty(STDERR_FILENO))
		fputs("\rtorch-dataloader   running ...", stderr);
	char *argv[] = { (char *)a->python, (char *)a->script,
			 (char *)a->folder, "--epochs", ep, "--step-us", st,
			 "--seed", sd, "--workers", wk, "--raw", NULL };
	pid = spawn(argv, &fd);
	if (pid < 0) {
		perror("torch: fork");
		return -1;
	}
	FILE *f = fdopen(fd, "r");
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "raw images=%lu wall=%lf cpu=%lf wait=%lf "
			   "epochs=%lu", &images, &r.wall, &r.cpu, &r.wait,
			   &epochs) == 5)
			parsed = 1;
	if (f)
		fclose(f);
	else
		close(fd);
	int ok = wait_ok(pid) && parsed;
	if (isatty(STDERR_FILENO))
		fprintf(stderr, "\r%60s\r", "");
	if (atomic_load(&interrupted))
		return 1;
	if (!ok) {
		fprintf(stderr, "torch: %s failed\n", a->script);
		return -1;
	}
	r.images = images;
	r.epochs_done = epochs;
	r.epoch_s = epochs ? r.wall / epochs : 0;
	snprintf(r.workers, sizeof r.workers, "%u proc", a->workers);
	report("torch-dataloader", &r, alone_rate);
	return 0;
}

/* One line on stderr for a bad command line; more for --help. */
static int usage(int help)
{
	fprintf(help ? stdout : stderr,
		"usage: bench_imagefolder [FOLDER] [--dir D] [--images N] "
		"[--epochs E] [--step-us U] [--threads T] [--seed S] "
		"[--check] [--no-torch] [--torch-script PATH] [--python PY] "
		"[--generate-only]\n");
	if (help)
		fputs("\nTimes a JPEG classification pipeline (decode, crop, "
		      "flip, normalize,\nbatches of 32) under each executor, "
		      "beside the training step alone\nand PyTorch's "
		      "DataLoader. Without FOLDER (one sub-folder per class),\n"
		      "N synthetic images (default 2000) are made once under D "
		      "(default\n$XDG_CACHE_HOME/eachobs or ~/.cache/eachobs).\n"
		      "\n"
		      "  --generate-only  make the synthetic folder, print its "
		      "path and exit\n"
		      "  --epochs E   epochs per row (default 1)\n"
		      "  --step-us U  the training step's cost per batch "
		      "(default 2000)\n"
		      "  --threads T  workers of every row (default: the CPUs, "
		      "minus one where\n"
		      "               the consumer needs a core)\n"
		      "  --seed S     the shuffle's and the augmentation's seed "
		      "(default 2024)\n"
		      "  --check      also check every image and executor "
		      "(exits 1 otherwise)\n"
		      "  --no-torch, --torch-script PATH, --python PY\n"
		      "               the PyTorch row: skip it, or how to run "
		      "it\n"
		      "Ctrl-C stops and prints the partial results "
		      "(exit status 130).\n",
		      stdout);
	return help ? 0 : 2;
}

int main(int argc, char **argv)
{
	const char *folder_arg = NULL, *dir = NULL, *python = "/usr/bin/python3";
#ifdef IMAGEFOLDER_TORCH_SCRIPT
	const char *torch_script = IMAGEFOLDER_TORCH_SCRIPT; /* from meson */
#else
	const char *torch_script = NULL;
#endif
	size_t nimages = 2000;
	unsigned epochs = 1, nthreads = 0;
	double step_us = 2000;
	unsigned long long seed = 2024;
	int check = 0, torch = 1, generate_only = 0, status = 0;
	char cache[2048], synth[3072];

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			return usage(1);
		} else if (!strcmp(a, "--check")) {
			check = 1;
		} else if (!strcmp(a, "--no-torch")) {
			torch = 0;
		} else if (!strcmp(a, "--generate-only")) {
			generate_only = 1;
		} else if (a[0] != '-' && !folder_arg) {
			folder_arg = a;
		} else if (!v) {
			return usage(0);
		} else if (!strcmp(a, "--dir")) {
			dir = v, i++;
		} else if (!strcmp(a, "--images")) {
			nimages = strtoull(v, NULL, 10), i++;
		} else if (!strcmp(a, "--epochs")) {
			epochs = (unsigned)strtoul(v, NULL, 10), i++;
		} else if (!strcmp(a, "--step-us")) {
			step_us = strtod(v, NULL), i++;
		} else if (!strcmp(a, "--threads")) {
			nthreads = (unsigned)strtoul(v, NULL, 10), i++;
		} else if (!strcmp(a, "--seed")) {
			seed = strtoull(v, NULL, 10), i++;
		} else if (!strcmp(a, "--torch-script")) {
			torch_script = v, i++;
		} else if (!strcmp(a, "--python")) {
			python = v, i++;
		} else {
			return usage(0);
		}
	}
	if (nimages == 0 || epochs == 0 || (generate_only && folder_arg)) {
		return usage(0);
	}
	if (!folder_arg) {
		const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
		if (!dir) {
			if (xdg && *xdg)
				snprintf(cache, sizeof cache, "%s/eachobs", xdg);
			else
				snprintf(cache, sizeof cache, "%s/.cache/eachobs",
					 home ? home : "/tmp");
			dir = cache;
		}
		snprintf(synth, sizeof synth, "%s/imagenette-synth-%zu", dir,
			 nimages);
		if (jpeg_folder_generate(synth, nimages) < 0)
			return 1;
		folder_arg = synth;
	}
	if (generate_only) {
		printf("%s\n", folder_arg);
		return 0;
	}

	struct jpeg_folder f;
	if (jpeg_folder_load(&f, folder_arg) < 0) {
		jpeg_folder_free(&f);
		return 1;
	}
	struct sigaction sa = { .sa_handler = on_sigint };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);

	struct checks ck = { 0 };
	if (check) {
		ck.seen = calloc(f.n, 1);
		ck.first_sum = calloc(f.n, sizeof *ck.first_sum);
		if (!ck.seen || !ck.first_sum)
			return 1;
	}
	static const struct config configs[] = {
		{ "serial", EACHOBS_SERIAL, 0, 0 },
		{ "threaded", EACHOBS_THREADED, 0, 0 },
		{ "background", EACHOBS_BACKGROUND, 0, 0 },
		{ "background-offcore", EACHOBS_BACKGROUND, 1, 0 },
		{ "background-nice", EACHOBS_BACKGROUND, 0, 10 },
	};
	struct pipeline p = { &f, seed, 0 };
	unsigned cpus = usable_cpus();
	struct run alone = { 0 };
	double alone_rate = 0;

	printf("# %zu images, %d classes, %s; %u epoch(s), batch %d, "
	       "step %.0f us, %u CPUs; workers: threads started, +c: the "
	       "consumer decodes too\n",
	       f.n, f.nclasses, folder_arg, epochs, BATCH, step_us, cpus);
	report_header();
	int arc = run_alone(&p, epochs, step_us, &alone);
	if (arc < 0) {
		fprintf(stderr, "alone: cannot preload a batch\n");
		status = 1;
	} else {
		if (step_us > 0 && alone.wall > 0)
			alone_rate = alone.images / alone.wall;
		report("alone (no loader)", &alone, alone_rate);
		if (arc > 0)
			status = 130;
	}
	for (size_t c = 0; status != 130 && c < sizeof configs / sizeof *configs;
	     c++) {
		unsigned nt = config_threads(&configs[c], nthreads, cpus);
		int rc = run_config(&p, &configs[c], nt, epochs, step_us,
				    check ? &ck : NULL, c == 0, alone_rate);
		if (rc < 0)
			status = 1;
		if (rc > 0)
			status = 130;
	}
	/* --check (CI) leaves PyTorch out: it would check nothing. */
	if (torch && !check && status != 130) {
		struct torch_args ta = { python, torch_script, folder_arg,
					 epochs, nthreads ? nthreads : cpus,
					 step_us, seed };
		int rc = run_torch(&ta, alone_rate);
		if (rc < 0)
			status = 1;
		if (rc > 0)
			status = 130;
	}
	if (check && status == 0) {
		double m = ck.nfloats ? ck.sum / ck.nfloats : NAN;
		double sd = sqrt(ck.sumsq / ck.nfloats - m * m);
		int ok = ck.dup == 0 && ck.nan == 0 && ck.mismatch == 0 &&
			 fabs(m) < 2 && sd > 0.1 && sd < 5;
		printf("check: %s (missed or repeated %zu, NaN %zu, differing "
		       "from serial %zu, mean %.3f, std %.3f)\n",
		       ok ? "ok" : "FAILED", ck.dup, ck.nan, ck.mismatch, m, sd);
		status = ok ? 0 : 1;
	}
	free(ck.seen);
	free(ck.first_sum);
	jpeg_folder_free(&f);
	return status;
}
