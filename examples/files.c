/*
 * One file, one observation: a folder of files of different sizes, read
 * into variable-length entries of batches, shuffled every epoch. Each
 * loading thread keeps a read buffer of its own, made the first time it
 * loads and freed when the thread ends, not once per file.
 *
 * usage: files [DIR]   (no DIR: makes a folder of 500 sample files)
 */
#define _GNU_SOURCE
#include <eachobs.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_BYTES 4096 /* obs_size: a larger file fails with -EFBIG */

struct folder {
	char dir[256];
	char (*names)[256];
	size_t n;
};

/* Per-thread state: made on first use, freed by pthread when the thread
 * that made it ends (a worker at close, a pool's thread with its pool). */
static pthread_key_t buffer_key;

static void *thread_buffer(void)
{
	void *buf = pthread_getspecific(buffer_key);

	if (!buf && (buf = malloc(MAX_BYTES + 1)))
		pthread_setspecific(buffer_key, buf);
	return buf;
}

/* Read fd into buf until it ends or len bytes are in; -1 on an error. */
static ssize_t read_up_to(int fd, char *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t r = read(fd, buf + got, len - got);
		if (r == 0)
			break;
		if (r < 0 && errno != EINTR) /* a signal: read on */
			return -1;
		got += r > 0 ? (size_t)r : 0;
	}
	return (ssize_t)got;
}

static size_t folder_numobs(void *ctx)
{
	return ((struct folder *)ctx)->n;
}

static int folder_getobs(void *ctx, size_t idx, void *obs)
{
	const struct folder *f = ctx;
	char path[600];
	char *buf = thread_buffer(); /* e.g. a decoder's scratch space */

	if (!buf)
		return -ENOMEM;
	snprintf(path, sizeof(path), "%s/%s", f->dir, f->names[idx]);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return -errno;
	/* A byte more than the slot holds tells a file that does not fit. */
	ssize_t len = read_up_to(fd, buf, MAX_BYTES + 1);
	int err = errno;
	close(fd);
	if (len < 0)
		return -err;
	if (len > MAX_BYTES)
		return -EFBIG; /* never cut short in silence */
	memcpy(obs, buf, (size_t)len); /* a real loader decodes here */
	return eachobs_set_length((size_t)len);
}

/* The files of dir, sorted so that index i is the same file every run. */
static int list(struct folder *f, const char *dir)
{
	struct dirent **ents;
	int n = scandir(dir, &ents, NULL, alphasort);

	if (n < 0)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "%s", dir);
	f->names = calloc((size_t)n + 1, sizeof(*f->names));
	for (int i = 0; i < n; i++) {
		if (f->names && ents[i]->d_type == DT_REG)
			snprintf(f->names[f->n++], 256, "%s", ents[i]->d_name);
		free(ents[i]);
	}
	free(ents);
	return f->names ? 0 : -1;
}

static int make_samples(char *dir)
{
	if (!mkdtemp(dir))
		return -1;
	for (int i = 0; i < 500; i++) {
		char path[300];
		snprintf(path, sizeof(path), "%s/%04d.txt", dir, i);
		FILE *fp = fopen(path, "w");
		if (!fp)
			return -1;
		for (int k = 0; k < 1 + (i * 37) % 160; k++) /* < 4 KB */
			fprintf(fp, "line %d of sample %d\n", k, i);
		fclose(fp);
	}
	return 0;
}

int main(int argc, char **argv)
{
	char sample[] = "/tmp/eachobs-files-XXXXXX";
	struct folder f = { 0 };

	if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {
		int help = argc == 2 && (!strcmp(argv[1], "--help") ||
					 !strcmp(argv[1], "-h"));
		fprintf(help ? stdout : stderr, "usage: %s [DIR]\n", argv[0]);
		if (help)
			puts("Reads every file of DIR (or of 500 samples it makes)"
			     " into batches, 3 shuffled epochs;\na file over "
			     "4096 bytes fails, named.");
		return help ? 0 : 2;
	}
	const char *dir = argc == 2 ? argv[1] : sample;
	if ((argc == 1 && make_samples(sample) < 0) || list(&f, dir) < 0) {
		fprintf(stderr, "%s: cannot read the folder\n", dir);
		return 1;
	}
	pthread_key_create(&buffer_key, free);

	eachobs_dataset data = { &f, folder_numobs, folder_getobs, MAX_BYTES };
	for (unsigned long long epoch = 0; epoch < 3; epoch++) {
		eachobs_options o = { .batchsize = 32, .shuffle = true,
				      .seed = 1, .epoch = epoch };
		eachobs_iter *it;
		eachobs_batch b;
		size_t files = 0, bytes = 0;
		int rc = eachobs_parallel(&it, &data, &o);
		if (rc < 0)
			return 1;
		while ((rc = eachobs_next_batch(it, &b)) == 1) {
			for (size_t j = 0; j < b.count; j++) {
				/* b.lengths[j] bytes of file b.idx[j] */
				bytes += b.lengths[j];
				files++;
			}
		}
		if (rc < 0) /* b.idx: the file that failed */
			fprintf(stderr, "%s/%s: %s\n", f.dir, f.names[*b.idx],
				eachobs_strerror(rc));
		eachobs_close(it);
		printf("epoch %llu: %zu files, %zu bytes\n", epoch, files, bytes);
		if (rc < 0 || files != f.n)
			return 1;
	}
	free(pthread_getspecific(buffer_key)); /* this thread's, if it loaded */
	for (size_t i = 0; argc == 1 && i < f.n; i++) {
		char path[600];
		snprintf(path, sizeof(path), "%s/%s", sample, f.names[i]);
		unlink(path);
	}
	if (argc == 1)
		rmdir(sample);
	free(f.names);
	return 0;
}
