/*
 * A stream's shards and their yielded records (see shards.h).
 *
 * The checkpoint is a magic word, then unsigned LEB128 numbers (small
 * numbers take a byte: a record of 16 shards in flight takes a few
 * hundred bytes whatever the stream's size), then an FNV-1a hash of
 * everything before it:
 *   version, key (two 32-bit halves), nlists, cursor, draws,
 *   each list's taken, the number of shards in flight, and for each:
 *   list, at, k, nextra, then each extra record as its distance from the
 *   one before it (from k for the first).
 */
#include "shards.h"
#include "eachobs.h"
#include "resume.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MAGIC "eachstrm"
enum { VERSION = 1 };

/* This rank's place among shard_count: its first position, and the
 * stride. */
static void rank_of(const eachobs_options *o, uint64_t *index, uint64_t *count)
{
	*count = o->shard_count > 1 ? o->shard_count : 1;
	*index = *count > 1 ? o->shard_index : 0;
}

uint64_t eachobs__shards_of_rank(size_t nshards, const eachobs_options *o)
{
	uint64_t index, count;

	rank_of(o, &index, &count);
	return nshards > index ? (nshards - index + count - 1) / count : 0;
}

int eachobs__shards_init(struct eachobs__shards *s, size_t nshards,
			 const eachobs_options *o, unsigned nlists,
			 uint64_t key)
{
	eachobs_options order = { .shuffle = o->shuffle,
				  .seed = o->seed,
				  .epoch = o->epoch };

	memset(s, 0, sizeof(*s));
	eachobs__sampler_init(&s->order, nshards, &order);
	rank_of(o, &s->rank_offset, &s->rank_stride);
	s->rank_len = eachobs__shards_of_rank(nshards, o);
	s->key = key;
	s->nlists = nlists;
	s->lists = calloc(nlists, sizeof(*s->lists));
	if (!s->lists)
		return -ENOMEM;
	for (unsigned j = 0; j < nlists; j++)
		s->lists[j].len = s->rank_len > j
					  ? (s->rank_len - j + nlists - 1) / nlists
					  : 0;
	return 0;
}

void eachobs__shards_fini(struct eachobs__shards *s)
{
	for (size_t i = 0; i < s->nfly; i++)
		free(s->fly[i].extra);
	free(s->fly);
	free(s->lists);
	memset(s, 0, sizeof(*s));
}

/* The stream's shard at index at of list j. */
static uint64_t shard_at(const struct eachobs__shards *s, unsigned j,
			 uint64_t at)
{
	uint64_t pos = j + at * s->nlists;

	return eachobs__sampler_index(&s->order,
				      s->rank_offset + pos * s->rank_stride);
}

static struct eachobs__inflight *find(struct eachobs__shards *s,
				      uint64_t shard)
{
	if (s->hint < s->nfly && s->fly[s->hint].shard == shard)
		return &s->fly[s->hint];
	for (size_t i = 0; i < s->nfly; i++)
		if (s->fly[i].shard == shard) {
			s->hint = i;
			return &s->fly[i];
		}
	return NULL;
}

static struct eachobs__inflight *add(struct eachobs__shards *s)
{
	if (s->nfly == s->capfly) {
		size_t cap = s->capfly ? 2 * s->capfly : 16;
		void *p = realloc(s->fly, cap * sizeof(*s->fly));
		if (!p) {
			s->broken = true;
			return NULL;
		}
		s->fly = p;
		s->capfly = cap;
	}
	struct eachobs__inflight *f = &s->fly[s->nfly++];
	memset(f, 0, sizeof(*f));
	f->total = UINT64_MAX;
	return f;
}

static void drop(struct eachobs__shards *s, struct eachobs__inflight *f)
{
	free(f->extra);
	*f = s->fly[--s->nfly];
}

/* The queued (resumed) shard of list j that comes first, or NULL. */
static struct eachobs__inflight *first_queued(struct eachobs__shards *s,
					      unsigned j)
{
	struct eachobs__inflight *best = NULL;

	for (size_t i = 0; i < s->nfly; i++) {
		struct eachobs__inflight *f = &s->fly[i];
		if (f->queued && f->list == j && (!best || f->at < best->at))
			best = f;
	}
	return best;
}

