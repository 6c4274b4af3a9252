/* The dashboard's snapshot (gateway/dashboard/snapshot.c) from a reply of
 * lua/top_snapshot.lua decoded by hiredis's own reader from the bytes Redis
 * would send: every part lands where the page reads it; a tenant's view and
 * its chart points hold that tenant and nothing of another (nor the
 * account-wide figures); a reply of another shape is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dashboard/snapshot.h"

/* A bulk string in RESP. */
static void bulk(char *out, size_t cap, const char *s)
{
    size_t have = strlen(out);
    snprintf(out + have, cap - have, "$%zu\r\n%s\r\n", strlen(s), s);
}

static void raw(char *out, size_t cap, const char *s)
{
    size_t have = strlen(out);
    snprintf(out + have, cap - have, "%s", s);
}

static const char views[] =
    "{\"queues\":{\"high\":{\"queued\":0,\"in_flight\":1,\"oldest_enq_ms\":0},"
    "\"normal\":{\"queued\":6,\"in_flight\":2,\"oldest_enq_ms\":900}},"
    "\"groups\":{\"gpt|acme\":900,\"gpt|beta\":950},\"delayed\":3,\"dead_letters\":4,"
    "\"workers\":{\"w1\":990,\"w2\":100},"
    "\"endpoints\":{\"now_ms\":1000,\"endpoints\":[{\"name\":\"ep-a\",\"state\":\"ok\","
    "\"models\":[{\"model\":\"gpt\",\"bucket\":\"gpt@ep-a\",\"requests_used\":7,"
    "\"requests_limit\":70,\"tokens_used\":0,\"tokens_limit\":-1}]}]},"
    "\"users\":{\"acme|ann\":{\"queued\":3,\"parked\":1,\"jobs\":4},"
    "\"beta|bob\":{\"queued\":0,\"parked\":0,\"jobs\":2}}}";

/* The reply of one snapshot at now_ms 1000: two rows (acme, beta). */
static redisReply *snapshot_reply(int elements)
{
    static char resp[8192];
    resp[0] = '\0';
    char head[16];
    snprintf(head, sizeof(head), "*%d\r\n", elements);
    raw(resp, sizeof(resp), head);
    /* P stats: done, dead, cancelled, http_429, insufficient_quota,
     * http_429_spurious, own_429_wait, own_429_budget; then in flight */
    raw(resp, sizeof(resp),
        ":1000\r\n*8\r\n:10\r\n:4\r\n:1\r\n:9\r\n:2\r\n:1\r\n:6\r\n:5\r\n:3\r\n");
    raw(resp, sizeof(resp), "*8\r\n");
    const char *rows[] = {"gpt", "acme", "4", "1", "gpt", "beta", "2", "0"};
    for (int i = 0; i < 8; i++)
        bulk(resp, sizeof(resp), rows[i]);
    raw(resp, sizeof(resp), "*18\r\n");
    const char *b[] = {"gpt",        "1", "10", "100", "1000", "60000",
                       "gpt/t/acme", "2", "20", "50",  "-1",   "60000",
                       "gpt/t/beta", "3", "30", "50",  "-1",   "60000"};
    for (int i = 0; i < 18; i++)
        bulk(resp, sizeof(resp), b[i]);
    raw(resp, sizeof(resp), "*6\r\n");
    const char *m[] = {"gpt|acme|n", "5", "gpt|acme|tok", "50", "gpt|beta|n", "3"};
    for (int i = 0; i < 6; i++)
        bulk(resp, sizeof(resp), m[i]);
    if (elements > 6)
        bulk(resp, sizeof(resp), views);
    redisReader *rd = redisReaderCreate();
    assert_non_null(rd);
    void *reply = NULL;
    assert_int_equal(redisReaderFeed(rd, resp, strlen(resp)), REDIS_OK);
    assert_int_equal(redisReaderGetReply(rd, &reply), REDIS_OK);
    redisReaderFree(rd);
    assert_non_null(reply);
    return reply;
}

static json_int_t num(const json_t *o, const char *path)
{
    /* "a.b.c" */
    char buf[128];
    snprintf(buf, sizeof(buf), "%s", path);
    const json_t *v = o;
    char *save = NULL;
    for (char *p = strtok_r(buf, ".", &save); p != NULL; p = strtok_r(NULL, ".", &save))
        v = json_is_array(v) ? json_array_get(v, (size_t)strtol(p, NULL, 10))
                             : json_object_get(v, p);
    assert_true(json_is_integer(v));
    return json_integer_value(v);
}

static const char *str(const json_t *o, const char *a, size_t i, const char *b)
{
    return json_string_value(json_object_get(json_array_get(json_object_get(o, a), i), b));
}

