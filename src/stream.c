/*
 * The stream mode: shards read front to back by places, units handed to
 * the consumer through each place's queue (see include/eachobs_stream.h
 * for what users are promised).
 *
 * A place is an open shard and the unit being filled from it. A loader
 * owns one place at a time (`owned`), so a shard is read by one thread at
 * a time; between units an owner may let go of its place, and another may
 * go on with it. When its shard ends, the place takes the next one of its
 * list (shards.c): unordered, one list that every place takes from;
 * ordered, a list per place. A unit is records of one place, in the order
 * read; a full unit goes to the place's queue.
 *
 * Unordered, loader j keeps to place j while it has work and adopts any
 * other place with an open shard and nobody on it when its own has none
 * (so that the tail of the epoch is not one thread's); the THREADED
 * consumer has a place of its own. The consumer takes from the queues in
 * turn. A unit holds a credit from its first record until the consumer
 * takes it (or draws it from the shuffle buffer): at most buffersize.
 *
 * Ordered, the consumer takes from place `cursor` and moves on to the
 * next: the round-robin that makes the sequence deterministic. A place
 * may have `quota` units queued or being filled, so that the one the
 * consumer waits for always has room, and loaders pick the place the
 * consumer will need first (from the cursor on). SERIAL is ordered
 * without workers: the consumer fills the place it waits for itself, as
 * the THREADED consumer does when nobody is on it.
 *
 * Everything above is under one mutex, taken once per unit by its loader
 * and once per unit by the consumer: a stream's records cost far more
 * than that (a read, a decode), and no callback ever runs under it.
 * Sleepers wait on event counts for a sequence number that changes under
 * the lock (ready_seq: a unit was queued or the end came; work_seq: room,
 * a place let go of, or the loading ended), so that no wake-up is lost
 * and close and eachobs_interrupt can wake them without the lock.
 */
#define _GNU_SOURCE
#include "stream.h"
#include "error.h"
#include "shards.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { NONE = UINT32_MAX };

/* How a fill ended. */
enum fill { FULL, END, FAILED, HALT, INTR };

struct place {
	/* Under the lock. */
	bool owned;
	bool done;       /* ordered: every unit of its shards queued */
	size_t nready;   /* units in its queue */
	uint32_t head, tail; /* the queue, through link[] */
	struct eachobs__slot *partial; /* the unit being filled */
	/* Its owner's (nobody's while not owned). */
	size_t filled;   /* entries of partial */
	void *state;     /* the open shard's; NULL: none */
	uint64_t shard, rec; /* the open shard, its next record */
	struct eachobs__skip skip; /* what to drop of it (resumed) */
	size_t skip_at;
};

struct eachobs__stream {
	eachobs_stream s;
	struct eachobs__shards shards;
	bool deterministic; /* ordered: the round-robin over the places */
	bool helps;       /* the consumer loads when nothing is ready */
	bool drop_last;
	unsigned nplaces;
	unsigned helper;  /* unordered: the consumer's place */
	size_t cap;       /* entries per unit */
	size_t quota;     /* ordered: units per place */
	size_t credits;   /* unordered: buffersize */
	size_t nslots;
	size_t length;    /* eachobs_length */
	unsigned long long seed, epoch; /* the shuffle buffer's draws */
	pthread_mutex_t lock;
	/* Under the lock. */
	struct place *places;
	struct eachobs__slot *slots;
	uint32_t *link;
	struct eachobs__slot **free;
	size_t nfree;
	size_t used;      /* unordered: units holding a credit */
	size_t nready;    /* in every queue */
	unsigned ndone;   /* ordered: places done */
	unsigned rr;      /* unordered: the queue the consumer looks at first */
	bool stopped;     /* unordered: a failure under STOP ended loading */
	size_t max_waiting;
	/* The consumer's: the shuffle buffer. */
	struct eachobs__slot **window;
	size_t nwin, S;
	bool raw_end;
	_Atomic uint32_t ready_seq EACHOBS__ALIGNED;
	_Atomic uint32_t work_seq EACHOBS__ALIGNED;
	struct eachobs__event ev_ready EACHOBS__ALIGNED;
	struct eachobs__event ev_work EACHOBS__ALIGNED;
};

