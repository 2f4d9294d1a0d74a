/*
 * eachobs_interrupt: a blocked eachobs_next / eachobs_next_batch returns
 * -EINTR (or the next call does), nothing is lost, -EINTR is not sticky,
 * and a real SIGINT handler can use it. Checked over every executor,
 * ordered and not, single observations and batches, with and without
 * hold, on a pool and not.
 */
#define _GNU_SOURCE
#include "eachobs.h"
#include "helpers.h"

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

TestSuite(interrupt, .init = deadline, .timeout = 60);

struct gated {
	size_t n;
	unsigned sleep_us;
	/* While closed, getobs of every index at or above gate_from waits
	 * for it to open (polling eachobs_cancelled, so close stays prompt). */
	size_t gate_from;
	atomic_bool open;
	atomic_uint *calls;
};

static size_t gated_numobs(void *ctx)
{
	return ((struct gated *)ctx)->n;
}

static int gated_getobs(void *ctx, size_t idx, void *obs)
{
	struct gated *g = ctx;

	atomic_fetch_add(&g->calls[idx], 1);
	memcpy(obs, &idx, sizeof(idx));
	while (idx >= g->gate_from && !atomic_load(&g->open)) {
		if (eachobs_cancelled())
			return -ECANCELED;
		sleep_us(200);
	}
	sleep_us(g->sleep_us);
	return 0;
}

/* Every point of mode m in the option space (helpers.h), batch sizes 0,
 * 8. */
static void for_each_point(const struct mode *m,
			   void (*f)(const struct point *, eachobs_pool *))
{
	static const size_t sizes[] = { 0, 8 };

	cr_assert_eq(points_of_mode(m, sizes, sizeof(sizes) / sizeof(sizes[0]),
				    3, f), 0, "no pool");
}

static eachobs_iter *start(struct gated *g, const struct point *p,
			   eachobs_pool *pool)
{
	eachobs_dataset data = { g, gated_numobs, gated_getobs,
				 sizeof(size_t) };
	eachobs_options o = { .nthreads = 3, .executor = p->ex,
			      .ordered = p->ordered, .batchsize = p->batchsize,
			      .hold = p->hold, .pool = p->pool ? pool : NULL };
	eachobs_iter *it;

	g->calls = calloc(g->n, sizeof(*g->calls));
	cr_assert_not_null(g->calls);
	cr_assert_eq(eachobs_parallel(&it, &data, &o), 0);
	return it;
}

/* The consumer's view: every index it was given, each once, in order
 * when ordered. */
struct seen {
	unsigned char *got;
	size_t count;
	size_t last;
	bool ordered;
	char err[160];
};

static void see(struct seen *s, size_t idx)
{
	if (s->err[0])
		return;
	if (s->got[idx]++)
		snprintf(s->err, sizeof(s->err), "index %zu yielded twice", idx);
	else if (s->ordered && s->count && idx != s->last + 1)
		snprintf(s->err, sizeof(s->err), "index %zu after %zu", idx,
			 s->last);
	s->last = idx;
	s->count++;
}

/* One call: 1 (and every index seen), 0, or a code. */
static int next_item(eachobs_iter *it, const struct point *p, struct seen *s)
{
	int rc;

	if (p->batchsize) {
		eachobs_batch b;
		rc = eachobs_next_batch(it, &b);
		if (rc != 1)
			return rc;
		for (size_t j = 0; j < b.count; j++) {
			if (*(const size_t *)((const char *)b.data +
					      j * sizeof(size_t)) != b.idx[j])
				snprintf(s->err, sizeof(s->err),
					 "batch entry %zu is not its index", j);
			see(s, b.idx[j]);
		}
		if (p->hold)
			cr_assert_eq(eachobs_release(it, b.data), 0);
		return 1;
	}
	const void *obs;
	size_t idx;
	rc = eachobs_next(it, &obs, &idx);
	if (rc != 1)
		return rc;
	if (*(const size_t *)obs != idx)
		snprintf(s->err, sizeof(s->err), "slot of %zu holds %zu", idx,
			 *(const size_t *)obs);
	see(s, idx);
	if (p->hold)
		cr_assert_eq(eachobs_release(it, obs), 0);
	return 1;
}

