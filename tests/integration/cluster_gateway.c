/* llmq-gateway on a Redis Cluster: 3 primaries with a replica each, 3
 * accounts (one per primary), one llmq-gateway per account and one worker
 * serving all three, every process given the same redis+cluster:// URL.
 * Clients call the gateways over HTTP: a Batch (file upload, batch, output
 * file) for account 0 and synchronous chat calls for every account, all
 * queued behind each account's limit. Mid-run the primary of account 0 hands
 * over to its replica (CLUSTER FAILOVER: its gateway's and the worker's
 * connections are answered MOVED) while the slot of account 1 is moved live
 * to the primary of account 2 (its calls meet ASK, TRYAGAIN, then MOVED);
 * more calls follow on the new owners. Nothing of it reaches a client: every
 * call is answered 200 with its completion, the batch completes with one
 * result per line; every job ended exactly once (read on the node that
 * serves its account now), reached the API once, and no account was over its
 * limit there. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "cluster_support.h"

#define ACCOUNTS 3
#define CALLS_BEFORE 8 /* sync calls per account sent before the cluster changes */
#define CALLS_AFTER 4  /* ...and after */
#define BATCH_LINES 10
#define RPM 10
#define PERIOD_MS 2600
#define TEST_CALLS (ACCOUNTS * (CALLS_BEFORE + CALLS_AFTER))

struct gw_proc {
    pid_t pid;
    int port;
    char key[128]; /* a gateway key of the account (`llmq keys create`) */
    char log[128];
};

/* Starts llmq-gateway for account k of r on a free port and creates a key;
 * waits until /readyz says it reached its node. */
static void gw_start(struct cluster_run *r, int k, struct gw_proc *g)
{
    char port_file[128];
    snprintf(port_file, sizeof(port_file), "/tmp/llmq-cluster-gw-%d-%d.port", (int)getpid(), k);
    snprintf(g->log, sizeof(g->log), "/tmp/llmq-cluster-gw-%d-%d.log", (int)getpid(), k);
    unlink(port_file);
    g->pid = llmq_test_fork();
    assert_true(g->pid >= 0);
    if (g->pid == 0) {
        FILE *f = fopen(g->log, "w");
        if (f != NULL) {
            dup2(fileno(f), 2);
            dup2(fileno(f), 1);
        }
        const char *argv[] = {"llmq-gateway", "--redis",     r->cl.url,     "--account",
                              r->accounts[k], "--listen",    "127.0.0.1:0", "--port-file",
                              port_file,      "--log-level", "info",        NULL};
        execv(llmq_test_bin("llmq-gateway", 0), (char *const *)argv);
        _exit(127);
    }
    g->port = 0;
    for (long long end = llmq_test_now_ms() + 20000; g->port == 0 && llmq_test_now_ms() < end;) {
        char *s = llmq_test_read_file(port_file, NULL);
        if (s != NULL && s[0] != '\0')
            g->port = (int)strtol(s, NULL, 10);
        free(s);
        if (g->port == 0)
            usleep(50000);
    }
    assert_true(g->port > 0);
    unlink(port_file);
    const char *argv[] = {"llmq", "keys", "create", "--tenant", "acme", NULL};
    struct cli_run c = cli_run(r->accounts[k], argv);
    assert_int_equal(c.status, 0);
    snprintf(g->key, sizeof(g->key), "%s", c.out);
    g->key[strcspn(g->key, "\r\n")] = '\0';
    assert_true(strlen(g->key) > 8);
    cli_free(&c);
}

/* One HTTP exchange with a gateway: its handle, request headers and the
 * answer collected. */
struct exchange {
    CURL *h;
    struct curl_slist *headers;
    char *body; /* the answer (new, NUL-ended) */
    size_t len;
    long status;
    int account;
    int done;
};

static size_t on_data(char *p, size_t size, size_t n, void *ud)
{
    struct exchange *x = ud;
    char *b = realloc(x->body, x->len + size * n + 1);
    assert_non_null(b);
    memcpy(b + x->len, p, size * n);
    x->body = b;
    x->len += size * n;
    x->body[x->len] = '\0';
    return size * n;
}

/* Prepares x for path of gateway g: a POST of json when json is set (borrowed
 * until done), else a GET; mime, when set, is the multipart body. */