static struct eachobs__stream *M(const eachobs_iter *it)
{
	return it->ms;
}

static bool halted(const eachobs_iter *it)
{
	return eachobs__halted_at(it, 0);
}

/* ---- under the lock: queues, slots, places -------------------------- */

static void push(struct eachobs__stream *m, struct place *p,
		 struct eachobs__slot *slot)
{
	uint32_t i = (uint32_t)(slot - m->slots);

	m->link[i] = NONE;
	if (p->tail == NONE)
		p->head = i;
	else
		m->link[p->tail] = i;
	p->tail = i;
	p->nready++;
	m->nready++;
}

static struct eachobs__slot *pop(struct eachobs__stream *m, struct place *p)
{
	uint32_t i = p->head;

	p->head = m->link[i];
	if (p->head == NONE)
		p->tail = NONE;
	p->nready--;
	m->nready--;
	if (m->nready + m->nwin + 1 > m->max_waiting)
		m->max_waiting = m->nready + m->nwin + 1;
	return &m->slots[i];
}

static unsigned list_of(const struct eachobs__stream *m, const struct place *p)
{
	return m->deterministic ? (unsigned)(p - m->places) : 0;
}

/* Whether p has records to load (shards left, one open, or a unit
 * begun); p is not owned (its owner writes state without the lock). */
static bool has_work(const struct eachobs__stream *m, const struct place *p)
{
	return !p->done && (p->state || p->partial ||
			    eachobs__shards_left(&m->shards, list_of(m, p)));
}

/* Whether p may fill a unit: one begun, or room for a new one. */
static bool has_room(const struct eachobs__stream *m, const struct place *p)
{
	if (p->partial)
		return true;
	if (!m->nfree)
		return false;
	return m->deterministic ? p->nready < m->quota : m->used < m->credits;
}

/* Own p, with a unit to fill. */
static struct place *own(struct eachobs__stream *m, struct place *p)
{
	p->owned = true;
	if (!p->partial) {
		p->partial = m->free[--m->nfree];
		p->filled = 0;
		m->used++;
	}
	return p;
}

static bool can_take(const struct eachobs__stream *m, const struct place *p)
{
	return !p->owned && has_work(m, p) && has_room(m, p);
}

/* The place loader `self` should fill next, owned; NULL: none now.
 * Unordered: its own, else one with an open shard that nobody is on;
 * ordered: the first the consumer will need. */
static struct place *pick(struct eachobs__stream *m, unsigned self)
{
	if (m->deterministic) {
		for (unsigned i = 0; i < m->nplaces; i++) {
			struct place *p = &m->places[(m->shards.cursor + i) %
						     m->nplaces];
			if (can_take(m, p))
				return own(m, p);
		}
		return NULL;
	}
	if (self < m->nplaces && can_take(m, &m->places[self]))
		return own(m, &m->places[self]);
	for (unsigned i = 1; i < m->nplaces; i++) {
		struct place *p = &m->places[(self + i) % m->nplaces];
		/* owned first: an owner writes state without the lock. */
		if (!p->owned && (p->state || p->partial) && can_take(m, p))
			return own(m, p);
	}
	return NULL;
}

/* Whether no place will queue another unit. */
static bool loading_over(const struct eachobs__stream *m)
{
	if (m->deterministic)
		return m->ndone == m->nplaces;
	if (m->stopped)
		return true;
	if (eachobs__shards_left(&m->shards, 0))
		return false;
	for (unsigned i = 0; i < m->nplaces; i++) {
		const struct place *p = &m->places[i];
		if (p->owned || p->state || p->partial)
			return false;
	}
	return true;
}

static void give_slot(struct eachobs__stream *m, struct eachobs__slot *slot)
{
	m->free[m->nfree++] = slot;
}

