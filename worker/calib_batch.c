/* Calibration samples summed per (account, model) and written in batches;
 * the contract (when, and what a crash loses) is in calib_batch.h. */
#include "calib_batch.h"

#include <stddef.h>

#include "base/clock.h"
#include "base/log.h"
#include "model_state.h"
#include "redis/script.h"
#include "worker.h"

int64_t llmq_worker_calib_delay_ms(int64_t written_ms, int64_t now_ms)
{
    if (written_ms < 0)
        return 0;
    int64_t due = written_ms + CALIB_WRITE_EVERY_MS;
    return due > now_ms ? due - now_ms : 0;
}

static void on_calib_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)revents;
    llmq_worker_calib_write(t->data);
}

static void arm(struct worker_model *m, int64_t delay_ms)
{
    struct ev_loop *loop = m->acct->w->loop;
    if (ev_cb(&m->calib_timer) == NULL) { /* its first use: the table made it zeroed */
        ev_init(&m->calib_timer, on_calib_timer);
        m->calib_timer.data = m;
    }
    ev_timer_stop(loop, &m->calib_timer);
    ev_timer_set(&m->calib_timer, delay_ms / 1000.0, 0.0);
    ev_timer_start(loop, &m->calib_timer);
}

static void on_written(redisAsyncContext *ac, redisReply *r, void *privdata)
{
    (void)ac;
    struct worker_model *m = privdata;
    struct worker_account *a = m->acct;
    m->calib_in_flight--;
    if (r == NULL)
        LLMQ_LOG_JOB(LLMQ_LOG_WARN, a->cfg->name, NULL,
                     "calibration write of %s: connection lost before the reply (its samples "
                     "may not be counted)",
                     m->name);
    else if (r->type == REDIS_REPLY_ERROR)
        LLMQ_LOG_JOB(LLMQ_LOG_WARN, a->cfg->name, NULL, "calibration write of %s failed: %s",
                     m->name, r->str);
    /* Draining: this may be the last reply the loop waits for. Not once the
     * loop has ended (ev_depth 0): then this runs from main.c freeing the
     * connection, and there is no loop left to stop. */
    if (a->w->draining && ev_depth(a->w->loop) > 0 && a->w->check_done != NULL)
        a->w->check_done(a->w);
}

void llmq_worker_calib_write(struct worker_model *m)
{
    struct worker_account *a = m->acct;
    ev_timer_stop(a->w->loop, &m->calib_timer);
    if (m->calib_pending.n == 0)
        return;
    struct llmq_calib_add_argv args;
    struct llmq_error err = {0};
    if (llmq_calib_add_argv(&args, a->cfg->name, m->name, &m->calib_pending, &err) != LLMQ_OK) {
        /* cannot happen for names the model table took; never loop on it */
        LLMQ_LOG_JOB(LLMQ_LOG_WARN, a->cfg->name, NULL, "calibration of %s dropped: %s", m->name,
                     err.msg);
        m->calib_pending = (struct llmq_calib_increments){0};
        return;
    }
    redisAsyncContext *ac = llmq_redis_async_context(a->cmd);
    if (ac == NULL || llmq_script_run_async(ac, LLMQ_SCRIPT_CALIB_ADD, 1, LLMQ_CALIB_ADD_ARGC,
                                            args.argv, NULL, on_written, m) != LLMQ_OK) {
        arm(m, CALIB_WRITE_EVERY_MS); /* Redis away: keep the sums, try again */
        return;
    }
    m->calib_in_flight++;
    m->calib_written_ms = llmq_monotonic_ms();
    m->calib_pending = (struct llmq_calib_increments){0};
}

void llmq_worker_calib_add(struct worker_account *a, const char *model, int64_t estimated_tokens,
                           int64_t actual_tokens)
{
    struct worker_model *m = llmq_worker_model(a, model);
    if (m == NULL ||
        llmq_calib_sum_add(&m->calib_pending, estimated_tokens, actual_tokens) != LLMQ_OK)
        return;
    if (m->calib_pending.n >= CALIB_WRITE_SAMPLES)
        llmq_worker_calib_write(m);
    else if (!ev_is_active(&m->calib_timer))
        arm(m, llmq_worker_calib_delay_ms(m->calib_written_ms, llmq_monotonic_ms()));
}

int llmq_worker_calib_flush(struct worker_account *a)
{
    int unanswered = 0;
    for (struct worker_model *m = a->models; m != NULL; m = m->next) {
        if (m->calib_pending.n > 0 && llmq_redis_async_context(a->cmd) != NULL)
            llmq_worker_calib_write(m);
        if (m->calib_pending.n > 0)
            ev_timer_stop(a->w->loop, &m->calib_timer); /* away: nothing more to try */
        unanswered += m->calib_in_flight;
    }
    return unanswered;
}
