/* Calibration samples: summed by the writer, added with one calib_add
 * script call per model (lua/calib_add.lua), read with one HGETALL.
 *
 * The script only adds the sums it is given, so all arithmetic stays in C,
 * where it is tested. Relative errors are stored in basis points (1/100 of
 * a percent), clamped to ±1,000,000 so their squares cannot overflow a
 * 64-bit sum in any realistic number of samples. */
#include "jobs/calibration.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redis/redis.h"

/* "llmq:{ACCOUNT}:calib" into key (LLMQ_KEY_FIXED_MAX bytes). */
static enum llmq_rc calib_key(const char *account, char *key, struct llmq_error *err)
{
    char prefix[LLMQ_KEY_PREFIX_MAX];
    if (llmq_account_prefix(account, prefix, sizeof(prefix), err) != LLMQ_OK)
        return LLMQ_EINVAL;
    return llmq_key(key, LLMQ_KEY_FIXED_MAX, prefix, LLMQ_KEY_CALIB, NULL, err);
}

void llmq_calib_increments(long long estimated_tokens, long long actual_tokens,
                           struct llmq_calib_increments *out)
{
    long long d = actual_tokens - estimated_tokens;
    long long rel;
    if (actual_tokens > 0)
        rel = (long long)llround((double)d * 10000.0 / (double)actual_tokens);
    else
        rel = d == 0 ? 0 : -10000; /* nothing was sent, yet we expected some */
    if (rel > 1000000)
        rel = 1000000;
    if (rel < -1000000)
        rel = -1000000;
    out->n = 1;
    out->est = estimated_tokens;
    out->act = actual_tokens;
    out->abs = d < 0 ? -d : d;
    out->under = d > 0;
    out->rel_bp = rel;
    out->rel2_bp = rel * rel;
}

enum llmq_rc llmq_calib_sum_add(struct llmq_calib_increments *sum, long long estimated_tokens,
                                long long actual_tokens)
{
    struct llmq_calib_increments inc;
    if (estimated_tokens < 0 || actual_tokens < 0)
        return LLMQ_EINVAL;
    llmq_calib_increments(estimated_tokens, actual_tokens, &inc);
    sum->n += inc.n;
    sum->est += inc.est;
    sum->act += inc.act;
    sum->abs += inc.abs;
    sum->under += inc.under;
    sum->rel_bp += inc.rel_bp;
    sum->rel2_bp += inc.rel2_bp;
    return LLMQ_OK;
}

enum llmq_rc llmq_calib_add_argv(struct llmq_calib_add_argv *out, const char *account,
                                 const char *model, const struct llmq_calib_increments *sum,
                                 struct llmq_error *err)
{
    if (llmq_account_prefix(account, out->prefix, sizeof(out->prefix), err) != LLMQ_OK)
        return LLMQ_EINVAL;
    if (!llmq_name_valid(model) || strlen(model) >= sizeof(out->model))
        return llmq_error_set(err, LLMQ_EINVAL, "calibration: invalid model name");
    if (sum->n <= 0)
        return llmq_error_set(err, LLMQ_EINVAL, "calibration: no samples to add");
    /* In lua/calib_add.lua's ARGV order. */
    const long long vals[LLMQ_CALIB_FIELDS + 1] = {sum->n,     sum->est,    sum->act,    sum->abs,
                                                   sum->under, sum->rel_bp, sum->rel2_bp};
    snprintf(out->model, sizeof(out->model), "%s", model);
    out->argv[0] = out->prefix;
    out->argv[1] = out->model;
    for (int i = 0; i <= LLMQ_CALIB_FIELDS; i++) {
        snprintf(out->num[i], sizeof(out->num[i]), "%lld", vals[i]);
        out->argv[2 + i] = out->num[i];
    }
    return LLMQ_OK;
}

/* Finds or appends the entry of model (mlen bytes) in *arr. */
static struct llmq_calib_stats *entry_for(struct llmq_calib_stats **arr, size_t *n, size_t *cap,
                                          const char *model, size_t mlen)
{
    for (size_t i = 0; i < *n; i++) {
        if (strlen((*arr)[i].model) == mlen && memcmp((*arr)[i].model, model, mlen) == 0)
            return &(*arr)[i];
    }
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 8;
        struct llmq_calib_stats *na = realloc(*arr, nc * sizeof(**arr));
        if (na == NULL)
            return NULL;
        *arr = na;
        *cap = nc;
    }
    struct llmq_calib_stats *s = &(*arr)[(*n)++];
    memset(s, 0, sizeof(*s));
    memcpy(s->model, model, mlen < sizeof(s->model) - 1 ? mlen : sizeof(s->model) - 1);
    return s;
}

/* Sums of the relative errors, kept aside until the means are computed. */
struct rel_sums {
    double rel, rel2;
};