/* A unit that leaves the loaders' count (taken, dropped): its credit. */
static void credit_back(struct eachobs__stream *m)
{
	if (!m->deterministic)
		m->used--;
	atomic_fetch_add_explicit(&m->work_seq, 1, memory_order_release);
}

static void bump_ready(struct eachobs__stream *m)
{
	atomic_fetch_add_explicit(&m->ready_seq, 1, memory_order_release);
}

/* ---- loading a unit (the owner, without the lock) ------------------- */

/* Entry e of p's unit: the failure `code` of record r of p's shard. */
static void put_failure(struct place *p, size_t e, uint64_t r, int code)
{
	struct eachobs__buf *b = &p->partial->b;

	b->idx[e] = EACHOBS_STREAM_IDX(p->shard, r);
	b->len[e] = 0;
	b->status[e] = code;
}

/* Whether record r of p's shard was yielded before the resume. */
static bool dropped(struct place *p, uint64_t r)
{
	struct eachobs__skip *k = &p->skip;

	if (r < k->k)
		return true;
	while (p->skip_at < k->nextra && k->extra[p->skip_at] < r)
		p->skip_at++;
	return p->skip_at < k->nextra && k->extra[p->skip_at] == r;
}

static void forget_skip(struct place *p)
{
	free(p->skip.extra);
	memset(&p->skip, 0, sizeof(p->skip));
	p->skip_at = 0;
}

/* p's shard ended after p->rec records: closed, and told to the record. */
static void end_shard(eachobs_iter *it, struct place *p)
{
	struct eachobs__stream *m = M(it);

	m->s.close(m->s.ctx, p->state);
	p->state = NULL;
	forget_skip(p);
	pthread_mutex_lock(&m->lock);
	eachobs__shards_end(&m->shards, p->shard, p->rec);
	pthread_mutex_unlock(&m->lock);
}

/* Open p's next shard: 1, 0 when its list has none left, or -1 after a
 * failure written into the unit's next entry. A resumed shard goes to its
 * first record not yielded with seek, where there is one. */
static int open_next(eachobs_iter *it, struct place *p)
{
	struct eachobs__stream *m = M(it);
	struct eachobs__skip skip;
	uint64_t shard;

	pthread_mutex_lock(&m->lock);
	bool got = eachobs__shards_take(&m->shards, list_of(m, p), &shard,
					&skip);
	pthread_mutex_unlock(&m->lock);
	if (!got)
		return 0;
	forget_skip(p);
	p->shard = shard;
	p->rec = 0;
	p->skip = skip;
	int rc = eachobs__load_open(&it->load, m->s.open, shard, &p->state);
	if (rc < 0) {
		p->state = NULL;
		put_failure(p, p->filled, EACHOBS_STREAM_OPEN, rc);
		return -1;
	}
	if (skip.k && m->s.seek) {
		rc = eachobs__load_seek(&it->load, m->s.seek, p->state,
					skip.k);
		p->rec = skip.k;
		if (rc < 0) {
			/* The rest of the shard is lost: it ends at the
			 * failed record. */
			put_failure(p, p->filled, p->rec++, rc);
			end_shard(it, p);
			return -1;
		}
	}
	return 1;
}

/* Fill p's unit (owned by the caller) until it is full, p's shards are
 * done, a failure stops it (STOP), close halts it, or, for the consumer,
 * an interrupt comes between two records of a batch. */
static enum fill fill(eachobs_iter *it, struct place *p, bool consumer)
{
	struct eachobs__stream *m = M(it);

	while (p->filled < m->cap) {
		if (halted(it))
			return HALT;
		if (consumer && p->filled && eachobs__interrupted(it))
			return INTR;
		if (!p->state) {
			int rc = open_next(it, p);
			if (rc == 0)
				return END;
			if (rc < 0 && (p->filled++, !it->skip_errors))
				return FAILED;
			continue;
		}
		int rc = eachobs__load_record(
			&it->load, &p->partial->b, p->filled,
			EACHOBS_STREAM_IDX(p->shard, p->rec), m->s.next,
			p->state);
		if (rc == 0) {
			end_shard(it, p);
			continue;
		}
		if (dropped(p, p->rec++))
			continue;
		p->filled++;
		if (rc < 0 && !it->skip_errors) {
			end_shard(it, p);
			return FAILED;
		}
	}
	return FULL;
}