static void finish(eachobs_iter *it, struct gated *g, struct seen *s,
		   const char *what)
{
	eachobs_close(it);
	cr_assert_eq(s->err[0], 0, "%s: %s", what, s->err);
	cr_assert_eq(s->count, g->n, "%s: %zu of %zu yielded", what, s->count,
		     g->n);
	for (size_t i = 0; i < g->n; i++)
		cr_assert_eq(g->calls[i], 1, "%s: getobs(%zu) ran %u times",
			     what, i, g->calls[i]);
	free(s->got);
	free(g->calls);
}

/* Interrupts before a call: that call returns -EINTR once, whatever the
 * number of interrupts, and the next goes on; at the end too. */
static void before_a_call(const struct point *p, eachobs_pool *pool)
{
	struct gated g = { .n = 64, .gate_from = SIZE_MAX };
	struct seen s = { .got = calloc(64, 1),
			  .ordered = p->ordered || p->ex == EACHOBS_SERIAL };
	char what[96];
	int rc;

	point_name(p, what, sizeof(what));
	eachobs_iter *it = start(&g, p, pool);
	cr_assert_eq(eachobs_interrupt(it), 0);
	cr_assert_eq(next_item(it, p, &s), -EINTR, "%s: first call", what);
	cr_assert_eq(next_item(it, p, &s), 1, "%s: after -EINTR", what);
	cr_assert_eq(eachobs_interrupt(it), 0);
	cr_assert_eq(eachobs_interrupt(it), 0);
	cr_assert_eq(next_item(it, p, &s), -EINTR, "%s: two interrupts", what);
	while ((rc = next_item(it, p, &s)) == 1)
		;
	cr_assert_eq(rc, 0, "%s: ended with %d", what, rc);
	cr_assert_eq(eachobs_interrupt(it), 0);
	cr_assert_eq(next_item(it, p, &s), -EINTR, "%s: at the end", what);
	cr_assert_eq(next_item(it, p, &s), 0, "%s: end after -EINTR", what);
	finish(it, &g, &s, what);
}

ParameterizedTestParameters(interrupt,
			    is_answered_by_the_next_call_once_and_not_sticky)
{
	return mode_params();
}

ParameterizedTest(const struct mode *m, interrupt,
		  is_answered_by_the_next_call_once_and_not_sticky)
{
	for_each_point(m, before_a_call);
}

/*
 * The consumer blocks on an item that cannot be ready (its getobs waits
 * for a gate); another thread interrupts it. Without a thread of its own
 * in getobs (BACKGROUND) the call must return -EINTR while the gate is
 * still closed; under THREADED and SERIAL it may be inside that getobs
 * itself, so the interrupter opens the gate once it has waited long
 * enough, and the call returns -EINTR when that getobs returns. Then the
 * iteration goes on to its end with nothing lost.
 */
struct interrupter {
	eachobs_iter *it;
	struct gated *g;
	double wait_s; /* how long to leave the gate closed at most */
	atomic_bool answered;
	bool answered_while_closed;
};

static void *interrupt_then_open(void *arg)
{
	struct interrupter *x = arg;

	eachobs_interrupt(x->it);
	/* A deadline, not synchronization: the outcome is checked either
	 * way. */
	for (double t0 = now_s(); !atomic_load(&x->answered) &&
				  now_s() - t0 < x->wait_s;)
		sleep_us(200);
	x->answered_while_closed = atomic_load(&x->answered);
	atomic_store(&x->g->open, true);
	return NULL;
}

static void while_blocked(const struct point *p, eachobs_pool *pool)
{
	size_t bs = p->batchsize ? p->batchsize : 1;
	struct gated g = { .n = 16 * bs, .gate_from = 0 };
	struct seen s = { .got = calloc(16 * bs, 1),
			  .ordered = p->ordered || p->ex == EACHOBS_SERIAL };
	char what[96];
	pthread_t t;
	int rc;

	point_name(p, what, sizeof(what));
	eachobs_iter *it = start(&g, p, pool);
	/* BACKGROUND answers at once; the others only once the gate opens,
	 * so waiting long for them only makes the test slow. */
	struct interrupter x = { it, &g,
				 p->ex == EACHOBS_BACKGROUND ? 5.0 : 0.1,
				 false, false };
	cr_assert_eq(pthread_create(&t, NULL, interrupt_then_open, &x), 0);
	rc = next_item(it, p, &s);
	atomic_store(&x.answered, true);
	pthread_join(t, NULL);
	cr_assert_eq(rc, -EINTR, "%s: blocked call returned %d", what, rc);
	if (p->ex == EACHOBS_BACKGROUND)
		cr_assert(x.answered_while_closed,
			  "%s: -EINTR only once the blocking getobs ended",
			  what);
	while ((rc = next_item(it, p, &s)) == 1)
		;
	cr_assert_eq(rc, 0, "%s: ended with %d", what, rc);
	finish(it, &g, &s, what);
}

