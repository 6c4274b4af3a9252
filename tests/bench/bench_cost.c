/* Charge models against known prompt tokens.
 *
 * Usage: bench_cost [tests/data/cost/requests.jsonl]
 * For every request of the corpus (made by tests/tools/gen_cost_corpus.mjs)
 * estimates the prompt tokens with LLMQ_CHARGE_EXACT and with
 * LLMQ_CHARGE_CHARS (OpenAI's characters/4 admission estimate) and prints,
 * per category, how far each is from the request's known prompt tokens: the
 * usage OpenAI's API reported (category cookbook-api) or the cookbook's rule
 * evaluated with the npm tiktoken (all others; no API is reachable offline).
 * JSON/4 is another reading of OpenAI's rule: UTF-8 bytes of the whole
 * compact JSON body / 4, for comparison only. Also the mean time of one exact estimate. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "llmq/cost.h"
#include "llmq/tokens.h"

#define MAX_CATS 16

struct cat {
    char name[32];
    int n;
    double ref_sum;
    double err_abs_pct[3], err_max_pct[3], err_signed_pct[3]; /* EXACT, CHARS, JSON/4 */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static struct cat *cat_for(struct cat *cats, int *n, const char *name)
{
    for (int i = 0; i < *n; i++) {
        if (strcmp(cats[i].name, name) == 0)
            return &cats[i];
    }
    if (*n == MAX_CATS)
        return NULL;
    struct cat *c = &cats[(*n)++];
    memset(c, 0, sizeof(*c));
    snprintf(c->name, sizeof(c->name), "%s", name);
    return c;
}

static void add_sample(struct cat *c, int model, long long est, long long ref)
{
    double e = ref > 0 ? 100.0 * (double)(est - ref) / (double)ref : 0.0;
    c->err_signed_pct[model] += e;
    c->err_abs_pct[model] += fabs(e);
    if (fabs(e) > c->err_max_pct[model])
        c->err_max_pct[model] = fabs(e);
}

static void print_row(const struct cat *c)
{
    printf("| %s | %d | %.0f |", c->name, c->n, c->ref_sum / c->n);
    for (int m = 0; m < 3; m++)
        printf(" %+.1f%% | %.1f%% | %.1f%% |", c->err_signed_pct[m] / c->n,
               c->err_abs_pct[m] / c->n, c->err_max_pct[m]);
    printf("\n");
}

/* Estimates one corpus line with both charge models. Returns 0, or -1 when
 * an estimate fails. */
static int bench_line(const char *line, struct cat *cats, int *ncats, struct cat *all,
                      const struct llmq_cost_options opt[2], double *exact_s)
{
    json_t *req = json_loads(line, 0, NULL);
    const char *category = json_string_value(json_object_get(req, "category"));
    const char *url = json_string_value(json_object_get(req, "url"));
    long long ref = json_integer_value(json_object_get(req, "prompt_tokens"));
    struct cat *c = category ? cat_for(cats, ncats, category) : NULL;
    if (c == NULL || url == NULL) {
        json_decref(req);
        return 0;
    }
    c->n++;
    all->n++;
    c->ref_sum += (double)ref;
    all->ref_sum += (double)ref;
    for (int m = 0; m < 2; m++) {
        struct llmq_cost cost;
        struct llmq_error err;
        double t0 = now_s();
        if (llmq_cost_estimate(url, json_object_get(req, "body"), &opt[m], &cost, &err) !=
            LLMQ_OK) {
            fprintf(stderr, "%s\n", err.msg);
            json_decref(req);
            return -1;
        }
        if (m == 0)
            *exact_s += now_s() - t0;
        add_sample(c, m, cost.prompt_tokens, ref);
        add_sample(all, m, cost.prompt_tokens, ref);
    }
    /* Another reading of "the request's character count": bytes of the JSON body. */
    char *text = json_dumps(json_object_get(req, "body"), JSON_COMPACT);
    long long body_tokens = text ? ((long long)strlen(text) + 3) / 4 : 0;
    free(text);
    add_sample(c, 2, body_tokens, ref);
    add_sample(all, 2, body_tokens, ref);
    json_decref(req);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "tests/data/cost/requests.jsonl";
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        perror(path);
        return 1;
    }
    struct cat cats[MAX_CATS], all = {.name = "**all**"};
    int ncats = 0;
    double exact_s = 0;
    char *line = NULL;
    size_t cap = 0;
    struct llmq_cost_options opt[2];
    for (int m = 0; m < 2; m++) {
        llmq_cost_options_default(&opt[m]);
        opt[m].margin_pct = 0;
    }
    opt[1].charge_model = LLMQ_CHARGE_CHARS;
    /* Vocabularies load once per process: keep that out of the timing. */
    if (llmq_tokens_load(LLMQ_ENCODING_O200K_BASE, NULL) != LLMQ_OK ||
        llmq_tokens_load(LLMQ_ENCODING_CL100K_BASE, NULL) != LLMQ_OK) {
        fprintf(stderr, "cannot load the vocabularies\n");
        return 1;
    }
    while (getline(&line, &cap, f) > 0) {
        if (bench_line(line, cats, &ncats, &all, opt, &exact_s) != 0)
            return 1;
    }
    free(line);
    fclose(f);
    printf("Prompt-token estimate vs known prompt tokens "
           "(error = (estimate - known) / known)\n\n");
    printf("| category | requests | mean known tokens"
           " | EXACT bias | EXACT mean abs err | EXACT max abs err"
           " | CHARS bias | CHARS mean abs err | CHARS max abs err"
           " | JSON/4 bias | JSON/4 mean abs err | JSON/4 max abs err |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < ncats; i++)
        print_row(&cats[i]);
    print_row(&all);
    printf("\nEXACT estimate: %.1f us per request (mean, this build)\n",
           all.n ? exact_s / all.n * 1e6 : 0.0);
    return 0;
}
