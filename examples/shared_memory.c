/*
 * Batches in memory another process reads, without a copy: an allocator
 * puts eachobs's batch buffers in a memfd mapped shared, a child process
 * maps the same memory, and for every batch the parent sends the child
 * only where the batch lies; the child reads it in place and answers with
 * a checksum; then the parent releases the batch, and the loader may write
 * into it again. The same allocator hook gives pinned memory for a GPU
 * (cudaHostAlloc), huge pages or NUMA-local memory.
 *
 * Run it with no arguments; it exits 0 when the child saw every batch as
 * the parent did.
 */
#define _GNU_SOURCE
#include <eachobs.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define OBS_FLOATS 256

/* One shared mapping; eachobs asks for one block per iterator. */
struct shm {
	int fd;
	void *base;
	size_t size;
};

static void *shm_alloc(void *ctx, size_t size, size_t align)
{
	struct shm *s = ctx;

	(void)align; /* mmap returns page-aligned memory */
	s->fd = memfd_create("eachobs-batches", 0);
	if (s->fd < 0 || ftruncate(s->fd, (off_t)size) < 0)
		return NULL;
	s->base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
	s->size = size;
	return s->base == MAP_FAILED ? NULL : s->base;
}

static void shm_free(void *ctx, void *ptr, size_t size)
{
	struct shm *s = ctx;

	munmap(ptr, size);
	close(s->fd);
}

static size_t numobs(void *ctx)
{
	(void)ctx;
	return 4096;
}

static int getobs(void *ctx, size_t idx, void *obs)
{
	float *x = obs;

	(void)ctx;
	for (int i = 0; i < OBS_FLOATS; i++)
		x[i] = (float)(idx % 97) + (float)i / 1024;
	return 0;
}

static double checksum(const float *x, size_t n)
{
	double sum = 0;

	for (size_t i = 0; i < n; i++)
		sum += x[i];
	return sum;
}

/* The other process: map the memfd, read each batch where it lies. */
static int child(int fd, size_t size, int in, int out)
{
	const unsigned char *base = mmap(NULL, size, PROT_READ, MAP_SHARED,
					 fd, 0);
	uint64_t where[2]; /* offset, floats */

	if (base == MAP_FAILED)
		return 1;
	while (read(in, where, sizeof(where)) == sizeof(where)) {
		double sum = checksum((const float *)(base + where[0]),
				      where[1]);
		if (write(out, &sum, sizeof(sum)) != sizeof(sum))
			return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1) { /* no arguments but --help */
		int help = !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h");
		fprintf(help ? stdout : stderr, "usage: %s [--help]\n", argv[0]);
		if (help)
			puts("Batches in a memfd that a child process reads in place.");
		return help ? 0 : 2;
	}
	struct shm s = { -1, NULL, 0 };
	eachobs_allocator a = { shm_alloc, shm_free, &s };
	eachobs_dataset data = { NULL, numobs, getobs,
				 OBS_FLOATS * sizeof(float) };
	eachobs_options o = { .batchsize = 64, .hold = 1, .allocator = &a };
	eachobs_iter *it;
	eachobs_batch b;
	int to[2], from[2], rc, bad = 0, n = 0;

	if (eachobs_parallel(&it, &data, &o) < 0 || pipe(to) || pipe(from))
		return 1;
	pid_t pid = fork();
	if (pid == 0) {
		close(to[1]);
		close(from[0]);
		_exit(child(s.fd, s.size, to[0], from[1]));
	}
	close(to[0]);
	close(from[1]);
	while ((rc = eachobs_next_batch(it, &b)) == 1) {
		uint64_t where[2] = { (uint64_t)((unsigned char *)b.data -
						 (unsigned char *)s.base),
				      b.count * OBS_FLOATS };
		double theirs;
		if (write(to[1], where, sizeof(where)) != sizeof(where) ||
		    read(from[0], &theirs, sizeof(theirs)) != sizeof(theirs))
			break;
		bad += theirs != checksum(b.data, b.count * OBS_FLOATS);
		n++;
		eachobs_release(it, b.data); /* the child is done with it */
	}
	close(to[1]);
	waitpid(pid, NULL, 0);
	eachobs_close(it);
	printf("%d batches read in place by another process, %d differed\n",
	       n, bad);
	return rc == 0 && bad == 0 && n == 64 ? 0 : 1;
}
