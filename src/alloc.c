/*
 * Allocation and thread creation, in one place so that tests can make each
 * of them fail in turn and count what is left allocated.
 *
 * The fault counters are thread-local: allocation and thread creation only
 * happen on the thread that calls eachobs_parallel, so a test arms faults
 * for its own calls without touching iterators that other threads start.
 */
#define _GNU_SOURCE
#include "base.h"
#include "fault.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>

static EACHOBS__TLS long alloc_fault = -1;
static EACHOBS__TLS long thread_fault = -1;
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

/* Buffers this large go on huge pages where the kernel offers them. */
#define HUGE_PAGE ((size_t)2 << 20)
#define HUGE_FROM (4 * HUGE_PAGE)

void *eachobs__alloc_aligned(size_t size)
{
	size_t align = size >= HUGE_FROM ? HUGE_PAGE : EACHOBS__CACHELINE;
	void *p = NULL;

	if (fault_fires(&alloc_fault))
		return NULL;
	/* posix_memalign rejects nothing we pass: the alignment is a power of
	 * two multiple of sizeof(void *). */
	if (posix_memalign(&p, align, size ? size : 1) != 0)
		return NULL;
	/* Slots are touched for the first time by getobs, one page fault
	 * per 4 KiB, which held in-place batches of images far below memory
	 * speed (docs/design.md, Measurements). With transparent huge pages
	 * in madvise mode (the Debian default) this asks for 2 MiB pages:
	 * 512 times fewer faults. Advice only: where it fails nothing
	 * changes. */
	if (align == HUGE_PAGE)
		madvise(p, size, MADV_HUGEPAGE);
	return count(p);
}

void eachobs__free(void *p)
{
	if (!p)
		return;
	atomic_fetch_sub_explicit(&alloc_live, 1, memory_order_relaxed);
	free(p);
}

/*
 * Workers block asynchronous signals, as libuv's pool threads do, so that
 * a program's SIGINT handler (which may call eachobs_interrupt) runs on the
 * program's own threads, and a worker's getobs is not cut short by EINTR.
 * Synchronous signals stay open, so a crash in getobs still reaches a
 * sanitizer's or debugger's handler; SIGPROF, so profilers see workers.
 */
static int block_async_signals(pthread_attr_t *attr)
{
	static const int keep[] = { SIGSEGV, SIGBUS,  SIGFPE, SIGILL,
				    SIGTRAP, SIGABRT, SIGSYS, SIGPROF };
	sigset_t set;

	sigfillset(&set);
	for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
		sigdelset(&set, keep[i]);
	return pthread_attr_setsigmask_np(attr, &set);
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
	/* glibc allocates the signal mask (and the CPU set) of the
	 * attributes: an allocation fault here stands for that one, which
	 * fails with ENOMEM. */
	if (rc == 0)
		rc = fault_fires(&alloc_fault) ? ENOMEM
					       : block_async_signals(&attr);
	if (rc == 0 && cpus)
		rc = pthread_attr_setaffinity_np(&attr, sizeof(*cpus), cpus);
	if (rc == 0)
		rc = pthread_create(t, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	return rc;
}
