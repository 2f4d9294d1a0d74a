/*
 * The SERIAL executor: no threads; the consumer loads each unit itself,
 * in order, into a slot it does not hold.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>

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
	struct eachobs__slot *slot = it->serial_open;

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
		eachobs__open(&it->load, slot, it->yielded++);
		it->serial_open = slot;
	}
	while (!eachobs__fill_step(&it->load, slot)) {
		if (eachobs__failed(it)) { /* STOP: the rest is not loaded */
			it->serial_open = NULL;
			return EACHOBS__TAKE_FAILED;
		}
		if (eachobs__take_interrupt(it))
			return -EINTR;
	}
	it->serial_open = NULL;
	*out = slot;
	return 1;
}

/* The consumer owns every slot: nothing to give back, nobody to wake. */
static void give_back(void *it, struct eachobs__slot *slot)
{
	(void)it;
	(void)slot;
}

static void fail(void *arg, size_t u)
{
	eachobs_iter *it = arg;

	(void)u;
	eachobs__loader_halt(&it->load, 0);
	atomic_store_explicit(&it->stop, true, memory_order_release);
}

static void wake_consumer(eachobs_iter *it)
{
	(void)it;
}

static size_t max_waiting(const eachobs_iter *it)
{
	(void)it;
	return 0;
}

const struct eachobs__mode eachobs__serial_mode = {
	.worker = NULL,
	.take = take,
	.give_back = give_back,
	.fail = fail,
	.wake_consumer = wake_consumer,
	.max_waiting = max_waiting,
};
