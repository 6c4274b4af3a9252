/* The deployment examples are well-formed without a cluster or a container
 * engine: every YAML document under examples/ parses (libyaml) and carries the
 * fields Kubernetes, KEDA and Compose require, the pieces refer to each other
 * by the right names (ScaledObject → Deployment, Deployment → Secret and
 * ConfigMap, StatefulSet → its Service), and the Dockerfile is multi-stage.
 * Reads $LLMQ_SOURCE_DIR/examples (set by ctest). Registered by
 * tests/examples.cmake, which links libyaml. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <yaml.h>

#include <cmocka.h>

#include "data_files.h"

#define MAX_DOCS 64
#define MAX_FILES 32

struct doc {
    yaml_document_t y;
    char file[512];
    int compose; /* docker-compose.yml */
};

static struct doc docs[MAX_DOCS];
static int n_docs;
static char yaml_files[MAX_FILES][512];
static int n_yaml_files;

/* ---- a few accessors over libyaml's document tree ---- */

static const char *scalar(const struct doc *d, const yaml_node_t *n)
{
    (void)d;
    return n != NULL && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* The value of key in mapping m, or NULL. */
static yaml_node_t *get(struct doc *d, yaml_node_t *m, const char *key)
{
    if (m == NULL || m->type != YAML_MAPPING_NODE)
        return NULL;
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        const char *k = scalar(d, yaml_document_get_node(&d->y, p->key));
        if (k != NULL && strcmp(k, key) == 0)
            return yaml_document_get_node(&d->y, p->value);
    }
    return NULL;
}

/* The node at a dotted path ("spec.template.spec") from n (NULL: the root). */
static yaml_node_t *at(struct doc *d, yaml_node_t *n, const char *path)
{
    if (n == NULL)
        n = yaml_document_get_root_node(&d->y);
    while (n != NULL && *path != '\0') {
        char part[128];
        const char *dot = strchr(path, '.');
        size_t len = dot != NULL ? (size_t)(dot - path) : strlen(path);
        assert_true(len < sizeof(part));
        memcpy(part, path, len);
        part[len] = '\0';
        n = get(d, n, part);
        path += dot != NULL ? len + 1 : len;
    }
    return n;
}

static const char *str_at(struct doc *d, yaml_node_t *n, const char *path)
{
    return scalar(d, at(d, n, path));
}

static int seq_len(const yaml_node_t *n)
{
    return n != NULL && n->type == YAML_SEQUENCE_NODE
               ? (int)(n->data.sequence.items.top - n->data.sequence.items.start)
               : -1;
}

static yaml_node_t *seq_item(struct doc *d, yaml_node_t *n, int i)
{
    return yaml_document_get_node(&d->y, n->data.sequence.items.start[i]);
}

static const char *kind(struct doc *d)
{
    return str_at(d, NULL, "kind");
}

/* The first document of kind k named name (NULL: any name), or NULL. */
static struct doc *find(const char *k, const char *name)
{
    for (int i = 0; i < n_docs; i++) {
        const char *dk = kind(&docs[i]), *dn = str_at(&docs[i], NULL, "metadata.name");
        if (dk != NULL && strcmp(dk, k) == 0 && (name == NULL || (dn && strcmp(dn, name) == 0)))
            return &docs[i];
    }
    return NULL;
}

static void fail_doc(const struct doc *d, const char *what)
{
    fail_msg("%s: %s", d->file, what);
}

/* ---- loading ---- */

static void load_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    yaml_parser_t parser;
    assert_int_equal(yaml_parser_initialize(&parser), 1);
    yaml_parser_set_input_file(&parser, f);
    for (;;) {
        assert_true(n_docs < MAX_DOCS);
        struct doc *d = &docs[n_docs];
        if (!yaml_parser_load(&parser, &d->y))
            fail_msg("%s: YAML error at line %zu: %s", path, parser.problem_mark.line + 1,
                     parser.problem ? parser.problem : "?");
        if (yaml_document_get_root_node(&d->y) == NULL) {
            yaml_document_delete(&d->y);
            break;
        }
        snprintf(d->file, sizeof(d->file), "%s", path);
        d->compose = strstr(path, "docker-compose") != NULL;
        n_docs++;
    }
    yaml_parser_delete(&parser);
    fclose(f);
}