bool eachobs__shards_left(const struct eachobs__shards *s, unsigned j)
{
	if (s->lists[j].taken < s->lists[j].len)
		return true;
	for (size_t i = 0; i < s->nfly; i++)
		if (s->fly[i].queued && s->fly[i].list == j)
			return true;
	return false;
}

bool eachobs__shards_take(struct eachobs__shards *s, unsigned j,
			  uint64_t *shard, struct eachobs__skip *skip)
{
	struct eachobs__inflight *f = first_queued(s, j);
	struct eachobs__shard_list *l = &s->lists[j];

	memset(skip, 0, sizeof(*skip));
	if (f) {
		f->queued = false;
		*shard = f->shard;
		skip->k = f->k;
		if (f->nextra && (skip->extra = malloc(f->nextra * 8))) {
			memcpy(skip->extra, f->extra, f->nextra * 8);
			skip->nextra = f->nextra;
		} else if (f->nextra) {
			s->broken = true; /* they will be yielded twice */
		}
		return true;
	}
	if (l->taken == l->len)
		return false;
	*shard = shard_at(s, j, l->taken);
	if ((f = add(s))) {
		f->shard = *shard;
		f->list = j;
		f->at = l->taken;
	}
	l->taken++;
	return true;
}

void eachobs__shards_end(struct eachobs__shards *s, uint64_t shard,
			 uint64_t total)
{
	struct eachobs__inflight *f = find(s, shard);

	if (!f)
		return;
	f->total = total;
	if (f->k >= total)
		drop(s, f);
}

/* Record r beyond f's prefix, kept sorted. */
static void add_extra(struct eachobs__shards *s, struct eachobs__inflight *f,
		      uint64_t r)
{
	size_t i = f->nextra;

	if (f->nextra == f->cap) {
		size_t cap = f->cap ? 2 * f->cap : 4;
		void *p = realloc(f->extra, cap * sizeof(*f->extra));
		if (!p) {
			s->broken = true;
			return;
		}
		f->extra = p;
		f->cap = cap;
	}
	while (i > 0 && f->extra[i - 1] > r) {
		f->extra[i] = f->extra[i - 1];
		i--;
	}
	f->extra[i] = r;
	f->nextra++;
}

void eachobs__shards_yield(struct eachobs__shards *s, uint64_t shard,
			   uint64_t r)
{
	struct eachobs__inflight *f = find(s, shard);
	size_t n = 0;

	if (!f)
		return;
	if (r == EACHOBS_STREAM_OPEN) {
		drop(s, f);
		return;
	}
	if (r != f->k) {
		add_extra(s, f, r);
		return;
	}
	f->k++;
	while (n < f->nextra && f->extra[n] == f->k) {
		f->k++;
		n++;
	}
	if (n) {
		memmove(f->extra, f->extra + n, (f->nextra - n) * 8);
		f->nextra -= n;
	}
	if (f->k >= f->total)
		drop(s, f);
}

uint64_t eachobs__shards_remaining(const struct eachobs__shards *s, unsigned j,
				   size_t (*count)(void *, size_t), void *ctx)
{
	const struct eachobs__shard_list *l = &s->lists[j];
	uint64_t left = 0;

	for (uint64_t at = l->taken; at < l->len; at++) {
		size_t c = count(ctx, shard_at(s, j, at));
		if (c == SIZE_MAX)
			return UINT64_MAX;
		left += c;
	}
	for (size_t i = 0; i < s->nfly; i++) {
		const struct eachobs__inflight *f = &s->fly[i];
		if (f->list != j)
			continue;
		size_t c = count(ctx, f->shard);
		if (c == SIZE_MAX)
			return UINT64_MAX;
		uint64_t done = f->k + f->nextra;
		left += c > done ? c - done : 0;
	}
	return left;
}

/* ---- the record ----------------------------------------------------- */

struct writer {
	unsigned char *p;
	size_t room, n;
};

static void put(struct writer *w, uint64_t v)
{
	do {
		unsigned char b = v & 0x7f;
		v >>= 7;
		if (v)
			b |= 0x80;
		if (w->n < w->room)
			w->p[w->n] = b;
		w->n++;
	} while (v);
}

