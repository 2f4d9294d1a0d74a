/*
 * Checkpoint and resume (see resume.h): the yielded spans, the checkpoint
 * bytes, and the remap of a resumed iterator.
 *
 * The bytes: nine 64-bit words, then the yielded spans in original units,
 * sorted, two words each, all in the machine's byte order (a checkpoint
 * moves between processes of one machine, not between machines):
 *
 *   magic and format version, total size, FNV-1a of everything after
 *   this word, numobs, positions, units, batchsize, options hash, spans.
 *
 * FNV-1a changes its state by a bijection for every byte, so two records
 * of one length that differ in any one byte (a flipped bit) never hash
 * alike; a truncated one fails the size word first.
 */
#include "resume.h"
#include "base.h"
#include "resume.h"
#include "base.h"

#include <errno.h>
#include <string.h>

#define MAGIC ((uint64_t)0x454f434bu << 32 | 1u) /* "EOCK", version 1 */
enum { HEADER_WORDS = 9 };
#define HEADER_BYTES (HEADER_WORDS * sizeof(uint64_t))

uint64_t eachobs__fnv(uint64_t h, const void *p, size_t len)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < len; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* ---- the yielded spans ------------------------------------------------ */

int eachobs__yielded_init(struct eachobs__yielded *y, size_t cap)
{
	memset(y, 0, sizeof(*y));
	y->cap = cap ? cap : 1;
	y->spans = eachobs__calloc(y->cap, sizeof(*y->spans));
	return y->spans ? 0 : -ENOMEM;
}

void eachobs__yielded_fini(struct eachobs__yielded *y)
{
	eachobs__free(y->spans);
	y->spans = NULL;
}

/* Room for one more span. The bound in resume.h says the initial room
 * suffices; growing is there in case it is ever wrong, not expected. */
static bool room(struct eachobs__yielded *y)
{
	if (y->n < y->cap)
		return true;
	struct eachobs__span *more = eachobs__calloc(2 * y->cap, sizeof(*more));
	if (!more) {
		y->broken = true;
		return false;
	}
	memcpy(more, y->spans, y->n * sizeof(*more));
	eachobs__free(y->spans);
	y->spans = more;
	y->cap *= 2;
	return true;
}

static uint64_t max64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

void eachobs__yielded_flush(struct eachobs__yielded *y)
{
	struct eachobs__span r = y->run, *s = y->spans;
	size_t lo = 0, hi = y->n;

	if (r.lo == r.hi)
		return;
	y->run.lo = y->run.hi = 0;
	while (lo < hi) { /* the first span that starts after r */
		size_t mid = lo + (hi - lo) / 2;
		if (s[mid].lo > r.lo)
			hi = mid;
		else
			lo = mid + 1;
	}
	bool left = lo > 0 && s[lo - 1].hi >= r.lo;
	bool right = lo < y->n && r.hi >= s[lo].lo;
	if (left && right) {
		s[lo - 1].hi = max64(s[lo].hi, r.hi);
		memmove(&s[lo], &s[lo + 1], (y->n - lo - 1) * sizeof(*s));
		y->n--;
	} else if (left) {
		s[lo - 1].hi = max64(s[lo - 1].hi, r.hi);
	} else if (right) {
		s[lo].lo = r.lo;
		s[lo].hi = max64(s[lo].hi, r.hi);
	} else if (room(y)) {
		s = y->spans;
		memmove(&s[lo + 1], &s[lo], (y->n - lo) * sizeof(*s));
		s[lo] = r;
		y->n++;
	}
}

/* ---- the remap ------------------------------------------------------- */

void eachobs__remap_fini(struct eachobs__remap *m)
{
	eachobs__free(m->done);
	eachobs__free(m->rest);
	eachobs__free(m->vstart);
	memset(m, 0, sizeof(*m));
}

