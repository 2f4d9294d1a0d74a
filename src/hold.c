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
 * buffers as it yields (four pointers, no copy) and lets go of the slot at
 * once; eachobs_release returns the buffer to the spares. The window is then
 * buffersize + workers slots, and the memory buffersize + workers + K units
 * either way.
 */
#define _GNU_SOURCE
#include "hold.h"
#include "error.h"

#include <errno.h>

size_t eachobs__hold_spares(bool swap, unsigned hold)
{
	return swap && hold ? hold : 0;
}

int eachobs__hold_init(struct eachobs__hold *h, unsigned hold, bool swap,
		       void (*give_back)(eachobs_iter *, struct eachobs__slot *),
		       eachobs_iter *owner, struct eachobs__arena *arena)
{
	h->automatic = hold == 0;
	h->swap = swap && hold > 0;
	h->give_back = give_back;
	h->owner = owner;
	h->arena = arena;
	h->max = hold ? hold : 1;
	h->items = eachobs__calloc(h->max, sizeof(*h->items));
	if (!h->items)
		return eachobs__fail(-ENOMEM,
				     "out of memory for the list of %u held "
				     "items (hold %u)",
				     h->max, hold);
	if (h->swap) {
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

void eachobs__hold_fini(struct eachobs__hold *h)
{
	eachobs__free(h->items);
	eachobs__free(h->spares);
}

bool eachobs__hold_has(const struct eachobs__hold *h,
		       const struct eachobs__slot *slot)
{
	for (unsigned i = 0; i < h->n; i++)
		if (h->items[i].slot == slot)
			return true;
	return false;
}

const struct eachobs__buf *eachobs__hold_take(struct eachobs__hold *h,
					      struct eachobs__slot *slot)
{
	struct eachobs__held *item = &h->items[h->n++];

	item->b = slot->b;
	item->slot = slot;
	item->tensor = false;
	if (h->swap) {
		/* The slot gets a spare; it is free for the unit W ahead as
		 * soon as the give-back is seen. */
		slot->b = h->spares[--h->nspares];
		item->slot = NULL;
		h->give_back(h->owner, slot);
	}
	return &item->b;
}

static void drop(struct eachobs__hold *h, unsigned i)
{
	struct eachobs__held *item = &h->items[i];

	if (item->slot)
		h->give_back(h->owner, item->slot);
	else
		h->spares[h->nspares++] = item->b;
	/* The last one in its place: automatic hold drops its only item per
	 * observation, and copying an item onto itself cost as much as the
	 * rest of the drop. */
	if (i != --h->n)
		*item = h->items[h->n];
}

const struct eachobs__buf *eachobs__hold_find(const struct eachobs__hold *h,
					      const void *data)
{
	for (unsigned i = 0; i < h->n; i++)
		if (h->items[i].b.data == data)
			return &h->items[i].b;
	return NULL;
}

int eachobs__hold_release(struct eachobs__hold *h, const void *data)
{
	eachobs__hold_drain(h);
	for (unsigned i = 0; i < h->n; i++) {
		if (h->items[i].b.data != data)
			continue;
		if (h->items[i].tensor)
			return eachobs__fail(-EINVAL,
					     "eachobs_release: item %p belongs "
					     "to a DLPack tensor, whose deleter "
					     "releases it", data);
		drop(h, i);
		return 0;
	}
	return eachobs__fail(-EINVAL,
			     "eachobs_release: pointer %p is not a held item "
			     "(never yielded, or released already)",
			     data);
}

int eachobs__hold_lend(struct eachobs__hold *h, const void *data,
		       struct eachobs__buf *b)
{
	eachobs__hold_drain(h);
	for (unsigned i = 0; !h->automatic && i < h->n; i++) {
		struct eachobs__held *item = &h->items[i];
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
			     h->automatic ? 0 : h->max,
			     h->automatic ? ": set hold >= 1" : "");
}

/* An item a deleter gave back: release it as eachobs_release would. */
static void take_back(void *arg, const void *data)
{
	struct eachobs__hold *h = arg;

	for (unsigned i = 0; i < h->n; i++)
		if (h->items[i].b.data == data) {
			drop(h, i);
			return;
		}
}

/* Only hold >= 1 can lend items to tensors: the common hold = 0 skips
 * even the arena's flag. */
void eachobs__hold_drain(struct eachobs__hold *h)
{
	if (!h->automatic && h->arena)
		eachobs__arena_drain(h->arena, take_back, h);
}

void eachobs__hold_release_auto(struct eachobs__hold *h)
{
	if (h->automatic && h->n)
		drop(h, 0);
}