static void exchange_init(struct exchange *x, const struct gw_proc *g, const char *path,
                          const char *json, curl_mime *mime)
{
    memset(x, 0, sizeof(*x));
    x->h = curl_easy_init();
    assert_non_null(x->h);
    char url[256], auth[200];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", g->port, path);
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", g->key);
    x->headers = curl_slist_append(NULL, auth);
    if (json != NULL) {
        x->headers = curl_slist_append(x->headers, "Content-Type: application/json");
        curl_easy_setopt(x->h, CURLOPT_POSTFIELDS, json);
    }
    if (mime != NULL)
        curl_easy_setopt(x->h, CURLOPT_MIMEPOST, mime);
    curl_easy_setopt(x->h, CURLOPT_URL, url);
    curl_easy_setopt(x->h, CURLOPT_HTTPHEADER, x->headers);
    curl_easy_setopt(x->h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(x->h, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(x->h, CURLOPT_TIMEOUT_MS, 120000L); /* against hanging */
    curl_easy_setopt(x->h, CURLOPT_PRIVATE, x);
}

static void exchange_free(struct exchange *x)
{
    curl_slist_free_all(x->headers);
    if (x->h != NULL)
        curl_easy_cleanup(x->h);
    free(x->body);
    x->body = NULL;
}

/* One blocking exchange; returns the status, the answer in x->body. */
static long exchange_run(struct exchange *x)
{
    CURLcode rc = curl_easy_perform(x->h);
    if (rc != CURLE_OK)
        fprintf(stderr, "exchange: %s\n", curl_easy_strerror(rc));
    assert_int_equal(rc, CURLE_OK);
    curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &x->status);
    x->done = 1;
    return x->status;
}

/* Drives the exchanges on m until at least until of them are done (or
 * timeout_ms passes, against hanging); returns how many are done. */
static int drive(CURLM *m, int *done, int until, long long timeout_ms)
{
    long long end = llmq_test_now_ms() + timeout_ms;
    int running = 1;
    while (*done < until && llmq_test_now_ms() < end) {
        curl_multi_perform(m, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(m, &left)) != NULL) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            struct exchange *x;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
            if (msg->data.result != CURLE_OK)
                fprintf(stderr, "call of account %d: %s\n", x->account,
                        curl_easy_strerror(msg->data.result));
            curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &x->status);
            x->done = 1;
            (*done)++;
            curl_multi_remove_handle(m, x->h);
        }
        if (*done < until)
            curl_multi_poll(m, NULL, 0, 100, NULL);
    }
    return *done;
}

static const char chat_body[] = "{\"model\":\"" CLUSTER_MODEL "\",\"max_tokens\":20,"
                                "\"messages\":[{\"role\":\"user\",\"content\":\"hello there\"}]}";

/* Adds n synchronous chat calls to each gateway, into calls from *used. */
static void calls_add(CURLM *m, struct gw_proc *gws, struct exchange *calls, int *used, int n)
{
    for (int i = 0; i < n; i++)
        for (int k = 0; k < ACCOUNTS; k++) {
            struct exchange *x = &calls[(*used)++];
            exchange_init(x, &gws[k], "/v1/chat/completions", chat_body, NULL);
            x->account = k;
            assert_int_equal(curl_multi_add_handle(m, x->h), CURLM_OK);
        }
}

/* Uploads BATCH_LINES chat lines as a batch file of gateway g and creates a
 * batch from it; its id into batch_id (64 bytes). */
