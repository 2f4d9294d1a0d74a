/*
 * Autotune's controller (tune.h): one decision per interval, taken by
 * whichever loader finds it due, from the figures its owner gathers.
 */
#include "tune.h"

#include <limits.h>

/* An interval lasts at least MIN_INTERVAL_NS and LOADS_PER_LOADER getobs
 * durations, so that every loader finished a few loads in it, and at most
 * MAX_INTERVAL_NS; one shorter than MAX_INTERVAL_NS is judged only once
 * JUDGE_LOADS loads per loader came back in it. */
#define MIN_INTERVAL_NS 20000000ull
#define MAX_INTERVAL_NS 500000000ull
#define LOADS_PER_LOADER 4u
#define JUDGE_LOADS 2u
/* Past the CPUs, a computing getobs's steps are judged over at least
 * PAST_CPUS_NS: what they gain there is small beside a short interval's
 * noise. After a change, one load's time (at least SETTLE_MIN_NS) passes
 * before the interval that judges it begins. */
#define PAST_CPUS_NS 100000000ull
#define SETTLE_MIN_NS 2000000ull
/* The consumer is starved when it waits (or loads itself) more than
 * STARVED of the time, fed when less than FED; between, nothing moves. */
#define STARVED 0.05
#define FED 0.02
/* A step up pays when throughput rose by at least this share of what the
 * added loaders would give if each loaded as fast as the others; past
 * the CPUs, a getobs that computes gains only what the hand-off does
 * (fewer sleeps and wake-ups), so any clear rise pays there. */
#define PAYS 0.3
#define CLEAR_RISE 0.05
/* There, a step down stands when throughput fell by less than KEEP_LOSS:
 * the fewest loaders within that of the rate. */
#define KEEP_LOSS 0.02
/* Either verdict there stands only when a second interval agrees, but
 * a step up that raised throughput by CLEAR past the noise needs none. */
#define CLEAR 0.15
/* The depth doubles when the consumer is starved while the loaders spend
 * more than ROOM_SHARE of their time waiting for room. */
#define ROOM_SHARE 0.1
/* The cost of one getobs strayed when it moved by more than a third of
 * what it was when the counts were learnt; two intervals in a row make
 * them forgotten. */
#define STRAY (1.0 / 3)
#define STRAYS 2u
/* Decisions at a plateau before the counts above it are tried again:
 * what was measured there may have been noise. */
#define REPROBE 25u

static size_t depth_for(const struct eachobs__tune *t, unsigned loaders)
{
	const struct eachobs__tune_depth *dp = &t->dp;
	size_t d = dp->per_loader * loaders;

	if (d < dp->least)
		d = dp->least;
	if (d < t->deepest)
		d = t->deepest;
	return d < 1 ? 1 : d > dp->bound ? dp->bound : d;
}

void eachobs__tune_init(struct eachobs__tune *t, unsigned bound,
			unsigned cpus, unsigned start,
			const struct eachobs__tune_sample *first,
			const struct eachobs__tune_depth *dp)
{
	if (bound < 1)
		bound = 1;
	start = start < 1 ? 1 : start > bound ? bound : start;
	atomic_init(&t->active, start);
	atomic_init(&t->done, false);
	atomic_init(&t->most, start);
	atomic_init(&t->reason, EACHOBS_TUNE_STARTING);
	atomic_init(&t->next_ns, first->now_ns + MIN_INTERVAL_NS);
	atomic_init(&t->deciding, false);
	eachobs__event_init(&t->ev_park);
	t->bound = bound;
	t->cpus = cpus < 1 ? 1 : cpus > bound ? bound : cpus;
	t->last = *first;
	t->prev = start;
	t->prev_rate = 0;
	t->prev_starved = false;
	t->prev_computes = false;
	t->bad = bound + 1;
	t->g_ref = 0;
	t->drift = 0;
	t->at_plateau = 0;
	t->fed_streak = 0;
	t->settling = false;
	t->lose = 0;
	t->confirm_from = 0;
	t->confirm_rate = 0;
	t->down_from = 0;
	t->down_rate = 0;
	t->probing = false;
	t->dp = dp ? *dp : (struct eachobs__tune_depth){ 1, 0, 1 };
	if (t->dp.bound < 1)
		t->dp.bound = 1;
	t->deepest = 0;
	t->from_start = true;
	atomic_init(&t->depth, depth_for(t, start));
}

