/* The key builder of keys.h: one table of the key names below an account
 * prefix, so no other code spells a key out; and the names and the prefix
 * a key is made of (llmq_name_valid, llmq_account_prefix). The Lua scripts' key helpers
 * (KEY.<kind> in lua/: KEY.job(P, id)) are generated from this table by
 * cmake/embed_lua.cmake, which reads its rows as they are written here. */
#include "redis/keys.h"

#include <stdio.h>
#include <string.h>

struct key_name {
    const char *head; /* after the prefix, before the name */
    const char *tail; /* after the name */
    int named;        /* takes a name */
};

static const struct key_name key_names[LLMQ_KEY_KIND_COUNT] = {
    [LLMQ_KEY_LIMIT] = {"limit:", "", 1},
    [LLMQ_KEY_POLICY] = {"policy", "", 0},
    [LLMQ_KEY_WINDOW_LOG] = {"bw:", "", 1},
    [LLMQ_KEY_ARRIVED_LOG] = {"bws:", "", 1},
    [LLMQ_KEY_JOB] = {"job:", "", 1},
    [LLMQ_KEY_JOB_RECORD] = {"jr:", "", 1},
    [LLMQ_KEY_JOB_BODY] = {"body:", "", 1},
    [LLMQ_KEY_QUEUE] = {"q:", "", 1},
    [LLMQ_KEY_DELAYED] = {"delayed", "", 0},
    [LLMQ_KEY_WEIGHTS] = {"weights", "", 0},
    [LLMQ_KEY_BACKLOG] = {"backlog:", "", 1},
    [LLMQ_KEY_WAKE] = {"wake", "", 0},
    [LLMQ_KEY_RESULT] = {"res:", "", 1},
    [LLMQ_KEY_EVENTS] = {"events", "", 0},
    [LLMQ_KEY_DEAD] = {"dead", "", 0},
    [LLMQ_KEY_DONE] = {"done", "", 0},
    [LLMQ_KEY_OLD_RESULTS] = {"results", "", 0},
    [LLMQ_KEY_WORKERS] = {"workers", "", 0},
    [LLMQ_KEY_WORKER_INFO] = {"winfo", "", 0},
    [LLMQ_KEY_STATS] = {"stats", "", 0},
    [LLMQ_KEY_CALIB] = {"calib", "", 0},
    [LLMQ_KEY_SETTINGS] = {"settings", "", 0},
    [LLMQ_KEY_AUTH_PAUSE] = {"auth_pause", "", 0},
    [LLMQ_KEY_GW_KEY] = {"gw:key:", "", 1},
    [LLMQ_KEY_GW_KEYS] = {"gw:keys", "", 0},
    [LLMQ_KEY_GW_FILE] = {"gw:file:", "", 1},
    [LLMQ_KEY_GW_FILES] = {"gw:files", "", 0},
    [LLMQ_KEY_GW_FILE_JOBS] = {"gw:file:", ":jobs", 1},
    [LLMQ_KEY_GW_FILE_DATA] = {"gw:file:", ":data", 1},
    [LLMQ_KEY_GW_BATCH] = {"gw:batch:", "", 1},
    [LLMQ_KEY_GW_BATCH_JOBS] = {"gw:batch:", ":jobs", 1},
    [LLMQ_KEY_GW_BATCHES] = {"gw:batches", "", 0},
    [LLMQ_KEY_GW_STAGING] = {"gw:staging", "", 0},
    [LLMQ_KEY_GW_LEASE] = {"gw:lease:", "", 1},
    [LLMQ_KEY_BUDGETS] = {"budgets", "", 0},
    [LLMQ_KEY_BUDGET] = {"budget:", "", 1},
    [LLMQ_KEY_PRICES] = {"prices", "", 0},
    [LLMQ_KEY_SPEND] = {"spend:", "", 1},
    [LLMQ_KEY_SSE] = {"sse:", "", 1},
    [LLMQ_KEY_SSE_WORKER] = {"ssw:", "", 1},
    [LLMQ_KEY_SLOT_GUARD] = {"slot_guard", "", 0},
    [LLMQ_KEY_SEQ] = {"seq", "", 0},
    [LLMQ_KEY_KEY_QUEUE] = {"kq:", "", 1},
    [LLMQ_KEY_SCHED_MODELS] = {"sm:", "", 1},
    [LLMQ_KEY_SCHED_TENANTS] = {"st:", "", 1},
    [LLMQ_KEY_SCHED_USERS] = {"su:", "", 1},
    [LLMQ_KEY_SCHED_BLOCKED] = {"sblk", "", 0},
    [LLMQ_KEY_BLOCKED_ON] = {"sbb:", "", 1},
    [LLMQ_KEY_SCHED_VTIME] = {"svt", "", 0},
    [LLMQ_KEY_ENDPOINTS] = {"eps", "", 0},
    [LLMQ_KEY_ENDPOINT] = {"ep:", "", 1},
    [LLMQ_KEY_EP_HEALTH] = {"eph:", "", 1},
    [LLMQ_KEY_MODEL_EPS] = {"epm:", "", 1},
    [LLMQ_KEY_EP_ROUTES] = {"eproute", "", 0},
    [LLMQ_KEY_EP_FALLBACKS] = {"epfb", "", 0},
    [LLMQ_KEY_GW_BATCH_LIVE] = {"gw:batch:", ":live", 1},
    [LLMQ_KEY_DONE_SEC] = {"done_sec:", "", 1},
    [LLMQ_KEY_OFFLOAD] = {"offload", "", 0},
    [LLMQ_KEY_PB_STAGE] = {"pbs:", "", 1},
    [LLMQ_KEY_PB_STAGED] = {"pbsi", "", 0},
    [LLMQ_KEY_PBATCH] = {"pb:", "", 1},
    [LLMQ_KEY_PBATCH_JOBS] = {"pbj:", "", 1},
    [LLMQ_KEY_PBATCHES] = {"pbl", "", 0},
    [LLMQ_KEY_PBATCH_DUE] = {"pba", "", 0},
    [LLMQ_KEY_PB_ELIGIBLE] = {"pbe:", "", 1},
    [LLMQ_KEY_PB_AUTO] = {"pbau:", "", 1},
    [LLMQ_KEY_PB_QUEUE] = {"pbq:", "", 1},
    [LLMQ_KEY_PB_DEADLINES] = {"pbd", "", 0},
    [LLMQ_KEY_PB_PARKED] = {"pbp", "", 0},
    [LLMQ_KEY_DASH_SESSION] = {"dash:sess:", "", 1},
    [LLMQ_KEY_CACHE] = {"cache:", "", 1},
    [LLMQ_KEY_CACHE_FLIGHT] = {"cachef:", "", 1},
    [LLMQ_KEY_CACHE_WAIT] = {"cachew:", "", 1},
    [LLMQ_KEY_CACHE_INDEX] = {"cachei", "", 0},
    [LLMQ_KEY_CACHE_STATS] = {"caches", "", 0},
    [LLMQ_KEY_CACHE_DUE] = {"cachedl", "", 0},
    [LLMQ_KEY_CACHE_CONFIG] = {"cachecfg", "", 0},
};

