/* A gateway key's policy (gateway/key_policy.c): models matched exactly
 * against the comma list, both ways and in every list position; tenant and
 * user pinned; priority a ceiling; a job built from a line gets the key's
 * terms as new copies and is left as it was when refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "key_policy.h"

static struct gw_key key(const char *tenant, const char *user, enum llmq_priority prio,
                         const char *models)
{
    struct gw_key k = {.priority = prio};
    snprintf(k.tenant, sizeof(k.tenant), "%s", tenant);
    snprintf(k.user, sizeof(k.user), "%s", user);
    snprintf(k.models, sizeof(k.models), "%s", models);
    return k;
}

/* The verdict of k for model (no tenant, user; normal priority asked). */
static enum gw_key_verdict for_model(const struct gw_key *k, const char *model)
{
    struct gw_job_terms t = {.model = model};
    struct gw_error e = {0};
    enum gw_key_verdict v = gw_key_policy_decide(k, &t, &e);
    if (v == GW_KEY_REFUSES) {
        assert_int_equal(e.status, 404);
        assert_string_equal(e.type, "invalid_request_error");
        assert_string_equal(e.param, "model");
        assert_string_equal(e.code, "model_not_found");
        assert_non_null(strstr(e.msg, model));
    }
    return v;
}

static void test_models_exact(void **state)
{
    (void)state;
    struct gw_key all = key("", "", LLMQ_PRIORITY_HIGH, "");
    assert_int_equal(for_model(&all, "gpt-4o"), GW_KEY_ALLOWS);
    assert_int_equal(for_model(&all, "anything"), GW_KEY_ALLOWS);

    struct gw_key one = key("acme", "", LLMQ_PRIORITY_HIGH, "gpt-4o");
    assert_int_equal(for_model(&one, "gpt-4o"), GW_KEY_ALLOWS);
    assert_int_equal(for_model(&one, "gpt-4o-mini"), GW_KEY_REFUSES); /* listed is a prefix */
    assert_int_equal(for_model(&one, "gpt-4"), GW_KEY_REFUSES);       /* asked is a prefix */
    assert_int_equal(for_model(&one, "GPT-4O"), GW_KEY_REFUSES);
    assert_int_equal(for_model(&one, ""), GW_KEY_REFUSES);

    struct gw_key mini = key("acme", "", LLMQ_PRIORITY_HIGH, "gpt-4o-mini");
    assert_int_equal(for_model(&mini, "gpt-4o-mini"), GW_KEY_ALLOWS);
    assert_int_equal(for_model(&mini, "gpt-4o"), GW_KEY_REFUSES);
    assert_int_equal(for_model(&mini, "gpt-4o-mini-2024-07-18"), GW_KEY_REFUSES);

    struct gw_key list =
        key("acme", "", LLMQ_PRIORITY_HIGH, "gpt-4o-mini,text-embedding-3-small,o3");
    assert_int_equal(for_model(&list, "gpt-4o-mini"), GW_KEY_ALLOWS);
    assert_int_equal(for_model(&list, "text-embedding-3-small"), GW_KEY_ALLOWS);
    assert_int_equal(for_model(&list, "o3"), GW_KEY_ALLOWS);
    assert_int_equal(for_model(&list, "gpt-4o"), GW_KEY_REFUSES);
    assert_int_equal(for_model(&list, "text-embedding-3"), GW_KEY_REFUSES);
    assert_int_equal(for_model(&list, "o3-mini"), GW_KEY_REFUSES);
    assert_int_equal(for_model(&list, "o"), GW_KEY_REFUSES);
    assert_int_equal(for_model(&list, "gpt-4o-mini,text-embedding-3-small"), GW_KEY_REFUSES);
    /* a NULL model (a future path that has none) is no model the list names */
    struct gw_job_terms t = {0};
    struct gw_error e;
    assert_int_equal(gw_key_policy_decide(&list, &t, &e), GW_KEY_REFUSES);
}