static void put_body(const struct eachobs__shards *s, struct writer *w)
{
	put(w, VERSION);
	put(w, s->key >> 32);
	put(w, s->key & 0xffffffffu);
	put(w, s->nlists);
	put(w, s->cursor);
	put(w, s->draws);
	for (unsigned j = 0; j < s->nlists; j++)
		put(w, s->lists[j].taken);
	put(w, s->nfly);
	for (size_t i = 0; i < s->nfly; i++) {
		const struct eachobs__inflight *f = &s->fly[i];
		uint64_t prev = f->k;
		put(w, f->list);
		put(w, f->at);
		put(w, f->k);
		put(w, f->nextra);
		for (size_t e = 0; e < f->nextra; e++) {
			put(w, f->extra[e] - prev);
			prev = f->extra[e];
		}
	}
}

int eachobs__shards_write(const struct eachobs__shards *s, void *buf,
			  size_t *len)
{
	size_t room = *len;
	struct writer w = { (unsigned char *)buf, room, 8 };

	if (s->broken)
		return -ENOMEM;
	put_body(s, &w);
	*len = w.n + 8;
	if (w.n + 8 > room)
		return -ENOSPC;
	memcpy(buf, MAGIC, 8);
	uint64_t h = eachobs__fnv(EACHOBS__FNV_BASIS, buf, w.n);
	memcpy((unsigned char *)buf + w.n, &h, 8);
	return 0;
}

struct reader {
	const unsigned char *p;
	size_t len, at;
	bool bad;
};

static uint64_t get(struct reader *r)
{
	uint64_t v = 0;

	for (unsigned shift = 0; shift < 64; shift += 7) {
		if (r->at >= r->len) {
			r->bad = true;
			return 0;
		}
		unsigned char b = r->p[r->at++];
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
	}
	r->bad = true;
	return 0;
}

/* One in-flight shard of the record; false when it does not fit. */
static bool get_inflight(struct eachobs__shards *s, struct reader *r)
{
	unsigned list = (unsigned)get(r);
	uint64_t at = get(r), k = get(r), nextra = get(r), prev = k;

	if (r->bad || list >= s->nlists || at >= s->lists[list].taken ||
	    nextra > r->len)
		return false;
	struct eachobs__inflight *f = add(s);
	if (!f)
		return false;
	f->list = list;
	f->at = at;
	f->k = k;
	f->shard = shard_at(s, list, at);
	f->queued = true;
	for (uint64_t e = 0; e < nextra; e++) {
		uint64_t d = get(r);
		if (r->bad || d == 0 || (prev += d) >= (uint64_t)1 << 40)
			return false;
		add_extra(s, f, prev);
	}
	return !s->broken;
}

int eachobs__shards_resume(struct eachobs__shards *s, const void *buf,
			   size_t len)
{
	struct reader r = { buf, len >= 16 ? len - 8 : 0, 8, false };
	uint64_t h;

	if (len < 16 || memcmp(buf, MAGIC, 8))
		return -EINVAL;
	memcpy(&h, (const unsigned char *)buf + len - 8, 8);
	if (h != eachobs__fnv(EACHOBS__FNV_BASIS, buf, len - 8))
		return -EINVAL;
	uint64_t version = get(&r), hi = get(&r), lo = get(&r);
	if (r.bad || version != VERSION || (hi << 32 | lo) != s->key ||
	    get(&r) != s->nlists)
		return -EINVAL;
	s->cursor = get(&r);
	s->draws = get(&r);
	for (unsigned j = 0; j < s->nlists; j++) {
		s->lists[j].taken = get(&r);
		if (s->lists[j].taken > s->lists[j].len)
			return -EINVAL;
	}
	uint64_t nfly = get(&r);
	if (r.bad || nfly > len)
		return -EINVAL;
	for (uint64_t i = 0; i < nfly; i++)
		if (!get_inflight(s, &r))
			return s->broken ? -ENOMEM : -EINVAL;
	return r.bad || r.at != r.len ? -EINVAL : 0;
}
