/*
 * What the consumer holds: the items eachobs_next / eachobs_next_batch
 * yielded and that are still valid.
 *
 * hold = 0: at most one, given back by the next call (hold.automatic).
 * hold = K: up to K, each given back by eachobs_release, in any order.
 *
 * Unordered (and SERIAL), a held item is simply a slot kept out of the free
 * ring, so the slots are buffersize + workers + K. Ordered, a held slot
 * would block the reorder window: unit i + W goes into the slot of unit i,
 * and a consumer keeping an old item would stall the window for good. So
 * with hold = K the consumer swaps the loaded buffer for one of K spare
 * buffers as it yields (three pointers, no copy) and lets go of the slot at
 * once; eachobs_release returns the buffer to the spares. The window is then
 * buffersize + workers slots, and the memory buffersize + workers + K units
 * either way.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>

static bool swapping(const eachobs_iter *it)
{
	return it->ordered && !it->hold.automatic;
}

size_t eachobs__hold_spares(bool ordered, unsigned hold)
{
	return ordered && hold ? hold : 0;
}

int eachobs__hold_init(eachobs_iter *it, unsigned hold)
{
	struct eachobs__hold *h = &it->hold;

	h->automatic = hold == 0;
	h->max = hold ? hold : 1;
	h->items = eachobs__calloc(h->max, sizeof(*h->items));
	if (!h->items)
		return eachobs__fail(-ENOMEM,
				     "out of memory for the list of %u held "
				     "items (hold %u)",
				     h->max, hold);
	if (swapping(it)) {
		h->spares = eachobs__calloc(h->max, sizeof(*h->spares));
		if (!h->spares)
			return eachobs__fail(-ENOMEM,
					     "out of memory for hold %u spare "
					     "buffers",
					     hold);
		h->nspares = h->max; /* the caller points them at memory */
	}
	return 0;
}

void eachobs__hold_fini(eachobs_iter *it)
{
	eachobs__free(it->hold.items);
	eachobs__free(it->hold.spares);
}

void eachobs__give_back(eachobs_iter *it, struct eachobs__slot *slot)
{
	it->mode->give_back(it, slot);
}

bool eachobs__hold_full(const eachobs_iter *it)
{
	return it->hold.n == it->hold.max;
}

bool eachobs__hold_has(const eachobs_iter *it, const struct eachobs__slot *slot)
{
	for (unsigned i = 0; i < it->hold.n; i++)
		if (it->hold.items[i].slot == slot)
			return true;
	return false;
}

const struct eachobs__buf *eachobs__hold_take(eachobs_iter *it,
					      struct eachobs__slot *slot)
{
	struct eachobs__hold *h = &it->hold;
	struct eachobs__held *item = &h->items[h->n++];

	item->b = slot->b;
	item->slot = slot;
	item->tensor = false;
	if (swapping(it)) {
		/* The slot gets a spare; it is free for the unit W ahead as
		 * soon as the release store below is seen. */
		slot->b = h->spares[--h->nspares];
		item->slot = NULL;
		it->mode->give_back(it, slot);
	}
	return &item->b;
}

static void drop(eachobs_iter *it, unsigned i)
{
	struct eachobs__hold *h = &it->hold;
	struct eachobs__held *item = &h->items[i];

	if (item->slot)
		eachobs__give_back(it, item->slot);
	else
		h->spares[h->nspares++] = item->b;
	*item = h->items[--h->n];
}

const struct eachobs__buf *eachobs__hold_find(const eachobs_iter *it,
					      const void *data)
{
	for (unsigned i = 0; i < it->hold.n; i++)
		if (it->hold.items[i].b.data == data)
			return &it->hold.items[i].b;
	return NULL;
}

int eachobs__hold_release(eachobs_iter *it, const void *data)
{
	eachobs__hold_drain(it);
	for (unsigned i = 0; i < it->hold.n; i++) {
		if (it->hold.items[i].b.data != data)
			continue;
		if (it->hold.items[i].tensor)
			return eachobs__fail(-EINVAL,
					     "eachobs_release: item %p belongs "
					     "to a DLPack tensor, whose deleter "
					     "releases it", data);
		drop(it, i);
		return 0;
	}
	return eachobs__fail(-EINVAL,
			     "eachobs_release: pointer %p is not a held item "
			     "(never yielded, or released already)",
			     data);
}

int eachobs__hold_lend(eachobs_iter *it, const void *data,
		       struct eachobs__buf *b)
{
	eachobs__hold_drain(it);
	for (unsigned i = 0; !it->hold.automatic && i < it->hold.n; i++) {
		struct eachobs__held *item = &it->hold.items[i];
		if (item->b.data != data)
			continue;
		if (item->tensor)
			return eachobs__fail(-EINVAL,
					     "eachobs_dlpack: item %p belongs "
					     "to a tensor already", data);
		item->tensor = true;
		*b = item->b;
		return 0;
	}
	return eachobs__fail(-EINVAL,
			     "eachobs_dlpack: %p is not an item this iterator "
			     "holds (hold %u)%s", data,
			     it->hold.automatic ? 0 : it->hold.max,
			     it->hold.automatic ? ": set hold >= 1" : "");
}

/* An item a deleter gave back: release it as eachobs_release would. */
static void take_back(void *arg, const void *data)
{
	eachobs_iter *it = arg;

	for (unsigned i = 0; i < it->hold.n; i++)
		if (it->hold.items[i].b.data == data) {
			drop(it, i);
			return;
		}
}

/* Only hold >= 1 can lend items to tensors: the common hold = 0 skips
 * even the arena's flag. */
void eachobs__hold_drain(eachobs_iter *it)
{
	if (!it->hold.automatic && it->arena)
		eachobs__arena_drain(it->arena, take_back, it);
}

void eachobs__hold_release_auto(eachobs_iter *it)
{
	if (it->hold.automatic && it->hold.n)
		drop(it, 0);
}
