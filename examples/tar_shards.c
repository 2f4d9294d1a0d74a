/*
 * Training input from WebDataset-style tar shards on eachobs streams: each
 * shard a tar archive whose samples are consecutive files sharing a key
 * (000123.jpg and 000123.cls), read front to back with libarchive, the
 * JPEG decoded with libturbojpeg, cropped, flipped and normalized as
 * examples/imagefolder.c does, into batches of 32 224 x 224 float images
 * and their labels (a second field), on worker threads:
 *
 *   - open() opens a shard with libarchive, next() reads one sample (its
 *     files up to the next key) and writes the floats straight into the
 *     batch, close() closes it; seek() skips samples without decoding,
 *     so a resumed epoch does not decode what it yielded;
 *   - shards are shuffled per epoch, samples drawn through a shuffle
 *     buffer; --ordered makes the sequence the same for any --threads;
 *   - --rank R --ranks N reads shards R, R + N, ... (one process per
 *     rank, as with MPI);
 *   - --state FILE writes a checkpoint after every batch (atomically) and
 *     resumes from it at start, so that a run killed at any point and
 *     started again yields each sample of the epoch exactly once;
 *     --keys FILE writes the keys yielded, in order.
 *
 *   example_tar_shards DIR [--epochs E] [--threads T] [--batch B]
 *       [--seed S] [--shuffle-buffer K] [--ordered] [--rank R --ranks N]
 *       [--state FILE] [--keys FILE] [--step-us U]
 *
 * DIR holds the shards, *.tar, read in name order.
 */
#define _GNU_SOURCE
#include <eachobs.h>

#include "jpeg_folder.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What goes with each image: its sample's key (the number in its name)
 * and its class. */
struct meta {
	long long key;
	int label;
};

struct shards {
	char **paths;
	size_t n;
	unsigned long long seed, epoch;
};

/* An open shard: the archive, and a file of the next sample already read
 * (its header was the end of the sample before). */
struct reader {
	struct archive *a;
	size_t shard;
	size_t record;       /* samples read */
	char pending[256];   /* name of a file read ahead, "" if none */
	unsigned char *pbuf; /* its bytes */
	size_t plen;
	bool eof;            /* the archive ended */
};

struct sample {
	char key[256];
	unsigned char *jpeg;
	size_t jlen;
	int label;
	bool has_label;
};

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int list_shards(struct shards *s, const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t cap = 0;

	if (!d) {
		fprintf(stderr, "tar_shards: %s: %s\n", dir, strerror(errno));
		return -1;
	}
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);
		if (len < 5 || strcmp(e->d_name + len - 4, ".tar"))
			continue;
		if (s->n == cap) {
			cap = cap ? 2 * cap : 16;
			s->paths = realloc(s->paths, cap * sizeof(*s->paths));
		}
		if (asprintf(&s->paths[s->n], "%s/%s", dir, e->d_name) < 0)
			break;
		s->n++;
	}
	closedir(d);
	if (!s->n) {
		fprintf(stderr, "tar_shards: no .tar file in %s\n", dir);
		return -1;
	}
	qsort(s->paths, s->n, sizeof(*s->paths), cmp_str);
	return 0;
}

static int shard_open(void *ctx, size_t shard, void **state)
{
	struct shards *s = ctx;
	struct reader *r = calloc(1, sizeof(*r));

	if (!r)
		return -ENOMEM;
	r->a = archive_read_new();
	archive_read_support_format_tar(r->a);
	if (archive_read_open_filename(r->a, s->paths[shard], 1 << 16) !=
	    ARCHIVE_OK) {
		int err = archive_errno(r->a);
		archive_read_free(r->a);
		free(r);
		return err > 0 ? -err : -EIO;
	}
	r->shard = shard;
	*state = r;
	return 0;
}

static void shard_close(void *ctx, void *state)
{
	struct reader *r = state;

	(void)ctx;
	archive_read_free(r->a);
	free(r->pbuf);
	free(r);
}

