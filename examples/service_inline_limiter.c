/* A service that calls OpenAI itself and asks llmq's shared limiter first.
 *
 * Not every caller wants a queue: a request handler that must answer its own
 * client keeps the call inline and only needs "may I spend this budget now?".
 * This program shows that pattern with the synchronous limiter API
 * (llmq/limiter.h), the same account+model → tenant → user buckets the
 * workers use, so inline callers and queued jobs share one RPM/TPM budget:
 *
 *   estimate cost → llmq_limiter_acquire
 *     granted     → call the API → 2xx: llmq_limiter_settle(real usage)
 *                                  429: llmq_limiter_refund + pause the model
 *                                       bucket for the server's hint, try again
 *                                  5xx/transport: settle at the reserved cost
 *                                       (the call may have been billed)
 *                                  other 4xx: refund
 *     denied      → sleep exactly wait_ms (plus a little jitter) and ask again,
 *                   or shed the request when that is longer than --max-wait-ms
 *     never fits  → the cost exceeds a whole limit: waiting cannot help
 *   Redis down    → fail-open (default: a local limiter with --local-share of
 *                   each limit last seen) or --fail-closed (refuse to call).
 *
 * usage: service_inline_limiter [options] [PROMPT...]
 *   --redis URL        env LLMQ_REDIS_URL, default redis://127.0.0.1:6379/0
 *   --account NAME     env LLMQ_ACCOUNT, default "default"
 *   --model M          default gpt-4o-mini
 *   --tenant T, --user U, --priority high|normal|low
 *   --base-url URL     env OPENAI_BASE_URL, default https://api.openai.com/v1;
 *                      the key is OPENAI_API_KEY
 *   --dry-run          no HTTP call: the "reply" uses the estimated prompt
 *                      tokens plus 8 completion tokens
 *   --max-wait-ms MS   longest total wait for budget per request (default 10000)
 *   --fail-closed      refuse to call while Redis is unreachable
 *   --local-share F    fail-open share of each limit, (0,1] (default 0.5)
 * Each PROMPT is one request (default: three built-in questions).
 *
 * Output, one line per event on stdout (tests read it):
 *   granted I cost=C local=0|1      waiting I wait_ms=W bucket=B reason=R
 *   shed I wait_ms=W                never-fits I cost=C limit=L bucket=B
 *   settled I usage=U               refunded I status=S
 *   kept I status=S                 summary served=N shed=N never_fits=N errors=N
 * Exit: 0 every request served; 1 runtime failure (Redis down and fail-closed);
 *   2 usage error; 3 some request was not served (shed, never fits, HTTP error).
 * Uses only the public library (llmq/limiter.h, llmq/cost.h) plus libcurl and
 * jansson, which llmq itself links. */
#include <curl/curl.h>
#include <jansson.h>
#include <llmq/cost.h>
#include <llmq/limiter.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

struct options {
    struct llmq_limiter_config lim;
    const char *account, *model, *tenant, *user, *base_url, *api_key;
    enum llmq_priority prio;
    int dry_run;
    long long max_wait_ms;
};

struct tally {
    int served, shed, never_fits, errors;
};

/* What one API call returned. */
struct reply {
    long status;        /* 0: transport failure */
    long long usage;    /* usage.total_tokens of a 2xx, -1 when absent */
    long long retry_ms; /* retry-after(-ms) hint of a 429, 0 when none */
    char *body;
    size_t len;
};

