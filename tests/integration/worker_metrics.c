/* The worker's /metrics, /healthz and /readyz over real HTTP, and its JSON
 * logs:
 *   - a run through API faults: every scrape parses as strict Prometheus text
 *     (HELP/TYPE, escaped labels, consistent histograms) and the counters
 *     match the run (jobs succeeded, 429s as many as the sim's access log
 *     shows, nothing left in flight);
 *   - /readyz turns 503 when the worker's Redis stops and 200 when it is
 *     back, while /healthz stays 200;
 *   - with --log-format json --log-level debug every log line is a JSON
 *     object, job lines name their job and account, and the API key appears
 *     in no log line and no scrape. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "worker_support.h"

#define JOBS 200
#define DEADLINE_MS 90000

/* ---- HTTP ---- */

/* worker_http_get (worker_support.h) fetches a page of the worker's endpoint. */

/* Polls path until it answers want (or the deadline); returns the last status. */
static long wait_status(int port, const char *path, long want)
{
    long long deadline = llmq_test_now_ms() + DEADLINE_MS;
    long got = 0;
    while (llmq_test_now_ms() < deadline) {
        struct worker_page pg = worker_http_get(port, path);
        got = pg.status;
        free(pg.body);
        if (got == want)
            break;
        usleep(50000);
    }
    return got;
}

/* ---- a strict parser of Prometheus text format 0.0.4 ---- */

#define PROM_MAX_LABELS 8

struct prom_sample {
    char name[128];
    int n_labels;
    char lname[PROM_MAX_LABELS][32];
    char lvalue[PROM_MAX_LABELS][256];
    double value;
};

struct prom_family {
    char name[128];
    char type[16];
    int help, has_samples, closed;
};

struct prom {
    struct prom_sample *s;
    size_t n, cap;
    struct prom_family fam[64];
    int n_fam;
    struct prom_family *current; /* the family whose samples come now */
    char why[512];
};

static int prom_fail(struct prom *p, const char *line, const char *why)
{
    snprintf(p->why, sizeof(p->why), "%s in line: %.300s", why, line);
    return -1;
}

static int name_char(char c, int first, int colon)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':') ||
           (!first && c >= '0' && c <= '9');
}

/* Reads a metric (colon 1) or label name at *s into out; 0 or -1. */
static int read_name(const char **s, char *out, size_t n, int colon)
{
    size_t i = 0;
    while (name_char((*s)[i], i == 0, colon)) {
        if (i + 1 >= n)
            return -1;
        out[i] = (*s)[i];
        i++;
    }
    out[i] = '\0';
    *s += i;
    return i > 0 ? 0 : -1;
}

static struct prom_family *prom_family(struct prom *p, const char *name)
{
    for (int i = 0; i < p->n_fam; i++)
        if (strcmp(p->fam[i].name, name) == 0)
            return &p->fam[i];
    if (p->n_fam == 64)
        return NULL;
    struct prom_family *f = &p->fam[p->n_fam++];
    memset(f, 0, sizeof(*f));
    snprintf(f->name, sizeof(f->name), "%s", name);
    return f;
}

/* The family a sample name belongs to (histogram suffixes stripped). */
static struct prom_family *sample_family(struct prom *p, const char *name)
{
    static const char *const sfx[] = {"_bucket", "_sum", "_count"};
    for (int i = 0; i < p->n_fam; i++) {
        struct prom_family *f = &p->fam[i];
        size_t fl = strlen(f->name);
        if (strcmp(f->type, "histogram") != 0) {
            if (strcmp(f->name, name) == 0)
                return f;
            continue;
        }
        for (int k = 0; k < 3; k++)
            if (strncmp(name, f->name, fl) == 0 && strcmp(name + fl, sfx[k]) == 0)
                return f;
    }
    return NULL;
}