static void walk(const char *dir)
{
    DIR *dp = opendir(dir);
    assert_non_null(dp);
    struct dirent *e;
    while ((e = readdir(dp)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) != 0)
            continue;
        size_t len = strlen(e->d_name);
        if (S_ISDIR(st.st_mode)) {
            walk(path);
        } else if ((len > 5 && strcmp(e->d_name + len - 5, ".yaml") == 0) ||
                   (len > 4 && strcmp(e->d_name + len - 4, ".yml") == 0)) {
            assert_true(n_yaml_files < MAX_FILES);
            snprintf(yaml_files[n_yaml_files++], 512, "%s", path);
            load_file(path);
        }
    }
    closedir(dp);
}

static const char *examples_dir(void)
{
    static char dir[512];
    const char *src = getenv("LLMQ_SOURCE_DIR");
    assert_non_null(src);
    snprintf(dir, sizeof(dir), "%s/examples", src);
    return dir;
}

static int setup(void **state)
{
    (void)state;
    walk(examples_dir());
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < n_docs; i++)
        yaml_document_delete(&docs[i].y);
    return 0;
}

/* ---- checks ---- */

static void test_every_document_names_itself(void **state)
{
    (void)state;
    assert_true(n_yaml_files >= 2);
    int k8s = 0, compose = 0;
    for (int i = 0; i < n_docs; i++) {
        struct doc *d = &docs[i];
        if (d->compose) {
            compose++;
            continue;
        }
        k8s++;
        if (str_at(d, NULL, "apiVersion") == NULL || kind(d) == NULL)
            fail_doc(d, "a document without apiVersion or kind");
        const char *name = str_at(d, NULL, "metadata.name");
        if (name == NULL || name[0] == '\0')
            fail_doc(d, "a document without metadata.name");
    }
    assert_int_equal(compose, 1);
    assert_true(k8s >= 5);
}

/* spec.selector.matchLabels ⊆ spec.template.metadata.labels. */
static void check_selector(struct doc *d)
{
    yaml_node_t *sel = at(d, NULL, "spec.selector.matchLabels");
    yaml_node_t *labels = at(d, NULL, "spec.template.metadata.labels");
    if (sel == NULL || sel->type != YAML_MAPPING_NODE ||
        sel->data.mapping.pairs.top == sel->data.mapping.pairs.start)
        fail_doc(d, "spec.selector.matchLabels missing or empty");
    for (yaml_node_pair_t *p = sel->data.mapping.pairs.start; p < sel->data.mapping.pairs.top;
         p++) {
        const char *k = scalar(d, yaml_document_get_node(&d->y, p->key));
        const char *v = scalar(d, yaml_document_get_node(&d->y, p->value));
        const char *t = scalar(d, get(d, labels, k));
        if (t == NULL || strcmp(t, v) != 0)
            fail_doc(d, "a selector label the pod template does not carry");
    }
}

static void check_probe(struct doc *d, yaml_node_t *c, const char *probe, const char *path)
{
    yaml_node_t *p = get(d, c, probe);
    const char *got = str_at(d, p, "httpGet.path");
    if (got == NULL || strcmp(got, path) != 0)
        fail_msg("%s: %s.httpGet.path is not %s", d->file, probe, path);
    const char *port = str_at(d, p, "httpGet.port");
    if (port == NULL)
        fail_msg("%s: %s.httpGet.port missing", d->file, probe);
    /* a named port must be declared by the container */
    if (port[0] < '0' || port[0] > '9') {
        yaml_node_t *ports = get(d, c, "ports");
        int found = 0;
        for (int i = 0; i < seq_len(ports); i++) {
            const char *n = str_at(d, seq_item(d, ports, i), "name");
            found |= n != NULL && strcmp(n, port) == 0;
        }
        if (!found)
            fail_msg("%s: probe port '%s' is no container port", d->file, port);
    }
}

