/*
 * The consumer's side of the public iterator: eachobs_next and
 * eachobs_next_batch over the units its mode (serial.c, unordered.c,
 * ordered.c) takes, with interrupts, failures and skips; release, stats,
 * failures, length, checkpoint, interrupt and close. Starting and stopping
 * is start.c's.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

/* ---- taking the next unit ------------------------------------------- */

/* What admit returns for a unit whose every entry failed and was
 * skipped: the caller looks again. */
enum { SKIPPED = 2 };

static void record_failure(eachobs_iter *it, size_t idx, int code)
{
	if (it->nfailures < EACHOBS_FAILURES_KEPT)
		it->failures[it->nfailures] = (eachobs_failure){ idx, code };
	it->nfailures++;
}

/* on_error = SKIP: record the failed entries from `bad` on and move the
 * good ones down over them, so a batch stays contiguous. Only this error
 * path moves observation bytes (out of line: not the consumer's common
 * path). */
static __attribute__((noinline)) void compact(eachobs_iter *it,
					      struct eachobs__buf *b,
					      size_t bad)
{
	size_t keep = bad;

	for (size_t e = bad; e < b->count; e++) {
		if (b->status[e] < 0) {
			record_failure(it, b->idx[e], b->status[e]);
			continue;
		}
		eachobs__layout_move(&it->layout, b->data, keep, e);
		b->idx[keep] = b->idx[e];
		b->len[keep] = b->len[e];
		b->status[keep] = 0;
		keep++;
	}
	b->count = keep;
}

/*
 * The consumer took slot over: 1 when it has observations to yield, SKIPPED
 * when every one failed and was skipped (the slot is given back), or the
 * first failure's code, which becomes sticky (STOP).
 */
static int admit(eachobs_iter *it, struct eachobs__slot *slot)
{
	struct eachobs__buf *b = &slot->b;
	size_t bad = 0;

	size_t count = it->batchsize ? atomic_load_explicit(&slot->count,
							     memory_order_relaxed)
				     : 1;

	/* Stored only when it changed: the line holds the buffer's pointers,
	 * which every loader of the slot reads, and a store per unit would
	 * take it from them each time. */
	if (b->count != count)
		b->count = count;
	while (bad < b->count && b->status[bad] == 0)
		bad++;
	if (bad == b->count)
		return 1;
	if (!it->skip_errors) {
		it->err = b->status[bad];
		it->err_idx = b->idx[bad];
		it->mode->give_back(it, slot);
		return it->err;
	}
	compact(it, b, bad);
	if (b->count > 0)
		return 1;
	it->mode->give_back(it, slot);
	return SKIPPED;
}

/* The failure record's code becomes the sticky error (STOP). */
static int fail_from_record(eachobs_iter *it)
{
	eachobs__loader_failure(&it->load, &it->err, &it->err_idx);
	return it->err;
}

/* A unit taken before an interrupt was seen is kept for the next call,
 * so that an interrupt never loses one. */
static inline __attribute__((always_inline)) int
take_or_stash(eachobs_iter *it, struct eachobs__slot **out)
{
	int rc = 1;

	if (it->stash) {
		*out = it->stash;
		it->stash = NULL;
	} else {
		rc = it->mode->take(it, out);
	}
	if (rc == 1 && eachobs__take_interrupt(it)) {
		it->stash = *out;
		return -EINTR;
	}
	if (rc == EACHOBS__TAKE_FAILED)
		return fail_from_record(it);
	if (rc != 1)
		return rc;
	/* Read before admit: a skipped unit's slot goes back at once. */
	size_t u = atomic_load_explicit(&(*out)->unit, memory_order_relaxed);
	if (it->mode->yielded)
		it->mode->yielded(it, *out);
	rc = admit(it, *out);
	if (!it->mode->yielded && (rc == 1 || rc == SKIPPED))
		eachobs__yielded_add(&it->done, u); /* skipped counts too */
	return rc;
}