static int parse_comment(struct prom *p, const char *line)
{
    int help = strncmp(line, "# HELP ", 7) == 0;
    if (!help && strncmp(line, "# TYPE ", 7) != 0)
        return prom_fail(p, line, "comment that is neither HELP nor TYPE");
    const char *s = line + 7;
    char name[128];
    if (read_name(&s, name, sizeof(name), 1) != 0 || *s != ' ')
        return prom_fail(p, line, "bad metric name");
    s++;
    struct prom_family *f = prom_family(p, name);
    if (f == NULL || f->has_samples)
        return prom_fail(p, line, "HELP/TYPE after the family's samples");
    if (help) {
        if (f->help++)
            return prom_fail(p, line, "second HELP");
        for (; *s; s++)
            if (*s == '\\' && s[1] != '\\' && s[1] != 'n')
                return prom_fail(p, line, "bad escape in HELP");
            else if (*s == '\\')
                s++;
        return 0;
    }
    if (f->type[0])
        return prom_fail(p, line, "second TYPE");
    static const char *const types[] = {"counter", "gauge", "histogram", "summary", "untyped"};
    for (int i = 0; i < 5; i++)
        if (strcmp(s, types[i]) == 0)
            snprintf(f->type, sizeof(f->type), "%s", s);
    return f->type[0] ? 0 : prom_fail(p, line, "unknown type");
}

/* Reads {name="value",...} at *s into sm. */
static int parse_labels(struct prom *p, const char *line, const char **s, struct prom_sample *sm)
{
    (*s)++;
    while (**s != '}') {
        if (sm->n_labels == PROM_MAX_LABELS)
            return prom_fail(p, line, "too many labels");
        char *ln = sm->lname[sm->n_labels], *lv = sm->lvalue[sm->n_labels];
        if (read_name(s, ln, 32, 0) != 0 || (*s)[0] != '=' || (*s)[1] != '"')
            return prom_fail(p, line, "bad label name");
        for (int i = 0; i < sm->n_labels; i++)
            if (strcmp(sm->lname[i], ln) == 0)
                return prom_fail(p, line, "duplicate label");
        *s += 2;
        size_t n = 0;
        for (; **s != '"'; (*s)++) {
            char c = **s;
            if (c == '\0' || c == '\n')
                return prom_fail(p, line, "unterminated label value");
            if (c == '\\') {
                (*s)++;
                c = **s == 'n' ? '\n' : **s;
                if (**s != 'n' && **s != '\\' && **s != '"')
                    return prom_fail(p, line, "bad escape in label value");
            }
            if (n + 1 >= 256)
                return prom_fail(p, line, "label value too long");
            lv[n++] = c;
        }
        lv[n] = '\0';
        (*s)++;
        sm->n_labels++;
        if (**s == ',')
            (*s)++;
        else if (**s != '}')
            return prom_fail(p, line, "expected , or }");
    }
    (*s)++;
    return 0;
}

static int parse_sample(struct prom *p, const char *line)
{
    struct prom_sample sm = {0};
    const char *s = line;
    if (read_name(&s, sm.name, sizeof(sm.name), 1) != 0)
        return prom_fail(p, line, "bad sample name");
    if (*s == '{' && parse_labels(p, line, &s, &sm) != 0)
        return -1;
    if (*s != ' ')
        return prom_fail(p, line, "expected a space before the value");
    s++;
    char *end = NULL;
    if (strcmp(s, "+Inf") == 0)
        sm.value = INFINITY;
    else if (strcmp(s, "-Inf") == 0)
        sm.value = -INFINITY;
    else if (strcmp(s, "NaN") == 0)
        sm.value = NAN;
    else if ((sm.value = strtod(s, &end)), end == s || *end != '\0')
        return prom_fail(p, line, "bad value (or a timestamp)");
    struct prom_family *f = sample_family(p, sm.name);
    if (f == NULL)
        return prom_fail(p, line, "sample without a TYPE line");
    if (f != p->current) {
        if (f->closed)
            return prom_fail(p, line, "family's samples not contiguous");
        if (p->current != NULL)
            p->current->closed = 1;
        p->current = f;
    }
    f->has_samples = 1;
    if (strcmp(f->type, "counter") == 0 && !(sm.value >= 0))
        return prom_fail(p, line, "negative counter");
    if (p->n == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 256;
        p->s = realloc(p->s, p->cap * sizeof(*p->s));
    }
    p->s[p->n++] = sm;
    return 0;
}

static const char *label_of(const struct prom_sample *s, const char *name)
{
    for (int i = 0; i < s->n_labels; i++)
        if (strcmp(s->lname[i], name) == 0)
            return s->lvalue[i];
    return NULL;
}

