/* Progress of a wait on stderr: a bar redrawn in place on a terminal
 * ([####....] done/total, queued and running, jobs/s, 429s seen, ETA), and
 * otherwise plain lines sparingly: each 10% of the jobs or every 30 s, plus
 * the final line (once). The ETA is the longer of what the rate seen so far
 * and what the limits allow for the jobs left would take. */
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
    size_t last_tenth;  /* tenths of total done at the last plain line */
    int drawn;          /* a bar is on screen */
    int printed;        /* a plain line went out; printed_done/dead its counts */
    size_t printed_done, printed_dead;
};

/* Where the jobs of a wait are. */
struct llmq_progress_counts {
    size_t done, dead;      /* ended; of those dead-lettered */
    size_t queued;          /* not started (queued, delayed) */
    size_t running;         /* delivered to a worker, not ended */
    long long n429;         /* 429 replies seen since the start */
    int no_worker;          /* no live worker consumes the account */
    long long limit_eta_ms; /* the least time the limits allow for the jobs left; -1 none */
};

/* Starts reporting on out (borrowed; a TTY gets the bar) for total jobs. */
void llmq_progress_init(struct llmq_progress *p, FILE *out, const char *prog, size_t total);

/* Reports the counts. Plain lines are rate-limited unless force is set. */
void llmq_progress_update(struct llmq_progress *p, const struct llmq_progress_counts *c, int force);

/* Reports the final counts (unless a plain line already said them) and ends
 * the bar's line. */
void llmq_progress_end(struct llmq_progress *p, const struct llmq_progress_counts *c);

/* Formats the progress line into buf (both styles use it; pure: no clock,
 * elapsed_ms is time since the start). */
void llmq_progress_format(char *buf, size_t n, const struct llmq_progress_counts *c, size_t total,
                          long long elapsed_ms, int bar);

#endif
