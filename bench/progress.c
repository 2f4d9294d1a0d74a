/*
 * The progress line; see progress.h.
 */
#include "progress.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

/* Carriage return, then erase to the end of the line (ECMA-48 EL). */
#define ERASE_LINE "\r\033[K"

void show_progress(const char *fmt, ...)
{
	va_list ap;

	if (!isatty(STDERR_FILENO))
		return;
	fputs(ERASE_LINE, stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

void clear_progress(void)
{
	if (isatty(STDERR_FILENO))
		fputs(ERASE_LINE, stderr);
}
