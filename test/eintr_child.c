/*
 * The child of the interrupt tests that send a real SIGINT while the
 * consumer's own getobs (EACHOBS_SERIAL) waits in a system call: a process
 * of its own, so that the signal reaches only it.
 *
 * getobs(0) writes one byte to READY, then waits on DATA: in ppoll, which
 * a handled signal always cuts short (SIGINT is blocked everywhere else,
 * so the signal cannot come before the wait), or, for `restart`, in read,
 * which SA_RESTART resumes until the parent writes a byte. It returns
 * -errno when the call fails, as examples/files.c does. The other indices
 * load at once.
 *
 *   getobs   the handler does nothing: the consumer must see its getobs's
 *            failure as -ERESTART, sticky, with *idx = 0; never -EINTR.
 *   both     the handler calls eachobs_interrupt: the first call returns
 *            -EINTR with *idx untouched (the interrupt), the next ones
 *            -ERESTART with *idx = 0 (the getobs); no -EINTR after that.
 *   restart  the guide's recipe (SA_RESTART, eachobs_interrupt): -EINTR,
 *            then every index once, index 0 first.
 *
 * usage: eintr_child getobs|both|restart READY DATA
 * Exit status: 0 when the calls returned as above; 2 on a bad command
 * line; 10 and up otherwise (what went wrong is printed on stderr).
 */
#define _GNU_SOURCE
#include "eachobs.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N 8
#define UNTOUCHED ((size_t)0x5eed)

static eachobs_iter *_Atomic running;
static bool interrupting;
static int ready_fd, data_fd;
static bool restarting;
static sigset_t unblocked; /* the mask with SIGINT open */

static void on_sigint(int sig)
{
	(void)sig;
	eachobs_iter *it = atomic_load(&running);
	if (interrupting && it)
		eachobs_interrupt(it);
}

static size_t numobs(void *ctx)
{
	(void)ctx;
	return N;
}

/* Wait for the signal inside a system call; -errno when it fails. */
static int wait_in_system_call(void)
{
	char c;

	if (write(ready_fd, "r", 1) != 1)
		return -EIO;
	if (restarting) {
		/* SIGINT may be handled right here, before read: read then
		 * waits for the parent's byte, as it does after a restart. */
		pthread_sigmask(SIG_SETMASK, &unblocked, NULL);
		ssize_t r = read(data_fd, &c, 1);
		return r == 1 ? 0 : r < 0 ? -errno : -EIO;
	}
	struct pollfd p = { .fd = data_fd, .events = POLLIN };
	return ppoll(&p, 1, NULL, &unblocked) < 0 ? -errno : -EIO;
}

static int getobs(void *ctx, size_t idx, void *obs)
{
	(void)ctx;
	memcpy(obs, &idx, sizeof(idx));
	return idx == 0 ? wait_in_system_call() : 0;
}

static int next(eachobs_iter *it, size_t *idx)
{
	*idx = UNTOUCHED;
	return eachobs_next(it, NULL, idx);
}

static int fail(int status, const char *what, int rc, size_t idx)
{
	fprintf(stderr, "eintr_child: %s (returned %d, %s; *idx %s%zu)\n",
		what, rc, eachobs_strerror(rc),
		idx == UNTOUCHED ? "untouched " : "= ",
		idx == UNTOUCHED ? (size_t)0 : idx);
	return status;
}

/* getobs and both: the getobs's failure, -ERESTART for index 0, sticky. */
static int expect_restart(eachobs_iter *it)
{
	size_t idx;

	for (int k = 0; k < 3; k++) {
		int rc = next(it, &idx);
		if (rc != -ERESTART || idx != 0)
			return fail(20 + k, "a getobs cut short by a signal is "
				    "not -ERESTART at index 0", rc, idx);
	}
	return 0;
}

/* restart: every index once, index 0 first. */
static int expect_all(eachobs_iter *it)
{
	size_t idx, want = 0;
	int rc;

	while ((rc = next(it, &idx)) == 1)
		if (idx != want++)
			return fail(30, "an index out of order", rc, idx);
	if (rc != 0 || want != N)
		return fail(31, "the run did not end after every index", rc,
			    idx);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		printf("usage: %s getobs|both|restart READY DATA\n"
		       "Runs a SERIAL iterator whose first getobs waits in a "
		       "system call until SIGINT.\n", argv[0]);
		return 0;
	}
	if (argc != 4 || (strcmp(argv[1], "getobs") && strcmp(argv[1], "both") &&
			  strcmp(argv[1], "restart"))) {
		fprintf(stderr, "usage: %s getobs|both|restart READY DATA "
				"(try --help)\n", argv[0]);
		return 2;
	}
	interrupting = strcmp(argv[1], "getobs") != 0;
	restarting = strcmp(argv[1], "restart") == 0;
	ready_fd = atoi(argv[2]);
	data_fd = atoi(argv[3]);

	struct sigaction sa = { .sa_handler = on_sigint,
				.sa_flags = restarting ? SA_RESTART : 0 };
	sigset_t block;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	pthread_sigmask(SIG_BLOCK, &block, &unblocked);
	sigdelset(&unblocked, SIGINT);

	eachobs_options o = { .executor = EACHOBS_SERIAL };
	eachobs_dataset data = { NULL, numobs, getobs, sizeof(size_t) };
	eachobs_iter *it;
	size_t idx;
	if (eachobs_parallel(&it, &data, &o) != 0)
		return 10;
	atomic_store(&running, it);
	int status = 0;
	if (interrupting) {
		int rc = next(it, &idx);
		if (rc != -EINTR || idx != UNTOUCHED)
			status = fail(11, "the interrupt is not a -EINTR that "
				      "leaves *idx untouched", rc, idx);
	}
	if (status == 0)
		status = restarting ? expect_all(it) : expect_restart(it);
	atomic_store(&running, NULL);
	eachobs_close(it);
	return status;
}