/* The value following flag in the container's args, or NULL. */
static const char *arg_value(struct doc *d, yaml_node_t *c, const char *flag)
{
    yaml_node_t *args = get(d, c, "args");
    for (int i = 0; i + 1 < seq_len(args); i++) {
        const char *a = scalar(d, seq_item(d, args, i));
        if (a != NULL && strcmp(a, flag) == 0)
            return scalar(d, seq_item(d, args, i + 1));
    }
    return NULL;
}

static void test_worker_deployment(void **state)
{
    (void)state;
    struct doc *d = find("Deployment", "llmq-worker");
    assert_non_null(d);
    assert_string_equal(str_at(d, NULL, "apiVersion"), "apps/v1");
    check_selector(d);
    yaml_node_t *cs = at(d, NULL, "spec.template.spec.containers");
    assert_true(seq_len(cs) >= 1);
    for (int i = 0; i < seq_len(cs); i++) {
        yaml_node_t *c = seq_item(d, cs, i);
        if (str_at(d, c, "image") == NULL || str_at(d, c, "name") == NULL)
            fail_doc(d, "a container without name or image");
        if (at(d, c, "resources.requests") == NULL || at(d, c, "resources.limits") == NULL)
            fail_doc(d, "a container without resources.requests and limits");
        check_probe(d, c, "livenessProbe", "/healthz");
        check_probe(d, c, "readinessProbe", "/readyz");
        const char *mport = arg_value(d, c, "--metrics-port");
        if (mport == NULL)
            fail_doc(d, "the worker is not started with --metrics-port");
        /* the grace period outlasts --grace-ms (default 30000) */
        const char *grace = arg_value(d, c, "--grace-ms");
        long long grace_ms = grace ? strtoll(grace, NULL, 10) : 30000;
        const char *tgps = str_at(d, NULL, "spec.template.spec.terminationGracePeriodSeconds");
        assert_non_null(tgps);
        assert_true(strtoll(tgps, NULL, 10) * 1000 > grace_ms);
        /* the key file comes from a Secret volume that exists */
        const char *keyfile = arg_value(d, c, "--api-key-file");
        assert_non_null(keyfile);
        yaml_node_t *vols = at(d, NULL, "spec.template.spec.volumes");
        int secret_found = 0;
        for (int v = 0; v < seq_len(vols); v++) {
            const char *sn = str_at(d, seq_item(d, vols, v), "secret.secretName");
            secret_found |= sn != NULL && find("Secret", sn) != NULL;
        }
        if (!secret_found)
            fail_doc(d, "no volume from a Secret defined in examples/k8s");
        yaml_node_t *from = get(d, c, "envFrom");
        for (int e = 0; e < seq_len(from); e++) {
            const char *cm = str_at(d, seq_item(d, from, e), "configMapRef.name");
            if (cm != NULL && find("ConfigMap", cm) == NULL)
                fail_doc(d, "envFrom names a ConfigMap that is not defined");
        }
    }
}

static void test_secret_has_placeholder_only(void **state)
{
    (void)state;
    struct doc *d = find("Secret", NULL);
    assert_non_null(d);
    assert_non_null(str_at(d, NULL, "type"));
    yaml_node_t *data = at(d, NULL, "stringData");
    if (data == NULL)
        data = at(d, NULL, "data");
    assert_non_null(data);
    assert_int_equal(data->type, YAML_MAPPING_NODE);
    for (yaml_node_pair_t *p = data->data.mapping.pairs.start; p < data->data.mapping.pairs.top;
         p++) {
        const char *v = scalar(d, yaml_document_get_node(&d->y, p->value));
        assert_non_null(v);
        assert_null(strstr(v, "sk-")); /* never a real-looking key */
    }
}

