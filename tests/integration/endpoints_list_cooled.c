/* `llmq endpoints list` tells an endpoint whose cooling is over from one
 * still cooling. The health hash of an endpoint that failed says "cooling"
 * until its half-open probe settles (lua/lib/endpoints.lua); past its
 * cool_until, with no probe in flight, the endpoint takes a request again.
 * Three endpoints in the states settle leaves them in, written straight to
 * their health hashes (no worker, no waiting):
 *   ep0  cooling ended 22 s ago, no probe sent: ok, its next request a probe
 *        (it was listed "cooling for -22000 ms");
 *   ep1  cooling for another minute;
 *   ep2  cooling over, its probe in flight: probing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "endpoints_support.h"

/* Redis's clock in ms (the scripts' now). */
static long long redis_now_ms(redisContext *c)
{
    redisReply *r = redisCommand(c, "TIME");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    long long ms =
        strtoll(r->element[0]->str, NULL, 10) * 1000 + strtoll(r->element[1]->str, NULL, 10) / 1000;
    freeReplyObject(r);
    return ms;
}

/* Sets endpoint name of account cooling until cool_until (probe in flight
 * until probe_until; 0: none), as a failed call leaves it. */
static void set_cooling(redisContext *c, const char *account, const char *name,
                        long long cool_until, long long probe_until)
{
    char key[256], cu[32], pu[32];
    snprintf(key, sizeof(key), "llmq:{%s}:eph:%s", account, name);
    snprintf(cu, sizeof(cu), "%lld", cool_until);
    snprintf(pu, sizeof(pu), "%lld", probe_until);
    redisReply *r = redisCommand(c, "HSET %s state cooling why %s since_ms %s cool_until %s", key,
                                 "http 500 server_error", cu, cu);
    assert_non_null(r);
    freeReplyObject(r);
    if (probe_until > 0) {
        r = redisCommand(c, "HSET %s probe_until %s", key, pu);
        assert_non_null(r);
        freeReplyObject(r);
    }
}

/* The entry of endpoint name in the list o (borrowed). */
static json_t *entry(json_t *o, const char *name)
{
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(o, "endpoints"), i, e)
    {
        if (strcmp(json_string_value(json_object_get(e, "name")), name) == 0)
            return e;
    }
    fail_msg("endpoint %s not listed", name);
    return NULL;
}

/* The line of endpoint name ("  <name>  ...") in text, into buf. */
static void line_of(const char *text, const char *name, char *buf, size_t n)
{
    char head[64];
    snprintf(head, sizeof(head), "  %s  ", name);
    const char *p = strstr(text, head);
    assert_non_null(p);
    size_t len = strcspn(p, "\n");
    snprintf(buf, n, "%.*s", (int)len, p);
}

static void test_cooled_endpoint_listed_ok(void **state)
{
    (void)state;
    char account[64];
    llmq_test_unique_name(account, sizeof(account), "eplist");
    struct ep_sim eps[3];
    for (int i = 0; i < 3; i++) {
        ep_init(&eps[i], i);
        eps[i].sim.port = llmq_test_free_port(); /* nothing listens: never called */
        ep_add(account, &eps[i], "/v1", NULL);
    }
    redisContext *c = llmq_test_redis_connect();
    long long now = redis_now_ms(c);
    set_cooling(c, account, "ep0", now - 22000, 0);
    set_cooling(c, account, "ep1", now + 60000, 0);
    set_cooling(c, account, "ep2", now - 1000, now + 30000);
    redisFree(c);

    struct cli_run r = ep_cli(account, 0, "endpoints", "list", "--json", NULL);
    json_t *o = json_loads(r.out, 0, NULL);
    assert_non_null(o);
    assert_string_equal(json_string_value(json_object_get(entry(o, "ep0"), "state")), "ok");
    assert_true(json_is_true(json_object_get(entry(o, "ep0"), "probe_next")));
    assert_string_equal(json_string_value(json_object_get(entry(o, "ep1"), "state")), "cooling");
    assert_false(json_is_true(json_object_get(entry(o, "ep1"), "probe_next")));
    assert_string_equal(json_string_value(json_object_get(entry(o, "ep2"), "state")), "probing");
    json_decref(o);
    cli_free(&r);

    r = ep_cli(account, 0, "endpoints", "list", NULL);
    printf("%s", r.out);
    char line[512];
    line_of(r.out, "ep0", line, sizeof(line));
    assert_null(strstr(line, "cooling for"));
    assert_non_null(strstr(line, "ok (cooled down after http 500 server_error; its next "
                                 "request is a probe)"));
    line_of(r.out, "ep1", line, sizeof(line));
    assert_non_null(strstr(line, "cooling for "));
    assert_null(strstr(line, "cooling for -"));
    line_of(r.out, "ep2", line, sizeof(line));
    assert_non_null(strstr(line, "probing"));
    cli_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cooled_endpoint_listed_ok),
    };
    return cmocka_run_group_tests_name("endpoints_list_cooled", tests, NULL, NULL);
}