/* Yield the next unit: 1 with *out, 0 at the end, or < 0. */
static inline __attribute__((always_inline)) int
next_unit(eachobs_iter *it, const struct eachobs__buf **out)
{
	struct eachobs__slot *slot;
	int rc;

	if (it->err)
		return it->err;
	if (it->hold.automatic) /* the item the last call yielded */
		eachobs__hold_release_auto(&it->hold);
	else /* items tensor deleters gave back */
		eachobs__hold_drain(&it->hold);
	if (eachobs__take_interrupt(it))
		return -EINTR;
	if (!it->stash && it->yielded >= it->nunits)
		return 0;
	if (eachobs__hold_full(&it->hold))
		return -ENOBUFS;
	do
		rc = take_or_stash(it, &slot);
	while (rc == SKIPPED);
	if (rc != 1)
		return rc;
	*out = eachobs__hold_take(&it->hold, slot);
	it->nyielded += (*out)->count;
	return 1;
}

/* next_unit with the consumer's stats. */
static int next_counted(eachobs_iter *it, const struct eachobs__buf **out)
{
	/* Restored on return: a getobs may itself run an iterator. */
	struct eachobs__stats *outer = eachobs__tls_stats;
	eachobs__tls_stats = &it->cstats;
	int rc = next_unit(it, out);
	eachobs__tls_stats = outer;
	return rc;
}

/* Why a call of fn (eachobs_next or _batch) returned rc < 0: each code
 * next_unit returns. */
static int next_fail(const eachobs_iter *it, const char *fn, int rc)
{
	if (rc == it->err && it->mode->fail_message) /* sticky */
		return it->mode->fail_message(it, rc, fn, it->err_idx);
	if (rc == it->err) /* sticky: what a getobs returned */
		return eachobs__fail_getobs(rc, fn, it->err_idx);
	if (rc == -EINTR)
		return eachobs__fail(rc,
				     "%s: interrupted by eachobs_interrupt "
				     "(call again to go on)",
				     fn);
	if (rc == -ENOBUFS)
		return eachobs__fail(rc,
				     "%s: %u items are held, as many as hold %u "
				     "allows (eachobs_release one, then call "
				     "again)",
				     fn, it->hold.n, it->hold.max);
	return eachobs__fail(rc, "%s: %s", fn, eachobs_strerror(rc));
}

int eachobs_next(eachobs_iter *it, const void **obs, size_t *idx)
{
	const struct eachobs__buf *b;

	if (obs)
		*obs = NULL;
	if (!it)
		return eachobs__fail(-EINVAL, "eachobs_next: it is NULL");
	if (it->batchsize)
		return eachobs__fail(-EINVAL,
				     "eachobs_next: the iterator is batched "
				     "(batchsize %zu): use eachobs_next_batch",
				     it->batchsize);
	int rc = next_counted(it, &b);
	if (rc == 1) {
		if (obs)
			*obs = b->data;
		if (idx)
			*idx = b->idx[0];
	} else if (rc < 0 && rc == it->err && idx) { /* sticky */
		*idx = it->err_idx;
	}
	return rc < 0 ? next_fail(it, "eachobs_next", rc) : rc;
}

int eachobs_next_batch(eachobs_iter *it, eachobs_batch *batch)
{
	const struct eachobs__buf *b;

	if (!batch)
		return eachobs__fail(-EINVAL, "eachobs_next_batch: batch is NULL");
	memset(batch, 0, sizeof(*batch));
	if (!it)
		return eachobs__fail(-EINVAL, "eachobs_next_batch: it is NULL");
	if (!it->batchsize)
		return eachobs__fail(-EINVAL,
				     "eachobs_next_batch: the iterator is not "
				     "batched (batchsize 0): use eachobs_next");
	int rc = next_counted(it, &b);
	if (rc == 1) {
		batch->data = b->data;
		batch->idx = b->idx;
		batch->lengths = b->len;
		batch->count = b->count;
		it->nbatches++;
	} else if (rc < 0 && rc == it->err) { /* sticky */
		batch->idx = &it->err_idx;
	}
	return rc < 0 ? next_fail(it, "eachobs_next_batch", rc) : rc;
}

int eachobs_release(eachobs_iter *it, const void *data)
{
	if (!it)
		return eachobs__fail(-EINVAL, "eachobs_release: it is NULL");
	if (!data)
		return eachobs__fail(-EINVAL, "eachobs_release: data is NULL");
	if (it->hold.automatic)
		return eachobs__fail(-EINVAL,
				     "eachobs_release: hold is 0 (the next "
				     "eachobs_next gives each item back)");
	return eachobs__hold_release(&it->hold, data);
}