/* After the owner's fill, under the lock: the unit it leaves, which is
 * returned when the caller yields it itself (direct), else queued. */
static struct eachobs__slot *settle(struct eachobs__stream *m, struct place *p,
				    enum fill r, bool direct)
{
	struct eachobs__slot *slot = p->partial;

	p->owned = false;
	atomic_fetch_add_explicit(&m->work_seq, 1, memory_order_release);
	if (r == HALT || r == INTR)
		return NULL;
	p->partial = NULL;
	/* Ordered, a failure under STOP ends the place (its other shards
	 * are never read); an end is found below. */
	if (r == FAILED && m->deterministic) {
		p->done = true;
		m->ndone++;
	}
	if (r == FAILED && !m->deterministic)
		m->stopped = true;
	if (r == END && (p->filled == 0 || m->drop_last)) {
		give_slot(m, slot);
		credit_back(m);
		slot = NULL;
	}
	if (slot)
		atomic_store_explicit(&slot->count, p->filled,
				      memory_order_relaxed);
	if (slot && !direct)
		push(m, p, slot);
	/* Ordered, a place whose shards are all read is done: at the end
	 * of a fill, or after a unit that ended with its last shard (a
	 * failed open skipped), which leaves no fill to find the end. */
	if (m->deterministic && !p->done && !p->state &&
	    !eachobs__shards_left(&m->shards, list_of(m, p))) {
		p->done = true;
		m->ndone++;
	}
	bump_ready(m);
	return direct ? slot : NULL;
}

/* ---- the workers ----------------------------------------------------- */

/* A sleeper's condition: the sequence number it read under the lock. */
struct seq_wait {
	const eachobs_iter *it;
	const _Atomic uint32_t *word;
	uint32_t seq;
};

static bool seq_moved(const void *arg)
{
	const struct seq_wait *w = arg;

	return atomic_load_explicit(w->word, memory_order_acquire) != w->seq ||
	       halted(w->it);
}

static void worker(eachobs_iter *it, unsigned self)
{
	struct eachobs__stream *m = M(it);

	pthread_mutex_lock(&m->lock);
	while (!halted(it)) {
		struct place *p = pick(m, self);
		if (!p) {
			if (loading_over(m))
				break;
			struct seq_wait w = {
				it, &m->work_seq,
				atomic_load_explicit(&m->work_seq,
						     memory_order_relaxed)
			};
			pthread_mutex_unlock(&m->lock);
			eachobs__event_wait_timed(&m->ev_work, seq_moved,
						  &w, eachobs__loader_spins());
			pthread_mutex_lock(&m->lock);
			continue;
		}
		pthread_mutex_unlock(&m->lock);
		enum fill r = fill(it, p, false);
		pthread_mutex_lock(&m->lock);
		settle(m, p, r, false);
		bool over = r != FULL && loading_over(m);
		pthread_mutex_unlock(&m->lock);
		eachobs__event_notify(&m->ev_ready, 1);
		if (over || r == FAILED)
			eachobs__event_notify(&m->ev_work, INT_MAX);
		pthread_mutex_lock(&m->lock);
	}
	pthread_mutex_unlock(&m->lock);
	/* Loaders waiting for work that will not come leave too. */
	eachobs__event_notify(&m->ev_work, INT_MAX);
}

/* ---- the consumer ---------------------------------------------------- */

/* A queued unit in the order the mode yields, or NULL. Ordered, places
 * whose shards are done and queues empty are passed. */