/* The sample's labels but le, as one string, to group a histogram's series. */
static void series_key(const struct prom_sample *s, char *out, size_t n)
{
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < s->n_labels && used < n; i++)
        if (strcmp(s->lname[i], "le") != 0)
            used += (size_t)snprintf(out + used, n - used, "%s=%s;", s->lname[i], s->lvalue[i]);
}

/* Each histogram series: buckets ascending by le, cumulative, ending at +Inf
 * equal to _count, with a _sum. */
static int check_histograms(struct prom *p)
{
    for (size_t i = 0; i < p->n; i++) {
        struct prom_family *f = sample_family(p, p->s[i].name);
        size_t fl = strlen(f->name);
        if (strcmp(f->type, "histogram") != 0 || strcmp(p->s[i].name + fl, "_count") != 0)
            continue;
        char key[1024], k2[1024], bucket[160], sum[160];
        series_key(&p->s[i], key, sizeof(key));
        snprintf(bucket, sizeof(bucket), "%s_bucket", f->name);
        snprintf(sum, sizeof(sum), "%s_sum", f->name);
        double last_le = -INFINITY, last_v = 0;
        int buckets = 0, sums = 0;
        for (size_t j = 0; j < p->n; j++) {
            series_key(&p->s[j], k2, sizeof(k2));
            if (strcmp(k2, key) != 0)
                continue;
            sums += strcmp(p->s[j].name, sum) == 0;
            if (strcmp(p->s[j].name, bucket) != 0)
                continue;
            const char *le = label_of(&p->s[j], "le");
            double v = le == NULL ? NAN : strcmp(le, "+Inf") == 0 ? INFINITY : strtod(le, NULL);
            if (!(v > last_le) || p->s[j].value < last_v)
                return prom_fail(p, p->s[j].name, "buckets not ascending or not cumulative");
            last_le = v;
            last_v = p->s[j].value;
            buckets++;
        }
        if (buckets == 0 || !isinf(last_le) || last_v != p->s[i].value || sums != 1)
            return prom_fail(p, p->s[i].name, "no +Inf bucket equal to _count, or no _sum");
    }
    return 0;
}

/* Parses text into p (free with prom_free); 0, or -1 with p->why. */
static int prom_parse(const char *text, struct prom *p)
{
    memset(p, 0, sizeof(*p));
    size_t len = strlen(text);
    if (len == 0 || text[len - 1] != '\n')
        return prom_fail(p, "", "text does not end with a newline");
    char *copy = strdup(text);
    int rc = 0;
    for (char *line = copy, *nl; rc == 0 && *line; line = nl + 1) {
        nl = strchr(line, '\n');
        *nl = '\0';
        if (line[0] == '\0')
            rc = prom_fail(p, line, "empty line");
        else
            rc = line[0] == '#' ? parse_comment(p, line) : parse_sample(p, line);
    }
    free(copy);
    return rc == 0 ? check_histograms(p) : rc;
}

static void prom_free(struct prom *p)
{
    free(p->s);
    p->s = NULL;
}

/* Sum of the samples named name whose labels include the pairs given
 * (NULL-terminated label, value list). */
static double prom_sum(const struct prom *p, const char *name, ...)
{
    double total = 0;
    for (size_t i = 0; i < p->n; i++) {
        if (strcmp(p->s[i].name, name) != 0)
            continue;
        va_list ap;
        va_start(ap, name);
        int match = 1;
        for (const char *k = va_arg(ap, const char *); k != NULL; k = va_arg(ap, const char *)) {
            const char *v = va_arg(ap, const char *), *have = label_of(&p->s[i], k);
            match &= have != NULL && strcmp(have, v) == 0;
        }
        va_end(ap);
        if (match)
            total += p->s[i].value;
    }
    return total;
}

/* Scrapes /metrics and parses it strictly (asserting); returns the text too. */
static char *scrape(int port, struct prom *p)
{
    struct worker_page pg = worker_http_get(port, "/metrics");
    assert_int_equal(pg.status, 200);
    if (prom_parse(pg.body, p) != 0)
        fail_msg("/metrics is not valid Prometheus text: %s", p->why);
    return pg.body;
}

/* ---- tests ---- */

