/* The steps of a request (see request_step.h). Each step is a small record
 * of its request, its callback and ud, given to the wrapped call as its
 * private data: the trampoline runs the callback, then drops the reference
 * and frees the record. */
#include "request_step.h"

#include <stdlib.h>

#include "http.h"
#include "offload.h"
#include "request_ref.h"

struct step {
    struct gw_request *r;
    void *ud;
    union {
        redisCallbackFn *reply;
        llmq_script_cb *script;
        llmq_job_store_push_cb *push;
        llmq_job_result_cb *result;
    } cb;
};

/* A step of r (kept until step_end), or NULL without memory. */
static struct step *step_new(struct gw_request *r, void *ud)
{
    struct step *s = malloc(sizeof(*s));
    if (s == NULL)
        return NULL;
    s->r = r;
    s->ud = ud;
    gw_request_hold(r);
    return s;
}

static void step_end(struct step *s)
{
    struct gw_request *r = s->r;
    free(s);
    gw_request_release(r);
}

static void on_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
    struct step *s = privdata;
    if (s->cb.reply != NULL)
        s->cb.reply(ac, reply, s->ud);
    step_end(s);
}

int gw_step_command(struct gw_request *r, redisAsyncContext *ac, redisCallbackFn *cb, void *ud,
                    const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc;
    struct step *s = r != NULL ? step_new(r, ud) : NULL;
    if (r == NULL) {
        rc = redisvAsyncCommand(ac, cb, ud, fmt, ap);
    } else if (s == NULL) {
        rc = REDIS_ERR;
    } else {
        s->cb.reply = cb;
        rc = redisvAsyncCommand(ac, on_reply, s, fmt, ap);
        if (rc != REDIS_OK)
            step_end(s);
    }
    va_end(ap);
    return rc;
}

int gw_step_command_argv(struct gw_request *r, redisAsyncContext *ac, redisCallbackFn *cb, void *ud,
                         int argc, const char **argv, const size_t *lens)
{
    if (r == NULL)
        return redisAsyncCommandArgv(ac, cb, ud, argc, argv, lens);
    struct step *s = step_new(r, ud);
    if (s == NULL)
        return REDIS_ERR;
    s->cb.reply = cb;
    int rc = redisAsyncCommandArgv(ac, on_reply, s, argc, argv, lens);
    if (rc != REDIS_OK)
        step_end(s);
    return rc;
}

int gw_request_command(struct gw_request *r, redisCallbackFn *cb, const char *fmt, ...)
{
    redisAsyncContext *ac = gw_redis(r->gw);
    struct step *s = ac != NULL ? step_new(r, r) : NULL;
    if (s == NULL) {
        gw_respond_no_redis(r);
        return -1;
    }
    s->cb.reply = cb;
    va_list ap;
    va_start(ap, fmt);
    enum llmq_rc rc = llmq_redis_vcommand_async(ac, on_reply, s, fmt, ap);
    va_end(ap);
    if (rc != LLMQ_OK) {
        step_end(s);
        gw_respond_no_redis(r);
        return -1;
    }
    return 0;
}

static void on_script(redisAsyncContext *ac, redisReply *reply, void *privdata)
{
    struct step *s = privdata;
    s->cb.script(ac, reply, s->ud);
    step_end(s);
}

enum llmq_rc gw_step_script(struct gw_request *r, redisAsyncContext *ac, enum llmq_script_id id,
                            int nkeys, int argc, const char **argv, const size_t *lens,
                            llmq_script_cb *cb, void *ud)
{
    if (r == NULL)
        return llmq_script_run_async(ac, id, nkeys, argc, argv, lens, cb, ud);
    struct step *s = step_new(r, ud);
    if (s == NULL)
        return LLMQ_ENOMEM;
    s->cb.script = cb;
    enum llmq_rc rc = llmq_script_run_async(ac, id, nkeys, argc, argv, lens, on_script, s);
    if (rc != LLMQ_OK)
        step_end(s);
    return rc;
}

static void on_push(enum llmq_rc rc, const struct llmq_error *err, void *ud)
{
    struct step *s = ud;
    s->cb.push(rc, err, s->ud);
    step_end(s);
}

enum llmq_rc gw_step_push(struct gw_request *r, redisAsyncContext *ac, const char *prefix,
                          const struct llmq_job_gate *gate, const struct llmq_job *jobs, size_t n,
                          struct llmq_job_outcome *out, llmq_job_store_push_cb *cb, void *ud,
                          struct llmq_error *err)
{
    if (r == NULL)
        return llmq_job_store_push_async(ac, prefix, gate, jobs, n, out, cb, ud, err);
    struct step *s = step_new(r, ud);
    if (s == NULL)
        return llmq_error_set(err, LLMQ_ENOMEM, "out of memory");
    s->cb.push = cb;
    enum llmq_rc rc = llmq_job_store_push_async(ac, prefix, gate, jobs, n, out, on_push, s, err);
    if (rc != LLMQ_OK)
        step_end(s);
    return rc;
}

static void on_result(enum llmq_rc rc, const char *line, size_t len, int dead, void *ud)
{
    struct step *s = ud;
    s->cb.result(rc, line, len, dead, s->ud);
    step_end(s);
}

enum llmq_rc gw_step_result_read(struct gw_request *r, redisAsyncContext *ac, const char *prefix,
                                 const char *id, llmq_job_result_cb *cb, void *ud,
                                 struct llmq_error *err)
{
    if (r == NULL)
        return llmq_job_result_read_async(ac, prefix, id, cb, ud, err);
    struct step *s = step_new(r, ud);
    if (s == NULL)
        return llmq_error_set(err, LLMQ_ENOMEM, "out of memory");
    s->cb.result = cb;
    enum llmq_rc rc = llmq_job_result_read_async(ac, prefix, id, on_result, s, err);
    if (rc != LLMQ_OK)
        step_end(s);
    return rc;
}

/* An offload task of a request: runs the task it wraps. */
struct step_task {
    struct gw_offload_task t;
    struct gw_offload_task *inner;
    struct gw_request *r;
};

static void task_work(struct gw_offload_task *t)
{
    struct step_task *st = (struct step_task *)t;
    st->inner->work(st->inner);
}

static void task_done(struct gw_offload_task *t)
{
    struct step_task *st = (struct step_task *)t;
    struct gw_request *r = st->r;
    st->inner->stopping = t->stopping;
    st->inner->done(st->inner);
    free(st);
    gw_request_release(r);
}

int gw_step_offload(struct gw_request *r, struct gw_offload *o, struct gw_offload_task *t)
{
    struct step_task *st = calloc(1, sizeof(*st));
    if (st == NULL)
        return -1;
    st->t.work = task_work;
    st->t.done = task_done;
    st->inner = t;
    st->r = r;
    gw_request_hold(r);
    gw_offload_submit(o, &st->t);
    return 0;
}

void gw_step_wait_begin(struct gw_request *r)
{
    gw_request_hold(r);
}

void gw_step_wait_end(struct gw_request *r)
{
    gw_request_release(r);
}