static struct eachobs__slot *take_queued(struct eachobs__stream *m)
{
	if (m->deterministic) {
		for (unsigned n = 0; n < m->nplaces; n++) {
			struct place *p = &m->places[m->shards.cursor];
			if (!p->nready && !p->done)
				return NULL;
			m->shards.cursor = (m->shards.cursor + 1) % m->nplaces;
			if (p->nready)
				return pop(m, p);
		}
		return NULL;
	}
	for (unsigned n = 0; m->nready && n < m->nplaces; n++) {
		struct place *p = &m->places[m->rr];
		m->rr = (m->rr + 1) % m->nplaces;
		if (p->nready)
			return pop(m, p);
	}
	return NULL;
}

static bool ended(const struct eachobs__stream *m)
{
	return m->nready == 0 && loading_over(m);
}

/* The THREADED or SERIAL consumer, nothing queued: fill a unit itself.
 * 1 with *out; 0 when there was nothing for it to fill; AGAIN when it
 * filled nothing to yield (look again); -EINTR. Called and returns with
 * the lock held. */
enum { AGAIN = 2 };

static int help(eachobs_iter *it, struct eachobs__slot **out)
{
	struct eachobs__stream *m = M(it);
	struct place *p;

	if (m->deterministic) {
		p = &m->places[m->shards.cursor];
		p = can_take(m, p) ? own(m, p) : NULL;
	} else {
		p = pick(m, m->helper);
	}
	if (!p)
		return 0;
	pthread_mutex_unlock(&m->lock);
	enum fill r = fill(it, p, true);
	pthread_mutex_lock(&m->lock);
	struct eachobs__slot *slot = settle(m, p, r, true);
	if (r == INTR)
		return -EINTR;
	if (!slot)
		return AGAIN;
	if (m->deterministic)
		m->shards.cursor = (m->shards.cursor + 1) % m->nplaces;
	*out = slot;
	return 1;
}

static bool ready_moved(const void *arg)
{
	const struct seq_wait *w = arg;

	return seq_moved(arg) || eachobs__interrupted(w->it);
}

/* Sleep until ready_seq moves from seq (read under the lock), an
 * interrupt or close. */
static void wait_ready(eachobs_iter *it, uint32_t seq)
{
	struct seq_wait w = { it, &M(it)->ready_seq, seq };
	uint64_t t0 = eachobs__now_ns();

	eachobs__idle_begin(&it->cstats, t0);
	eachobs__event_wait(&M(it)->ev_ready, ready_moved, &w,
			    eachobs__consumer_spins());
	eachobs__idle_end(&it->cstats, t0, eachobs__now_ns());
}

/* Under the lock: the next unit in the mode's order, 1 with *out, 0 at
 * the end, -EINTR. */
static int next_raw(eachobs_iter *it, struct eachobs__slot **out)
{
	struct eachobs__stream *m = M(it);

	for (;;) {
		if ((*out = take_queued(m)))
			return 1;
		if (ended(m))
			return 0;
		if (eachobs__take_interrupt(it))
			return -EINTR;
		int rc = m->helps ? help(it, out) : 0;
		if (rc == AGAIN)
			continue;
		if (rc != 0)
			return rc;
		uint32_t seq = atomic_load_explicit(&m->ready_seq,
						    memory_order_relaxed);
		pthread_mutex_unlock(&m->lock);
		wait_ready(it, seq);
		pthread_mutex_lock(&m->lock);
	}
}

/* The next unit: 1, 0 at the end, -EINTR. release: its credit goes back
 * now (else when it leaves the shuffle buffer). */
static int take_raw(eachobs_iter *it, struct eachobs__slot **out, bool release)
{
	struct eachobs__stream *m = M(it);

	pthread_mutex_lock(&m->lock);
	int rc = next_raw(it, out);
	if (rc == 1 && (release || m->deterministic))
		credit_back(m);
	pthread_mutex_unlock(&m->lock);
	if (rc == 1)
		eachobs__event_notify(&m->ev_work, 1);
	return rc;
}

/* A unit that fails under STOP: yielded at once, never drawn. */
static bool fails(const eachobs_iter *it, const struct eachobs__slot *slot)
{
	size_t n = atomic_load_explicit(&slot->count, memory_order_relaxed);

	for (size_t e = 0; !it->skip_errors && e < n; e++)
		if (slot->b.status[e] < 0)
			return true;
	return false;
}