/* docs/operations.md's Deploying section says what the ScaledObject above measures:
 * the backlog lists (redis triggers) and the pending entries (redis-streams),
 * and not the group's lag, which no trigger reads. */
static void check_docs_describe_triggers(void)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/docs/operations.md", getenv("LLMQ_SOURCE_DIR"));
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char text[1 << 20];
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    char *start = strstr(text, "- **`examples/k8s/`**");
    assert_non_null(start);
    char *end = strstr(start + 1, "\n- **");
    if (end != NULL)
        *end = '\0';
    const char *want[] = {"`redis` list trigger", "llmq:{default}:backlog:high|normal|low",
                          "`redis-streams` trigger", "pending entries",
                          "llmq:{default}:q:high|normal|low"};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        if (strstr(start, want[i]) == NULL)
            fail_msg("docs/operations.md's examples/k8s/ item does not say %s:\n%s", want[i],
                     start);
    if (strstr(start, "lag") != NULL)
        fail_msg("docs/operations.md's examples/k8s/ item names a lag no trigger reads:\n%s",
                 start);
}

/* The priority (0 high, 1 normal, 2 low) of key "llmq:{ACCOUNT}:<kind>:<prio>"
 * (kind "backlog" or "q"), its account into account (n bytes); -1 when key
 * is not one. */
static int key_priority(const char *key, const char *kind, char *account, size_t n)
{
    static const char *const prios[3] = {"high", "normal", "low"};
    const char *close = strstr(key, "}:");
    if (strncmp(key, "llmq:{", 6) != 0 || close == NULL || (size_t)(close - key - 6) >= n)
        return -1;
    snprintf(account, n, "%.*s", (int)(close - key - 6), key + 6);
    const char *rest = close + 2;
    size_t kl = strlen(kind);
    if (strncmp(rest, kind, kl) != 0 || rest[kl] != ':')
        return -1;
    for (int k = 0; k < 3; k++)
        if (strcmp(rest + kl + 1, prios[k]) == 0)
            return k;
    return -1;
}

#define SO_ACCOUNTS_MAX 8

/* A ScaledObject of the worker: it targets the Deployment; per account it
 * names, a backlog trigger (LLEN of P backlog:<prio>, common/redis/keys.h)
 * for every priority and at least one trigger of jobs in flight (pending
 * entries of a delivery stream). cluster: the triggers are KEDA's Redis
 * Cluster scalers (redis-cluster, redis-cluster-streams, with seed
 * addresses), else the single-node ones. */
