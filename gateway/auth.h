/* Gateway keys at request time (auth.c): the presented key's SHA-256
 * (computed when the request arrived, http.c; the key text itself is never
 * kept, logged or sent to Redis) names its hash in Redis (common/redis/keys.h
 * LLMQ_KEY_GW_KEY); its fields say tenant, user, priority and models. A
 * missing, malformed, unknown or revoked key is a 401 in OpenAI's shape; a
 * dashboard key (field role set: `llmq keys create --role`) is a 403
 * (code dashboard_key): it is for /dashboard only (dashboard/session.h).
 * Every request looks its key up again, so a revoke applies to the next
 * request. Runs on the gateway's loop. */
#ifndef LLMQ_GW_AUTH_H
#define LLMQ_GW_AUTH_H

struct gw_request;

/* Looks r's key up: fills r->key and calls then(r) when it is valid (and the
 * caller has not hung up), else answers r (401, or 503 without Redis). then
 * runs at most once, from a Redis callback; r is held until it has run. */
void gw_auth_check(struct gw_request *r, void (*then)(struct gw_request *r));

#endif
