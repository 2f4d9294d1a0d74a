/*
 * A folder of JPEGs with one sub-folder per class, as torchvision's
 * ImageFolder reads it, and what is done to each image before training:
 * listing the folder, decoding a file with libturbojpeg, a random-resized
 * crop with a random horizontal flip, normalization to float CHW. Also a
 * synthetic folder to run on. Used by examples/imagefolder.c and
 * bench/imagefolder.c; nothing here concerns eachobs but the seeds of
 * the synthetic images.
 */
#ifndef EACHOBS_EXAMPLES_JPEG_FOLDER_H
#define EACHOBS_EXAMPLES_JPEG_FOLDER_H

#include <stddef.h>
#include <stdint.h>

/* An augmented image: 3 channels of IMAGE_SIDE x IMAGE_SIDE floats,
 * channels first. */
#define IMAGE_SIDE 224
#define IMAGE_FLOATS (3 * IMAGE_SIDE * IMAGE_SIDE)

struct jpeg_folder {
	char **paths;  /* n files: classes in name order, each class's
			* files in name order */
	int *labels;   /* labels[i]: the rank of paths[i]'s class */
	size_t n;
	int nclasses;
};

/* List dir/CLASS/NAME.jpg (and .jpeg, any case) into f. 0; or -1 with a
 * message on stderr when there is no such file. Call jpeg_folder_free(f)
 * either way. */
int jpeg_folder_load(struct jpeg_folder *f, const char *dir);
void jpeg_folder_free(struct jpeg_folder *f);

/* Read the JPEG at path and decode it to RGB, 3 bytes a pixel: 0, with
 * *rgb (free() it) and its size; or a negative errno value (-EBADMSG: not
 * a JPEG libturbojpeg can decode). Thread-safe. */
int jpeg_read_rgb(const char *path, unsigned char **rgb, int *w, int *h);
/* The same for the len bytes of a JPEG in memory. */
int jpeg_decode_rgb(const unsigned char *jpeg, size_t len, unsigned char **rgb,
		    int *w, int *h);

/* torchvision's RandomResizedCrop(224) (area 8-100 %, aspect ratio
 * 3/4-4/3, here nearest neighbour) and RandomHorizontalFlip, drawn from a
 * generator seeded with seed, then Normalize with the ImageNet mean and
 * standard deviation: IMAGE_FLOATS floats into out. The same seed gives
 * the same floats. */
void augment_to_chw(const unsigned char *rgb, int w, int h, uint64_t seed,
		    float *out);

/* Make a synthetic folder of nimages JPEGs in dir (created if need be),
 * unless dir/.complete says an earlier call finished it: 10 classes, a
 * shorter side of 320, gradients, discs and noise seeded per image. 0 or
 * -1, with a message on stderr. */
int jpeg_folder_generate(const char *dir, size_t nimages);

#endif
