/* Progress reporting for `llmq enqueue --wait`.
 *
 * The rate is measured from the start of the wait; the ETA is the longer of
 * the remaining count at that rate and the least time the limits allow for
 * it (the caller's limit_eta_ms: a wait the limiter makes is not in a rate
 * measured over a burst), unknown when neither is known. Plain lines go out
 * when another tenth of the jobs ended or PLAIN_EVERY_MS passed, so logs of
 * long waits stay short. */
#include "base/clock.h"
#include "progress.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PLAIN_EVERY_MS 30000
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

static void format_eta(char *buf, size_t n, double rate, size_t left, long long limit_eta_ms)
{
    if (left == 0) {
        snprintf(buf, n, "0s");
        return;
    }
    double at_rate = rate > 0 ? (double)left / rate : -1;
    double at_limits = limit_eta_ms >= 0 ? (double)limit_eta_ms / 1000.0 : -1;
    double eta = at_rate > at_limits ? at_rate : at_limits;
    if (eta < 0) {
        snprintf(buf, n, "?");
        return;
    }
    long long s = (long long)(eta + 0.5);
    if (s >= 3600)
        snprintf(buf, n, "%lldh%02lldm", s / 3600, s / 60 % 60);
    else if (s >= 60)
        snprintf(buf, n, "%lldm%02llds", s / 60, s % 60);
    else
        snprintf(buf, n, "%llds", s);
}

void llmq_progress_format(char *buf, size_t n, const struct llmq_progress_counts *c, size_t total,
                          long long elapsed_ms, int bar)
{
    size_t done = c->done;
    double rate = elapsed_ms > 0 ? (double)done * 1000.0 / (double)elapsed_ms : 0;
    char eta[32], bars[BAR_WIDTH + 3] = "";
    format_eta(eta, sizeof(eta), rate, total > done ? total - done : 0, c->limit_eta_ms);
    if (bar) {
        size_t fill = total ? done * BAR_WIDTH / total : BAR_WIDTH;
        bars[0] = '[';
        for (size_t i = 0; i < BAR_WIDTH; i++)
            bars[1 + i] = i < fill ? '#' : '.';
        bars[BAR_WIDTH + 1] = ']';
        bars[BAR_WIDTH + 2] = '\0';
    }
    snprintf(buf, n,
             "%s%s%zu/%zu done (%zu dead), %zu queued, %zu running, %.1f jobs/s, %lld 429s, "
             "ETA %s%s",
             bars, bar ? " " : "", done, total, c->dead, c->queued, c->running, rate, c->n429,
             c->no_worker && done < total ? "?" : eta,
             c->no_worker && done < total ? " (no worker)" : "");
}

void llmq_progress_update(struct llmq_progress *p, const struct llmq_progress_counts *c, int force)
{
    long long now = llmq_monotonic_ms();
    char line[320];
    size_t tenth = p->total ? c->done * 10 / p->total : 10;
    if (!p->tty && !force && tenth == p->last_tenth && now - p->last_ms < PLAIN_EVERY_MS)
        return;
    llmq_progress_format(line, sizeof(line), c, p->total, now - p->start_ms, p->tty);
    if (p->tty) {
        fprintf(p->out, "\r\033[K%s", line);
        p->drawn = 1;
    } else {
        fprintf(p->out, "%s: progress: %s\n", p->prog, line);
        p->printed = 1;
        p->printed_done = c->done;
        p->printed_dead = c->dead;
    }
    fflush(p->out);
    p->last_ms = now;
    p->last_tenth = tenth;
}

void llmq_progress_end(struct llmq_progress *p, const struct llmq_progress_counts *c)
{
    if (p->tty || !p->printed || p->printed_done != c->done || p->printed_dead != c->dead)
        llmq_progress_update(p, c, 1);
    if (p->drawn) {
        fputc('\n', p->out);
        fflush(p->out);
    }
    p->drawn = 0;
}
