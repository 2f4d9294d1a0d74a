/*
 * The memory items live in: one block from the user's allocator or ours,
 * referenced by the iterator and by each live DLPack tensor, and the items
 * that tensor deleters give back on any thread for the consumer to take
 * in.
 */
#ifndef EACHOBS_ARENA_H
#define EACHOBS_ARENA_H

#include "base.h"

#include <pthread.h>

struct eachobs__arena {
	_Atomic unsigned refs;     /* the iterator, and each live tensor */
	bool user;                 /* from the user's allocator `a` */
	eachobs_allocator a;
	unsigned char *mem;        /* 64-byte aligned */
	size_t size;
	/* Items given back by tensor deleters, on any thread, for the
	 * consumer to take in (eachobs__arena_drain): under lock; `pending`
	 * lets the consumer skip the lock when there is nothing. `open` is
	 * false once the iterator closed: nobody takes them in any more. */
	pthread_mutex_t lock;
	bool open;
	const void **returned;     /* room for every item the consumer holds */
	unsigned nreturned;
	_Atomic bool pending;
};

/* One block of size bytes, from a (NULL: ours), with one reference and
 * room for nhold items given back: 0, -ENOMEM, or -EINVAL for a
 * misaligned block (given back at once). */
int eachobs__arena_create(struct eachobs__arena **out,
			  const eachobs_allocator *a, size_t size,
			  unsigned nhold);
void eachobs__arena_ref(struct eachobs__arena *ar);
/* Drop a reference (NULL: nothing); the last frees the block. */
void eachobs__arena_unref(struct eachobs__arena *ar);
/* Any thread: item data goes back to the consumer, if it is still open. */
void eachobs__arena_give_back(struct eachobs__arena *ar, const void *data);
/* The consumer: call fn(arg, data) for every item given back since. */
void eachobs__arena_drain(struct eachobs__arena *ar,
			  void (*fn)(void *arg, const void *data), void *arg);
/* The iterator closes: items given back from now on are not taken in. */
void eachobs__arena_close(struct eachobs__arena *ar);

#endif /* EACHOBS_ARENA_H */