static void set_field(struct llmq_calib_stats *s, struct rel_sums *r, const char *suffix,
                      long long v)
{
    if (strcmp(suffix, "n") == 0)
        s->samples = v;
    else if (strcmp(suffix, "est") == 0)
        s->est_tokens = v;
    else if (strcmp(suffix, "act") == 0)
        s->actual_tokens = v;
    else if (strcmp(suffix, "abs") == 0)
        s->abs_error_tokens = v;
    else if (strcmp(suffix, "under") == 0)
        s->under_samples = v;
    else if (strcmp(suffix, "rel") == 0)
        r->rel = (double)v;
    else if (strcmp(suffix, "rel2") == 0)
        r->rel2 = (double)v;
}

static void finish_stats(struct llmq_calib_stats *s, const struct rel_sums *r)
{
    if (s->actual_tokens > 0) {
        /* in double: corrupt sums could overflow the difference */
        s->bias_pct =
            100.0 * ((double)s->actual_tokens - (double)s->est_tokens) / (double)s->actual_tokens;
        s->mean_abs_pct = 100.0 * (double)s->abs_error_tokens / (double)s->actual_tokens;
    }
    if (s->samples > 0) {
        double mean_bp = r->rel / (double)s->samples;
        double var_bp = r->rel2 / (double)s->samples - mean_bp * mean_bp;
        s->mean_rel_pct = mean_bp / 100.0;
        s->stddev_rel_pct = var_bp > 0 ? sqrt(var_bp) / 100.0 : 0.0;
    }
}

static int by_model(const void *a, const void *b)
{
    return strcmp(((const struct llmq_calib_stats *)a)->model,
                  ((const struct llmq_calib_stats *)b)->model);
}

/* Turns an HGETALL reply into the stats array. */
static enum llmq_rc parse_hash(const redisReply *r, struct llmq_calib_stats **out, size_t *n,
                               struct llmq_error *err)
{
    struct llmq_calib_stats *arr = NULL;
    struct rel_sums *sums = calloc(r->elements / 2 + 1, sizeof(*sums));
    size_t cnt = 0, cap = 0;
    if (sums == NULL)
        return llmq_error_set(err, LLMQ_ENOMEM, "calibration: out of memory");
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        const redisReply *f = r->element[i], *v = r->element[i + 1];
        if (f->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING)
            continue;
        const char *bar = memchr(f->str, '|', f->len);
        if (bar == NULL)
            continue; /* not ours: ignore rather than fail the whole status */
        struct llmq_calib_stats *s = entry_for(&arr, &cnt, &cap, f->str, (size_t)(bar - f->str));
        if (s == NULL) {
            free(arr);
            free(sums);
            return llmq_error_set(err, LLMQ_ENOMEM, "calibration: out of memory");
        }
        char suffix[8] = {0};
        size_t sl = f->len - (size_t)(bar + 1 - f->str);
        if (sl < sizeof(suffix))
            memcpy(suffix, bar + 1, sl);
        set_field(s, &sums[s - arr], suffix, strtoll(v->str, NULL, 10));
    }
    for (size_t i = 0; i < cnt; i++)
        finish_stats(&arr[i], &sums[i]);
    free(sums);
    if (cnt > 1)
        qsort(arr, cnt, sizeof(*arr), by_model);
    *out = arr;
    *n = cnt;
    return LLMQ_OK;
}

enum llmq_rc llmq_calib_read(redisContext *c, const char *account, struct llmq_calib_stats **out,
                             size_t *n, struct llmq_error *err)
{
    char key[LLMQ_KEY_FIXED_MAX];
    if (calib_key(account, key, err) != LLMQ_OK)
        return LLMQ_EINVAL;
    redisReply *r = redisCommand(c, "HGETALL %s", key);
    if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
        enum llmq_rc rc = llmq_redis_error(c, r, "calibration HGETALL", err);
        if (r != NULL)
            freeReplyObject(r);
        return rc;
    }
    enum llmq_rc rc = parse_hash(r, out, n, err);
    freeReplyObject(r);
    return rc;
}

enum llmq_rc llmq_calib_reset(redisContext *c, const char *account, struct llmq_error *err)
{
    char key[LLMQ_KEY_FIXED_MAX];
    if (calib_key(account, key, err) != LLMQ_OK)
        return LLMQ_EINVAL;
    redisReply *r = redisCommand(c, "DEL %s", key);
    if (r == NULL || r->type == REDIS_REPLY_ERROR) {
        enum llmq_rc rc = llmq_redis_error(c, r, "calibration DEL", err);
        if (r != NULL)
            freeReplyObject(r);
        return rc;
    }
    freeReplyObject(r);
    return LLMQ_OK;
}

int llmq_calib_margin_pct(const struct llmq_calib_stats *s, int floor_pct, long long min_samples)
{
    if (s == NULL || s->samples < min_samples || s->samples == 0)
        return floor_pct;
    double need = s->mean_rel_pct + 2.0 * s->stddev_rel_pct;
    /* clamp before converting: corrupt sums can make need huge, inf or NaN */
    int pct = need > 100.0 ? 100 : need > 0 ? (int)ceil(need) : 0;
    if (pct < floor_pct)
        pct = floor_pct;
    return pct > 100 ? 100 : pct;
}
