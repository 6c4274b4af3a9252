/* Unit test of worker/pbatch/pbatch_target.c: where a provider batch's
 * Files and Batches calls go on its endpoint (the implicit one, a named
 * OpenAI-style one, an Azure resource), with which key, and the url of its
 * lines. Pure: no Redis, no HTTP. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* cmocka.h needs setjmp.h, stdarg.h and stddef.h first */
#include <cmocka.h>

#include "pbatch/pbatch_target.h"

static struct llmq_worker_config cfg;
static char east_key[] = "east-key";

static void setup_cfg(void)
{
    memset(&cfg, 0, sizeof(cfg));
    snprintf(cfg.base_url, sizeof(cfg.base_url), "http://own.example/v1x");
    snprintf(cfg.endpoint_keys[0].name, sizeof(cfg.endpoint_keys[0].name), "east");
    cfg.endpoint_keys[0].key = east_key;
    cfg.n_endpoint_keys = 1;
}

static void implicit_endpoint_is_the_workers_own(void **state)
{
    (void)state;
    setup_cfg();
    struct llmq_pbatch_target t = {0};
    char url[512];
    assert_int_equal(llmq_pbatch_target_url(&t, &cfg, "/v1/files", url, sizeof(url)), 0);
    assert_string_equal(url, "http://own.example/v1x/v1/files");
    assert_string_equal(llmq_pbatch_target_key(&t, &cfg, "acct-key"), "acct-key");
    assert_int_equal(llmq_pbatch_target_azure(&t), 0);
    assert_string_equal(llmq_pbatch_target_line_url(&t, "/v1/chat/completions"),
                        "/v1/chat/completions");
}

static void named_openai_endpoint_uses_its_url_and_key(void **state)
{
    (void)state;
    setup_cfg();
    struct llmq_pbatch_target t = {0};
    snprintf(t.ep, sizeof(t.ep), "east");
    snprintf(t.base_url, sizeof(t.base_url), "https://east.example");
    char url[512];
    assert_int_equal(llmq_pbatch_target_url(&t, &cfg, "/v1/batches?limit=100", url, sizeof(url)),
                     0);
    assert_string_equal(url, "https://east.example/v1/batches?limit=100");
    assert_string_equal(llmq_pbatch_target_key(&t, &cfg, "acct-key"), "east-key");
    snprintf(t.ep, sizeof(t.ep), "west"); /* a key this worker does not hold */
    assert_null(llmq_pbatch_target_key(&t, &cfg, "acct-key"));
    char tiny[8];
    assert_int_equal(llmq_pbatch_target_url(&t, &cfg, "/v1/files", tiny, sizeof(tiny)), -1);
}

static void azure_endpoint_uses_the_resource_paths(void **state)
{
    (void)state;
    setup_cfg();
    struct llmq_pbatch_target t = {0};
    snprintf(t.ep, sizeof(t.ep), "east");
    snprintf(t.base_url, sizeof(t.base_url), "https://res.openai.azure.com");
    snprintf(t.api_version, sizeof(t.api_version), "2024-10-21");
    char url[512];
    assert_int_equal(llmq_pbatch_target_url(&t, &cfg, "/v1/files", url, sizeof(url)), 0);
    assert_string_equal(url, "https://res.openai.azure.com/openai/files?api-version=2024-10-21");
    assert_int_equal(llmq_pbatch_target_url(&t, &cfg, "/v1/files?purpose=batch", url, sizeof(url)),
                     0);
    assert_string_equal(url, "https://res.openai.azure.com/openai/files?purpose=batch"
                             "&api-version=2024-10-21");
    /* a deployment URL as the base: the resource is what comes before it */
    snprintf(t.base_url, sizeof(t.base_url),
             "https://res.openai.azure.com/openai/deployments/mini");
    assert_int_equal(llmq_pbatch_target_url(&t, &cfg, "/v1/batches/b1/cancel", url, sizeof(url)),
                     0);
    assert_string_equal(url, "https://res.openai.azure.com/openai/batches/b1/cancel"
                             "?api-version=2024-10-21");
    assert_int_equal(llmq_pbatch_target_azure(&t), 1);
    assert_string_equal(llmq_pbatch_target_line_url(&t, "/v1/chat/completions"),
                        "/chat/completions");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(implicit_endpoint_is_the_workers_own),
        cmocka_unit_test(named_openai_endpoint_uses_its_url_and_key),
        cmocka_unit_test(azure_endpoint_uses_the_resource_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