static void check_scaled_object(struct doc *d, int cluster)
{
    assert_string_equal(str_at(d, NULL, "apiVersion"), "keda.sh/v1alpha1");
    const char *target = str_at(d, NULL, "spec.scaleTargetRef.name");
    assert_non_null(target);
    assert_non_null(find("Deployment", target));
    const char *max = str_at(d, NULL, "spec.maxReplicaCount");
    const char *min = str_at(d, NULL, "spec.minReplicaCount");
    assert_non_null(max);
    assert_true(strtol(max, NULL, 10) >= 1);
    assert_true(min == NULL || strtol(min, NULL, 10) <= strtol(max, NULL, 10));
    yaml_node_t *trig = at(d, NULL, "spec.triggers");
    assert_true(seq_len(trig) >= 1);
    const char *list_type = cluster ? "redis-cluster" : "redis";
    const char *stream_type = cluster ? "redis-cluster-streams" : "redis-streams";
    char accounts[SO_ACCOUNTS_MAX][128];
    int n_accounts = 0, backlog[SO_ACCOUNTS_MAX][3] = {{0}}, pending[SO_ACCOUNTS_MAX] = {0};
    for (int i = 0; i < seq_len(trig); i++) {
        yaml_node_t *t = seq_item(d, trig, i);
        const char *type = str_at(d, t, "type");
        assert_non_null(type);
        yaml_node_t *m = get(d, t, "metadata");
        if (cluster ? str_at(d, m, "addresses") == NULL && str_at(d, m, "hosts") == NULL
                    : str_at(d, m, "address") == NULL && str_at(d, m, "addressFromEnv") == NULL &&
                          str_at(d, m, "host") == NULL)
            fail_doc(d, cluster ? "a trigger without addresses or hosts (the seed nodes)"
                                : "a trigger without address, addressFromEnv or host");
        int is_list = strcmp(type, list_type) == 0;
        if (!is_list && strcmp(type, stream_type) != 0)
            fail_msg("%s: unexpected trigger type %s", d->file, type);
        const char *key = str_at(d, m, is_list ? "listName" : "stream");
        assert_non_null(key);
        char account[128];
        int s = key_priority(key, is_list ? "backlog" : "q", account, sizeof(account));
        if (s < 0)
            fail_msg("%s: unexpected %s %s", d->file, is_list ? "list" : "stream", key);
        int a = 0;
        while (a < n_accounts && strcmp(accounts[a], account) != 0)
            a++;
        if (a == n_accounts) {
            assert_true(n_accounts < SO_ACCOUNTS_MAX);
            snprintf(accounts[n_accounts++], sizeof(accounts[0]), "%s", account);
        }
        if (is_list) {
            assert_non_null(str_at(d, m, "listLength"));
            const char *act = str_at(d, m, "activationListLength");
            assert_true(act == NULL || strcmp(act, "0") == 0); /* any backlog wakes from zero */
            backlog[a][s]++;
        } else {
            assert_string_equal(str_at(d, m, "consumerGroup"), "workers");
            /* lag of the delivery stream is not the backlog any more */
            assert_null(str_at(d, m, "lagCount"));
            if (str_at(d, m, "pendingEntriesCount") != NULL)
                pending[a]++;
        }
    }
    for (int a = 0; a < n_accounts; a++) {
        if (backlog[a][0] < 1 || backlog[a][1] < 1 || backlog[a][2] < 1) /* every priority */
            fail_msg("%s: account %s lacks a priority's backlog trigger", d->file, accounts[a]);
        if (pending[a] < 1)
            fail_msg("%s: account %s has no trigger of jobs in flight", d->file, accounts[a]);
    }
}

static void test_scaled_object(void **state)
{
    (void)state;
    struct doc *d = find("ScaledObject", "llmq-worker");
    assert_non_null(d);
    check_scaled_object(d, 0);
    check_docs_describe_triggers();
}

/* The ScaledObject for a Redis Cluster: the same keys of two accounts
 * through KEDA's Redis Cluster scalers. */
static void test_scaled_object_cluster(void **state)
{
    (void)state;
    struct doc *d = find("ScaledObject", "llmq-worker-cluster");
    assert_non_null(d);
    check_scaled_object(d, 1);
}

static void test_redis_statefulset(void **state)
{
    (void)state;
    struct doc *d = find("StatefulSet", NULL);
    assert_non_null(d);
    const char *svc = str_at(d, NULL, "spec.serviceName");
    assert_non_null(svc);
    assert_non_null(find("Service", svc));
    check_selector(d);
    assert_true(seq_len(at(d, NULL, "spec.volumeClaimTemplates")) >= 1);
    yaml_node_t *c = seq_item(d, at(d, NULL, "spec.template.spec.containers"), 0);
    assert_non_null(str_at(d, c, "image"));
    const char *aof = arg_value(d, c, "--appendonly");
    assert_non_null(aof);
    assert_string_equal(aof, "yes");
    assert_string_equal(arg_value(d, c, "--maxmemory-policy"), "noeviction");
}