bool eachobs__tune_due(struct eachobs__tune *t, uint64_t now)
{
	bool no = false;

	if (now < atomic_load_explicit(&t->next_ns, memory_order_relaxed))
		return false;
	return atomic_compare_exchange_strong_explicit(
		&t->deciding, &no, true, memory_order_acquire,
		memory_order_relaxed);
}

static uint64_t diff(uint64_t now, uint64_t then)
{
	return now > then ? now - then : 0;
}

/* What one interval showed. */
struct interval {
	uint64_t ns;
	double rate;    /* getobs calls returned per second */
	double g;       /* ns per getobs on the loaders */
	double cpu;     /* the loaders' CPU time over their getobs time */
	bool computes;  /* getobs uses its CPU more than it waits */
	double starved; /* the consumer's share of time waiting or loading */
	double waited;  /* of that, waiting */
	double room;    /* the loaders' share of time waiting for room */
};

/* A cost that stays away from g_ref makes what was learnt stale. */
static void follow_cost(struct eachobs__tune *t, double g)
{
	double off = g > t->g_ref ? g - t->g_ref : t->g_ref - g;

	if (t->g_ref > 0 && off <= STRAY * t->g_ref) {
		t->drift = 0;
		return;
	}
	if (t->g_ref > 0 && ++t->drift < STRAYS)
		return;
	t->g_ref = g;
	t->drift = 0;
	t->bad = t->bound + 1;
	t->at_plateau = 0;
	t->lose = 0;
	t->confirm_from = 0;
	t->down_from = 0;
	t->probing = false;
}

/* The consumer does not wait: the fewest loaders that keep it fed. */
static unsigned fed(const struct interval *v, unsigned a)
{
	double need = v->rate * v->g * 1.25 / 1e9;
	unsigned n = need >= a ? a : (unsigned)need + 1;

	/* Give back at most half a step: the rate measured may have been
	 * held down by a consumer that paused. */
	return n < (a + 1) / 2 ? (a + 1) / 2 : n;
}

/* Whether a computing getobs's loaders are past the CPUs at a. */
static bool past_cpus(const struct eachobs__tune *t,
		      const struct interval *v, unsigned a)
{
	return v->computes && a >= t->cpus;
}

/*
 * What this interval says of the last change, when it settles it: true
 * with the count to go to in *to. A step up pays when throughput rose by
 * enough (past the CPUs: clearly, and in a second interval too); a step
 * down to try, from past the CPUs, stands when throughput fell by less
 * than KEEP_LOSS. Every verdict narrows what is left to try: `bad` is
 * the fewest known not to pay, `lose` the most known to give less.
 */
static bool judged(struct eachobs__tune *t, const struct interval *v,
		   unsigned a, unsigned *to)
{
	if (t->confirm_from) {
		unsigned from = t->confirm_from;
		t->confirm_from = 0;
		if (v->rate < t->confirm_rate * (1 + CLEAR_RISE)) {
			t->bad = a;
			*to = from;
			return true;
		}
		t->lose = t->lose > from ? t->lose : from;
		return false;
	}
	if (t->probing) {
		t->probing = false;
		if (v->rate >= t->prev_rate * (1 - KEEP_LOSS)) {
			/* Hold it for a second look. */
			t->down_from = t->prev;
			t->down_rate = t->prev_rate;
			*to = a;
		} else {
			t->lose = a;
			*to = t->prev;
		}
		return true;
	}
	if (t->down_from) {
		unsigned from = t->down_from;
		t->down_from = 0;
		if (v->rate >= t->down_rate * (1 - KEEP_LOSS)) {
			t->bad = from;
			*to = a;
		} else {
			t->lose = a;
			*to = from;
		}
		return true;
	}
	if (!t->prev_starved || t->prev >= a)
		return false;
	double ideal = (double)a / t->prev - 1;
	bool past = past_cpus(t, v, t->prev);
	if (v->rate < t->prev_rate * (1 + (past ? CLEAR_RISE : PAYS * ideal))) {
		t->bad = a;
		*to = t->prev;
		return true;
	}
	if (past && v->rate < t->prev_rate * (1 + CLEAR)) {
		/* One interval's rise past the CPUs may be noise: hold the
		 * count for a second one. */
		t->confirm_from = t->prev;
		t->confirm_rate = t->prev_rate;
		*to = a;
		return true;
	}
	t->lose = t->lose > t->prev ? t->lose : t->prev;
	return false;
}

/* Past the CPUs, nothing left to try upwards: halfway down to the fewest
 * not known to lose, to try (a when there is none). */
static unsigned probe_down(struct eachobs__tune *t, unsigned a)
{
	unsigned lo = t->lose + 1 > t->cpus ? t->lose + 1 : t->cpus;

	if (lo >= a)
		return a;
	t->probing = true;
	return a - (a - lo + 1) / 2;
}