/* The shuffle buffer's next draw: an index below n. */
static size_t draw(struct eachobs__stream *m, size_t n)
{
	uint64_t r = eachobs_seed(m->seed ^ 0x7368756666627566ull, m->epoch,
				  (size_t)m->shards.draws++);

	return (size_t)(((unsigned __int128)r * n) >> 64);
}

static int take(eachobs_iter *it, struct eachobs__slot **out)
{
	struct eachobs__stream *m = M(it);
	struct eachobs__slot *slot;

	if (!m->S)
		return take_raw(it, out, true);
	while (m->nwin < m->S && !m->raw_end) {
		int rc = take_raw(it, &slot, false);
		if (rc < 0)
			return rc;
		if (rc == 0)
			m->raw_end = true;
		else if (fails(it, slot))
			goto yield;
		else
			m->window[m->nwin++] = slot;
	}
	if (!m->nwin)
		return 0;
	size_t r = draw(m, m->nwin);
	slot = m->window[r];
	m->window[r] = m->window[--m->nwin];
yield:
	*out = slot;
	pthread_mutex_lock(&m->lock);
	credit_back(m);
	pthread_mutex_unlock(&m->lock);
	eachobs__event_notify(&m->ev_work, 1);
	return 1;
}

static void give_back(eachobs_iter *it, struct eachobs__slot *slot)
{
	struct eachobs__stream *m = M(it);

	pthread_mutex_lock(&m->lock);
	give_slot(m, slot);
	pthread_mutex_unlock(&m->lock);
}

/* The consumer took slot's unit to yield it (or skip it): its records
 * count as yielded, unless it fails under STOP (then it is read again
 * on resume). */
static void yielded(eachobs_iter *it, const struct eachobs__slot *slot)
{
	struct eachobs__stream *m = M(it);
	size_t n = atomic_load_explicit(&slot->count, memory_order_relaxed);

	if (fails(it, slot))
		return;
	pthread_mutex_lock(&m->lock);
	for (size_t e = 0; e < n; e++)
		eachobs__shards_yield(&m->shards,
				      EACHOBS_STREAM_SHARD(slot->b.idx[e]),
				      EACHOBS_STREAM_RECORD(slot->b.idx[e]));
	pthread_mutex_unlock(&m->lock);
}

static int checkpoint(eachobs_iter *it, void *buf, size_t *len)
{
	struct eachobs__stream *m = M(it);

	pthread_mutex_lock(&m->lock);
	int rc = eachobs__shards_write(&m->shards, buf, len);
	pthread_mutex_unlock(&m->lock);
	return rc;
}

static size_t length(const eachobs_iter *it)
{
	return M(it)->length;
}

/* A failure of record idx reported by fn: which shard, which record. */
static int fail_message(const eachobs_iter *it, int code, const char *fn,
			size_t idx)
{
	size_t shard = EACHOBS_STREAM_SHARD(idx), r = EACHOBS_STREAM_RECORD(idx);
	char call[64];

	(void)it;
	if (code == -EMSGSIZE)
		return eachobs__fail(code,
				     "%s: record %zu of shard %zu is larger "
				     "than obs_size (eachobs_set_length "
				     "refused its length)",
				     fn, r, shard);
	if (r == EACHOBS_STREAM_OPEN)
		snprintf(call, sizeof(call), "open(shard %zu)", shard);
	else
		snprintf(call, sizeof(call), "next(shard %zu, record %zu)",
			 shard, r);
	return eachobs__fail_call(code, fn, call);
}

/* Failures under STOP reach the consumer in their units (see fill). */
static void fail(eachobs_iter *it, size_t u)
{
	(void)it;
	(void)u;
}

/* Any thread, also a signal handler: no lock, only the events. */
static void wake(eachobs_iter *it)
{
	struct eachobs__stream *m = M(it);

	if (!m || !m->places)
		return;
	eachobs__event_notify(&m->ev_ready, INT_MAX);
	eachobs__event_notify(&m->ev_work, INT_MAX);
}

