/* Calibration samples: write as one EVAL of HINCRBYs, read with one HGETALL.
 *
 * The script is generic (field suffix, increment pairs) so all arithmetic
 * stays in C, where it is tested; it is embedded here rather than in lua/
 * because it is three lines and has no logic worth a file. Relative errors
 * are stored in basis points (1/100 of a percent), clamped to ±1,000,000 so
 * their squares cannot overflow a 64-bit sum in any realistic number of
 * samples. */
#include "jobs/calibration.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redis/redis.h"

static const char calib_script[] =
    "for i = 2, #ARGV, 2 do\n"
    "  redis.call('HINCRBY', KEYS[1], ARGV[1] .. '|' .. ARGV[i], ARGV[i + 1])\n"
    "end\n"
    "return #ARGV\n";

/* "llmq:{ACCOUNT}:calib" into key (LLMQ_KEY_FIXED_MAX bytes). */
static enum llmq_rc calib_key(const char *account, char *key, struct llmq_error *err)
{
    char prefix[LLMQ_KEY_PREFIX_MAX];
    if (llmq_account_prefix(account, prefix, sizeof(prefix), err) != LLMQ_OK)
        return LLMQ_EINVAL;
    return llmq_key(key, LLMQ_KEY_FIXED_MAX, prefix, LLMQ_KEY_CALIB, NULL, err);
}

static const char *const suffixes[LLMQ_CALIB_FIELDS + 1] = {"n",     "est", "act", "abs",
                                                            "under", "rel", "rel2"};

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

enum llmq_rc llmq_calib_record_cmd(struct llmq_calib_cmd *cmd, const char *account,
                                   const char *model, long long estimated_tokens,
                                   long long actual_tokens, struct llmq_error *err)
{
    struct llmq_calib_increments inc;
    if (calib_key(account, cmd->key, err) != LLMQ_OK)
        return LLMQ_EINVAL;
    if (!llmq_name_valid(model))
        return llmq_error_set(err, LLMQ_EINVAL, "calibration: invalid model name");
    if (estimated_tokens < 0 || actual_tokens < 0)
        return llmq_error_set(err, LLMQ_EINVAL, "calibration: negative token count");
    llmq_calib_increments(estimated_tokens, actual_tokens, &inc);
    const long long vals[LLMQ_CALIB_FIELDS + 1] = {inc.n,     inc.est,    inc.act,    inc.abs,
                                                   inc.under, inc.rel_bp, inc.rel2_bp};
    memset(cmd->argv, 0, sizeof(cmd->argv));
    snprintf(cmd->model, sizeof(cmd->model), "%s", model);
    int a = 0;
    cmd->argv[a++] = "EVAL";
    cmd->argv[a++] = calib_script;
    cmd->argv[a++] = "1";
    cmd->argv[a++] = cmd->key;
    cmd->argv[a++] = cmd->model;
    for (int i = 0; i <= LLMQ_CALIB_FIELDS; i++) {
        snprintf(cmd->num[i], sizeof(cmd->num[i]), "%lld", vals[i]);
        cmd->argv[a++] = suffixes[i];
        cmd->argv[a++] = cmd->num[i];
    }
    cmd->argc = a;
    for (int i = 0; i < a; i++)
        cmd->argvlen[i] = strlen(cmd->argv[i]);
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