/* The rest span that holds virtual unit v. */
static size_t rest_of(const struct eachobs__remap *m, uint64_t v)
{
	size_t lo = 0, hi = m->nrest;

	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (m->vstart[mid] <= v)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

uint64_t eachobs__remap_unit(const struct eachobs__remap *m, uint64_t v)
{
	size_t k = rest_of(m, v);

	return m->rest[k].lo + (v - m->vstart[k]);
}

/* ---- writing: the yielded spans in original units ---------------------- */

/* A stream of original-unit spans in increasing order: the yielded spans
 * as they are (not resumed), or mapped piece by piece through m. */
struct stream {
	const struct eachobs__yielded *y;
	const struct eachobs__remap *m;
	size_t i;    /* next span of y */
	uint64_t at; /* resumed: where in span i we are (virtual) */
};

static bool stream_next(struct stream *st, struct eachobs__span *out)
{
	const struct eachobs__yielded *y = st->y;

	if (st->i >= y->n)
		return false;
	struct eachobs__span v = y->spans[st->i];
	if (!st->m) {
		*out = v;
		st->i++;
		return true;
	}
	uint64_t a = st->at > v.lo ? st->at : v.lo;
	size_t k = rest_of(st->m, a);
	uint64_t end = st->m->vstart[k] +
		       (st->m->rest[k].hi - st->m->rest[k].lo);
	uint64_t b = v.hi < end ? v.hi : end;
	out->lo = st->m->rest[k].lo + (a - st->m->vstart[k]);
	out->hi = out->lo + (b - a);
	if (b == v.hi) {
		st->i++;
		st->at = 0;
	} else {
		st->at = b;
	}
	return true;
}

/* Collects spans, joining touching ones; counts them, and writes them when
 * out is set. */
struct sink {
	unsigned char *out;
	size_t n;
	struct eachobs__span last;
	bool have;
};

static void sink_put(struct sink *k, const struct eachobs__span *s)
{
	if (k->have && s->lo <= k->last.hi) {
		k->last.hi = max64(k->last.hi, s->hi);
		return;
	}
	if (k->have) {
		if (k->out)
			memcpy(k->out + k->n * sizeof(k->last), &k->last,
			       sizeof(k->last));
		k->n++;
	}
	k->last = *s;
	k->have = true;
}

static void sink_end(struct sink *k)
{
	if (!k->have)
		return;
	if (k->out)
		memcpy(k->out + k->n * sizeof(k->last), &k->last,
		       sizeof(k->last));
	k->n++;
	k->have = false;
}

/* Merge the spans yielded before a resume with those yielded since. */
static void merge(struct eachobs__yielded *y, const struct eachobs__remap *m,
		  struct sink *k)
{
	struct stream st = { y, m, 0, 0 };
	struct eachobs__span s;
	size_t d = 0, nd = m ? m->ndone : 0;
	bool have = stream_next(&st, &s);

	while (have || d < nd) {
		if (have && (d == nd || s.lo < m->done[d].lo)) {
			sink_put(k, &s);
			have = stream_next(&st, &s);
		} else {
			sink_put(k, &m->done[d++]);
		}
	}
	sink_end(k);
}

int eachobs__ckpt_write(const struct eachobs__ckpt_key *key,
			struct eachobs__yielded *y,
			const struct eachobs__remap *m, void *buf, size_t *len)
{
	struct sink count = { 0 };

	eachobs__yielded_flush(y);
	if (y->broken)
		return -ENOMEM;
	merge(y, m, &count);
	size_t need = HEADER_BYTES + count.n * sizeof(struct eachobs__span);
	if (!buf || *len < need) {
		*len = need;
		return -ENOSPC;
	}
	unsigned char *b = buf;
	uint64_t h[HEADER_WORDS] = { MAGIC, need, 0, key->numobs, key->npos,
				      key->nunits, key->batchsize, key->config,
				      count.n };
	struct sink write = { b + HEADER_BYTES, 0, { 0, 0 }, false };
	merge(y, m, &write);
	memcpy(b, h, sizeof(h));
	h[2] = eachobs__fnv(EACHOBS__FNV_BASIS, b + 3 * sizeof(uint64_t),
			    need - 3 * sizeof(uint64_t));
	memcpy(b + 2 * sizeof(uint64_t), &h[2], sizeof(h[2]));
	*len = need;
	return 0;
}

/* ---- reading ----------------------------------------------------------- */

/* The spans, checked: in order, not empty, not touching, inside the units. */
static bool spans_ok(const struct eachobs__span *s, size_t n, uint64_t nunits)
{
	for (size_t i = 0; i < n; i++) {
		if (s[i].lo >= s[i].hi || s[i].hi > nunits)
			return false;
		if (i && s[i].lo <= s[i - 1].hi)
			return false;
	}
	return true;
}

/* What the done spans leave of [0, nunits), with virtual starts. */
static int build_rest(struct eachobs__remap *m, uint64_t nunits)
{
	size_t cap = m->ndone + 1, n = 0;
	uint64_t at = 0, v = 0;

	m->rest = eachobs__calloc(cap, sizeof(*m->rest));
	m->vstart = eachobs__calloc(cap, sizeof(*m->vstart));
	if (!m->rest || !m->vstart)
		return -ENOMEM;
	for (size_t i = 0; i <= m->ndone; i++) {
		uint64_t end = i < m->ndone ? m->done[i].lo : nunits;
		if (end > at) {
			m->rest[n] = (struct eachobs__span){ at, end };
			m->vstart[n++] = v;
			v += end - at;
		}
		if (i < m->ndone)
			at = m->done[i].hi;
	}
	m->nrest = n;
	m->total = v;
	return 0;
}

int eachobs__ckpt_read(const struct eachobs__ckpt_key *key, const void *buf,
		       size_t len, struct eachobs__remap *m)
{
	uint64_t h[HEADER_WORDS];
	const unsigned char *b = buf;

	memset(m, 0, sizeof(*m));
	if (!buf || len < HEADER_BYTES)
		return -EINVAL;
	memcpy(h, b, sizeof(h));
	if (h[0] != MAGIC || h[1] != len ||
	    h[2] != eachobs__fnv(EACHOBS__FNV_BASIS, b + 3 * sizeof(uint64_t),
				 len - 3 * sizeof(uint64_t)))
		return -EINVAL;
	if (h[3] != key->numobs || h[4] != key->npos || h[5] != key->nunits ||
	    h[6] != key->batchsize || h[7] != key->config ||
	    h[8] != (len - HEADER_BYTES) / sizeof(struct eachobs__span) ||
	    (len - HEADER_BYTES) % sizeof(struct eachobs__span))
		return -EINVAL;
	m->ndone = h[8];
	m->done = eachobs__calloc(m->ndone ? m->ndone : 1, sizeof(*m->done));
	if (!m->done)
		return -ENOMEM;
	memcpy(m->done, b + HEADER_BYTES, m->ndone * sizeof(*m->done));
	int rc = spans_ok(m->done, m->ndone, key->nunits)
			 ? build_rest(m, key->nunits)
			 : -EINVAL;
	if (rc < 0)
		eachobs__remap_fini(m);
	return rc;
}