static void test_parser_rejects_bad_text(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "x 1",   /* no newline at the end */
        "x 1\n", /* no TYPE */
        "# TYPE x counter\nx -1\n",
        "# TYPE x counter\nx{a=\"1} 1\n",
        "# TYPE x counter\nx{a=\"\\t\"} 1\n",
        "# TYPE x counter\nx 1 123\n",
        "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
        "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n",
        "# TYPE x counter\n# TYPE x counter\nx 1\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct prom p;
        assert_int_equal(prom_parse(bad[i], &p), -1);
        prom_free(&p);
    }
    struct prom p;
    assert_int_equal(prom_parse("# HELP x X \\\\ y.\n# TYPE x counter\nx{a=\"q\\\"\\n\"} 1\n"
                                "# TYPE h histogram\nh_bucket{le=\"1\"} 1\n"
                                "h_bucket{le=\"+Inf\"} 2\nh_sum 3\nh_count 2\n",
                                &p),
                     0);
    assert_true(prom_sum(&p, "x", "a", "q\"\n", NULL) == 1);
    prom_free(&p);
}

/* Scrapes the worker on port until account's JOBS jobs have succeeded and
 * nothing is left in flight or queued (or the deadline), checking every
 * scrape parses and counters only grow. Leaves the last scrape in *p. */
static void scrape_until_done(int port, const char *account, struct prom *p)
{
    double last_dispatched = 0;
    int scrapes = 0, printed = 0;
    long long deadline = llmq_test_now_ms() + DEADLINE_MS;
    for (;; scrapes++) {
        char *text = scrape(port, p);
        double d = prom_sum(p, "llmq_jobs_dispatched_total", "account", account, NULL);
        assert_true(d >= last_dispatched);
        last_dispatched = d;
        double done = prom_sum(p, "llmq_jobs_succeeded_total", "account", account, NULL);
        double busy = prom_sum(p, "llmq_jobs_in_hand", NULL) +
                      prom_sum(p, "llmq_requests_in_flight", NULL) +
                      prom_sum(p, "llmq_queue_jobs", "account", account, NULL) +
                      prom_sum(p, "llmq_delayed_jobs", "account", account, NULL);
        if (!printed && done >= JOBS / 4 && done < JOBS) {
            printf("# a scrape during the run:\n%s", text);
            printed = 1;
        }
        free(text);
        if ((done == JOBS && busy == 0) || llmq_test_now_ms() > deadline)
            break;
        prom_free(p);
        usleep(100000);
    }
    printf("# %d scrapes\n", scrapes + 1);
}

