/*
 * The GIL on loader threads: a thread state each keeps (taking the GIL
 * costs no more than that), and the consumer's turn first when it comes
 * back from the library. Both used only by a Python getobs and the
 * consumer of a Loader (module.c).
 */
#ifndef EACHOBS_PY_GIL_H
#define EACHOBS_PY_GIL_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

/* Once, at module init: 0, or -1 with a Python exception. */
int gil_init(void);
/* Take the GIL on a loader thread (any thread, GIL not held): what
 * gil_leave needs back. */
int gil_enter(void);
void gil_leave(int g);

/*
 * The GIL goes to the consumer first. A loader thread drops the GIL after
 * each sample and asks for it again at once; CPython hands it to a waiting
 * thread only after its switch interval (5 ms), so a consumer coming back
 * from the library would wait that long for each batch while loaders
 * take turns. So the consumer says it wants the GIL (`wanted`)
 * while it takes it, and a loader thread about to take it waits until the
 * consumer has it. The flag is cleared before the waiters are counted,
 * and a waiter counts itself before it reads the flag: one of the two
 * sees the other.
 */
struct gil_gate {
	atomic_bool wanted;   /* the consumer is taking the GIL */
	atomic_uint waiters;
	pthread_mutex_t lock;
	pthread_cond_t free;
};

void gil_gate_init(struct gil_gate *g);
void gil_gate_fini(struct gil_gate *g);
/* A loader thread about to take the GIL: wait while the consumer takes it. */
void gil_gate_pass(struct gil_gate *g);
/* The consumer, GIL released, about to take it; and once it has it. */
static inline void gil_gate_want(struct gil_gate *g)
{
	atomic_store(&g->wanted, true);
}
void gil_gate_got(struct gil_gate *g);

#endif /* EACHOBS_PY_GIL_H */
