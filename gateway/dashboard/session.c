/* Dashboard sessions (see session.h). A check is two Redis reads: the
 * session's hash, then the key it names; a login is the key's read, then
 * one MULTI with the session's HSET and PEXPIRE. Between the steps the
 * request's state (r->state) holds what the next step needs; it is dropped
 * before the handler runs, which may then use r->state for its own. */
#include "dashboard/session.h"

#include <hiredis/async.h>
#include <jansson.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "redis/keys.h"
#include "redis/redis.h"
#include "request_step.h"

struct session_step {
    struct gw_dash_viewer v;
    char key_hash[LLMQ_GW_KEY_HASH_LEN + 1];
    char token[LLMQ_GW_KEY_LEN + 1]; /* login: the new session's token */
    void (*then)(struct gw_request *r, const struct gw_dash_viewer *v);
};

static void step_free(void *p)
{
    if (p != NULL)
        explicit_bzero(p, sizeof(struct session_step));
    free(p);
}

static struct session_step *step_new(struct gw_request *r)
{
    struct session_step *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        gw_respond_errorf(r, 500, "server_error", NULL, NULL, "out of memory");
        return NULL;
    }
    if (r->state_free != NULL)
        r->state_free(r->state);
    r->state = s;
    r->state_free = step_free;
    return s;
}

static void step_drop(struct gw_request *r)
{
    step_free(r->state);
    r->state = NULL;
    r->state_free = NULL;
}

static const char *field(const redisReply *h, const char *name)
{
    const char *v = llmq_redis_field(h, name);
    return v != NULL ? v : "";
}

static void refuse_session(struct gw_request *r)
{
    gw_respond_errorf(r, 401, "invalid_request_error", NULL, "no_session",
                      "Not logged in, or the session expired: log in with a dashboard key.");
}

/* Fills v from a key's hash k; returns 0, or -1 when k is no dashboard key
 * (answered: 401 unknown, 403 a client key). */
static int viewer_from_key(struct gw_request *r, const redisReply *k, struct gw_dash_viewer *v)
{
    if (k->elements == 0) {
        gw_respond_errorf(r, 401, "invalid_request_error", NULL, "invalid_api_key",
                          "Unknown or revoked key. Dashboard keys are made with `llmq keys "
                          "create --role viewer` (or admin).");
        return -1;
    }
    const char *role = field(k, "role");
    if (strcmp(role, "admin") != 0 && strcmp(role, "viewer") != 0) {
        gw_respond_errorf(r, 403, "invalid_request_error", NULL, "client_key",
                          "This key is a client key (for /v1): it cannot open the dashboard. "
                          "Make a dashboard key with `llmq keys create --role viewer`.");
        return -1;
    }
    const char *tenant = field(k, "tenant");
    if (tenant[0] != '\0' && !llmq_name_valid(tenant)) {
        gw_respond_errorf(r, 403, "invalid_request_error", NULL, "invalid_api_key",
                          "This key is misconfigured; ask for a new one.");
        return -1;
    }
    v->admin = strcmp(role, "admin") == 0;
    snprintf(v->tenant, sizeof(v->tenant), "%s", tenant);
    return 0;
}

static void on_check_key(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    struct gw_request *r = privdata;
    redisReply *k = reply;
    struct session_step *s = r->state;
    if (k == NULL || k->type != REDIS_REPLY_ARRAY || s == NULL) {
        gw_respond_no_redis(r);
    } else if (viewer_from_key(r, k, &s->v) == 0 && !r->gone) {
        struct gw_dash_viewer v = s->v;
        void (*then)(struct gw_request *, const struct gw_dash_viewer *) = s->then;
        step_drop(r);
        then(r, &v);
        explicit_bzero(&v, sizeof(v));
    }
}