/* The consumer waits: the next count to try, and why. */
static unsigned starved(struct eachobs__tune *t, const struct interval *v,
			unsigned a, unsigned *reason)
{
	unsigned to, next;

	*reason = v->computes ? EACHOBS_TUNE_CPU_BOUND : EACHOBS_TUNE_PLATEAU;
	if (judged(t, v, a, &to)) {
		if (to > a || t->confirm_from)
			*reason = EACHOBS_TUNE_GROWING;
		return to;
	}
	/* Only a waiting getobs loses much to a plateau found in noise. */
	if (!v->computes && t->bad <= t->bound && ++t->at_plateau >= REPROBE)
		t->bad = t->bound + 1, t->at_plateau = 0;
	/* Waiting loaders cost little: the less CPU a getobs uses, the
	 * longer the stride (the ramp-up is time lost). */
	unsigned stride = v->computes ? 2 : v->cpu < 0.1 ? 8 : 4;
	if (t->bad > t->bound)
		next = a > UINT_MAX / stride ? UINT_MAX : a * stride;
	else
		next = a + (t->bad - a) / 2;
	if (next > t->bound)
		next = t->bound;
	if (next > a && next < t->bad) {
		*reason = EACHOBS_TUNE_GROWING;
		return next;
	}
	if (past_cpus(t, v, a) && a > t->cpus)
		return probe_down(t, a);
	if (a >= t->bound)
		*reason = EACHOBS_TUNE_AT_BOUND;
	return a;
}

/* How far ahead to load for `want` loaders; deeper, up to the bound,
 * when loaders waited for room while the consumer waited (a THREADED
 * consumer that loads itself meanwhile leaves them no room, rightly).
 * Never from the interval that holds the start: there the consumer waits
 * for the first units and then the loaders, having filled the depth, wait
 * for room, one after the other, and what is learnt here stays. */
static void deepen(struct eachobs__tune *t, const struct interval *v,
		   unsigned want, unsigned *reason)
{
	size_t d = eachobs__tune_depth(t);

	if (!t->from_start && v->waited > STARVED && v->room > ROOM_SHARE) {
		/* A getobs that computes explains the waits better. */
		if (d >= t->dp.bound && want == eachobs__tune_active(t) &&
		    *reason != EACHOBS_TUNE_CPU_BOUND)
			*reason = EACHOBS_TUNE_MEMORY_BOUND;
		t->deepest = d >= t->dp.bound / 2 ? t->dp.bound : 2 * d;
	}
	atomic_store_explicit(&t->depth, depth_for(t, want),
			      memory_order_relaxed);
}

static uint64_t interval_for(double g)
{
	double ns = g * LOADS_PER_LOADER;

	return ns < MIN_INTERVAL_NS   ? MIN_INTERVAL_NS
	       : ns > MAX_INTERVAL_NS ? MAX_INTERVAL_NS
				      : (uint64_t)ns;
}

