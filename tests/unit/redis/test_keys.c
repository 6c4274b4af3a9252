/* The key builder (common/redis/keys.c): every kind writes the layout keys.h
 * documents, names go where the kind takes one, and a key that does not fit,
 * a missing or extra name or an unknown kind is an error with an empty buffer,
 * never a truncated key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "redis/keys.h"

#define P "llmq:{acct}:"

static void test_layout(void **state)
{
    (void)state;
    static const struct {
        enum llmq_key_kind kind;
        const char *name, *want;
    } cases[] = {
        {LLMQ_KEY_LIMIT, "gpt-4o/t/acme", P "limit:gpt-4o/t/acme"},
        {LLMQ_KEY_POLICY, NULL, P "policy"},
        {LLMQ_KEY_WINDOW_LOG, "gpt-4o", P "bw:gpt-4o"},
        {LLMQ_KEY_ARRIVED_LOG, "gpt-4o", P "bws:gpt-4o"},
        {LLMQ_KEY_JOB, "j-1", P "job:j-1"},
        {LLMQ_KEY_JOB_BODY, "j-1", P "body:j-1"},
        {LLMQ_KEY_JOB_RECORD, "j-1", P "jr:j-1"},
        {LLMQ_KEY_QUEUE, "high", P "q:high"},
        {LLMQ_KEY_DELAYED, NULL, P "delayed"},
        {LLMQ_KEY_WEIGHTS, NULL, P "weights"},
        {LLMQ_KEY_BACKLOG, "low", P "backlog:low"},
        {LLMQ_KEY_WAKE, NULL, P "wake"},
        {LLMQ_KEY_RESULT, "j-1", P "res:j-1"},
        {LLMQ_KEY_EVENTS, NULL, P "events"},
        {LLMQ_KEY_DEAD, NULL, P "dead"},
        {LLMQ_KEY_DONE, NULL, P "done"},
        {LLMQ_KEY_OLD_RESULTS, NULL, P "results"},
        {LLMQ_KEY_WORKERS, NULL, P "workers"},
        {LLMQ_KEY_WORKER_INFO, NULL, P "winfo"},
        {LLMQ_KEY_STATS, NULL, P "stats"},
        {LLMQ_KEY_CALIB, NULL, P "calib"},
        {LLMQ_KEY_SETTINGS, NULL, P "settings"},
        {LLMQ_KEY_AUTH_PAUSE, NULL, P "auth_pause"},
        {LLMQ_KEY_GW_KEY, "ab12", P "gw:key:ab12"},
        {LLMQ_KEY_GW_KEYS, NULL, P "gw:keys"},
        {LLMQ_KEY_GW_FILE, "file-1", P "gw:file:file-1"},
        {LLMQ_KEY_GW_FILES, NULL, P "gw:files"},
        {LLMQ_KEY_GW_FILE_JOBS, "file-1", P "gw:file:file-1:jobs"},
        {LLMQ_KEY_GW_FILE_DATA, "file-1", P "gw:file:file-1:data"},
        {LLMQ_KEY_GW_BATCH, "batch_1", P "gw:batch:batch_1"},
        {LLMQ_KEY_GW_BATCH_JOBS, "batch_1", P "gw:batch:batch_1:jobs"},
        {LLMQ_KEY_GW_BATCHES, NULL, P "gw:batches"},
        {LLMQ_KEY_GW_STAGING, NULL, P "gw:staging"},
        {LLMQ_KEY_GW_LEASE, "gw-1f", P "gw:lease:gw-1f"},
        {LLMQ_KEY_BUDGETS, NULL, P "budgets"},
        {LLMQ_KEY_BUDGET, "t/acme#usd/month", P "budget:t/acme#usd/month"},
        {LLMQ_KEY_PRICES, NULL, P "prices"},
        {LLMQ_KEY_SPEND, "2026-12-02", P "spend:2026-12-02"},
        {LLMQ_KEY_SSE, "gw-7", P "sse:gw-7"},
        {LLMQ_KEY_SSE_WORKER, "host-7", P "ssw:host-7"},
        {LLMQ_KEY_SLOT_GUARD, NULL, P "slot_guard"},
        {LLMQ_KEY_SEQ, NULL, P "seq"},
        {LLMQ_KEY_KEY_QUEUE, "normal|m|t|u", P "kq:normal|m|t|u"},
        {LLMQ_KEY_SCHED_MODELS, "high", P "sm:high"},
        {LLMQ_KEY_SCHED_TENANTS, "high|m", P "st:high|m"},
        {LLMQ_KEY_SCHED_USERS, "high|m|t", P "su:high|m|t"},
        {LLMQ_KEY_SCHED_BLOCKED, NULL, P "sblk"},
        {LLMQ_KEY_BLOCKED_ON, "m/t/acme", P "sbb:m/t/acme"},
        {LLMQ_KEY_SCHED_VTIME, NULL, P "svt"},
        {LLMQ_KEY_ENDPOINTS, NULL, P "eps"},
        {LLMQ_KEY_ENDPOINT, "east", P "ep:east"},
        {LLMQ_KEY_EP_HEALTH, "east", P "eph:east"},
        {LLMQ_KEY_MODEL_EPS, "gpt-4o", P "epm:gpt-4o"},
        {LLMQ_KEY_EP_ROUTES, NULL, P "eproute"},
        {LLMQ_KEY_EP_FALLBACKS, NULL, P "epfb"},
        {LLMQ_KEY_GW_BATCH_LIVE, "batch_1", P "gw:batch:batch_1:live"},
        {LLMQ_KEY_DONE_SEC, "1764664502", P "done_sec:1764664502"},
        {LLMQ_KEY_OFFLOAD, NULL, P "offload"},
        {LLMQ_KEY_PB_STAGE, "m|/v1/embeddings", P "pbs:m|/v1/embeddings"},
        {LLMQ_KEY_PB_STAGED, NULL, P "pbsi"},
        {LLMQ_KEY_PBATCH, "pb-1-2", P "pb:pb-1-2"},
        {LLMQ_KEY_PBATCH_JOBS, "pb-1-2", P "pbj:pb-1-2"},
        {LLMQ_KEY_PBATCHES, NULL, P "pbl"},
        {LLMQ_KEY_PBATCH_DUE, NULL, P "pba"},
        {LLMQ_KEY_PB_ELIGIBLE, "gpt-4o-mini", P "pbe:gpt-4o-mini"},
        {LLMQ_KEY_PB_AUTO, "gpt-4o-mini", P "pbau:gpt-4o-mini"},
        {LLMQ_KEY_PB_QUEUE, "gpt-4o-mini@east", P "pbq:gpt-4o-mini@east"},
        {LLMQ_KEY_PB_DEADLINES, NULL, P "pbd"},
        {LLMQ_KEY_PB_PARKED, NULL, P "pbp"},
        {LLMQ_KEY_DASH_SESSION, "ab12", P "dash:sess:ab12"},
        {LLMQ_KEY_CACHE, "t1|gpt-4o|ab12", P "cache:t1|gpt-4o|ab12"},
        {LLMQ_KEY_CACHE_FLIGHT, "|gpt-4o|ab12", P "cachef:|gpt-4o|ab12"},
        {LLMQ_KEY_CACHE_WAIT, "t1|m|ab", P "cachew:t1|m|ab"},
        {LLMQ_KEY_CACHE_DUE, NULL, P "cachedl"},
        {LLMQ_KEY_CACHE_INDEX, NULL, P "cachei"},
        {LLMQ_KEY_CACHE_STATS, NULL, P "caches"},
        {LLMQ_KEY_CACHE_CONFIG, NULL, P "cachecfg"},
    };
    assert_int_equal(sizeof(cases) / sizeof(cases[0]), LLMQ_KEY_KIND_COUNT);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char buf[LLMQ_KEY_FIXED_MAX + 64];
        struct llmq_error err = {0};
        assert_int_equal(llmq_key(buf, sizeof(buf), P, cases[i].kind, cases[i].name, &err),
                         LLMQ_OK);
        assert_string_equal(buf, cases[i].want);
        /* the head reads the name back out of the key */
        const char *head = llmq_key_head(cases[i].kind);
        assert_non_null(head);
        assert_memory_equal(buf + strlen(P), head, strlen(head));
    }
}

