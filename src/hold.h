/*
 * What the consumer holds: the items it was yielded and that are still
 * valid, and where each goes when it is let go of.
 *
 * hold = 0: at most one, given back by the next call (automatic).
 * hold = K: up to K, each given back by a release, in any order, or by the
 * deleter of a DLPack tensor that took it over (through the arena).
 *
 * A held item is a slot kept from the loaders, unless the hold swaps: then
 * the slot is given back at once, and the consumer holds a spare buffer
 * that the slot's loaded buffer was exchanged for (hold.c says why the
 * ordered mode needs that). Knows nothing of iterators: slots go back
 * through the give-back function it was given. Consumer thread only.
 */
#ifndef EACHOBS_HOLD_H
#define EACHOBS_HOLD_H

#include "arena.h"
#include "eachobs.h"
#include "slot.h"

struct eachobs__held {
	struct eachobs__buf b;        /* as yielded */
	struct eachobs__slot *slot;   /* NULL when swapped out */
	bool tensor;                  /* a DLPack tensor owns it (dlpack.c) */
};

struct eachobs__hold {
	bool automatic;               /* hold = 0: the next call gives back */
	bool swap;                    /* yield spares, give slots back at once */
	unsigned max;                 /* K, or 1 when automatic */
	unsigned n;                   /* held now */
	struct eachobs__held *items;
	struct eachobs__buf *spares;  /* when swapping: free buffers */
	unsigned nspares;
	/* Where a slot goes back to the loaders: give_back(owner, slot);
	 * the owner is opaque here. */
	void (*give_back)(eachobs_iter *owner, struct eachobs__slot *slot);
	eachobs_iter *owner;
	/* Where tensor deleters give items back (NULL: nowhere). */
	struct eachobs__arena *arena;
};

/* Spare buffers a hold of `hold` needs: hold when it swaps, else 0. */
size_t eachobs__hold_spares(bool swap, unsigned hold);
/* Allocate the held list and, when swap and hold = K >= 1, K spare buffer
 * descriptors (h->spares) for the caller to point at memory. 0 or
 * -ENOMEM; eachobs__hold_fini either way. */
int eachobs__hold_init(struct eachobs__hold *h, unsigned hold, bool swap,
		       void (*give_back)(eachobs_iter *, struct eachobs__slot *),
		       eachobs_iter *owner, struct eachobs__arena *arena);
void eachobs__hold_fini(struct eachobs__hold *h);
/* Whether another item can be held (inline: the consumer asks before
 * every observation). */
static inline bool eachobs__hold_full(const struct eachobs__hold *h)
{
	return h->n == h->max;
}
/* Whether slot is held (not swapped out). */
bool eachobs__hold_has(const struct eachobs__hold *h,
		       const struct eachobs__slot *slot);
/* Hold the loaded slot (the caller checked hold_full): the buffer to
 * yield, valid until the item is let go of. */
const struct eachobs__buf *eachobs__hold_take(struct eachobs__hold *h,
					      struct eachobs__slot *slot);
/* The held item whose data is at data, or NULL. */
const struct eachobs__buf *eachobs__hold_find(const struct eachobs__hold *h,
					      const void *data);
/* eachobs_release: 0, or -EINVAL for a pointer that is not a held item or
 * that a tensor owns. */
int eachobs__hold_release(struct eachobs__hold *h, const void *data);
/* Hand the held item at data to a tensor: *b its buffer; -EINVAL when it
 * is not a held item or a tensor has it already. */
int eachobs__hold_lend(struct eachobs__hold *h, const void *data,
		       struct eachobs__buf *b);
/* Take in the items that tensor deleters gave back. */
void eachobs__hold_drain(struct eachobs__hold *h);
/* hold = 0: let go of the item the last call yielded. */
void eachobs__hold_release_auto(struct eachobs__hold *h);

#endif /* EACHOBS_HOLD_H */