/* The key of a file name: what comes before its first dot. */
static void key_of(const char *name, char *key, size_t size)
{
	const char *slash = strrchr(name, '/');
	const char *base = slash ? slash + 1 : name;
	size_t n = strcspn(base, ".");

	snprintf(key, size, "%.*s", (int)(n < size ? n : size - 1), base);
}

/* Read the next file of the archive into r->pending: 1, 0 at its end, or
 * a negative errno. Its bytes are read too: the file may begin the next
 * sample, which a later call decodes. */
static int read_file(struct reader *r)
{
	struct archive_entry *e;

	if (r->eof)
		return 0;
	int rc = archive_read_next_header(r->a, &e);
	if (rc == ARCHIVE_EOF) {
		r->eof = true;
		return 0;
	}
	if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN)
		return -EIO;
	snprintf(r->pending, sizeof(r->pending), "%s",
		 archive_entry_pathname(e));
	r->plen = 0;
	la_int64_t size = archive_entry_size(e);
	free(r->pbuf);
	/* One byte more: a NUL after the bytes, for the class's text. */
	r->pbuf = malloc(size > 0 ? (size_t)size + 1 : 1);
	if (!r->pbuf)
		return -ENOMEM;
	la_ssize_t got = archive_read_data(r->a, r->pbuf, (size_t)size);
	if (got != size)
		return -EIO;
	r->pbuf[size] = '\0';
	r->plen = (size_t)size;
	return 1;
}

/* The files of the next sample into *s (data false: names only): 1, 0
 * at the end of the shard, or a negative errno. */
static int read_sample(struct reader *r, struct sample *s, bool data)
{
	int rc;

	memset(s, 0, sizeof(*s));
	if (!r->pending[0] && (rc = read_file(r)) <= 0)
		return rc;
	key_of(r->pending, s->key, sizeof(s->key));
	for (;;) {
		const char *dot = strchr(r->pending, '.');
		if (dot && data && !strcmp(dot, ".jpg")) {
			free(s->jpeg);
			s->jpeg = r->pbuf;
			s->jlen = r->plen;
			r->pbuf = NULL;
		} else if (dot && data && !strcmp(dot, ".cls")) {
			s->label = atoi((const char *)r->pbuf);
			s->has_label = true;
		}
		r->pending[0] = '\0';
		rc = read_file(r);
		if (rc <= 0) /* the end of the shard ends the sample */
			return rc < 0 ? rc : 1;
		char key[256];
		key_of(r->pending, key, sizeof(key));
		if (strcmp(key, s->key))
			return 1;
	}
}

static int shard_next(void *ctx, void *state, void *obs)
{
	struct shards *sh = ctx;
	struct reader *r = state;
	struct sample s;
	unsigned char *rgb;
	int w, h;

	int rc = read_sample(r, &s, true);
	if (rc <= 0)
		return rc;
	size_t idx = EACHOBS_STREAM_IDX(r->shard, r->record++);
	if (!s.jpeg || !s.has_label) {
		free(s.jpeg);
		return -EBADMSG; /* a sample without its image or class */
	}
	rc = jpeg_decode_rgb(s.jpeg, s.jlen, &rgb, &w, &h);
	free(s.jpeg);
	if (rc < 0)
		return rc;
	augment_to_chw(rgb, w, h, eachobs_seed(sh->seed, sh->epoch, idx), obs);
	free(rgb);
	struct meta *m = eachobs_field(1);
	m->key = atoll(s.key);
	m->label = s.label;
	return 1;
}

/* Skip samples without decoding them (a resumed epoch). */
static int shard_seek(void *ctx, void *state, size_t record)
{
	struct reader *r = state;
	struct sample s;

	(void)ctx;
	while (r->record < record) {
		int rc = read_sample(r, &s, false);
		if (rc <= 0)
			return rc < 0 ? rc : -ENODATA;
		r->record++;
	}
	return 0;
}

/* ---- the state file: the checkpoint and the keys yielded ---------------- */

struct state {
	const char *path;
	unsigned char *ckpt;
	size_t ckpt_len;
	long long *keys;
	size_t nkeys, cap;
	unsigned long long epoch;
};

