/* One pub/sub channel kept subscribed on a connection of its own
 * (redis_async.h underneath: reconnects with backoff, command timeout).
 *
 * On every (re)connect the channel is subscribed again; the subscription
 * counts as up only once Redis confirmed the SUBSCRIBE. A refused SUBSCRIBE
 * (an ACL without the channel) drops the connection (hiredis 0.14 takes an
 * error reply nobody waits for as the connection's), which connects again
 * after its backoff: a subscription refused for a while comes back by
 * itself. Until a SUBSCRIBE is confirmed the connection has not proved
 * usable (redis_async.h, setup_by_user), so refusals back off as failed
 * connects do (tests/integration/redis_sub_refused.c) instead of retrying
 * every ~70 ms behind each good handshake. The channel is never unsubscribed: hiredis 0.14 leaves
 * subscribe mode when its count of channels reaches 0.
 *
 * Callbacks run on the loop: on_message with each message's bytes
 * (borrowed for the call), on_state on every change between subscribed (1)
 * and not (0; messages may have been missed). Neither runs from
 * llmq_redis_sub_free. */
#ifndef LLMQ_REDIS_SUB_H
#define LLMQ_REDIS_SUB_H

#include <stddef.h>

#include "llmq/error.h"
#include "redis/redis_async.h"
#include "redis/redis_url.h"

struct ev_loop;
struct llmq_redis_sub;

typedef void llmq_redis_sub_message_cb(const char *msg, size_t len, void *privdata);
typedef void llmq_redis_sub_state_cb(int subscribed, void *privdata);

/* Subscribes channel (copied; at most 511 bytes) on a new connection to url
 * (copied) with cfg (copied; redis_async.h). Returns NULL with err without
 * memory or for a channel too long. */
struct llmq_redis_sub *llmq_redis_sub_new(struct ev_loop *loop, const struct llmq_redis_url *url,
                                          const struct llmq_redis_async_config *cfg,
                                          const char *channel,
                                          llmq_redis_sub_message_cb *on_message,
                                          llmq_redis_sub_state_cb *on_state, void *privdata,
                                          struct llmq_error *err);

/* 1 while subscribed (confirmed). NULL-safe (0). */
int llmq_redis_sub_ready(const struct llmq_redis_sub *s);

/* Why it is not subscribed ("" while it is). Borrowed until the next loop
 * iteration. */
const char *llmq_redis_sub_last_error(const struct llmq_redis_sub *s);

/* Closes the connection and frees s (NULL-safe). */
void llmq_redis_sub_free(struct llmq_redis_sub *s);

#endif
