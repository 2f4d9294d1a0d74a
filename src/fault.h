/*
 * Test-only fault injection and allocation accounting.
 *
 * These functions are hidden (not part of the public API); the tests link a
 * static copy of the library to reach them. The counters are thread-local so
 * that a test arming a fault on its own thread does not disturb iterators
 * started on other threads.
 */
#ifndef EACHOBS_FAULT_H
#define EACHOBS_FAULT_H

/* Make the (k+1)-th library allocation from now on, on this thread, fail
 * (k = 0: the next one). k < 0 disarms. The allocation glibc makes for
 * the attributes of each thread the library creates counts as one. */
void eachobs__fault_alloc_after(long k);
/* The same for thread creation: the (k+1)-th pthread_create fails with
 * EAGAIN. k < 0 disarms. */
void eachobs__fault_thread_after(long k);
/* Library allocations not yet freed, over the whole process. */
long eachobs__alloc_live(void);

#endif