const char *llmq_key_head(enum llmq_key_kind kind)
{
    if ((int)kind < 0 || kind >= LLMQ_KEY_KIND_COUNT)
        return NULL;
    return key_names[kind].head;
}

enum llmq_rc llmq_key(char *buf, size_t len, const char *prefix, enum llmq_key_kind kind,
                      const char *name, struct llmq_error *err)
{
    if (buf != NULL && len > 0)
        buf[0] = '\0';
    if (buf == NULL || len == 0 || prefix == NULL)
        return llmq_error_set(err, LLMQ_EINVAL, "key: no buffer or no prefix");
    if ((int)kind < 0 || kind >= LLMQ_KEY_KIND_COUNT)
        return llmq_error_set(err, LLMQ_EINVAL, "key: unknown kind %d", (int)kind);
    const struct key_name *k = &key_names[kind];
    if (k->named != (name != NULL))
        return llmq_error_set(err, LLMQ_EINVAL, "key %s%s: %s", k->head, k->tail,
                              k->named ? "needs a name" : "takes no name");
    int n = snprintf(buf, len, "%s%s%s%s", prefix, k->head, name != NULL ? name : "", k->tail);
    if (n < 0 || (size_t)n >= len) {
        buf[0] = '\0';
        return llmq_error_set(err, LLMQ_EINVAL, "key %s%s%s is longer than %zu bytes", k->head,
                              name != NULL ? name : "", k->tail, len - 1);
    }
    return LLMQ_OK;
}

int llmq_name_valid(const char *s)
{
    if (s == NULL)
        return 0;
    size_t n = strlen(s);
    if (n == 0 || n > 200)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= 0x20 || c == 0x7f || c == '/' || c == '|' || c == '{' || c == '}')
            return 0;
    }
    return 1;
}

enum llmq_rc llmq_account_prefix(const char *account, char *buf, size_t n, struct llmq_error *err)
{
    if (!llmq_name_valid(account))
        return llmq_error_set(err, LLMQ_EINVAL,
                              "account name must be 1..200 bytes without spaces, '/', '|', "
                              "'{' or '}'");
    int len = snprintf(buf, n, "llmq:{%s}:", account);
    if (len < 0 || (size_t)len >= n)
        return llmq_error_set(err, LLMQ_EINVAL, "account name too long");
    return LLMQ_OK;
}
