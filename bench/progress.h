/*
 * A one-line status for long runs: what the program is doing now, on
 * stderr, rewritten in place. Only when stderr is a terminal: logs and
 * pipes get the results alone. Shared by the benchmarks and the peers,
 * which print their results on stdout; call clear_progress() before
 * printing anything, so that it starts at column 0.
 */
#ifndef EACHOBS_BENCH_PROGRESS_H
#define EACHOBS_BENCH_PROGRESS_H

/* Replace the progress line with the formatted text (no newline). */
void show_progress(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

/* Erase the progress line, if any. */
void clear_progress(void);

#endif