static void test_compose(void **state)
{
    (void)state;
    struct doc *d = NULL;
    for (int i = 0; i < n_docs && d == NULL; i++)
        d = docs[i].compose ? &docs[i] : NULL;
    assert_non_null(d);
    static const char *const need[] = {"redis", "worker", "openai-sim", "enqueue"};
    yaml_node_t *services = at(d, NULL, "services");
    for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++) {
        yaml_node_t *s = get(d, services, need[i]);
        if (s == NULL)
            fail_msg("%s: no service %s", d->file, need[i]);
        if (get(d, s, "image") == NULL && get(d, s, "build") == NULL)
            fail_msg("%s: service %s has neither image nor build", d->file, need[i]);
    }
    yaml_node_t *worker = get(d, services, "worker");
    /* the key comes from a secret or env file, never inline */
    assert_null(at(d, worker, "environment.OPENAI_API_KEY"));
    assert_true(get(d, worker, "secrets") != NULL || get(d, worker, "env_file") != NULL);
    assert_string_equal(str_at(d, get(d, services, "openai-sim"), "build.target"), "openai-sim");
}

static char *slurp(const char *path)
{
    char *buf = llmq_test_read_file(path, NULL);
    assert_non_null(buf);
    return buf;
}

static void test_dockerfile_is_multi_stage(void **state)
{
    (void)state;
    char path[600];
    snprintf(path, sizeof(path), "%s/Dockerfile", examples_dir());
    char *text = slurp(path);
    int froms = 0, build_stage = 0;
    const char *entry = NULL, *user = NULL;
    for (char *line = text; line != NULL && *line != '\0';) {
        char *nl = strchr(line, '\n');
        if (nl != NULL)
            *nl = '\0';
        if (strncmp(line, "FROM ", 5) == 0) {
            froms++;
            build_stage |= froms == 1 && strstr(line, " AS build") != NULL;
        } else if (strncmp(line, "ENTRYPOINT ", 11) == 0) {
            entry = line; /* the last one: the default target's */
        } else if (strncmp(line, "USER ", 5) == 0) {
            user = line;
        }
        line = nl != NULL ? nl + 1 : NULL;
    }
    assert_true(froms >= 2);
    assert_true(build_stage);
    assert_non_null(entry);
    assert_non_null(strstr(entry, "llmq-worker"));
    assert_non_null(user);
    assert_null(strstr(user, "root"));
    assert_null(strstr(user, "USER 0"));
    free(text);
    text = slurp(path); /* the line split above wrote NULs */
    static const char *const runtime[] = {"libhiredis0.14",  "libev4",
                                          "libcurl4",        "libjansson4",
                                          "libpcre2-8-0",    "libssl3",
                                          "ca-certificates", "COPY --from=build",
                                          "cmake --install", "CMAKE_BUILD_TYPE=Release"};
    for (size_t i = 0; i < sizeof(runtime) / sizeof(runtime[0]); i++)
        if (strstr(text, runtime[i]) == NULL)
            fail_msg("Dockerfile: no %s", runtime[i]);
    free(text);
}

/* No file of the deployment examples holds anything shaped like an API key. */
static void test_no_keys_in_examples(void **state)
{
    (void)state;
    for (int i = 0; i < n_yaml_files; i++) {
        char *text = slurp(yaml_files[i]);
        if (strstr(text, "sk-") != NULL)
            fail_msg("%s contains 'sk-'", yaml_files[i]);
        free(text);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_document_names_itself),
        cmocka_unit_test(test_worker_deployment),
        cmocka_unit_test(test_secret_has_placeholder_only),
        cmocka_unit_test(test_scaled_object),
        cmocka_unit_test(test_scaled_object_cluster),
        cmocka_unit_test(test_redis_statefulset),
        cmocka_unit_test(test_compose),
        cmocka_unit_test(test_dockerfile_is_multi_stage),
        cmocka_unit_test(test_no_keys_in_examples),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
