/*
 * A folder of JPEGs and what is done to each image; see jpeg_folder.h.
 */
#define _GNU_SOURCE
#include "jpeg_folder.h"

#include <eachobs.h>

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <turbojpeg.h>
#include <unistd.h>

#define NCLASSES 10 /* of a synthetic folder */

static const float mean[3] = { 0.485f, 0.456f, 0.406f };
static const float stdev[3] = { 0.229f, 0.224f, 0.225f };

/* splitmix64: a small generator, seeded from eachobs_seed(). */
static uint64_t next_u64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double uniform(uint64_t *s, double lo, double hi)
{
	return lo + (hi - lo) * (double)(next_u64(s) >> 11) * 0x1p-53;
}

/* ---- Listing the folder: sorted classes, sorted files. ---- */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int is_jpeg(const char *name)
{
	const char *dot = strrchr(name, '.');
	return dot && (!strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg"));
}

/* Sorted paths in dir (of sub-folders, or of JPEGs); NULL when none. */
static char **list_dir(const char *dir, int want_dirs, size_t *count)
{
	DIR *d = opendir(dir);
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;

	*count = 0;
	if (!d)
		return NULL;
	while ((e = readdir(d))) {
		char path[4096];
		struct stat st;
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		if (stat(path, &st) < 0 ||
		    (want_dirs ? !S_ISDIR(st.st_mode) :
				 !S_ISREG(st.st_mode) || !is_jpeg(e->d_name)))
			continue;
		if (n + 1 >= cap) {
			cap = cap ? 2 * cap : 64;
			char **grown = realloc(names, cap * sizeof *names);
			if (!grown)
				break;
			names = grown;
		}
		names[n++] = strdup(path);
	}
	closedir(d);
	if (names)
		qsort(names, n, sizeof *names, cmp_str);
	*count = n;
	return names;
}

void jpeg_folder_free(struct jpeg_folder *f)
{
	for (size_t i = 0; i < f->n; i++)
		free(f->paths[i]);
	free(f->paths);
	free(f->labels);
}

int jpeg_folder_load(struct jpeg_folder *f, const char *dir)
{
	size_t ncls = 0, cap = 0;
	char **cls = list_dir(dir, 1, &ncls);

	memset(f, 0, sizeof *f);
	for (size_t c = 0; cls && c < ncls; c++) {
		size_t nf = 0;
		char **files = list_dir(cls[c], 0, &nf);
		for (size_t i = 0; files && i < nf; i++) {
			if (f->n == cap) {
				cap = cap ? 2 * cap : 1024;
				f->paths = realloc(f->paths,
						   cap * sizeof *f->paths);
				f->labels = realloc(f->labels,
						    cap * sizeof *f->labels);
				if (!f->paths || !f->labels)
					abort(); /* an example: no recovery */
			}
			f->paths[f->n] = files[i];
			f->labels[f->n++] = (int)c;
		}
		free(files);
		free(cls[c]);
	}
	f->nclasses = (int)ncls;
	free(cls);
	if (f->n == 0) {
		fprintf(stderr, "%s: no class folders with JPEGs\n", dir);
		return -1;
	}
	return 0;
}

/* ---- Reading and decoding one file. ---- */

static int read_file(const char *path, unsigned char **buf, size_t *len)
{
	FILE *f = fopen(path, "rb");
	long size;

	if (!f)
		return -errno;
	if (fseek(f, 0, SEEK_END) < 0 || (size = ftell(f)) < 0 ||
	    fseek(f, 0, SEEK_SET) < 0) {
		fclose(f);
		return -EIO;
	}
	*buf = malloc((size_t)size + 1);
	*len = *buf ? fread(*buf, 1, (size_t)size, f) : 0;
	fclose(f);
	if (!*buf)
		return -ENOMEM;
	return *len == (size_t)size ? 0 : -EIO;
}

int jpeg_decode_rgb(const unsigned char *jpeg, size_t len, unsigned char **rgb,
		    int *w, int *h)
{
	int sub, cs, rc = -EBADMSG;
	tjhandle tj = tjInitDecompress();

	*rgb = NULL;
	if (!tj || tjDecompressHeader3(tj, jpeg, len, w, h, &sub, &cs) < 0)
		goto out;
	*rgb = malloc((size_t)*w * *h * 3);
	if (!*rgb) {
		rc = -ENOMEM;
		goto out;
	}
	if (tjDecompress2(tj, jpeg, len, *rgb, *w, 0, *h, TJPF_RGB,
			  TJFLAG_FASTDCT) < 0)
		goto out;
	rc = 0;
out:
	if (tj)
		tjDestroy(tj);
	if (rc < 0) {
		free(*rgb);
		*rgb = NULL;
	}
	return rc;
}

int jpeg_read_rgb(const char *path, unsigned char **rgb, int *w, int *h)
{
	unsigned char *jpeg = NULL;
	size_t len;
	int rc = read_file(path, &jpeg, &len);

	*rgb = NULL;
	if (rc == 0)
		rc = jpeg_decode_rgb(jpeg, len, rgb, w, h);
	free(jpeg);
	return rc;
}

/* ---- Augmenting: crop, flip, normalize. ---- */

/*
 * A random-resized crop, as torchvision's RandomResizedCrop draws it:
 * area 8..100% of the image, aspect ratio 3/4..4/3 (log-uniform), ten
 * tries, then the central square.
 */
static void draw_crop(uint64_t *s, int w, int h, int *x0, int *y0, int *cw,
		      int *ch)
{
	for (int t = 0; t < 10; t++) {
		double area = (double)w * h * uniform(s, 0.08, 1.0);
		double ratio = exp(uniform(s, log(3.0 / 4), log(4.0 / 3)));
		int tw = (int)lround(sqrt(area * ratio));
		int th = (int)lround(sqrt(area / ratio));
		if (tw > 0 && th > 0 && tw <= w && th <= h) {
			*cw = tw;
			*ch = th;
			*x0 = (int)(next_u64(s) % (uint64_t)(w - tw + 1));
			*y0 = (int)(next_u64(s) % (uint64_t)(h - th + 1));
			return;
		}
	}
	*cw = *ch = w < h ? w : h;
	*x0 = (w - *cw) / 2;
	*y0 = (h - *ch) / 2;
}

/* Nearest-neighbour resize of the crop into float CHW, normalized. */
static void crop_to_chw(const unsigned char *rgb, int w, int x0, int y0,
			int cw, int ch, int flip, float *out)
{
	int xs[IMAGE_SIDE];

	for (int x = 0; x < IMAGE_SIDE; x++) {
		int sx = x0 + (int)(((long)x * cw + cw / 2) / IMAGE_SIDE);
		xs[flip ? IMAGE_SIDE - 1 - x : x] = sx;
	}
	for (int y = 0; y < IMAGE_SIDE; y++) {
		int sy = y0 + (int)(((long)y * ch + ch / 2) / IMAGE_SIDE);
		const unsigned char *row = rgb + (size_t)sy * w * 3;
		for (int c = 0; c < 3; c++) {
			float *dst = out + ((size_t)c * IMAGE_SIDE + y) *
						   IMAGE_SIDE;
			float scale = 1.0f / (255.0f * stdev[c]);
			float shift = mean[c] / stdev[c];
			for (int x = 0; x < IMAGE_SIDE; x++)
				dst[x] = row[3 * xs[x] + c] * scale - shift;
		}
	}
}

void augment_to_chw(const unsigned char *rgb, int w, int h, uint64_t seed,
		    float *out)
{
	uint64_t s = seed;
	int x0, y0, cw, ch;

	draw_crop(&s, w, h, &x0, &y0, &cw, &ch);
	crop_to_chw(rgb, w, x0, y0, cw, ch, (int)(next_u64(&s) & 1), out);
}

/* ---- The synthetic folder: generated once, then reused. ---- */

/* mkdir -p; 0 or -1. */
static int make_dirs(const char *path)
{
	char buf[4096];
	if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
		return -1;
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	return mkdir(buf, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

/* Image i: a class-tinted gradient, a few shapes and noise. */
static void draw_image(unsigned char *rgb, int w, int h, size_t i)
{
	uint64_t s = eachobs_seed(7, 0, i);
	int cls = (int)(i % NCLASSES);
	int cx[3], cy[3], r[3];
	unsigned char col[3][3];

	for (int k = 0; k < 3; k++) {
		cx[k] = (int)(next_u64(&s) % (uint64_t)w);
		cy[k] = (int)(next_u64(&s) % (uint64_t)h);
		r[k] = 20 + (int)(next_u64(&s) % 100);
		for (int c = 0; c < 3; c++)
			col[k][c] = (unsigned char)next_u64(&s);
	}
	for (int y = 0; y < h; y++) {
		for (int x = 0; x < w; x++) {
			unsigned char *p = rgb + 3 * ((size_t)y * w + x);
			int noise = (int)(next_u64(&s) & 31) - 16;
			p[0] = (unsigned char)(x * 255 / w * (cls + 1) / 11);
			p[1] = (unsigned char)(y * 255 / h);
			p[2] = (unsigned char)(cls * 25);
			for (int k = 0; k < 3; k++) {
				int dx = x - cx[k], dy = y - cy[k];
				if (dx * dx + dy * dy < r[k] * r[k])
					memcpy(p, col[k], 3);
			}
			for (int c = 0; c < 3; c++) {
				int v = p[c] + noise;
				p[c] = (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
			}
		}
	}
}

static int write_file(const char *path, const void *buf, size_t len)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		return -1;
	size_t done = fwrite(buf, 1, len, f);
	return fclose(f) == 0 && done == len ? 0 : -1;
}

int jpeg_folder_generate(const char *dir, size_t nimages)
{
	char path[4096];
	struct stat st;
	int maxw = 320 + 160, rc = -1, tty = isatty(STDERR_FILENO);

	snprintf(path, sizeof path, "%s/.complete", dir);
	if (stat(path, &st) == 0)
		return 0;
	fprintf(stderr, "generating %zu images in %s ...\n", nimages, dir);
	tjhandle tj = tjInitCompress();
	unsigned char *rgb = malloc((size_t)maxw * maxw * 3);
	if (!tj || !rgb || make_dirs(dir) < 0)
		goto out;
	for (size_t i = 0; i < nimages; i++) {
		/* Shorter side 320, the other 320..479, either way round. */
		int other = 320 + (int)(eachobs_seed(8, 0, i) % 160);
		int w = i % 3 ? other : 320, h = i % 3 ? 320 : other;
		unsigned char *jpeg = NULL;
		unsigned long len = 0;

		if (tty && i % 50 == 0) /* a count on a terminal */
			fprintf(stderr, "\r%zu/%zu", i, nimages);
		snprintf(path, sizeof path, "%s/c%02zu", dir, i % NCLASSES);
		if (make_dirs(path) < 0)
			goto out;
		draw_image(rgb, w, h, i);
		if (tjCompress2(tj, rgb, w, 0, h, TJPF_RGB, &jpeg, &len,
				TJSAMP_420, 85, TJFLAG_FASTDCT) < 0) {
			fprintf(stderr, "tjCompress2: %s\n", tjGetErrorStr2(tj));
			goto out;
		}
		snprintf(path, sizeof path, "%s/c%02zu/img%06zu.jpg", dir,
			 i % NCLASSES, i);
		int wrc = write_file(path, jpeg, len);
		tjFree(jpeg);
		if (wrc < 0)
			goto out;
	}
	snprintf(path, sizeof path, "%s/.complete", dir);
	rc = write_file(path, "", 0);
out:
	if (tty)
		fprintf(stderr, "\r%60s\r", "");
	if (rc < 0)
		fprintf(stderr, "cannot generate %s\n", dir);
	free(rgb);
	if (tj)
		tjDestroy(tj);
	return rc;
}
