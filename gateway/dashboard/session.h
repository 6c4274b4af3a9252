/* Who is looking at the dashboard: logging in with a dashboard key (`llmq
 * keys create --role admin|viewer [--tenant T]`), the session that follows,
 * and the checks every dashboard request goes through.
 *
 * A session lives in Redis (P dash:sess:<SHA-256 of its token>, keys.h), so
 * it survives a gateway restart and is shared by the gateways of an
 * account; it expires GW_DASH_SESSION_MS after login. The browser holds the
 * token in an HttpOnly, SameSite=Strict cookie (Secure under TLS), scoped to
 * /dashboard; Redis holds only the token's hash, the key's hash and the CSRF
 * token that every action (a POST) must send back in X-CSRF-Token. Each
 * request reads the key again: a revoked key, or one whose role changed,
 * applies at once. A client key (no role) never gets a session.
 *
 * Runs on the gateway's loop. */
#ifndef LLMQ_GW_DASH_SESSION_H
#define LLMQ_GW_DASH_SESSION_H

#include "auth/gw_key.h"
#include "jobs/job.h"

#define GW_DASH_SESSION_MS (12LL * 3600 * 1000)
#define GW_DASH_COOKIE "llmq_dash"

struct gw_request;

struct gw_dash_viewer {
    int admin;                              /* 1: may act; 0: a viewer */
    char tenant[LLMQ_JOB_ID_MAX + 1];       /* "" the whole account; else only this tenant */
    char csrf[LLMQ_GW_KEY_LEN + 1];         /* what actions must send in X-CSRF-Token */
    char session[LLMQ_GW_KEY_HASH_LEN + 1]; /* the hash naming the session */
};

/* Finds r's session (its cookie) and the key behind it: calls then(r, v)
 * with v borrowed for the call, or answers r (401 no or expired session, 401
 * a revoked key, 503 without Redis). then runs at most once, from a Redis
 * callback. */
void gw_dash_session_check(struct gw_request *r,
                           void (*then)(struct gw_request *r, const struct gw_dash_viewer *v));

/* POST /dashboard/api/login, body {"key": "..."}: a dashboard key gets a new
 * session (Set-Cookie) and {role, tenant, csrf}; an unknown key 401, a client
 * key 403. */
void gw_dash_session_login(struct gw_request *r);

/* POST /dashboard/api/logout (session checked, CSRF too): ends it. */
void gw_dash_session_logout(struct gw_request *r, const struct gw_dash_viewer *v);

/* 1 when r carries v's CSRF token in X-CSRF-Token. */
int gw_dash_session_csrf_ok(struct gw_request *r, const struct gw_dash_viewer *v);

#endif
