/*
 * A native getobs over a folder of JPEGs, for eachobs.NativeDataset:
 * examples/jpeg_folder.c's pipeline (libturbojpeg decode, a random
 * resized crop to 224 x 224, nearest neighbour, a random horizontal flip,
 * ImageNet normalization to float CHW) behind the signature the Python
 * package calls, int getobs(void *ctx, uint64_t idx, void *obs), with no
 * Python and no GIL anywhere in it. bench/python/jpeg.py builds it:
 *
 *   cc -O2 -shared -fPIC -Iinclude -Iexamples \
 *      -Deachobs_seed=jpeg_native_seed examples/jpeg_folder.c \
 *      bench/python/jpeg_native.c -lturbojpeg -lm -o libjpeg_native.so
 *
 * and calls it through ctypes: jpeg_native_open(dir, seed, field) lists
 * the folder and returns the ctx (NULL when it holds no JPEGs);
 * jpeg_native_count(ctx) its size; jpeg_native_set_epoch(ctx, e) before
 * each epoch; jpeg_native_close(ctx) at the end. getobs writes the image
 * at obs (field 0, "x": 3 x 224 x 224 float32) and the label at
 * field(1) (field 1, "y": int64), where field is the address of the
 * package's eachobs_field.
 *
 * jpeg_folder.c draws each image's crop and flip from a seed; the
 * library's eachobs_seed lives in the package's extension, which ctypes
 * cannot link this file against, so the seed here is a hash of its own
 * (the -D above renames the one call jpeg_folder.c makes, in its
 * generator, which this program does not use).
 */
#include "jpeg_folder.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

struct jpeg_native {
	struct jpeg_folder folder;
	uint64_t seed;
	uint64_t epoch; /* written between epochs, read by getobs */
	void *(*field)(size_t k);
};

static uint64_t mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

unsigned long long jpeg_native_seed(unsigned long long seed,
				    unsigned long long epoch, size_t idx)
{
	uint64_t h = mix(seed + 0x9e3779b97f4a7c15ull);
	h = mix(h ^ mix(epoch + 0x9e3779b97f4a7c15ull));
	return mix(h ^ mix((uint64_t)idx + 0x9e3779b97f4a7c15ull));
}

void *jpeg_native_open(const char *dir, uint64_t seed, void *field)
{
	struct jpeg_native *c = calloc(1, sizeof *c);

	if (!c)
		return NULL;
	if (jpeg_folder_load(&c->folder, dir) < 0) {
		jpeg_folder_free(&c->folder);
		free(c);
		return NULL;
	}
	c->seed = seed;
	c->field = (void *(*)(size_t))field;
	return c;
}

size_t jpeg_native_count(void *ctx)
{
	return ((struct jpeg_native *)ctx)->folder.n;
}

void jpeg_native_set_epoch(void *ctx, uint64_t epoch)
{
	__atomic_store_n(&((struct jpeg_native *)ctx)->epoch, epoch,
			 __ATOMIC_RELEASE);
}

int jpeg_native_getobs(void *ctx, uint64_t idx, void *obs)
{
	struct jpeg_native *c = ctx;
	unsigned char *rgb;
	int w, h, rc;

	if (idx >= c->folder.n)
		return -ERANGE;
	rc = jpeg_read_rgb(c->folder.paths[idx], &rgb, &w, &h);
	if (rc < 0)
		return rc;
	augment_to_chw(rgb, w, h,
		       jpeg_native_seed(c->seed,
					__atomic_load_n(&c->epoch,
							__ATOMIC_ACQUIRE),
					(size_t)idx),
		       obs);
	free(rgb);
	*(int64_t *)c->field(1) = c->folder.labels[idx];
	return 0;
}

void jpeg_native_close(void *ctx)
{
	struct jpeg_native *c = ctx;

	if (!c)
		return;
	jpeg_folder_free(&c->folder);
	free(c);
}