static void test_metrics_match_the_run(void **state)
{
    (void)state;
    char account[64], jobs[128], log[128], port_s[16];
    llmq_test_unique_name(account, sizeof(account), "metrics");
    struct sim_proc sim;
    const char *sim_args[] = {
        "--fail-500",   "5",  "--spurious-429", "8",  "--reset", "2", "--spurious-retry-ms", "200",
        "--latency-ms", "20", "--seed",         "11", NULL};
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-metrics-%d.jsonl", (int)getpid());
    worker_write_jobs(jobs, "m", JOBS, "gpt-4o-mini", 20, "{\"max_attempts\":20}");
    worker_enqueue(account, jobs);
    snprintf(log, sizeof(log), "/tmp/llmq-metrics-%d.log", (int)getpid());
    int port = llmq_test_free_port();
    snprintf(port_s, sizeof(port_s), "%d", port);
    const char *args[] = {"--concurrency",
                          "16",
                          "--backoff-base-ms",
                          "50",
                          "--backoff-cap-ms",
                          "300",
                          "--metrics-port",
                          port_s,
                          "--metrics-host",
                          "127.0.0.1",
                          NULL};
    pid_t w = worker_start(account, &sim, log, args);
    assert_int_equal(wait_status(port, "/healthz", 200), 200);

    struct prom p;
    scrape_until_done(port, account, &p);
    assert_int_equal(sim_proc_stop(&sim), 0);

    /* After it: the counters match the run and the sim's access log. */
    assert_true(prom_sum(&p, "llmq_jobs_succeeded_total", "account", account, NULL) == JOBS);
    assert_true(prom_sum(&p, "llmq_jobs_in_hand", NULL) == 0);
    assert_true(prom_sum(&p, "llmq_requests_in_flight", NULL) == 0);
    assert_true(prom_sum(&p, "llmq_jobs_succeeded_total", "status", "200", NULL) == JOBS);
    assert_true(prom_sum(&p, "llmq_jobs_dead_total", NULL) == 0);
    double dispatched = prom_sum(&p, "llmq_jobs_dispatched_total", "account", account, NULL);
    double retried = prom_sum(&p, "llmq_jobs_retried_total", "account", account, NULL);
    assert_true(dispatched == JOBS + retried);
    assert_true(prom_sum(&p, "llmq_request_duration_seconds_count", "account", account, "model",
                         "gpt-4o-mini", NULL) == dispatched);
    size_t n;
    struct sim_entry *e = sim_log_read(sim.log_file, &n);
    int sim_429 = 0, sim_500 = 0;
    for (size_t i = 0; i < n; i++) {
        sim_429 += e[i].status == 429;
        sim_500 += e[i].status == 500;
    }
    free(e);
    printf("# sim: %zu requests, %d 429s, %d 500s; dispatched %.0f, retried %.0f\n", n, sim_429,
           sim_500, dispatched, retried);
    assert_true(sim_429 > 0);
    assert_true(prom_sum(&p, "llmq_http_429_total", "account", account, NULL) == sim_429);
    assert_true(prom_sum(&p, "llmq_http_429_total", "cause", "rate_limit", NULL) == sim_429);
    assert_true(prom_sum(&p, "llmq_jobs_retried_total", "status", "429", NULL) == sim_429);
    assert_true(prom_sum(&p, "llmq_jobs_retried_total", "status", "500", NULL) == sim_500);
    assert_true(prom_sum(&p, "llmq_tokens_reserved_total", "account", account, NULL) > 0);
    assert_true(prom_sum(&p, "llmq_tokens_used_total", "account", account, NULL) > 0);
    assert_true(prom_sum(&p, "llmq_prompt_tokens_estimated_total", "account", account, NULL) > 0);
    assert_true(prom_sum(&p, "llmq_prompt_tokens_actual_total", "account", account, NULL) > 0);
    assert_true(prom_sum(&p, "llmq_limiter_wait_seconds_count", "account", account, NULL) > 0);
    assert_true(prom_sum(&p, "llmq_worker_ready", NULL) == 1);
    prom_free(&p);

    kill(w, SIGTERM);
    assert_int_equal(worker_wait(w, 30000), 0);
    char *text = cli_slurp(log);
    assert_null(strstr(text, WORKER_TEST_KEY));
    free(text);
    unlink(jobs);
    unlink(log);
}

static void test_readyz_follows_redis(void **state)
{
    (void)state;
    struct llmq_test_redis r = {0};
    assert_int_equal(llmq_test_redis_start(&r, NULL), 0);
    char account[64], log[128], port_s[16];
    llmq_test_unique_name(account, sizeof(account), "readyz");
    snprintf(log, sizeof(log), "/tmp/llmq-readyz-%d.log", (int)getpid());
    int port = llmq_test_free_port();
    snprintf(port_s, sizeof(port_s), "%d", port);
    struct sim_proc nosim = {.port = 9}; /* no API call is made: no job is queued */
    const char *args[] = {"--redis",   r.url, "--metrics-port", port_s, "--metrics-host",
                          "127.0.0.1", NULL};
    pid_t w = worker_start(account, &nosim, log, args);

    assert_int_equal(wait_status(port, "/readyz", 200), 200);
    assert_int_equal(wait_status(port, "/healthz", 200), 200);

    llmq_test_redis_stop(&r);
    assert_int_equal(wait_status(port, "/readyz", 503), 503);
    struct worker_page pg = worker_http_get(port, "/readyz");
    assert_int_equal(pg.status, 503);
    assert_non_null(strstr(pg.body, "redis"));
    free(pg.body);
    pg = worker_http_get(port, "/healthz");
    assert_int_equal(pg.status, 200);
    free(pg.body);
    struct prom p;
    char *text = scrape(port, &p);
    assert_true(prom_sum(&p, "llmq_redis_connected", "account", account, NULL) == 0);
    assert_true(prom_sum(&p, "llmq_worker_ready", NULL) == 0);
    prom_free(&p);
    free(text);

    assert_int_equal(llmq_test_redis_start(&r, NULL), 0); /* same port */
    assert_int_equal(wait_status(port, "/readyz", 200), 200);
    pg = worker_http_get(port, "/healthz");
    assert_int_equal(pg.status, 200);
    free(pg.body);

    kill(w, SIGTERM);
    assert_int_equal(worker_wait(w, 30000), 0);
    llmq_test_redis_stop(&r);
    unlink(log);
}