static void batch_create(const struct gw_proc *g, char *batch_id)
{
    char path[128];
    snprintf(path, sizeof(path), "/tmp/llmq-cluster-gw-%d.jsonl", (int)getpid());
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int i = 0; i < BATCH_LINES; i++)
        fprintf(f,
                "{\"custom_id\":\"line-%d\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\","
                "\"body\":%s}\n",
                i, chat_body);
    fclose(f);
    struct exchange x;
    curl_mime *mime = curl_mime_init(NULL);
    curl_mimepart *part = curl_mime_addpart(mime);
    curl_mime_name(part, "purpose");
    curl_mime_data(part, "batch", CURL_ZERO_TERMINATED);
    part = curl_mime_addpart(mime);
    curl_mime_name(part, "file");
    curl_mime_filedata(part, path);
    exchange_init(&x, g, "/v1/files", NULL, mime);
    assert_int_equal(exchange_run(&x), 200);
    json_t *file = json_loads(x.body, 0, NULL);
    assert_non_null(file);
    char body[256];
    snprintf(body, sizeof(body),
             "{\"input_file_id\":\"%s\",\"endpoint\":\"/v1/chat/completions\","
             "\"completion_window\":\"24h\"}",
             json_string_value(json_object_get(file, "id")));
    json_decref(file);
    exchange_free(&x);
    curl_mime_free(mime);
    unlink(path);
    exchange_init(&x, g, "/v1/batches", body, NULL);
    assert_int_equal(exchange_run(&x), 200);
    json_t *batch = json_loads(x.body, 0, NULL);
    assert_non_null(batch);
    snprintf(batch_id, 64, "%s", json_string_value(json_object_get(batch, "id")));
    json_decref(batch);
    exchange_free(&x);
}

/* Waits for batch_id of gateway g to end; asserts it completed with one 200
 * result per line, each custom_id once. */
static void batch_assert_completed(const struct gw_proc *g, const char *batch_id)
{
    char path[128], status[32] = "";
    snprintf(path, sizeof(path), "/v1/batches/%s", batch_id);
    json_t *batch = NULL;
    for (long long end = llmq_test_now_ms() + 120000; llmq_test_now_ms() < end;) {
        struct exchange x;
        exchange_init(&x, g, path, NULL, NULL);
        assert_int_equal(exchange_run(&x), 200);
        json_decref(batch);
        batch = json_loads(x.body, 0, NULL);
        exchange_free(&x);
        assert_non_null(batch);
        snprintf(status, sizeof(status), "%s", json_string_value(json_object_get(batch, "status")));
        if (strcmp(status, "completed") == 0 || strcmp(status, "failed") == 0 ||
            strcmp(status, "expired") == 0 || strcmp(status, "cancelled") == 0)
            break;
        usleep(200000);
    }
    json_t *counts = json_object_get(batch, "request_counts");
    printf("# batch %s: %s, %lld of %lld completed, %lld failed\n", batch_id, status,
           json_integer_value(json_object_get(counts, "completed")),
           json_integer_value(json_object_get(counts, "total")),
           json_integer_value(json_object_get(counts, "failed")));
    assert_string_equal(status, "completed");
    assert_int_equal(json_integer_value(json_object_get(counts, "completed")), BATCH_LINES);
    assert_int_equal(json_integer_value(json_object_get(counts, "failed")), 0);
    snprintf(path, sizeof(path), "/v1/files/%s/content",
             json_string_value(json_object_get(batch, "output_file_id")));
    json_decref(batch);
    struct exchange x;
    exchange_init(&x, g, path, NULL, NULL);
    assert_int_equal(exchange_run(&x), 200);
    int seen[BATCH_LINES] = {0}, lines = 0;
    for (char *line = x.body, *nl; line != NULL && *line != '\0'; line = nl ? nl + 1 : NULL) {
        nl = strchr(line, '\n');
        if (nl != NULL)
            *nl = '\0';
        json_t *o = json_loads(line, 0, NULL);
        assert_non_null(o);
        const char *cid = json_string_value(json_object_get(o, "custom_id"));
        assert_true(cid != NULL && strncmp(cid, "line-", 5) == 0);
        int i = (int)strtol(cid + 5, NULL, 10);
        assert_true(i >= 0 && i < BATCH_LINES);
        seen[i]++;
        lines++;
        assert_int_equal(
            json_integer_value(json_object_get(json_object_get(o, "response"), "status_code")),
            200);
        json_decref(o);
    }
    assert_int_equal(lines, BATCH_LINES);
    for (int i = 0; i < BATCH_LINES; i++)
        assert_int_equal(seen[i], 1);
    exchange_free(&x);
}

/* The ids of the jobs that ended for account k (as its events stream names
 * them), read on the node serving it now: a new array of n_ids strings
 * (each new). */
