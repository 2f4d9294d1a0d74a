/*
 * The SERIAL executor: no threads; the consumer loads each unit itself,
 * in order, into a slot it does not hold.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <string.h>

/* The mode's state (it->ms). */
struct eachobs__serial {
	/* Batched: the unit being filled, between calls that an interrupt
	 * ended (`yielded` counts it once it is complete). */
	struct eachobs__slot *open;
};

static struct eachobs__serial *S(const eachobs_iter *it)
{
	return it->ms;
}

static int init(eachobs_iter *it, unsigned workers)
{
	struct eachobs__serial *s = eachobs__calloc(1, sizeof(*s));

	(void)workers;
	if (!s)
		return eachobs__fail(-ENOMEM, "out of memory for the serial "
				     "mode's state");
	it->ms = s;
	return 0;
}

static void fini(eachobs_iter *it)
{
	eachobs__free(it->ms);
	it->ms = NULL;
}

static struct eachobs__slot *serial_slot(eachobs_iter *it)
{
	for (size_t i = 0; i < it->nslots; i++)
		if (!eachobs__hold_has(&it->hold, &it->slots[i]))
			return &it->slots[i];
	return NULL; /* not reached: the caller checked hold_full */
}

/* A batch of slow observations is loaded a claim at a time, so that an
 * interrupt ends the call after the getobs running when it came; the batch
 * goes on next call. */
static int take(eachobs_iter *it, struct eachobs__slot **out)
{
	struct eachobs__serial *s = S(it);
	struct eachobs__slot *slot = s->open;

	if (!slot) {
		if (it->yielded >= it->nunits)
			return 0;
		slot = serial_slot(it);
		/* Cheap entries: the whole batch at once, timed once. */
		if (!it->batchsize || eachobs__getobs_cheap(&it->load)) {
			eachobs__fill(&it->load, slot, it->yielded++);
			*out = slot;
			return 1;
		}
		eachobs__open(&it->load, slot, it->yielded);
		s->open = slot;
	}
	while (!eachobs__fill_step(&it->load, slot)) {
		if (eachobs__failed(it)) { /* STOP: the rest is not loaded */
			s->open = NULL;
			it->yielded++;
			return EACHOBS__TAKE_FAILED;
		}
		if (eachobs__take_interrupt(it))
			return -EINTR;
	}
	s->open = NULL;
	it->yielded++;
	*out = slot;
	return 1;
}

/* The consumer owns every slot: nothing to give back, nobody to wake (a
 * failure halted the loading: the consumer finds it after its getobs). */
static void give_back(eachobs_iter *it, struct eachobs__slot *slot)
{
	(void)it;
	(void)slot;
}

static void fail(eachobs_iter *it, size_t u)
{
	(void)it;
	(void)u;
}

static void wake(eachobs_iter *it)
{
	(void)it;
}

static size_t max_waiting(const eachobs_iter *it)
{
	(void)it;
	return 0;
}

const struct eachobs__mode eachobs__serial_mode = {
	.init = init,
	.fini = fini,
	.worker = NULL,
	.take = take,
	.give_back = give_back,
	.fail = fail,
	.wake = wake,
	.max_waiting = max_waiting,
};