static void test_pins_and_ceiling(void **state)
{
    (void)state;
    struct gw_key pinned = key("acme", "alice", LLMQ_PRIORITY_NORMAL, "");
    struct gw_job_terms t = {"gpt-4o", "other", "bob", LLMQ_PRIORITY_HIGH};
    struct gw_error e;
    assert_int_equal(gw_key_policy_decide(&pinned, &t, &e), GW_KEY_ALLOWS);
    assert_string_equal(t.tenant, "acme");
    assert_string_equal(t.user, "alice");
    assert_int_equal(t.priority, LLMQ_PRIORITY_NORMAL); /* high asked, normal allowed */

    t = (struct gw_job_terms){"gpt-4o", NULL, NULL, LLMQ_PRIORITY_LOW};
    assert_int_equal(gw_key_policy_decide(&pinned, &t, &e), GW_KEY_ALLOWS);
    assert_string_equal(t.tenant, "acme");
    assert_string_equal(t.user, "alice");
    assert_int_equal(t.priority, LLMQ_PRIORITY_LOW); /* below the ceiling: kept */

    /* a key without tenant or user leaves the request's own */
    struct gw_key open = key("", "", LLMQ_PRIORITY_LOW, "");
    t = (struct gw_job_terms){"gpt-4o", "own", "bob", LLMQ_PRIORITY_HIGH};
    assert_int_equal(gw_key_policy_decide(&open, &t, &e), GW_KEY_ALLOWS);
    assert_string_equal(t.tenant, "own");
    assert_string_equal(t.user, "bob");
    assert_int_equal(t.priority, LLMQ_PRIORITY_LOW);
    t = (struct gw_job_terms){"gpt-4o", NULL, NULL, LLMQ_PRIORITY_NORMAL};
    assert_int_equal(gw_key_policy_decide(&open, &t, &e), GW_KEY_ALLOWS);
    assert_null(t.tenant);
    assert_null(t.user);
}

static struct llmq_job line_job(const char *model, const char *tenant, const char *user,
                                enum llmq_priority prio)
{
    struct llmq_job j = {.priority = prio};
    j.id = strdup("line-1");
    j.model = strdup(model);
    j.tenant = tenant ? strdup(tenant) : NULL;
    j.user = user ? strdup(user) : NULL;
    return j;
}

static void test_apply_to_job(void **state)
{
    (void)state;
    struct gw_key k = key("acme", "alice", LLMQ_PRIORITY_NORMAL, "gpt-4o-mini,gpt-4o");
    struct gw_error e;
    struct llmq_job j = line_job("gpt-4o", "other", NULL, LLMQ_PRIORITY_HIGH);
    assert_int_equal(gw_key_policy_apply(&k, &j, &e), GW_KEY_ALLOWS);
    assert_string_equal(j.tenant, "acme");
    assert_string_equal(j.user, "alice");
    assert_ptr_not_equal(j.tenant, k.tenant); /* the job owns its copies */
    assert_ptr_not_equal(j.user, k.user);
    assert_int_equal(j.priority, LLMQ_PRIORITY_NORMAL);
    llmq_job_clear(&j);

    /* refused: the job is as it was */
    j = line_job("gpt-4o-mini-2024-07-18", "other", "bob", LLMQ_PRIORITY_HIGH);
    assert_int_equal(gw_key_policy_apply(&k, &j, &e), GW_KEY_REFUSES);
    assert_string_equal(e.code, "model_not_found");
    assert_non_null(strstr(e.msg, "`gpt-4o-mini-2024-07-18`"));
    assert_string_equal(j.tenant, "other");
    assert_string_equal(j.user, "bob");
    assert_int_equal(j.priority, LLMQ_PRIORITY_HIGH);
    llmq_job_clear(&j);

    /* an unrestricted key changes nothing */
    struct gw_key open = key("", "", LLMQ_PRIORITY_HIGH, "");
    j = line_job("gpt-4o", "own", "bob", LLMQ_PRIORITY_LOW);
    char *tenant = j.tenant, *user = j.user;
    assert_int_equal(gw_key_policy_apply(&open, &j, &e), GW_KEY_ALLOWS);
    assert_ptr_equal(j.tenant, tenant);
    assert_ptr_equal(j.user, user);
    assert_int_equal(j.priority, LLMQ_PRIORITY_LOW);
    llmq_job_clear(&j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_models_exact),
        cmocka_unit_test(test_pins_and_ceiling),
        cmocka_unit_test(test_apply_to_job),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
