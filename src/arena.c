/*
 * The arena: the one block of memory that every item buffer lives in
 * (slots, batch buffers, hold spares), from the user's allocator or ours.
 *
 * It is reference-counted because it may outlive its iterator: a DLPack
 * tensor made from an item keeps the item's memory valid until the tensor
 * is deleted, possibly after eachobs_close (eachobs_dlpack.h). The iterator
 * holds one reference, each live tensor one more; the last unref gives the
 * block back with the same allocator, on whichever thread that is.
 */
#define _GNU_SOURCE
#include "arena.h"

#include <errno.h>

static void arena_free(struct eachobs__arena *ar)
{
	pthread_mutex_destroy(&ar->lock);
	eachobs__free(ar->returned);
	eachobs__free(ar);
}

int eachobs__arena_create(struct eachobs__arena **out,
			  const eachobs_allocator *a, size_t size,
			  unsigned nhold)
{
	struct eachobs__arena *ar = eachobs__calloc(1, sizeof(*ar));

	*out = NULL;
	if (!ar)
		return -ENOMEM;
	pthread_mutex_init(&ar->lock, NULL);
	ar->open = true;
	ar->returned = eachobs__calloc(nhold ? nhold : 1,
				       sizeof(*ar->returned));
	if (!ar->returned) {
		arena_free(ar);
		return -ENOMEM;
	}
	atomic_init(&ar->refs, 1);
	ar->size = size ? size : 1;
	if (a) {
		ar->a = *a;
		ar->user = true;
		ar->mem = a->alloc(a->ctx, ar->size, EACHOBS__CACHELINE);
		if (ar->mem && ((uintptr_t)ar->mem & (EACHOBS__CACHELINE - 1))) {
			/* The user's bug, but a clear one: say so. */
			a->free(a->ctx, ar->mem, ar->size);
			arena_free(ar);
			return -EINVAL;
		}
	} else {
		ar->mem = eachobs__alloc_aligned(ar->size);
	}
	if (!ar->mem) {
		arena_free(ar);
		return -ENOMEM;
	}
	*out = ar;
	return 0;
}

void eachobs__arena_ref(struct eachobs__arena *ar)
{
	atomic_fetch_add_explicit(&ar->refs, 1, memory_order_relaxed);
}

/* acq_rel: the last owner must see every write the others made to the
 * memory (and to the arena) before it frees them. */
void eachobs__arena_unref(struct eachobs__arena *ar)
{
	if (!ar || atomic_fetch_sub_explicit(&ar->refs, 1,
					     memory_order_acq_rel) != 1)
		return;
	if (ar->user)
		ar->a.free(ar->a.ctx, ar->mem, ar->size);
	else
		eachobs__free(ar->mem);
	arena_free(ar);
}

/* Each item goes back at most once and the consumer holds at most nhold,
 * so `returned` has room. */
void eachobs__arena_give_back(struct eachobs__arena *ar, const void *data)
{
	pthread_mutex_lock(&ar->lock);
	if (ar->open) {
		ar->returned[ar->nreturned++] = data;
		atomic_store_explicit(&ar->pending, true, memory_order_release);
	}
	pthread_mutex_unlock(&ar->lock);
}

void eachobs__arena_drain(struct eachobs__arena *ar,
			  void (*fn)(void *arg, const void *data), void *arg)
{
	if (!atomic_load_explicit(&ar->pending, memory_order_acquire))
		return;
	pthread_mutex_lock(&ar->lock);
	for (unsigned i = 0; i < ar->nreturned; i++)
		fn(arg, ar->returned[i]);
	ar->nreturned = 0;
	atomic_store_explicit(&ar->pending, false, memory_order_relaxed);
	pthread_mutex_unlock(&ar->lock);
}

void eachobs__arena_close(struct eachobs__arena *ar)
{
	if (!ar)
		return;
	pthread_mutex_lock(&ar->lock);
	ar->open = false;
	pthread_mutex_unlock(&ar->lock);
}