ParameterizedTestParameters(interrupt,
			    wakes_a_blocked_consumer_and_the_iteration_goes_on)
{
	return mode_params();
}

ParameterizedTest(const struct mode *m, interrupt,
		  wakes_a_blocked_consumer_and_the_iteration_goes_on)
{
	for_each_point(m, while_blocked);
}

/* Interrupts at random moments of a whole run: every index exactly once,
 * in order where promised, whatever the calls they cut short. */
struct storm {
	eachobs_iter *it;
	atomic_bool done;
	unsigned sent;
};

static void *interrupt_often(void *arg)
{
	struct storm *x = arg;

	while (!atomic_load(&x->done)) {
		eachobs_interrupt(x->it);
		x->sent++;
		sleep_us(300);
	}
	return NULL;
}

static void during_a_run(const struct point *p, eachobs_pool *pool)
{
	size_t bs = p->batchsize ? p->batchsize : 1;
	struct gated g = { .n = 40 * bs, .sleep_us = 100,
			   .gate_from = SIZE_MAX };
	struct seen s = { .got = calloc(40 * bs, 1),
			  .ordered = p->ordered || p->ex == EACHOBS_SERIAL };
	char what[96];
	unsigned eintr = 0;
	pthread_t t;
	int rc;

	point_name(p, what, sizeof(what));
	eachobs_iter *it = start(&g, p, pool);
	/* One interrupt for certain, whatever the scheduling (under valgrind
	 * the interrupter may not run before the end); the rest at random. */
	struct storm x = { it, false, 1 };
	cr_assert_eq(eachobs_interrupt(it), 0);
	cr_assert_eq(pthread_create(&t, NULL, interrupt_often, &x), 0);
	while ((rc = next_item(it, p, &s)) != 0) {
		if (rc == -EINTR)
			eintr++;
		else
			cr_assert_eq(rc, 1, "%s: returned %d", what, rc);
	}
	atomic_store(&x.done, true);
	pthread_join(t, NULL);
	cr_assert_gt(eintr, 0, "%s: no -EINTR in %u interrupts", what, x.sent);
	cr_assert_leq(eintr, x.sent);
	finish(it, &g, &s, what);
}

ParameterizedTestParameters(interrupt, loses_and_repeats_nothing_during_a_run)
{
	return mode_params();
}

ParameterizedTest(const struct mode *m, interrupt,
		  loses_and_repeats_nothing_during_a_run)
{
	for_each_point(m, during_a_run);
}

Test(interrupt, rejects_null)
{
	cr_assert_eq(eachobs_interrupt(NULL), -EINVAL);
}

/*
 * The Ctrl-C recipe, for real: test/sigint_child.c, a program of its own
 * (a fresh process image, so that memcheck sees only its own memory),
 * installs a SIGINT handler that calls eachobs_interrupt and blocks in
 * eachobs_next_batch on its first batch; this test sends SIGINT as soon as
 * the child says it is about to call. The child exits 0 when the call
 * returned -EINTR before any batch and the handler ran on the consumer's
 * own thread.
 */
ParameterizedTestParameters(interrupt,
			    a_sigint_handler_interrupts_a_blocked_consumer)
{
	return worker_mode_params();
}

ParameterizedTest(const struct mode *m, interrupt,
		  a_sigint_handler_interrupts_a_blocked_consumer)
{
	int fds[2];
	char c;
	int status;

	cr_assert_eq(pipe(fds), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		char fd[16];
		close(fds[0]);
		snprintf(fd, sizeof(fd), "%d", fds[1]);
		execl(SIGINT_CHILD, SIGINT_CHILD,
		      m->executor == EACHOBS_THREADED ? "threaded" : "background",
		      m->ordered ? "ordered" : "unordered", fd, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	cr_assert_eq(read(fds[0], &c, 1), 1, "child not ready");
	close(fds[0]);
	cr_assert_eq(kill(pid, SIGINT), 0);
	/* A deadline, not synchronization. */
	double t0 = now_s();
	pid_t w;
	while ((w = waitpid(pid, &status, WNOHANG)) == 0 &&
	       now_s() - t0 < 10.0)
		sleep_us(1000);
	if (w == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
	}
	cr_assert_eq(w, pid, "%s: child still blocked 10 s after SIGINT",
		     mode_name(m));
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		  "%s: child status %d", mode_name(m),
		  WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status));
}

