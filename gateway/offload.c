/* One background thread for the gateway's slow pure work; see offload.h.
 *
 * Two queues under one mutex: todo (loop -> thread, signalled with a
 * condition variable) and finished (thread -> loop, signalled with
 * ev_async_send, which libev documents as safe from any thread). The loop's
 * async callback takes the whole finished list and runs each done callback
 * outside the lock, so a done callback may submit again. */
#include "offload.h"

#include <ev.h>
#include <pthread.h>
#include <stdlib.h>

struct gw_offload {
    struct ev_loop *loop;
    ev_async wake; /* finished tasks are waiting */
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t more;
    struct gw_offload_task *todo, *todo_tail; /* FIFO */
    struct gw_offload_task *finished; /* any order is fine: done callbacks are independent */
    int stopping;
    int pending; /* submitted, done not yet run (loop thread only) */
};

static void *offload_main(void *arg)
{
    struct gw_offload *o = arg;
    pthread_mutex_lock(&o->lock);
    for (;;) {
        while (o->todo == NULL && !o->stopping)
            pthread_cond_wait(&o->more, &o->lock);
        if (o->stopping)
            break;
        struct gw_offload_task *t = o->todo;
        o->todo = t->next;
        if (o->todo == NULL)
            o->todo_tail = NULL;
        pthread_mutex_unlock(&o->lock);
        t->work(t);
        pthread_mutex_lock(&o->lock);
        t->next = o->finished;
        o->finished = t;
        ev_async_send(o->loop, &o->wake);
    }
    pthread_mutex_unlock(&o->lock);
    return NULL;
}

/* Runs the done callbacks of the tasks in list. */
static void run_done(struct gw_offload *o, struct gw_offload_task *list)
{
    while (list != NULL) {
        struct gw_offload_task *t = list;
        list = t->next;
        t->next = NULL;
        o->pending--;
        t->done(t);
    }
}

static void on_wake(struct ev_loop *loop, ev_async *w, int revents)
{
    (void)loop;
    (void)revents;
    struct gw_offload *o = w->data;
    pthread_mutex_lock(&o->lock);
    struct gw_offload_task *list = o->finished;
    o->finished = NULL;
    pthread_mutex_unlock(&o->lock);
    run_done(o, list);
}

struct gw_offload *gw_offload_new(struct ev_loop *loop, struct llmq_error *err)
{
    struct gw_offload *o = calloc(1, sizeof(*o));
    if (o == NULL) {
        llmq_error_set(err, LLMQ_ENOMEM, "out of memory");
        return NULL;
    }
    o->loop = loop;
    pthread_mutex_init(&o->lock, NULL);
    pthread_cond_init(&o->more, NULL);
    ev_async_init(&o->wake, on_wake);
    o->wake.data = o;
    ev_async_start(loop, &o->wake);
    if (pthread_create(&o->thread, NULL, offload_main, o) != 0) {
        llmq_error_set(err, LLMQ_EIO, "cannot start the offload thread");
        ev_async_stop(loop, &o->wake);
        pthread_cond_destroy(&o->more);
        pthread_mutex_destroy(&o->lock);
        free(o);
        return NULL;
    }
    return o;
}

void gw_offload_submit(struct gw_offload *o, struct gw_offload_task *t)
{
    t->stopping = 0;
    t->next = NULL;
    o->pending++;
    pthread_mutex_lock(&o->lock);
    if (o->todo_tail != NULL)
        o->todo_tail->next = t;
    else
        o->todo = t;
    o->todo_tail = t;
    pthread_cond_signal(&o->more);
    pthread_mutex_unlock(&o->lock);
}

int gw_offload_pending(const struct gw_offload *o)
{
    return o ? o->pending : 0;
}

void gw_offload_free(struct gw_offload *o)
{
    if (o == NULL)
        return;
    pthread_mutex_lock(&o->lock);
    o->stopping = 1;
    pthread_cond_signal(&o->more);
    pthread_mutex_unlock(&o->lock);
    pthread_join(o->thread, NULL);
    ev_async_stop(o->loop, &o->wake);
    /* The thread is gone: no lock needed. */
    for (struct gw_offload_task *t = o->finished; t != NULL; t = t->next)
        t->stopping = 1;
    for (struct gw_offload_task *t = o->todo; t != NULL; t = t->next)
        t->stopping = 1;
    run_done(o, o->finished);
    run_done(o, o->todo);
    o->finished = o->todo = o->todo_tail = NULL;
    pthread_cond_destroy(&o->more);
    pthread_mutex_destroy(&o->lock);
    free(o);
}