static char **ended_ids(struct cluster_run *r, int k, size_t *n_ids)
{
    int node = llmq_test_cluster_owner(&r->cl, llmq_test_cluster_account_slot(r->accounts[k]));
    assert_true(node >= 0);
    redisContext *c = llmq_test_cluster_connect(&r->cl, node);
    assert_non_null(c);
    redisReply *rep = redisCommand(c, "XRANGE llmq:{%s}:events - +", r->accounts[k]);
    assert_true(rep != NULL && rep->type == REDIS_REPLY_ARRAY);
    size_t cap = 64;
    char **ids = malloc(cap * sizeof(*ids));
    *n_ids = 0;
    for (size_t i = 0; i < rep->elements; i++) {
        size_t pos = 0;
        const redisReply *e = rep->element[i];
        assert_true(e->type == REDIS_REPLY_ARRAY && e->elements == 2);
        const char *id; /* an entry names one or more jobs */
        while ((id = llmq_redis_field_next(e->element[1], "id", &pos)) != NULL) {
            if (*n_ids == cap)
                ids = realloc(ids, (cap *= 2) * sizeof(*ids));
            ids[(*n_ids)++] = strdup(id);
        }
    }
    freeReplyObject(rep);
    redisFree(c);
    return ids;
}

static int by_string(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Index of the account whose ended ids (sorted) hold id, or -1. */
static int account_of(char **ids[ACCOUNTS], const size_t n[ACCOUNTS], const char *id)
{
    for (int k = 0; k < ACCOUNTS; k++)
        if (bsearch(&id, ids[k], n[k], sizeof(char *), by_string) != NULL)
            return k;
    return -1;
}

/* Every job ended once; each reached the API once and no account over its
 * limit there (its arrivals, told apart by the ids each account's events
 * name). want[k]: the jobs account k was given. */
static void assert_jobs_and_limits(struct cluster_run *r, const int want[ACCOUNTS])
{
    char **ids[ACCOUNTS];
    size_t n[ACCOUNTS];
    for (int k = 0; k < ACCOUNTS; k++) {
        ids[k] = ended_ids(r, k, &n[k]);
        qsort(ids[k], n[k], sizeof(char *), by_string);
        int twice = 0;
        for (size_t i = 1; i < n[k]; i++)
            twice += strcmp(ids[k][i - 1], ids[k][i]) == 0;
        printf("# account %d: %zu jobs ended (%d given), %d ended twice\n", k, n[k], want[k],
               twice);
        assert_int_equal(twice, 0);
        assert_int_equal((int)n[k], want[k]);
    }
    size_t n_log;
    struct sim_entry *e = sim_log_read(r->sim.log_file, &n_log);
    sim_log_sort(e, n_log);
    int per_account[ACCOUNTS] = {0};
    long long *t = malloc(sizeof(long long) * (n_log + 1));
    for (int k = 0; k < ACCOUNTS; k++) {
        size_t m = 0;
        for (size_t i = 0; i < n_log; i++) {
            int owner = account_of(ids, n, e[i].job);
            assert_true(owner >= 0); /* every request is a job that ended */
            if (owner == k)
                t[m++] = e[i].t_ms;
        }
        per_account[k] = (int)m;
        size_t most = cluster_most_in_window(t, m, r->judge_ms);
        printf("# account %d: %zu requests, most in one %d ms window: %zu of %d\n", k, m,
               r->judge_ms, most, r->rpm);
        assert_true(most <= (size_t)r->rpm);
        assert_int_equal(per_account[k], want[k]); /* one request per job */
    }
    free(t);
    free(e);
    for (int k = 0; k < ACCOUNTS; k++) {
        for (size_t i = 0; i < n[k]; i++)
            free(ids[k][i]);
        free(ids[k]);
    }
}

static void test_gateways_through_failover_and_reshard(void **state)
{
    (void)state;
    struct cluster_run r;
    /* calls take 300 ms, the limits keep most of them queued */
    cluster_run_setup(&r, 3, 1, ACCOUNTS, 1, RPM, PERIOD_MS, 300);
    assert_int_equal(curl_global_init(CURL_GLOBAL_ALL), 0);
    char wlog[128];
    worker_log_path(wlog, "cluster-gateway", 0);
    const char *wargs[] = {"--concurrency", "16", "--visibility-ms", "4000", NULL};
    pid_t worker = cluster_worker_start(&r, wlog, wargs);
    assert_true(worker_wait_log(wlog, "redis connected", 30000));
    struct gw_proc gws[ACCOUNTS];
    for (int k = 0; k < ACCOUNTS; k++)
        gw_start(&r, k, &gws[k]);
    /* every gateway reached its account's node */
    for (int k = 0; k < ACCOUNTS; k++) {
        struct exchange x;
        exchange_init(&x, &gws[k], "/readyz", NULL, NULL);
        long st = 0;
        for (long long end = llmq_test_now_ms() + 20000; st != 200 && llmq_test_now_ms() < end;) {
            exchange_free(&x);
            exchange_init(&x, &gws[k], "/readyz", NULL, NULL);
            st = exchange_run(&x);
            if (st != 200)
                usleep(50000);
        }
        assert_int_equal(st, 200);
        exchange_free(&x);
    }

    char batch_id[64];
    batch_create(&gws[0], batch_id);
    CURLM *m = curl_multi_init();
    static struct exchange calls[TEST_CALLS];
    int used = 0, done = 0;
    calls_add(m, gws, calls, &used, CALLS_BEFORE);
    /* mid-run: a few calls answered, the others queued or in flight */
    assert_true(drive(m, &done, 6, 60000) >= 6);
    int done_before = done;

    int slot1 = llmq_test_cluster_account_slot(r.accounts[1]);
    /* 2 keys per MIGRATE, 40 ms apart: the slot is half-moved for a while */
    pid_t mover = cluster_move_slot_start(&r, slot1, 2, 2, 40, 1);
    /* Node 3 is the replica of primary 0, which serves account 0. */
    assert_int_equal(llmq_test_cluster_failover(&r.cl, 3, 15000), 0);
    calls_add(m, gws, calls, &used, CALLS_AFTER);
    drive(m, &done, used, 120000);
    assert_int_equal(worker_wait(mover, 60000), 0);
    assert_int_equal(llmq_test_cluster_wait_stable(&r.cl, 20000), 0);
    assert_int_equal(llmq_test_cluster_owner(&r.cl, llmq_test_cluster_account_slot(r.accounts[0])),
                     3);
    assert_int_equal(llmq_test_cluster_owner(&r.cl, slot1), 2);
    printf("# calls answered before the failover and the move: %d of %d\n", done_before, used);
    assert_true(done_before < ACCOUNTS * CALLS_BEFORE); /* it was mid-run */

    /* every call answered 200 with its completion */
    int ok = 0;
    for (int i = 0; i < used; i++) {
        int good = calls[i].done && calls[i].status == 200 && calls[i].body != NULL &&
                   strstr(calls[i].body, "\"object\":\"chat.completion\"") != NULL;
        if (!good)
            fprintf(stderr, "call %d (account %d): status %ld: %.300s\n", i, calls[i].account,
                    calls[i].status, calls[i].body ? calls[i].body : "");
        ok += good;
        exchange_free(&calls[i]);
    }
    curl_multi_cleanup(m);
    assert_int_equal(ok, TEST_CALLS);
    batch_assert_completed(&gws[0], batch_id);

    const int want[ACCOUNTS] = {CALLS_BEFORE + CALLS_AFTER + BATCH_LINES,
                                CALLS_BEFORE + CALLS_AFTER, CALLS_BEFORE + CALLS_AFTER};
    assert_jobs_and_limits(&r, want);
    assert_true(cluster_node_has_library(&r, 3));
    /* the gateways of accounts 0 and 1 followed their slot to its new node */
    for (int k = 0; k < 2; k++) {
        int n = worker_log_count(gws[k].log, "slot moved");
        printf("# gateway %d: %d lines 'slot moved'\n", k, n);
        assert_true(n >= 1);
    }
    for (int k = 0; k < ACCOUNTS; k++) {
        assert_int_equal(kill(gws[k].pid, SIGTERM), 0);
        assert_int_equal(worker_wait(gws[k].pid, 20000), 0);
        unlink(gws[k].log);
    }
    assert_int_equal(kill(worker, SIGTERM), 0);
    assert_int_equal(worker_wait(worker, 30000), 0);
    unlink(wlog);
    curl_global_cleanup();
    cluster_run_teardown(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gateways_through_failover_and_reshard),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
