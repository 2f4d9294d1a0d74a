/*
 * Allocation and thread creation, in one place so that tests can make each
 * of them fail in turn and count what is left allocated.
 *
 * The fault counters are thread-local: allocation and thread creation only
 * happen on the thread that calls eachobs_parallel, so a test arms faults
 * for its own calls without touching iterators that other threads start.
 */
#define _GNU_SOURCE
#include "internal.h"
#include "fault.h"

#include <errno.h>
#include <stdlib.h>

static _Thread_local long alloc_fault = -1;
static _Thread_local long thread_fault = -1;
static _Atomic long alloc_live;

void eachobs__fault_alloc_after(long k)
{
	alloc_fault = k;
}

void eachobs__fault_thread_after(long k)
{
	thread_fault = k;
}

long eachobs__alloc_live(void)
{
	return atomic_load(&alloc_live);
}

/* True when the armed fault fires now. */
static bool fault_fires(long *counter)
{
	if (*counter < 0)
		return false;
	return (*counter)-- == 0;
}

static void *count(void *p)
{
	if (p)
		atomic_fetch_add_explicit(&alloc_live, 1, memory_order_relaxed);
	return p;
}

void *eachobs__calloc(size_t nmemb, size_t size)
{
	if (fault_fires(&alloc_fault))
		return NULL;
	return count(calloc(nmemb, size));
}

void *eachobs__alloc_aligned(size_t size)
{
	void *p = NULL;

	if (fault_fires(&alloc_fault))
		return NULL;
	/* posix_memalign rejects nothing we pass: the alignment is a power of
	 * two multiple of sizeof(void *). */
	if (posix_memalign(&p, EACHOBS__CACHELINE, size ? size : 1) != 0)
		return NULL;
	return count(p);
}

void eachobs__free(void *p)
{
	if (!p)
		return;
	atomic_fetch_sub_explicit(&alloc_live, 1, memory_order_relaxed);
	free(p);
}

int eachobs__thread_create(pthread_t *t, size_t stack_size,
			   const cpu_set_t *cpus, void *(*fn)(void *),
			   void *arg)
{
	pthread_attr_t attr;
	int rc;

	if (fault_fires(&thread_fault))
		return EAGAIN;
	rc = pthread_attr_init(&attr);
	if (rc != 0)
		return rc;
	rc = pthread_attr_setstacksize(&attr, stack_size);
	if (rc == 0 && cpus)
		rc = pthread_attr_setaffinity_np(&attr, sizeof(*cpus), cpus);
	if (rc == 0)
		rc = pthread_create(t, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	return rc;
}