static void test_whole_account(void **state)
{
    (void)state;
    redisReply *r = snapshot_reply(7);
    json_t *s = gw_dash_snapshot_from_reply(r);
    assert_non_null(s);
    assert_int_equal(num(s, "now_ms"), 1000);
    assert_int_equal(num(s, "stats.done"), 10);
    assert_int_equal(num(s, "stats.insufficient_quota"), 2);
    assert_int_equal(num(s, "stats.http_429_spurious"), 1);
    /* the 429s llmq-gateway answered itself, by cause */
    assert_int_equal(num(s, "stats.own_429_wait"), 6);
    assert_int_equal(num(s, "stats.own_429_budget"), 5);
    assert_int_equal(num(s, "in_flight"), 3);
    assert_int_equal(json_array_size(json_object_get(s, "rows")), 2);
    assert_string_equal(str(s, "rows", 1, "tenant"), "beta");
    assert_int_equal(num(s, "rows.0.queued"), 4);
    assert_true(
        json_is_true(json_object_get(json_array_get(json_object_get(s, "rows"), 0), "blocked")));
    assert_int_equal(num(s, "rows.0.oldest_enq_ms"), 900);
    assert_int_equal(num(s, "rows.1.oldest_enq_ms"), 950);
    assert_int_equal(num(s, "buckets.0.tokens_limit"), 1000);
    assert_int_equal(num(s, "buckets.1.tokens_limit"), -1);
    /* the minute's counts and tokens of one model and tenant: one row */
    assert_int_equal(json_array_size(json_object_get(s, "minute")), 2);
    assert_int_equal(num(s, "minute.0.jobs"), 5);
    assert_int_equal(num(s, "minute.0.tokens"), 50);
    assert_int_equal(num(s, "queues.normal.queued"), 6);
    assert_int_equal(num(s, "delayed"), 3);
    assert_int_equal(num(s, "dead_letters"), 4);
    /* each named user's queued, parked and done in the last minute */
    json_t *users = json_object_get(s, "users");
    assert_int_equal(json_array_size(users), 2);
    for (size_t i = 0; i < 2; i++) {
        json_t *u = json_array_get(users, i);
        const char *who = json_string_value(json_object_get(u, "user"));
        assert_non_null(who);
        if (strcmp(who, "ann") == 0) {
            assert_string_equal(json_string_value(json_object_get(u, "tenant")), "acme");
            assert_int_equal(num(u, "queued"), 3);
            assert_int_equal(num(u, "parked"), 1);
            assert_int_equal(num(u, "jobs"), 4);
        } else {
            assert_string_equal(who, "bob");
            assert_string_equal(json_string_value(json_object_get(u, "tenant")), "beta");
            assert_int_equal(num(u, "jobs"), 2);
        }
    }
    /* a worker's age is now - its heartbeat */
    json_t *w = json_object_get(s, "workers");
    json_int_t ages = 0;
    for (size_t i = 0; i < json_array_size(w); i++)
        ages += num(json_array_get(w, i), "seen_ms_ago");
    assert_int_equal(ages, 10 + 900);
    /* the chart point holds every bucket, an endpoint's too */
    json_t *p = gw_dash_snapshot_point(s);
    assert_non_null(p);
    assert_int_equal(num(p, "b.gpt@ep-a.0"), 7);
    assert_int_equal(num(p, "b.gpt@ep-a.1"), 70);
    assert_int_equal(num(p, "b.gpt.3"), 1000);
    assert_int_equal(num(p, "queued.normal"), 6);
    assert_int_equal(num(p, "done"), 10);
    assert_int_equal(num(p, "own_429_wait"), 6);
    assert_int_equal(num(p, "own_429_budget"), 5);
    json_decref(p);
    json_decref(s);
    freeReplyObject(r);
}

static void test_tenant_sees_its_own(void **state)
{
    (void)state;
    redisReply *r = snapshot_reply(7);
    json_t *s = gw_dash_snapshot_from_reply(r);
    json_t *t = gw_dash_snapshot_for_tenant(s, "acme");
    assert_non_null(t);
    char *text = json_dumps(t, JSON_COMPACT);
    assert_non_null(text);
    assert_null(strstr(text, "beta"));
    assert_non_null(strstr(text, "acme"));
    assert_int_equal(json_array_size(json_object_get(t, "rows")), 1);
    assert_int_equal(json_array_size(json_object_get(t, "buckets")), 1);
    assert_string_equal(str(t, "buckets", 0, "name"), "gpt/t/acme");
    assert_int_equal(json_array_size(json_object_get(t, "minute")), 1);
    assert_int_equal(json_array_size(json_object_get(t, "users")), 1);
    assert_string_equal(str(t, "users", 0, "user"), "ann");
    for (const char *const *k = (const char *const[]){"stats", "queues", "endpoints", "workers",
                                                      "dead_letters", "delayed", NULL};
         *k != NULL; k++)
        assert_null(json_object_get(t, *k));
    free(text);
    json_t *p = gw_dash_snapshot_point(s);
    json_t *tp = gw_dash_point_for_tenant(p, "acme");
    assert_int_equal(json_object_size(json_object_get(tp, "b")), 1);
    assert_non_null(json_object_get(json_object_get(tp, "b"), "gpt/t/acme"));
    assert_null(json_object_get(tp, "done"));
    json_decref(tp);
    json_decref(p);
    json_decref(t);
    json_decref(s);
    freeReplyObject(r);
}

static void test_other_shape_refused(void **state)
{
    (void)state;
    redisReply *r = snapshot_reply(6); /* an older library: no views */
    assert_null(gw_dash_snapshot_from_reply(r));
    freeReplyObject(r);
    assert_null(gw_dash_snapshot_from_reply(NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_account),
        cmocka_unit_test(test_tenant_sees_its_own),
        cmocka_unit_test(test_other_shape_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