static size_t max_waiting(const eachobs_iter *it)
{
	return M(it)->max_waiting;
}

/* ---- start and end --------------------------------------------------- */

/* Once the slots exist: every one free, the places empty. */
static int init(eachobs_iter *it, unsigned workers)
{
	struct eachobs__stream *m = M(it);

	(void)workers;
	m->slots = it->slots;
	m->places = calloc(m->nplaces ? m->nplaces : 1, sizeof(*m->places));
	m->link = calloc(it->nslots, sizeof(*m->link));
	m->free = calloc(it->nslots, sizeof(*m->free));
	m->window = calloc(m->S ? m->S : 1, sizeof(*m->window));
	if (!m->places || !m->link || !m->free || !m->window)
		return eachobs__fail(-ENOMEM, "out of memory for the stream's "
				     "%u places and %zu slots",
				     m->nplaces, it->nslots);
	for (size_t i = 0; i < it->nslots; i++)
		m->free[m->nfree++] = &it->slots[i];
	for (unsigned i = 0; i < m->nplaces; i++) {
		struct place *p = &m->places[i];
		p->head = p->tail = NONE;
		if (m->deterministic && !eachobs__shards_left(&m->shards, i)) {
			p->done = true;
			m->ndone++;
		}
	}
	return 0;
}

/* No thread runs the mode any more: shards still open are closed. */
static void fini(eachobs_iter *it)
{
	struct eachobs__stream *m = M(it);

	if (!m)
		return;
	for (unsigned i = 0; m->places && i < m->nplaces; i++) {
		struct place *p = &m->places[i];
		if (p->state)
			m->s.close(m->s.ctx, p->state);
		forget_skip(p);
	}
	eachobs__shards_fini(&m->shards);
	pthread_mutex_destroy(&m->lock);
	free(m->places);
	free(m->link);
	free(m->free);
	free(m->window);
	eachobs__free(m);
	it->ms = NULL;
}

/* What a checkpoint of this stream must match: its shards and the
 * options that make the epoch's shard order and the places. */
static uint64_t stream_key(const eachobs_stream *s, const eachobs_options *o,
			   bool ordered, unsigned nlists)
{
	uint64_t v[] = { 0x73747265616d31ull, /* a stream's, not a dataset's */
			 s->nshards,
			 o->shuffle,
			 o->shuffle ? o->seed : 0,
			 o->shuffle ? o->epoch : 0,
			 o->shard_count > 1 ? o->shard_index : 0,
			 o->shard_count > 1 ? o->shard_count : 1,
			 ordered,
			 nlists };

	return eachobs__fnv(EACHOBS__FNV_BASIS, v, sizeof(v));
}

/* eachobs_length: the units left when every count is known. */
static size_t stream_length(const struct eachobs__stream *m, size_t batchsize)
{
	uint64_t total = 0;

	if (!m->s.count || (batchsize && !m->deterministic))
		return EACHOBS_LENGTH_UNKNOWN;
	for (unsigned j = 0; j < m->shards.nlists; j++) {
		uint64_t left = eachobs__shards_remaining(&m->shards, j,
							  m->s.count, m->s.ctx);
		if (left == UINT64_MAX)
			return EACHOBS_LENGTH_UNKNOWN;
		if (batchsize)
			left = m->drop_last ? left / batchsize
					    : (left + batchsize - 1) / batchsize;
		total += left;
	}
	return total >= SIZE_MAX ? EACHOBS_LENGTH_UNKNOWN : (size_t)total;
}