static void sleep_ms(long long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static size_t on_body(char *p, size_t size, size_t n, void *userdata)
{
    struct reply *r = userdata;
    char *b = realloc(r->body, r->len + size * n + 1);
    if (b == NULL)
        return 0;
    memcpy(b + r->len, p, size * n);
    r->len += size * n;
    b[r->len] = '\0';
    r->body = b;
    return size * n;
}

/* Reads retry-after-ms (preferred) or retry-after (seconds) into r->retry_ms. */
static size_t on_header(char *p, size_t size, size_t n, void *userdata)
{
    struct reply *r = userdata;
    char line[128];
    size_t len = size * n < sizeof(line) - 1 ? size * n : sizeof(line) - 1;
    memcpy(line, p, len);
    line[len] = '\0';
    if (strncasecmp(line, "retry-after-ms:", 15) == 0)
        r->retry_ms = (long long)strtod(line + 15, NULL);
    else if (strncasecmp(line, "retry-after:", 12) == 0 && r->retry_ms == 0)
        r->retry_ms = (long long)(strtod(line + 12, NULL) * 1000.0);
    return size * n;
}

/* POSTs body to <base>/v1/chat/completions; fills *r (r->body is new). */
static void call_api(const struct options *o, const char *body, struct reply *r)
{
    char url[1024], auth[1024];
    size_t blen = strlen(o->base_url);
    while (blen > 0 && o->base_url[blen - 1] == '/')
        blen--;
    if (blen >= 3 && strncmp(o->base_url + blen - 3, "/v1", 3) == 0)
        blen -= 3; /* ".../v1" and "..." mean the same, as for llmq-worker */
    snprintf(url, sizeof(url), "%.*s/v1/chat/completions", (int)blen, o->base_url);
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", o->api_key ? o->api_key : "");
    memset(r, 0, sizeof(*r));
    r->usage = -1;
    CURL *h = curl_easy_init();
    if (h == NULL)
        return;
    struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    hdrs = curl_slist_append(hdrs, auth);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 120000L);
    if (curl_easy_perform(h) == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    explicit_bzero(auth, sizeof(auth));
    json_t *doc = r->body ? json_loads(r->body, 0, NULL) : NULL;
    json_t *total = json_object_get(json_object_get(doc, "usage"), "total_tokens");
    if (json_is_integer(total))
        r->usage = json_integer_value(total);
    json_decref(doc);
}

/* The tokens charged at admission: the exact estimate, or OpenAI's
 * characters/4 rule when no tokenizer vocabulary is installed. */
static long long estimate(const char *body_text, long long *prompt_tokens)
{
    json_t *body = json_loads(body_text, 0, NULL);
    struct llmq_cost_options opt;
    struct llmq_cost cost = {0};
    struct llmq_error err = {0};
    llmq_cost_options_default(&opt);
    if (llmq_cost_estimate("/v1/chat/completions", body, &opt, &cost, &err) != LLMQ_OK) {
        fprintf(stderr, "service: exact estimate failed (%s); counting characters\n", err.msg);
        opt.charge_model = LLMQ_CHARGE_CHARS;
        if (llmq_cost_estimate("/v1/chat/completions", body, &opt, &cost, &err) != LLMQ_OK)
            cost.total_tokens = cost.prompt_tokens = (long long)strlen(body_text);
    }
    json_decref(body);
    *prompt_tokens = cost.prompt_tokens;
    return cost.total_tokens;
}

/* Settles or refunds grant g after the call; returns 1 when the request was
 * served, 0 when it failed for good, -1 when it should be tried again. */
static int finish_call(struct llmq_limiter *lim, const struct options *o, int i,
                       const struct llmq_grant *g, long long cost, const struct reply *r)
{
    struct llmq_error err = {0};
    if (r->status >= 200 && r->status < 300) {
        long long used = r->usage >= 0 ? r->usage : cost;
        if (llmq_limiter_settle(lim, g->reservation, used, &err) != LLMQ_OK)
            fprintf(stderr, "service: settle: %s\n", err.msg); /* the reservation stands */
        printf("settled %d usage=%lld\n", i, used);
        return 1;
    }
    if (r->status == 429) {
        /* Give the budget back and hold every caller of this model off for the
         * server's hint: OpenAI knows something the bucket does not. */
        llmq_limiter_refund(lim, g->reservation, &err);
        long long hint = r->retry_ms > 0 ? r->retry_ms : 1000;
        llmq_limiter_pause(lim, o->account, o->model, hint, NULL, &err);
        printf("refunded %d status=429\n", i);
        return -1;
    }
    if (r->status == 0 || r->status >= 500) {
        /* The call may have been billed: keep the reservation as charged. */
        llmq_limiter_settle(lim, g->reservation, cost, &err);
        printf("kept %d status=%ld\n", i, r->status);
        return 0;
    }
    llmq_limiter_refund(lim, g->reservation, &err);
    printf("refunded %d status=%ld\n", i, r->status);
    return 0;
}

/* Runs request i (body_text) through the limiter and the API. */
static enum llmq_rc serve(struct llmq_limiter *lim, const struct options *o, int i,
                          const char *body_text, struct tally *t)
{
    struct llmq_path path;
    struct llmq_error err = {0};
    if (llmq_path_init(&path, o->account, o->model, o->tenant, o->user, &err) != LLMQ_OK) {
        fprintf(stderr, "service: %s\n", err.msg);
        return LLMQ_EINVAL;
    }
    long long prompt_tokens = 0, cost = estimate(body_text, &prompt_tokens), waited_ms = 0;
    for (;;) {
        struct llmq_grant g;
        enum llmq_rc rc = llmq_limiter_acquire(lim, &path, cost, o->prio, &g, &err);
        if (rc != LLMQ_OK) { /* fail-closed and Redis unreachable, or a script error */
            fprintf(stderr, "service: acquire: %s\n", err.msg);
            return rc;
        }
        if (g.decision == LLMQ_NEVER_FITS) {
            printf("never-fits %d cost=%lld limit=%lld bucket=%s\n", i, (long long)g.cost,
                   (long long)g.limit, g.bucket);
            t->never_fits++;
            return LLMQ_OK;
        }
        if (g.decision == LLMQ_DENIED) {
            long long jitter = g.wait_ms / 20 > 0 ? rand() % (g.wait_ms / 20 + 1) : 0;
            if (waited_ms + g.wait_ms > o->max_wait_ms) {
                printf("shed %d wait_ms=%lld\n", i, (long long)g.wait_ms);
                t->shed++;
                return LLMQ_OK;
            }
            printf("waiting %d wait_ms=%lld bucket=%s reason=%s\n", i, (long long)g.wait_ms,
                   g.bucket, g.reason);
            fflush(stdout);
            sleep_ms(g.wait_ms + jitter);
            waited_ms += g.wait_ms + jitter;
            continue;
        }
        printf("granted %d cost=%lld local=%d\n", i, cost, g.local);
        fflush(stdout);
        struct reply r = {.status = 200, .usage = prompt_tokens + 8};
        if (!o->dry_run)
            call_api(o, body_text, &r);
        int done = finish_call(lim, o, i, &g, cost, &r);
        free(r.body);
        if (done == 1)
            t->served++;
        else if (done == 0)
            t->errors++;
        if (done >= 0)
            return LLMQ_OK;
    }
}

static int usage_error(const char *what)
{
    fprintf(stderr, "service: %s (see the comment at the top of service_inline_limiter.c)\n", what);
    return 2;
}

/* Parses argv into *o; returns the index of the first prompt, or -1. */
static int parse_args(int argc, char **argv, struct options *o)
{
    const char *base = getenv("OPENAI_BASE_URL");
    *o = (struct options){.account = getenv("LLMQ_ACCOUNT"),
                          .model = "gpt-4o-mini",
                          .base_url = base && base[0] ? base : "https://api.openai.com/v1",
                          .api_key = getenv("OPENAI_API_KEY"),
                          .prio = LLMQ_PRIORITY_NORMAL,
                          .max_wait_ms = 10000,
                          .lim = {.on_redis_down = LLMQ_FAIL_OPEN, .local_share = 0.5}};
    if (o->account == NULL || o->account[0] == '\0')
        o->account = "default";
    int i = 1;
    for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--dry-run") == 0) {
            o->dry_run = 1;
            continue;
        }
        if (strcmp(a, "--fail-closed") == 0) {
            o->lim.on_redis_down = LLMQ_FAIL_CLOSED;
            continue;
        }
        if (v == NULL)
            return usage_error("missing value"), -1;
        i++;
        if (strcmp(a, "--redis") == 0)
            o->lim.redis_url = v;
        else if (strcmp(a, "--account") == 0)
            o->account = v;
        else if (strcmp(a, "--model") == 0)
            o->model = v;
        else if (strcmp(a, "--tenant") == 0)
            o->tenant = v;
        else if (strcmp(a, "--user") == 0)
            o->user = v;
        else if (strcmp(a, "--base-url") == 0)
            o->base_url = v;
        else if (strcmp(a, "--max-wait-ms") == 0)
            o->max_wait_ms = strtoll(v, NULL, 10);
        else if (strcmp(a, "--local-share") == 0)
            o->lim.local_share = strtod(v, NULL);
        else if (strcmp(a, "--priority") != 0 || llmq_priority_parse(v, &o->prio) != 0)
            return usage_error("unknown option or bad value"), -1;
    }
    if (!o->dry_run && (o->api_key == NULL || o->api_key[0] == '\0'))
        return usage_error("set OPENAI_API_KEY (or use --dry-run)"), -1;
    return i;
}

