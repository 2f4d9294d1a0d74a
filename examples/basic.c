/*
 * The README's example, and the guide's first one, complete: a dataset of
 * 10000 "images" of 784 floats, loaded on 8 threads and consumed in place.
 * README.md and docs/guide.md quote it verbatim (tools/check_doc_code.py
 * checks that they do): change them together.
 */
#include <eachobs.h>

#include <stdio.h>
#include <string.h>

struct db {
	float scale;
};

static size_t numobs(void *ctx)
{
	(void)ctx;
	return 10000;
}

static int getobs(void *ctx, size_t idx, void *obs)
{
	const struct db *db = ctx;
	float *x = obs; /* 784 floats, owned by eachobs */

	for (size_t i = 0; i < 784; i++)
		x[i] = db->scale * (float)((idx + i) % 256);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1) { /* no arguments but --help */
		int help = strcmp(argv[1], "--help") == 0 ||
			   strcmp(argv[1], "-h") == 0;

		fprintf(help ? stdout : stderr, "usage: %s [--help]\n",
			argv[0]);
		if (help)
			puts("Loads 10000 images on 8 threads, in place.");
		return help ? 0 : 2;
	}

	struct db db = { 1.0f / 255 };
	eachobs_dataset data = { .ctx = &db, .numobs = numobs,
				 .getobs = getobs,
				 .obs_size = 784 * sizeof(float) };
	eachobs_iter *it;
	const void *obs;
	size_t idx, count = 0;
	double sum = 0;

	int rc = eachobs_parallel(&it, &data,
				  &(eachobs_options){ .nthreads = 8 });
	if (rc < 0) {
		fprintf(stderr, "eachobs: %s\n", eachobs_strerror(rc));
		return 1;
	}
	while ((rc = eachobs_next(it, &obs, &idx)) == 1) {
		sum += ((const float *)obs)[0]; /* valid until the next call */
		count++;
	}
	if (rc < 0) /* a getobs failed: rc is its code, idx its index */
		fprintf(stderr, "eachobs: %s at %zu\n", eachobs_strerror(rc),
			idx);
	eachobs_close(it);
	printf("%zu observations, mean first pixel %.4f\n", count,
	       sum / (double)count);
	return rc < 0 || count != 10000;
}