static void on_check_session(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    struct gw_request *r = privdata;
    redisReply *h = reply;
    struct session_step *s = r->state;
    if (h == NULL || h->type != REDIS_REPLY_ARRAY || s == NULL) {
        gw_respond_no_redis(r);
    } else if (h->elements == 0 || strlen(field(h, "key")) != LLMQ_GW_KEY_HASH_LEN) {
        refuse_session(r);
    } else {
        snprintf(s->key_hash, sizeof(s->key_hash), "%s", field(h, "key"));
        snprintf(s->v.csrf, sizeof(s->v.csrf), "%s", field(h, "csrf"));
        char key[LLMQ_KEY_FIXED_MAX + LLMQ_GW_KEY_HASH_LEN];
        if (llmq_key(key, sizeof(key), r->gw->prefix, LLMQ_KEY_GW_KEY, s->key_hash, NULL) ==
            LLMQ_OK)
            gw_request_command(r, on_check_key, "HGETALL %s", key);
        else
            refuse_session(r);
    }
}

void gw_dash_session_check(struct gw_request *r,
                           void (*then)(struct gw_request *r, const struct gw_dash_viewer *v))
{
    const char *token =
        r->conn ? MHD_lookup_connection_value(r->conn, MHD_COOKIE_KIND, GW_DASH_COOKIE) : NULL;
    if (token == NULL || token[0] == '\0' || strlen(token) > LLMQ_GW_KEY_LEN) {
        refuse_session(r);
        return;
    }
    struct session_step *s = step_new(r);
    if (s == NULL)
        return;
    s->then = then;
    llmq_gw_key_hash(token, strlen(token), s->v.session);
    char key[LLMQ_KEY_FIXED_MAX + LLMQ_GW_KEY_HASH_LEN];
    if (llmq_key(key, sizeof(key), r->gw->prefix, LLMQ_KEY_DASH_SESSION, s->v.session, NULL) !=
        LLMQ_OK) {
        refuse_session(r);
        return;
    }
    gw_request_command(r, on_check_session, "HGETALL %s", key);
}

int gw_dash_session_csrf_ok(struct gw_request *r, const struct gw_dash_viewer *v)
{
    const char *got =
        r->conn ? MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-CSRF-Token") : NULL;
    if (got == NULL || v->csrf[0] == '\0' || strlen(got) != strlen(v->csrf))
        return 0;
    /* compared in constant time: the token is a secret */
    unsigned char diff = 0;
    for (size_t i = 0; got[i] != '\0'; i++)
        diff |= (unsigned char)(got[i] ^ v->csrf[i]);
    return diff == 0;
}

/* The cookie's header line: the token, or "" with Max-Age=0 to clear it. */
static void set_cookie(struct gw_request *r, const char *token)
{
    char line[256];
    snprintf(line, sizeof(line),
             "Set-Cookie: " GW_DASH_COOKIE "=%s; Path=/dashboard; HttpOnly; SameSite=Strict; "
             "Max-Age=%lld%s\n",
             token, token[0] ? GW_DASH_SESSION_MS / 1000 : 0LL,
             r->gw->cfg->tls_cert[0] ? "; Secure" : "");
    size_t have = r->headers ? strlen(r->headers) : 0;
    char *h = realloc(r->headers, have + strlen(line) + 1);
    if (h == NULL)
        return;
    memcpy(h + have, line, strlen(line) + 1);
    r->headers = h;
}

static void on_login_stored(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    struct gw_request *r = privdata;
    redisReply *x = reply;
    struct session_step *s = r->state;
    if (x == NULL || x->type != REDIS_REPLY_ARRAY || s == NULL) {
        gw_respond_no_redis(r);
    } else {
        set_cookie(r, s->token);
        gw_respond_json(r, 200,
                        json_pack("{s:s, s:s, s:s}", "role", s->v.admin ? "admin" : "viewer",
                                  "tenant", s->v.tenant, "csrf", s->v.csrf));
    }
    step_drop(r);
}

