/* Progress of a wait on stderr: a redrawn bar on a terminal (done/total,
 * jobs/s, 429s seen, ETA), plain lines every few seconds otherwise. */
#ifndef LLMQ_PROGRESS_H
#define LLMQ_PROGRESS_H

#include <stddef.h>
#include <stdio.h>

struct llmq_progress {
    FILE *out;
    int tty;          /* redraw one line in place */
    const char *prog; /* prefix of plain lines */
    size_t total;
    long long start_ms; /* monotonic */
    long long last_ms;  /* last plain line */
    int drawn;          /* a bar is on screen */
};

/* Starts reporting on out (borrowed; a TTY gets the bar) for total jobs. */
void llmq_progress_init(struct llmq_progress *p, FILE *out, const char *prog, size_t total);

/* Reports done jobs of which dead were dead-lettered, and n429 429 replies
 * seen since the start. Plain lines are rate-limited unless force is set. */
void llmq_progress_update(struct llmq_progress *p, size_t done, size_t dead, long long n429,
                          int force);

/* Ends the bar's line (if one is drawn). */
void llmq_progress_finish(struct llmq_progress *p);

/* Formats the progress line into buf (both styles use it; pure: no clock,
 * elapsed_ms is time since the start). */
void llmq_progress_format(char *buf, size_t n, size_t done, size_t total, size_t dead,
                          long long n429, long long elapsed_ms, int bar);

#endif
