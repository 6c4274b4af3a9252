/* Offload on an Azure OpenAI endpoint, end to end: real Redis, a real
 * llmq-worker, openai-sim --azure (docs/DESIGN.md §3.10). The endpoint
 * (--azure-api-version, a deployment name): its offload goes through
 * /openai/files and /openai/batches with ?api-version= and the api-key
 * header (the sim refuses a Bearer key there), the batch's endpoint
 * "/chat/completions" and each line's model the deployment; every job
 * answered once, offloaded. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

/* cmocka.h needs setjmp.h, stdarg.h and stddef.h first */
#include <cmocka.h>

#include "offload_support.h"

#define AZ_JOBS 12

static void azure_endpoint_uses_azure_paths(void **state)
{
    (void)state;
    struct llmq_test_account a;
    llmq_test_account_open(&a, "offepaz");
    struct ep_sim az;
    ep_init(&az, 7);
    snprintf(az.name, sizeof(az.name), "azure-east");
    const char *sim_args[] = {"--azure", "--batch-pace-ms", "200", NULL};
    ep_sim_start(&az, sim_args);
    const char *x[] = {"--azure-api-version", "2024-10-21", NULL};
    ep_add(a.name, &az, "", x);
    struct cli_run r = ep_cli(a.name, 0, "limits", "set", MINI, "--endpoint", az.name, "--rpm",
                              "100000", "--deployment", "mini-global", NULL);
    cli_free(&r);
    offload_policy_all(a.name, MINI, 5);
    enqueue_marked(a.name, "az", "z-", AZ_JOBS);
    char log[128], store[1][96];
    worker_log_path(log, "offepaz", 0);
    const char *args[4];
    ep_key_args(&az, 1, args, 0, store);
    pid_t w = worker_start(a.name, &az.sim, log, args);
    wait_results(&a, "z-", AZ_JOBS);
    kill(w, SIGTERM);
    assert_int_equal(worker_wait(w, 60000), 0);
    /* every call on the Azure paths, answered 200: with api-version and the
     * api-key header (the sim refuses a Bearer key there) */
    size_t calls = ep_check_log(a.c, a.prefix, &az, 1);
    int seen[AZ_JOBS] = {0};
    size_t nb = ep_count_lines(&az, 1, "z-", seen, AZ_JOBS, "mini-global", "/chat/completions");
    for (int k = 0; k < AZ_JOBS; k++)
        assert_int_equal(seen[k], 1);
    assert_true(nb >= 3); /* 12 jobs, 5 a file */
    fprintf(stderr, "offload_endpoints: azure: %zu batches, %zu calls\n", nb, calls);
    assert_true(calls >= 4 * nb); /* upload, create, polls, downloads */
    /* the sim's Azure form itself: no api-version is a 404, a Bearer key 401 */
    struct sim_resp sr;
    char h[160];
    snprintf(h, sizeof(h), "api-key: %s", az.key);
    const char *hs[] = {h, NULL};
    sim_http(&az.sim, "/openai/batches", NULL, hs, &sr);
    assert_int_equal(sr.status, 404);
    sim_resp_free(&sr);
    snprintf(h, sizeof(h), "Authorization: Bearer %s", az.key);
    sim_http(&az.sim, "/openai/batches?api-version=2024-10-21", NULL, hs, &sr);
    assert_int_equal(sr.status, 401);
    sim_resp_free(&sr);
    ep_sim_stop(&az);
    llmq_test_account_close(&a);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(azure_endpoint_uses_azure_paths),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