/* Places, workers and slots: see eachobs_stream.h, Memory. */
static int plan_places(eachobs_iter *it, struct eachobs__stream *m,
		       const eachobs_options *o, unsigned nthreads,
		       size_t buffersize, struct eachobs__stream_plan *plan)
{
	uint64_t R = eachobs__shards_of_rank(m->s.nshards, o);
	size_t consumer = o->hold ? o->hold : 1;

	if (m->deterministic) {
		unsigned cycle = o->cycle_length ? o->cycle_length
						 : EACHOBS_STREAM_CYCLE;
		m->nplaces = R < cycle ? (R ? (unsigned)R : 1) : cycle;
		bool serial = it->executor == EACHOBS_SERIAL;
		plan->workers = serial ? 0
			      : nthreads < m->nplaces ? nthreads : m->nplaces;
		size_t share = buffersize > m->S ? (buffersize - m->S) /
							   m->nplaces
						 : 0;
		m->quota = serial || share == 0 ? 1 : share;
		plan->nslots = m->nplaces * m->quota + m->S + consumer;
		it->buffersize = m->nplaces * m->quota + m->S;
		return 0;
	}
	if (m->S && buffersize <= m->S)
		return eachobs__fail(-EINVAL,
				     "buffersize %zu is not above shuffle_buffer "
				     "%zu (loaders need room beside the shuffle "
				     "buffer)",
				     buffersize, m->S);
	plan->workers = R < nthreads ? (unsigned)R : nthreads;
	m->helps = it->executor == EACHOBS_THREADED;
	m->helper = plan->workers;
	m->nplaces = plan->workers + (m->helps ? 1 : 0);
	m->credits = buffersize;
	plan->nslots = buffersize + consumer;
	it->buffersize = buffersize;
	return 0;
}

int eachobs__stream_prepare(eachobs_iter *it, const eachobs_stream *s,
			    const eachobs_options *o, bool deterministic,
			    unsigned nthreads, size_t buffersize,
			    struct eachobs__stream_plan *plan)
{
	struct eachobs__stream *m = eachobs__alloc_aligned(sizeof(*m));

	if (!m)
		return eachobs__fail(-ENOMEM, "out of memory for the stream");
	memset(m, 0, sizeof(*m));
	pthread_mutex_init(&m->lock, NULL);
	eachobs__event_init(&m->ev_ready);
	eachobs__event_init(&m->ev_work);
	it->ms = m;
	m->s = *s;
	m->deterministic = deterministic;
	m->helps = it->executor != EACHOBS_BACKGROUND;
	m->drop_last = o->drop_last;
	m->cap = o->batchsize ? o->batchsize : 1;
	m->S = o->shuffle_buffer;
	m->seed = o->seed;
	m->epoch = o->epoch;
	int rc = plan_places(it, m, o, nthreads, buffersize, plan);
	if (rc < 0)
		return rc;
	unsigned nlists = m->deterministic ? m->nplaces : 1;
	if (eachobs__shards_init(&m->shards, s->nshards, o, nlists,
				 stream_key(s, o, m->deterministic, nlists)) < 0)
		return eachobs__fail(-ENOMEM, "out of memory for %u shard "
				     "lists", nlists);
	if (o->resume) {
		rc = eachobs__shards_resume(&m->shards, o->resume,
					    o->resume_len);
		if (rc == -EINVAL || m->shards.cursor >= m->nplaces)
			return eachobs__fail(-EINVAL,
					     "resume: the %zu bytes are not a "
					     "checkpoint of this stream "
					     "(damaged, truncated, or taken "
					     "with other nshards, shuffle, seed, "
					     "epoch, shards, ordered or "
					     "cycle_length)",
					     o->resume_len);
		if (rc < 0)
			return eachobs__fail(rc, "resume: out of memory for "
					     "the checkpoint's %zu bytes",
					     o->resume_len);
		it->resumed = true;
	}
	it->nunits = SIZE_MAX;
	it->batchsize = o->batchsize;
	it->cap = m->cap;
	m->length = stream_length(m, o->batchsize);
	return 0;
}

const struct eachobs__mode eachobs__stream_mode = {
	.init = init,
	.fini = fini,
	.worker = worker,
	.take = take,
	.give_back = give_back,
	.fail = fail,
	.wake = wake,
	.max_waiting = max_waiting,
	.yielded = yielded,
	.checkpoint = checkpoint,
	.length = length,
	.fail_message = fail_message,
};
