/*
 * Nice values. Raising one's own needs no privilege; lowering it needs
 * CAP_SYS_NICE (in the user namespace the kernel checks) or an
 * RLIMIT_NICE that allows the value, which only the kernel can answer for
 * sure. So a short-lived thread asks it: it raises its own nice value to
 * the highest, then tries the one wanted, and tells whether that worked.
 * Nothing is changed on the calling thread.
 */
#define _GNU_SOURCE
#include "nice.h"
#include "base.h"
#include "error.h"

#include <errno.h>
#include <sys/resource.h>
#include <unistd.h>

int eachobs__own_nice(void)
{
	errno = 0;
	int n = getpriority(PRIO_PROCESS, (id_t)gettid());
	return errno ? 0 : n;
}

enum { NICE_MAX = 19 };
/* The asking thread only makes two system calls. */
#define PROBE_STACK ((size_t)256 << 10)

static void *try_lowering(void *arg)
{
	int *want = arg;
	id_t self = (id_t)gettid();

	*want = setpriority(PRIO_PROCESS, self, NICE_MAX) == 0 &&
		setpriority(PRIO_PROCESS, self, *want) == 0;
	return NULL;
}

int eachobs__may_lower_nice(int want)
{
	pthread_t t;
	int answer = want;
	int err = eachobs__thread_create(&t, PROBE_STACK, NULL, try_lowering,
					 &answer);

	if (err != 0)
		return eachobs__fail_thread(err, NULL,
					    "worker_nice probe thread", 0, 1,
					    PROBE_STACK, NULL);
	pthread_join(t, NULL);
	return answer;
}