/* Checks one JSON log line; counts job lines of event kinds. */
static void check_log_line(const char *line, const char *account, int *dispatched, int *done,
                           int *retried)
{
    json_t *o = json_loads(line, 0, NULL);
    if (o == NULL)
        fail_msg("log line is not JSON: %s", line);
    assert_true(json_is_object(o));
    assert_non_null(json_string_value(json_object_get(o, "ts")));
    assert_non_null(json_string_value(json_object_get(o, "level")));
    const char *msg = json_string_value(json_object_get(o, "msg"));
    const char *job = json_string_value(json_object_get(o, "job"));
    assert_non_null(msg);
    if (strstr(msg, "lj-") != NULL && job == NULL)
        fail_msg("a line about a job without its job id: %s", line);
    if (job != NULL) {
        const char *acct = json_string_value(json_object_get(o, "account"));
        if (acct == NULL || strcmp(acct, account) != 0)
            fail_msg("a job line without its account: %s", line);
        *dispatched += strncmp(msg, "dispatched", 10) == 0;
        *done += strncmp(msg, "done", 4) == 0;
        *retried += strncmp(msg, "retry", 5) == 0;
    }
    json_decref(o);
}

static void test_json_logs(void **state)
{
    (void)state;
    char account[64], jobs[128], log[128], port_s[16];
    llmq_test_unique_name(account, sizeof(account), "jsonlog");
    struct sim_proc sim;
    const char *sim_args[] = {
        "--fail-500", "10", "--spurious-429", "10", "--spurious-retry-ms", "100", "--seed",
        "5",          NULL};
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);
    snprintf(jobs, sizeof(jobs), "/tmp/llmq-jsonlog-%d.jsonl", (int)getpid());
    worker_write_jobs(jobs, "lj", 60, "gpt-4o-mini", 20, "{\"max_attempts\":20}");
    worker_enqueue(account, jobs);
    snprintf(log, sizeof(log), "/tmp/llmq-jsonlog-%d.log", (int)getpid());
    int port = llmq_test_free_port();
    snprintf(port_s, sizeof(port_s), "%d", port);
    const char *args[] = {"--log-format",
                          "json",
                          "--log-level",
                          "debug",
                          "--backoff-base-ms",
                          "50",
                          "--backoff-cap-ms",
                          "200",
                          "--exit-when-idle-ms",
                          "1500",
                          "--metrics-port",
                          port_s,
                          NULL};
    pid_t w = worker_start(account, &sim, log, args);
    assert_int_equal(wait_status(port, "/healthz", 200), 200);
    struct worker_page pg = worker_http_get(port, "/metrics");
    assert_null(strstr(pg.body, WORKER_TEST_KEY));
    free(pg.body);
    assert_int_equal(worker_wait(w, DEADLINE_MS), 0);
    assert_int_equal(sim_proc_stop(&sim), 0);

    char *text = cli_slurp(log);
    assert_null(strstr(text, WORKER_TEST_KEY));
    int lines = 0, dispatched = 0, done = 0, retried = 0;
    for (char *line = text, *nl; *line; line = nl + 1) {
        nl = strchr(line, '\n');
        assert_non_null(nl); /* every line is complete */
        *nl = '\0';
        check_log_line(line, account, &dispatched, &done, &retried);
        lines++;
    }
    printf("# %d log lines: %d dispatched, %d done, %d retry lines\n", lines, dispatched, done,
           retried);
    assert_int_equal(done, 60);
    assert_int_equal(dispatched, 60 + retried);
    assert_true(retried > 0);
    free(text);
    unlink(jobs);
    unlink(log);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parser_rejects_bad_text),
        cmocka_unit_test(test_metrics_match_the_run),
        cmocka_unit_test(test_readyz_follows_redis),
        cmocka_unit_test(test_json_logs),
    };
    int rc = cmocka_run_group_tests_name("worker_metrics", tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
