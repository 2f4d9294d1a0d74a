/*
 * The GIL on loader threads (gil.h).
 */
#include "gil.h"

#include <stdlib.h>

/*
 * A Python thread state for each loader thread. PyGILState_Ensure on a
 * thread without one makes one, and the matching Release destroys it: a
 * few microseconds per sample, more than a small __getitem__ costs. So a
 * thread of the library keeps the one its first getobs made (its `outer`
 * Ensure is never released while it loads) and takes the GIL with it;
 * the thread's exit destroys it (thread_exit, a pthread key destructor:
 * pool threads exit when their pool does, an iterator's at its close,
 * which waits with the GIL released). A thread that had a state of its
 * own (the consumer, under THREADED and SERIAL) uses Ensure and Release,
 * which then only take and drop the GIL.
 */
struct thread_py {
	PyGILState_STATE outer;
	PyThreadState *saved; /* NULL while this thread holds the GIL */
};

static pthread_key_t thread_py_key;
static _Thread_local struct thread_py *thread_py;

static int finalizing(void)
{
#if PY_VERSION_HEX >= 0x030D0000
	return Py_IsFinalizing();
#else
	return _Py_IsFinalizing();
#endif
}

static void thread_exit(void *p)
{
	struct thread_py *t = p;

	/* Not PyGILState_Release: the thread's exit may have cleared the key
	 * it finds the state by before this destructor runs. */
	if (t->saved && Py_IsInitialized() && !finalizing()) {
		PyEval_RestoreThread(t->saved);
		PyThreadState_Clear(t->saved);
		PyThreadState_DeleteCurrent(); /* and drops the GIL */
	}
	free(t);
}

/* PyGILState_STATE for the threads with their own state, or -1 for ours. */
int gil_enter(void)
{
	struct thread_py *t = thread_py;

	if (t) {
		PyEval_RestoreThread(t->saved);
		t->saved = NULL;
		return -1;
	}
	if (PyGILState_GetThisThreadState())
		return (int)PyGILState_Ensure();
	t = calloc(1, sizeof(*t));
	if (!t || pthread_setspecific(thread_py_key, t) != 0) {
		free(t);
		return (int)PyGILState_Ensure(); /* the slow way, still right */
	}
	t->outer = PyGILState_Ensure();
	thread_py = t;
	return -1;
}

void gil_leave(int g)
{
	if (g == -1)
		thread_py->saved = PyEval_SaveThread();
	else
		PyGILState_Release((PyGILState_STATE)g);
}

int gil_init(void)
{
	if (pthread_key_create(&thread_py_key, thread_exit) != 0) {
		PyErr_NoMemory();
		return -1;
	}
	return 0;
}

void gil_gate_init(struct gil_gate *g)
{
	pthread_mutex_init(&g->lock, NULL);
	pthread_cond_init(&g->free, NULL);
}

void gil_gate_fini(struct gil_gate *g)
{
	pthread_cond_destroy(&g->free);
	pthread_mutex_destroy(&g->lock);
}

void gil_gate_pass(struct gil_gate *g)
{
	if (!atomic_load(&g->wanted))
		return;
	pthread_mutex_lock(&g->lock);
	atomic_fetch_add(&g->waiters, 1);
	while (atomic_load(&g->wanted))
		pthread_cond_wait(&g->free, &g->lock);
	atomic_fetch_sub(&g->waiters, 1);
	pthread_mutex_unlock(&g->lock);
}

void gil_gate_got(struct gil_gate *g)
{
	atomic_store(&g->wanted, false);
	if (!atomic_load(&g->waiters))
		return;
	pthread_mutex_lock(&g->lock);
	pthread_cond_broadcast(&g->free);
	pthread_mutex_unlock(&g->lock);
}