unsigned eachobs__tune_decide(struct eachobs__tune *t,
			      const struct eachobs__tune_sample *s)
{
	const struct eachobs__tune_sample *l = &t->last;
	unsigned a = eachobs__tune_active(t), want = a, reason;
	uint64_t loads = diff(s->loaded, l->loaded);
	uint64_t wl = diff(s->worker_loaded, l->worker_loaded);
	uint64_t gns = diff(s->getobs_ns, l->getobs_ns);
	struct interval v = {.ns = diff(s->now_ns, l->now_ns)};

	/* After a change, the loaders it started or parked need about one
	 * load to get there: the interval that judges it starts then. */
	if (t->settling) {
		uint64_t next = interval_for(t->g_ref);
		t->settling = false;
		t->last = *s;
		if (t->prev_computes && (a > t->cpus || t->prev > t->cpus) &&
		    next < PAST_CPUS_NS)
			next = PAST_CPUS_NS;
		atomic_store_explicit(&t->next_ns, s->now_ns + next,
				      memory_order_relaxed);
		return a;
	}
	/* Too little to judge yet: a getobs longer than the interval. */
	if (v.ns == 0 || ((loads < (uint64_t)JUDGE_LOADS * a || !wl) &&
			  v.ns < MAX_INTERVAL_NS)) {
		atomic_store_explicit(&t->next_ns, s->now_ns + MIN_INTERVAL_NS,
				      memory_order_relaxed);
		return a;
	}
	v.rate = (double)loads * 1e9 / (double)v.ns;
	v.g = wl ? (double)gns / (double)wl : t->g_ref;
	double cpu_ns = (double)diff(s->cpu_ns, l->cpu_ns);
	v.cpu = gns ? cpu_ns / (double)gns : 1;
	/* Loaders that fill the CPUs compute, whatever their getobs's wall
	 * time says (it grows with the threads that share the CPUs). */
	v.computes = v.cpu > 0.5 || cpu_ns > 0.75 * t->cpus * (double)v.ns;
	v.starved = (double)diff(s->starved_ns, l->starved_ns) / (double)v.ns;
	v.waited = (double)diff(s->waited_ns, l->waited_ns) / (double)v.ns;
	v.room = (double)diff(s->room_ns, l->room_ns) / ((double)a * v.ns);
	reason = atomic_load_explicit(&t->reason, memory_order_relaxed);
	follow_cost(t, v.g);
	t->fed_streak = v.starved < FED ? t->fed_streak + 1 : 0;
	if (v.starved < FED) {
		/* Two intervals in a row: loaders that fill the CPUs may
		 * keep a consumer off them for one. */
		if (t->fed_streak >= 2)
			want = fed(&v, a);
		reason = EACHOBS_TUNE_CONSUMER_BOUND;
	} else if (v.starved > STARVED) {
		want = starved(t, &v, a, &reason);
	} else if (reason == EACHOBS_TUNE_STARTING) {
		reason = EACHOBS_TUNE_CONSUMER_BOUND;
	}
	if (v.starved <= STARVED) {
		/* A verdict needs a starved interval: a fed one ends it. */
		t->confirm_from = 0;
		t->down_from = 0;
		t->probing = false;
	}
	want = want < 1 ? 1 : want > t->bound ? t->bound : want;
	deepen(t, &v, want, &reason);
	t->from_start = false;
	t->prev = a;
	t->prev_rate = v.rate;
	t->prev_starved = v.starved > STARVED;
	t->prev_computes = v.computes;
	t->last = *s;
	atomic_store_explicit(&t->reason, reason, memory_order_relaxed);
	/* Past the CPUs a computing getobs gains little, and a short
	 * interval's noise is larger than that. */
	uint64_t next = interval_for(v.g);
	if (v.computes && want > t->cpus && next < PAST_CPUS_NS)
		next = PAST_CPUS_NS;
	if (want != a) {
		t->settling = true;
		next = v.g < SETTLE_MIN_NS ? SETTLE_MIN_NS
		       : v.g > MAX_INTERVAL_NS ? MAX_INTERVAL_NS
					       : (uint64_t)v.g;
	}
	atomic_store_explicit(&t->next_ns, s->now_ns + next,
			      memory_order_relaxed);
	return want;
}

void eachobs__tune_commit(struct eachobs__tune *t, unsigned n)
{
	unsigned a = eachobs__tune_active(t);

	if (n < 1)
		n = 1;
	if (n != a)
		atomic_store_explicit(&t->active, n, memory_order_release);
	if (n > atomic_load_explicit(&t->most, memory_order_relaxed))
		atomic_store_explicit(&t->most, n, memory_order_relaxed);
	atomic_store_explicit(&t->deciding, false, memory_order_release);
	if (n > a)
		eachobs__event_notify(&t->ev_park, INT_MAX);
}

struct park {
	struct eachobs__tune *t;
	unsigned self;
	eachobs__cond_fn stop;
	const void *arg;
};

static bool may_leave(const void *arg)
{
	const struct park *p = arg;

	return p->self < atomic_load_explicit(&p->t->active,
					      memory_order_acquire) ||
	       atomic_load_explicit(&p->t->done, memory_order_acquire) ||
	       p->stop(p->arg);
}

bool eachobs__tune_park(struct eachobs__tune *t, unsigned self,
			eachobs__cond_fn stop, const void *arg)
{
	struct park p = {t, self, stop, arg};

	if (self < eachobs__tune_active(t))
		return true;
	/* Parked loaders sleep at once: no spins, they may park for long. */
	eachobs__event_wait_timed(&t->ev_park, may_leave, &p, 0);
	return !stop(arg);
}

void eachobs__tune_wake(struct eachobs__tune *t)
{
	eachobs__event_notify(&t->ev_park, INT_MAX);
}

void eachobs__tune_finish(struct eachobs__tune *t)
{
	if (atomic_load_explicit(&t->done, memory_order_relaxed))
		return;
	atomic_store_explicit(&t->done, true, memory_order_release);
	eachobs__event_notify(&t->ev_park, INT_MAX);
}
