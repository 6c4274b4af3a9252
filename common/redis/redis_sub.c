/* A channel kept subscribed; see redis_sub.h. */
#include "redis/redis_sub.h"

#include <ev.h>
#include <hiredis/async.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct llmq_redis_sub {
    struct ev_loop *loop;
    struct llmq_redis_async *ra;
    char channel[512];
    llmq_redis_sub_message_cb *on_message;
    llmq_redis_sub_state_cb *on_state;
    void *privdata;
    int subscribed;
    int freeing;
};

static void set_state(struct llmq_redis_sub *s, int subscribed)
{
    if (s->subscribed == subscribed)
        return;
    s->subscribed = subscribed;
    if (!s->freeing && s->on_state != NULL)
        s->on_state(subscribed, s->privdata);
}

/* The channel's callback: the confirmation, a message, or NULL (the
 * connection dropped). */
static void on_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    struct llmq_redis_sub *s = privdata;
    const redisReply *r = reply;
    if (r == NULL) {
        set_state(s, 0);
        return;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
        r->element[0]->type != REDIS_REPLY_STRING)
        return;
    const char *what = r->element[0]->str;
    if (strcmp(what, "subscribe") == 0) {
        llmq_redis_async_setup_done(s->ra);
        set_state(s, 1);
    } else if (strcmp(what, "message") == 0 && r->element[2]->type == REDIS_REPLY_STRING &&
               !s->freeing) {
        s->on_message(r->element[2]->str, r->element[2]->len, s->privdata);
    }
}

static void on_conn_state(struct llmq_redis_async *ra, int ready, void *privdata)
{
    struct llmq_redis_sub *s = privdata;
    redisAsyncContext *ac = llmq_redis_async_context(ra);
    if (!ready) {
        set_state(s, 0);
        return;
    }
    if (ac == NULL || redisAsyncCommand(ac, on_reply, s, "SUBSCRIBE %s", s->channel) != REDIS_OK)
        llmq_redis_async_reset(ra);
}

struct llmq_redis_sub *llmq_redis_sub_new(struct ev_loop *loop, const struct llmq_redis_url *url,
                                          const struct llmq_redis_async_config *cfg,
                                          const char *channel,
                                          llmq_redis_sub_message_cb *on_message,
                                          llmq_redis_sub_state_cb *on_state, void *privdata,
                                          struct llmq_error *err)
{
    if (channel == NULL || strlen(channel) >= sizeof(((struct llmq_redis_sub *)0)->channel)) {
        llmq_error_set(err, LLMQ_EINVAL, "channel name too long");
        return NULL;
    }
    struct llmq_redis_sub *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        llmq_error_set(err, LLMQ_ENOMEM, "out of memory");
        return NULL;
    }
    s->loop = loop;
    snprintf(s->channel, sizeof(s->channel), "%s", channel);
    s->on_message = on_message;
    s->on_state = on_state;
    s->privdata = privdata;
    /* a connection whose SUBSCRIBE is refused is no usable one: its
     * reconnects back off as failed attempts do */
    struct llmq_redis_async_config c = {0};
    if (cfg != NULL) /* NULL: llmq_redis_async_new says so */
        c = *cfg;
    c.setup_by_user = 1;
    s->ra = llmq_redis_async_new(loop, url, cfg != NULL ? &c : NULL, on_conn_state, s, err);
    if (s->ra == NULL) {
        free(s);
        return NULL;
    }
    return s;
}

int llmq_redis_sub_ready(const struct llmq_redis_sub *s)
{
    return s != NULL && s->subscribed && llmq_redis_async_ready(s->ra);
}

const char *llmq_redis_sub_last_error(const struct llmq_redis_sub *s)
{
    if (s == NULL || llmq_redis_sub_ready(s))
        return "";
    if (llmq_redis_async_ready(s->ra))
        return "SUBSCRIBE not confirmed";
    return llmq_redis_async_last_error(s->ra);
}

void llmq_redis_sub_free(struct llmq_redis_sub *s)
{
    if (s == NULL)
        return;
    s->freeing = 1;
    llmq_redis_async_free(s->ra);
    free(s);
}
