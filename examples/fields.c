/*
 * Observations made of fields: 1000 "images" of 784 floats, each with an
 * int64 label, loaded in batches of 64. With eachobs_options.fields, a
 * batch holds its pixels in one array and its labels in another, each
 * 64-byte aligned, so that both can go to a framework as they are (one
 * tensor each: eachobs_dlpack_fields, as examples/libtorch_train.cpp
 * does). getobs writes the pixels at obs (field 0) and the label at
 * eachobs_field(1); the loop finds the labels with eachobs_field_data.
 * docs/guide.md quotes it verbatim.
 *
 * Run it with no arguments; it exits 0 when every image came once, with
 * its own pixels and label.
 */
#include <eachobs.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define N 1000
#define PIXELS 784

static size_t numobs(void *ctx)
{
	(void)ctx;
	return N;
}

static int getobs(void *ctx, size_t idx, void *obs)
{
	float *x = obs;                    /* field 0: the pixels */
	int64_t *label = eachobs_field(1); /* field 1: the label */

	(void)ctx;
	for (size_t i = 0; i < PIXELS; i++)
		x[i] = (float)((idx + i) % 256) / 255;
	*label = (int64_t)(idx % 10);
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
			puts("Loads 1000 images with their labels in batches "
			     "of 64, each field an array.");
		return help ? 0 : 2;
	}

	static const size_t fields[] = { PIXELS * sizeof(float),
					 sizeof(int64_t) };
	eachobs_dataset data = { NULL, numobs, getobs, fields[0] + fields[1] };
	eachobs_options o = { .batchsize = 64, .fields = fields, .nfields = 2 };
	eachobs_iter *it;
	eachobs_batch b;
	unsigned char seen[N] = { 0 };
	size_t count = 0, wrong = 0;

	int rc = eachobs_parallel(&it, &data, &o);
	if (rc < 0) {
		fprintf(stderr, "eachobs: %s\n", eachobs_last_error());
		return 1;
	}
	while ((rc = eachobs_next_batch(it, &b)) == 1) {
		const float *x = b.data; /* b.count images, 784 floats apart */
		const int64_t *y = eachobs_field_data(it, b.data, 1);

		for (size_t j = 0; j < b.count; j++) {
			size_t idx = b.idx[j];
			/* b.lengths[j] counts field 0's bytes: the pixels. */
			wrong += b.lengths[j] != fields[0] ||
				 y[j] != (int64_t)(idx % 10) ||
				 x[j * PIXELS] != (float)(idx % 256) / 255 ||
				 seen[idx]++;
		}
		count += b.count;
	}
	if (rc < 0)
		fprintf(stderr, "eachobs: %s\n", eachobs_strerror(rc));
	eachobs_close(it);
	printf("%zu images with their labels, %zu misplaced\n", count, wrong);
	return rc < 0 || count != N || wrong;
}