static void test_exact_fit_and_overflow(void **state)
{
    (void)state;
    char buf[sizeof(P "res:abc")];
    assert_int_equal(llmq_key(buf, sizeof(buf), P, LLMQ_KEY_RESULT, "abc", NULL), LLMQ_OK);
    assert_string_equal(buf, P "res:abc");
    struct llmq_error err = {0};
    assert_int_equal(llmq_key(buf, sizeof(buf), P, LLMQ_KEY_RESULT, "abcd", &err), LLMQ_EINVAL);
    assert_string_equal(buf, "");
    assert_non_null(strstr(err.msg, "res:abcd"));
    assert_non_null(strstr(err.msg, "longer than"));
    /* the tail counts too */
    char small[sizeof(P "gw:batch:b")];
    assert_int_equal(llmq_key(small, sizeof(small), P, LLMQ_KEY_GW_BATCH_JOBS, "b", NULL),
                     LLMQ_EINVAL);
    assert_string_equal(small, "");
}

static void test_name_required_or_refused(void **state)
{
    (void)state;
    char buf[LLMQ_KEY_FIXED_MAX];
    struct llmq_error err = {0};
    assert_int_equal(llmq_key(buf, sizeof(buf), P, LLMQ_KEY_JOB, NULL, &err), LLMQ_EINVAL);
    assert_non_null(strstr(err.msg, "needs a name"));
    assert_string_equal(buf, "");
    assert_int_equal(llmq_key(buf, sizeof(buf), P, LLMQ_KEY_STATS, "x", &err), LLMQ_EINVAL);
    assert_non_null(strstr(err.msg, "takes no name"));
    assert_int_equal(llmq_key(buf, sizeof(buf), P, LLMQ_KEY_KIND_COUNT, NULL, &err), LLMQ_EINVAL);
    assert_non_null(strstr(err.msg, "unknown kind"));
    assert_null(llmq_key_head(LLMQ_KEY_KIND_COUNT));
    assert_int_equal(llmq_key(buf, sizeof(buf), NULL, LLMQ_KEY_STATS, NULL, &err), LLMQ_EINVAL);
    assert_int_equal(llmq_key(buf, 0, P, LLMQ_KEY_STATS, NULL, &err), LLMQ_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout),
        cmocka_unit_test(test_exact_fit_and_overflow),
        cmocka_unit_test(test_name_required_or_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
