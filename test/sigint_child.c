/*
 * The child of interrupt::a_sigint_handler_interrupts_a_blocked_consumer:
 * the guide's Ctrl-C recipe in a process of its own. It installs a SIGINT
 * handler that calls eachobs_interrupt, writes one byte to FD to say it is
 * about to block, and blocks in eachobs_next_batch on its first batch (16
 * getobs of 200 ms on 3 threads, far longer than the parent takes to send
 * SIGINT).
 *
 * usage: sigint_child background|threaded ordered|unordered FD
 * Exit status: 0 when the call returned -EINTR and the handler ran on this
 * (the consumer's) thread; 2 on a bad command line; 10 and up otherwise.
 */
#define _GNU_SOURCE
#include "eachobs.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static eachobs_iter *_Atomic running;
static pthread_t consumer;
static atomic_int off_consumer;

static void on_sigint(int sig)
{
	(void)sig;
	if (!pthread_equal(pthread_self(), consumer))
		atomic_fetch_add(&off_consumer, 1);
	eachobs_iter *it = atomic_load(&running);
	if (it)
		eachobs_interrupt(it);
}

static size_t numobs(void *ctx)
{
	(void)ctx;
	return 64;
}

static int getobs(void *ctx, size_t idx, void *obs)
{
	struct timespec t = { 0, 200 * 1000 * 1000 };

	(void)ctx;
	memcpy(obs, &idx, sizeof(idx));
	nanosleep(&t, NULL);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		printf("usage: %s background|threaded ordered|unordered FD\n"
		       "Blocks on a batch until SIGINT interrupts it.\n",
		       argv[0]);
		return 0;
	}
	if (argc != 4) {
		fprintf(stderr, "usage: %s background|threaded "
				"ordered|unordered FD (try --help)\n",
			argv[0]);
		return 2;
	}
	eachobs_options o = {
		.nthreads = 3,
		.batchsize = 16,
		.executor = strcmp(argv[1], "threaded") ? EACHOBS_BACKGROUND
							 : EACHOBS_THREADED,
		.ordered = strcmp(argv[2], "ordered") == 0,
	};
	eachobs_dataset data = { NULL, numobs, getobs, sizeof(size_t) };
	struct sigaction sa = { .sa_handler = on_sigint };
	eachobs_iter *it;
	eachobs_batch b;

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	consumer = pthread_self();
	if (eachobs_parallel(&it, &data, &o) != 0)
		return 10;
	atomic_store(&running, it);
	if (write(atoi(argv[3]), "r", 1) != 1)
		return 11;
	int rc = eachobs_next_batch(it, &b);
	atomic_store(&running, NULL);
	eachobs_close(it);
	if (rc != -EINTR)
		return 12;
	return atomic_load(&off_consumer) ? 13 : 0;
}