/*
 * A real SIGINT while the consumer's own getobs (SERIAL) waits in a system
 * call: test/eintr_child.c, which checks what the consumer's calls return
 * and exits 0 when they are right. This side sends SIGINT once the child
 * is inside getobs and, for `restart`, then writes the byte its read
 * waits for.
 */
static void run_eintr_child(const char *scenario)
{
	int ready[2], data[2];
	char c;
	int status;

	cr_assert_eq(pipe(ready), 0);
	cr_assert_eq(pipe(data), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		char r[16], d[16];
		close(ready[0]);
		close(data[1]);
		snprintf(r, sizeof(r), "%d", ready[1]);
		snprintf(d, sizeof(d), "%d", data[0]);
		execl(EINTR_CHILD, EINTR_CHILD, scenario, r, d, (char *)NULL);
		_exit(127);
	}
	close(ready[1]);
	close(data[0]);
	cr_assert_eq(read(ready[0], &c, 1), 1, "%s: child not ready", scenario);
	cr_assert_eq(kill(pid, SIGINT), 0);
	if (strcmp(scenario, "restart") == 0)
		cr_assert_eq(write(data[1], "d", 1), 1);
	/* A deadline, not synchronization. */
	double t0 = now_s();
	pid_t w;
	while ((w = waitpid(pid, &status, WNOHANG)) == 0 && now_s() - t0 < 10.0)
		sleep_us(1000);
	if (w == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
	}
	close(ready[0]);
	close(data[1]);
	cr_assert_eq(w, pid, "%s: child still running 10 s after SIGINT",
		     scenario);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		  "%s: child status %d (its stderr says why)", scenario,
		  WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status));
}

/* A getobs that returns -EINTR because a signal cut its system call short
 * is a getobs failure, -ERESTART, sticky with its index: never the
 * interrupt's -EINTR, on which a loop that calls again would spin. */
Test(interrupt, a_getobs_cut_short_by_a_signal_is_not_an_interrupt)
{
	run_eintr_child("getobs");
}

/* The handler calls eachobs_interrupt and the signal cuts the consumer's
 * getobs short: first the interrupt (-EINTR, *idx untouched), then the
 * getobs's failure (-ERESTART at its index), told apart by code. */
Test(interrupt, an_interrupt_and_a_getobs_cut_short_are_told_apart)
{
	run_eintr_child("both");
}

/* The guide's handler, installed with SA_RESTART: the consumer's getobs
 * is not cut short, the interrupt comes as -EINTR and nothing is lost. */
Test(interrupt, the_guides_handler_loses_nothing_of_a_getobs_it_interrupts)
{
	run_eintr_child("restart");
}

/* The checking consumer (helpers.c) takes the interrupt's -EINTR, which
 * leaves *idx untouched, as the header says, and the run then goes on to
 * every index once. */
ParameterizedTestParameters(interrupt, the_checking_consumer_takes_an_interrupt)
{
	return mode_params();
}

ParameterizedTest(const struct mode *m, interrupt,
		  the_checking_consumer_takes_an_interrupt)
{
	eachobs_options o = { .executor = m->executor, .ordered = m->ordered,
			      .nthreads = 2 };
	struct td td;
	struct cons c;
	eachobs_iter *it;
	int rc;

	td_init(&td, 200, 8, 200);
	eachobs_dataset data = td_dataset(&td);
	cr_assert_eq(eachobs_parallel(&it, &data, &o), 0);
	cons_init(&c, it, &td, o.ordered || o.executor == EACHOBS_SERIAL);
	cr_assert_eq(cons_next(&c, NULL, NULL), 1);
	cr_assert_eq(eachobs_interrupt(it), 0);
	cr_assert_eq(cons_next(&c, NULL, NULL), -EINTR, "%s", mode_name(m));
	cr_assert(c.err[0] == 0, "%s: %s", mode_name(m), c.err);
	while ((rc = cons_next(&c, NULL, NULL)) == 1)
		;
	cr_assert_eq(rc, 0);
	cr_assert(c.err[0] == 0, "%s: %s", mode_name(m), c.err);
	cr_assert(cons_all_seen(&c), "%s: an index was never yielded",
		  mode_name(m));
	cons_close(&c);
	cons_fini(&c);
	td_fini(&td);
}