int main(int argc, char **argv)
{
    struct options o;
    int first = parse_args(argc, argv, &o);
    if (first < 0)
        return 2;
    static const char *const builtin[] = {"What is a token bucket?", "Name three primes.",
                                          "Say hello in French."};
    const char *const *prompts = first < argc ? (const char *const *)argv + first : builtin;
    int n = first < argc ? argc - first : 3;
    struct llmq_error err = {0};
    struct llmq_limiter *lim = llmq_limiter_new(&o.lim, &err);
    if (lim == NULL) { /* fail-closed and Redis unreachable */
        fprintf(stderr, "service: %s: not calling the API\n", err.msg);
        return 1;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    srand((unsigned)time(NULL));
    struct tally t = {0};
    enum llmq_rc rc = LLMQ_OK;
    for (int i = 0; i < n && rc == LLMQ_OK; i++) {
        json_t *body = json_pack("{s:s, s:[{s:s, s:s}], s:i}", "model", o.model, "messages", "role",
                                 "user", "content", prompts[i], "max_completion_tokens", 64);
        char *text = json_dumps(body, JSON_COMPACT);
        rc = text ? serve(lim, &o, i + 1, text, &t) : LLMQ_ENOMEM;
        free(text);
        json_decref(body);
    }
    printf("summary served=%d shed=%d never_fits=%d errors=%d\n", t.served, t.shed, t.never_fits,
           t.errors);
    llmq_limiter_free(lim);
    curl_global_cleanup();
    if (rc != LLMQ_OK)
        return 1;
    return t.served == n ? 0 : 3;
}