static int obs_length_fail(const eachobs_iter *it, const void *obs,
			   const size_t *len)
{
	if (!it)
		return eachobs__fail(-EINVAL, "eachobs_obs_length: it is NULL");
	if (!obs)
		return eachobs__fail(-EINVAL, "eachobs_obs_length: obs is NULL");
	if (!len)
		return eachobs__fail(-EINVAL, "eachobs_obs_length: len is NULL");
	return eachobs__fail(-EINVAL,
			     "eachobs_obs_length: obs %p is not a currently "
			     "valid observation of it",
			     obs);
}

int eachobs_obs_length(const eachobs_iter *it, const void *obs, size_t *len)
{
	const struct eachobs__buf *b = it && obs ? eachobs__hold_find(&it->hold, obs)
						 : NULL;

	if (!b || !len)
		return obs_length_fail(it, obs, len);
	*len = b->len[0];
	return 0;
}

void eachobs__get_stats(const eachobs_iter *it, eachobs_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->yielded = it->nyielded;
	st->batches = it->nbatches;
	st->skipped = it->nfailures;
	struct eachobs__worker_totals w;

	eachobs__workers_totals(&it->workers, &w);
	st->loaded_by_consumer = eachobs__stat_read(&it->cstats.loaded);
	st->consumer_wait_ns = eachobs__stat_read(&it->cstats.idle_ns);
	st->consumer_getobs_ns = eachobs__stat_read(&it->cstats.getobs_ns);
	st->loaded = st->loaded_by_consumer + w.loaded;
	st->worker_getobs_ns = w.getobs_ns;
	st->worker_idle_ns = w.idle_ns;
	st->steals = w.steals;
	st->max_waiting = it->mode->max_waiting(it);
	st->nworkers = eachobs__workers_started(&it->workers);
	eachobs__tuning_stats(it, st);
}

size_t eachobs_failures(const eachobs_iter *it, eachobs_failure *out,
			size_t max)
{
	if (!it)
		return 0;
	size_t kept = it->nfailures < EACHOBS_FAILURES_KEPT
			      ? it->nfailures
			      : EACHOBS_FAILURES_KEPT;
	for (size_t i = 0; i < kept && i < max; i++)
		out[i] = it->failures[i];
	return it->nfailures;
}

void *eachobs_field_data(const eachobs_iter *it, const void *data, size_t k)
{
	if (!it || !data || k >= it->layout.n)
		return NULL;
	return (unsigned char *)data + it->layout.off[k];
}

size_t eachobs_length(const eachobs_iter *it)
{
	if (it && it->mode->length)
		return it->mode->length(it);
	return it ? it->nunits : 0;
}

int eachobs_checkpoint(eachobs_iter *it, void *buf, size_t *len)
{
	if (!it || !len)
		return eachobs__fail(-EINVAL, "eachobs_checkpoint: %s is NULL",
				     it ? "len" : "it");
	if (!buf && *len)
		return eachobs__fail(-EINVAL, "eachobs_checkpoint: buf is NULL "
				     "with *len %zu", *len);
	size_t room = *len;
	int rc = it->mode->checkpoint
			 ? it->mode->checkpoint(it, buf, len)
			 : eachobs__ckpt_write(&it->key, &it->done,
					       it->resumed ? &it->remap : NULL,
					       buf, len);
	if (rc == -ENOSPC)
		return eachobs__fail(rc, "eachobs_checkpoint: %zu bytes of room, "
				     "%zu needed", room, *len);
	if (rc < 0)
		return eachobs__fail(rc, "eachobs_checkpoint: the record of "
				     "yielded items could not grow");
	return 0;
}

/* Only lock-free atomics and futex wake-ups: safe in a signal handler.
 * The futex system call may set errno, which a handler must not change. */
int eachobs_interrupt(eachobs_iter *it)
{
	if (!it)
		return eachobs__fail_static(-EINVAL,
					    "eachobs_interrupt: it is NULL");
	int saved = errno;
	atomic_fetch_add_explicit(&it->interrupts, 1, memory_order_seq_cst);
	it->mode->wake(it);
	errno = saved;
	return 0;
}

void eachobs_close(eachobs_iter *it)
{
	if (it)
		eachobs__destroy(it);
}