static void add_key(struct state *st, long long key)
{
	if (st->nkeys == st->cap) {
		st->cap = st->cap ? 2 * st->cap : 1024;
		st->keys = realloc(st->keys, st->cap * sizeof(*st->keys));
	}
	st->keys[st->nkeys++] = key;
}

/* Write the checkpoint and the keys to path.tmp, then rename it over
 * path: a kill at any point leaves the old state or the new one. */
static int save_state(eachobs_iter *it, struct state *st)
{
	char tmp[4096];
	size_t len = 0;

	if (eachobs_checkpoint(it, NULL, &len) != -ENOSPC &&
	    eachobs_checkpoint(it, NULL, &len) != 0)
		return -1;
	unsigned char *buf = malloc(len ? len : 1);
	if (!buf || eachobs_checkpoint(it, buf, &len) < 0) {
		free(buf);
		return -1;
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp", st->path);
	FILE *f = fopen(tmp, "wb");
	int ok = f && fwrite(&st->epoch, sizeof(st->epoch), 1, f) == 1 &&
		 fwrite(&len, sizeof(len), 1, f) == 1 &&
		 fwrite(buf, 1, len, f) == len &&
		 fwrite(&st->nkeys, sizeof(st->nkeys), 1, f) == 1 &&
		 fwrite(st->keys, sizeof(*st->keys), st->nkeys, f) == st->nkeys;
	if (f && fclose(f) != 0)
		ok = 0;
	free(buf);
	return ok && rename(tmp, st->path) == 0 ? 0 : -1;
}

static void load_state(struct state *st)
{
	FILE *f = st->path ? fopen(st->path, "rb") : NULL;
	size_t n = 0;

	if (!f)
		return;
	if (fread(&st->epoch, sizeof(st->epoch), 1, f) == 1 &&
	    fread(&st->ckpt_len, sizeof(st->ckpt_len), 1, f) == 1 &&
	    (st->ckpt = malloc(st->ckpt_len + 1)) &&
	    fread(st->ckpt, 1, st->ckpt_len, f) == st->ckpt_len &&
	    fread(&n, sizeof(n), 1, f) == 1) {
		for (size_t i = 0; i < n; i++) {
			long long k;
			if (fread(&k, sizeof(k), 1, f) != 1)
				break;
			add_key(st, k);
		}
	}
	fclose(f);
}

/* ---- the loop ----------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f, "usage: example_tar_shards DIR [--epochs E] [--threads T] "
		   "[--batch B] [--seed S]\n"
		   "         [--shuffle-buffer K] [--ordered] [--rank R --ranks N] "
		   "[--state FILE]\n"
		   "         [--keys FILE] [--step-us U]\n"
		   "Reads WebDataset-style tar shards (DIR/*.tar: KEY.jpg + "
		   "KEY.cls per sample)\ninto batches of augmented images on "
		   "eachobs streams.\n");
}

struct args {
	const char *dir, *state, *keys;
	unsigned epochs, threads, rank, ranks;
	size_t batch, shuffle_buffer;
	unsigned long long seed;
	bool ordered;
	unsigned step_us;
};

static int parse(int argc, char **argv, struct args *a)
{
	*a = (struct args){ .epochs = 1, .batch = 32, .shuffle_buffer = 64,
			    .seed = 1 };
	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			exit(0);
		} else if (!strcmp(argv[i], "--ordered")) {
			a->ordered = true;
		} else if (argv[i][0] != '-' && !a->dir) {
			a->dir = argv[i];
		} else if (!v) {
			return -1;
		} else if (!strcmp(argv[i], "--epochs") && ++i) {
			a->epochs = (unsigned)atoi(v);
		} else if (!strcmp(argv[i], "--threads") && ++i) {
			a->threads = (unsigned)atoi(v);
		} else if (!strcmp(argv[i], "--batch") && ++i) {
			a->batch = (size_t)atol(v);
		} else if (!strcmp(argv[i], "--seed") && ++i) {
			a->seed = strtoull(v, NULL, 10);
		} else if (!strcmp(argv[i], "--shuffle-buffer") && ++i) {
			a->shuffle_buffer = (size_t)atol(v);
		} else if (!strcmp(argv[i], "--rank") && ++i) {
			a->rank = (unsigned)atoi(v);
		} else if (!strcmp(argv[i], "--ranks") && ++i) {
			a->ranks = (unsigned)atoi(v);
		} else if (!strcmp(argv[i], "--state") && ++i) {
			a->state = v;
		} else if (!strcmp(argv[i], "--keys") && ++i) {
			a->keys = v;
		} else if (!strcmp(argv[i], "--step-us") && ++i) {
			a->step_us = (unsigned)atoi(v);
		} else {
			return -1;
		}
	}
	return a->dir ? 0 : -1;
}

/* One epoch: every batch, a checkpoint after each with --state. */
static int run_epoch(struct shards *sh, const struct args *a, struct state *st,
		     int *label_sum)
{
	static const size_t fields[] = { IMAGE_FLOATS * sizeof(float),
					 sizeof(struct meta) };
	eachobs_stream s = { .ctx = sh, .nshards = sh->n,
			     .obs_size = fields[0] + fields[1],
			     .open = shard_open, .next = shard_next,
			     .close = shard_close, .seek = shard_seek };
	eachobs_options o = { .nthreads = a->threads,
			      .executor = EACHOBS_BACKGROUND,
			      .batchsize = a->batch, .fields = fields,
			      .nfields = 2, .shuffle = true, .seed = a->seed,
			      .epoch = st->epoch, .ordered = a->ordered,
			      .shuffle_buffer = a->shuffle_buffer,
			      .buffersize = a->shuffle_buffer + 8,
			      .shard_index = a->rank, .shard_count = a->ranks,
			      .resume = st->ckpt, .resume_len = st->ckpt_len };
	eachobs_iter *it;
	eachobs_batch b;
	int rc;

	sh->epoch = st->epoch;
	if ((rc = eachobs_stream_parallel(&it, &s, &o)) < 0) {
		fprintf(stderr, "tar_shards: %s\n", eachobs_last_error());
		return rc;
	}
	while ((rc = eachobs_next_batch(it, &b)) == 1) {
		const struct meta *m = eachobs_field_data(it, b.data, 1);
		for (size_t j = 0; j < b.count; j++) {
			*label_sum += m[j].label;
			add_key(st, m[j].key);
		}
		if (a->step_us)
			usleep(a->step_us); /* the training step */
		if (st->path && save_state(it, st) < 0) {
			fprintf(stderr, "tar_shards: cannot write %s\n",
				st->path);
			rc = -EIO;
			break;
		}
	}
	if (rc < 0 && !(st->path && rc == -EIO))
		fprintf(stderr, "tar_shards: %s\n", eachobs_last_error());
	eachobs_stats stats;
	eachobs_get_stats(it, &stats);
	eachobs_close(it);
	printf("epoch %llu: %zu samples, %u threads, consumer waited %.3f s\n",
	       st->epoch, st->nkeys, stats.nworkers,
	       stats.consumer_wait_ns / 1e9);
	return rc;
}

static int write_keys(const char *path, const struct state *st)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -1;
	for (size_t i = 0; i < st->nkeys; i++)
		fprintf(f, "%lld\n", st->keys[i]);
	return fclose(f) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct args a;
	struct shards sh = { 0 };
	struct state st = { 0 };
	int label_sum = 0, rc = 0;

	if (parse(argc, argv, &a) < 0) {
		usage(stderr);
		return 2;
	}
	if (list_shards(&sh, a.dir) < 0)
		return 1;
	sh.seed = a.seed;
	st.path = a.state;
	load_state(&st);
	for (; st.epoch < a.epochs && rc == 0; st.epoch++) {
		rc = run_epoch(&sh, &a, &st, &label_sum);
		if (rc == 0 && a.keys && write_keys(a.keys, &st) < 0)
			rc = -EIO;
		st.nkeys = 0;
		free(st.ckpt);
		st.ckpt = NULL;
		st.ckpt_len = 0;
	}
	if (st.path)
		unlink(st.path);
	printf("label sum %d\n", label_sum);
	for (size_t i = 0; i < sh.n; i++)
		free(sh.paths[i]);
	free(sh.paths);
	free(st.keys);
	return rc == 0 ? 0 : 1;
}
