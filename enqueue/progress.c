/* Progress reporting for `llmq enqueue --wait`.
 *
 * The rate is measured from the start of the wait; the ETA is the remaining
 * count at that rate (unknown until something finished). Plain lines go out
 * at most every PLAIN_EVERY_MS so logs of long waits stay short. */
#include "base/clock.h"
#include "progress.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PLAIN_EVERY_MS 5000
#define BAR_WIDTH 24

void llmq_progress_init(struct llmq_progress *p, FILE *out, const char *prog, size_t total)
{
    memset(p, 0, sizeof(*p));
    p->out = out;
    p->tty = isatty(fileno(out));
    p->prog = prog;
    p->total = total;
    p->start_ms = p->last_ms = llmq_monotonic_ms();
}

static void format_eta(char *buf, size_t n, double rate, size_t left)
{
    if (left == 0) {
        snprintf(buf, n, "0s");
        return;
    }
    if (rate <= 0) {
        snprintf(buf, n, "?");
        return;
    }
    long long s = (long long)((double)left / rate + 0.5);
    if (s >= 3600)
        snprintf(buf, n, "%lldh%02lldm", s / 3600, s / 60 % 60);
    else if (s >= 60)
        snprintf(buf, n, "%lldm%02llds", s / 60, s % 60);
    else
        snprintf(buf, n, "%llds", s);
}

void llmq_progress_format(char *buf, size_t n, size_t done, size_t total, size_t dead,
                          long long n429, long long elapsed_ms, int bar)
{
    double rate = elapsed_ms > 0 ? (double)done * 1000.0 / (double)elapsed_ms : 0;
    char eta[32], bars[BAR_WIDTH + 3] = "";
    format_eta(eta, sizeof(eta), rate, total > done ? total - done : 0);
    if (bar) {
        size_t fill = total ? done * BAR_WIDTH / total : BAR_WIDTH;
        bars[0] = '[';
        for (size_t i = 0; i < BAR_WIDTH; i++)
            bars[1 + i] = i < fill ? '#' : '.';
        bars[BAR_WIDTH + 1] = ']';
        bars[BAR_WIDTH + 2] = '\0';
    }
    snprintf(buf, n, "%s%s%zu/%zu done (%zu dead), %.1f jobs/s, %lld 429s, ETA %s", bars,
             bar ? " " : "", done, total, dead, rate, n429, eta);
}

void llmq_progress_update(struct llmq_progress *p, size_t done, size_t dead, long long n429,
                          int force)
{
    long long now = llmq_monotonic_ms();
    char line[256];
    if (!p->tty && !force && now - p->last_ms < PLAIN_EVERY_MS)
        return;
    llmq_progress_format(line, sizeof(line), done, p->total, dead, n429, now - p->start_ms, p->tty);
    if (p->tty) {
        fprintf(p->out, "\r\033[K%s", line);
        p->drawn = 1;
    } else {
        fprintf(p->out, "%s: progress: %s\n", p->prog, line);
    }
    fflush(p->out);
    p->last_ms = now;
}

void llmq_progress_finish(struct llmq_progress *p)
{
    if (p->drawn) {
        fputc('\n', p->out);
        fflush(p->out);
    }
    p->drawn = 0;
}