static void on_login_key(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    struct gw_request *r = privdata;
    redisReply *k = reply;
    struct session_step *s = r->state;
    struct llmq_error err = {0};
    char key[LLMQ_KEY_FIXED_MAX + LLMQ_GW_KEY_HASH_LEN];
    if (k == NULL || k->type != REDIS_REPLY_ARRAY || s == NULL) {
        gw_respond_no_redis(r);
    } else if (viewer_from_key(r, k, &s->v) != 0) {
        /* answered */
    } else if (llmq_gw_key_generate(s->token, sizeof(s->token), &err) != LLMQ_OK ||
               llmq_gw_key_generate(s->v.csrf, sizeof(s->v.csrf), &err) != LLMQ_OK) {
        gw_respond_errorf(r, 500, "server_error", NULL, NULL, "%s", err.msg);
    } else {
        llmq_gw_key_hash(s->token, strlen(s->token), s->v.session);
        if (llmq_key(key, sizeof(key), r->gw->prefix, LLMQ_KEY_DASH_SESSION, s->v.session, NULL) !=
            LLMQ_OK) {
            gw_respond_errorf(r, 500, "server_error", NULL, NULL, "session key too long");
        } else {
            redisAsyncContext *c = gw_redis(r->gw);
            /* one transaction: a session never exists without its expiry */
            if (c != NULL && redisAsyncCommand(c, NULL, NULL, "MULTI") == REDIS_OK &&
                redisAsyncCommand(c, NULL, NULL, "HSET %s key %s csrf %s", key, s->key_hash,
                                  s->v.csrf) == REDIS_OK &&
                redisAsyncCommand(c, NULL, NULL, "PEXPIRE %s %lld", key, GW_DASH_SESSION_MS) ==
                    REDIS_OK)
                gw_request_command(r, on_login_stored, "EXEC");
            else
                gw_respond_no_redis(r);
        }
    }
}

void gw_dash_session_login(struct gw_request *r)
{
    json_error_t je;
    json_t *body = r->body ? json_loadb(r->body, r->body_len, 0, &je) : NULL;
    const char *key = json_string_value(json_object_get(body, "key"));
    if (key == NULL || key[0] == '\0' || strlen(key) > 512) {
        json_decref(body);
        gw_respond_errorf(r, 400, "invalid_request_error", "key", NULL,
                          "The body must be {\"key\": \"<a dashboard key>\"}.");
        return;
    }
    struct session_step *s = step_new(r);
    if (s == NULL) {
        json_decref(body);
        return;
    }
    llmq_gw_key_hash(key, strlen(key), s->key_hash);
    json_decref(body);
    explicit_bzero(r->body, r->body_len);
    char hk[LLMQ_KEY_FIXED_MAX + LLMQ_GW_KEY_HASH_LEN];
    if (llmq_key(hk, sizeof(hk), r->gw->prefix, LLMQ_KEY_GW_KEY, s->key_hash, NULL) != LLMQ_OK) {
        gw_respond_errorf(r, 500, "server_error", NULL, NULL, "key name too long");
        return;
    }
    gw_request_command(r, on_login_key, "HGETALL %s", hk);
}

static void on_logout(redisAsyncContext *ac, void *reply, void *privdata)
{
    (void)ac;
    struct gw_request *r = privdata;
    if (reply == NULL) {
        gw_respond_no_redis(r);
    } else {
        set_cookie(r, "");
        gw_respond_json(r, 200, json_pack("{s:b}", "ok", 1));
    }
}

void gw_dash_session_logout(struct gw_request *r, const struct gw_dash_viewer *v)
{
    char key[LLMQ_KEY_FIXED_MAX + LLMQ_GW_KEY_HASH_LEN];
    if (llmq_key(key, sizeof(key), r->gw->prefix, LLMQ_KEY_DASH_SESSION, v->session, NULL) !=
        LLMQ_OK) {
        gw_respond_errorf(r, 500, "server_error", NULL, NULL, "session key too long");
        return;
    }
    gw_request_command(r, on_logout, "DEL %s", key);
}
