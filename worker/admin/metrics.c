/* The metric registry and its Prometheus text rendering; see metrics.h.
 *
 * Series live in a growable array per family and are found by a linear scan
 * of their label values: the worker's families have a handful of series each
 * (accounts x models x statuses), and the cap bounds the worst case. Label
 * values are stored raw and escaped only when rendered. */
#include "admin/metrics.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct metrics_series {
    char *labels[LLMQ_METRICS_MAX_LABELS];
    double value;      /* counter or gauge; a histogram's sum */
    uint64_t count;    /* histogram: observations */
    uint64_t *buckets; /* histogram: observations per bucket (not cumulative), +Inf last */
};

struct llmq_metric {
    struct llmq_metric *next;
    struct llmq_metrics *owner;
    char name[64];
    char *help;
    enum llmq_metric_type type;
    int n_labels;
    char label_names[LLMQ_METRICS_MAX_LABELS][32];
    double bounds[LLMQ_METRICS_MAX_BUCKETS];
    size_t n_bounds;
    struct metrics_series *series;
    size_t n_series, cap_series;
};

struct llmq_metrics {
    struct llmq_metric *first, *last;
    double dropped; /* values dropped at the series cap */
};

struct llmq_metrics *llmq_metrics_new(void)
{
    return calloc(1, sizeof(struct llmq_metrics));
}

static void family_free(struct llmq_metric *f)
{
    for (size_t i = 0; i < f->n_series; i++) {
        for (int l = 0; l < f->n_labels; l++)
            free(f->series[i].labels[l]);
        free(f->series[i].buckets);
    }
    free(f->series);
    free(f->help);
    free(f);
}

void llmq_metrics_free(struct llmq_metrics *m)
{
    if (m == NULL)
        return;
    struct llmq_metric *f = m->first;
    while (f != NULL) {
        struct llmq_metric *next = f->next;
        family_free(f);
        f = next;
    }
    free(m);
}

/* [a-zA-Z_:][a-zA-Z0-9_:]* for metric names (colon allowed), the same without
 * colons for label names. */
static int valid_name(const char *s, size_t max, int colon)
{
    size_t n = strlen(s);
    if (n == 0 || n >= max)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                 (colon && c == ':') || (i > 0 && c >= '0' && c <= '9');
        if (!ok)
            return 0;
    }
    return 1;
}

static int valid_bounds(enum llmq_metric_type type, const double *bounds, size_t n)
{
    if (type != LLMQ_METRIC_HISTOGRAM)
        return n == 0;
    if (n > LLMQ_METRICS_MAX_BUCKETS || (n > 0 && bounds == NULL))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(bounds[i]) || (i > 0 && bounds[i] <= bounds[i - 1]))
            return 0;
    return 1;
}

struct llmq_metric *llmq_metrics_register(struct llmq_metrics *m, const char *name,
                                          const char *help, enum llmq_metric_type type,
                                          const char *const *label_names, const double *bounds,
                                          size_t n_bounds)
{
    if (m == NULL || name == NULL || !valid_name(name, 64, 1) ||
        !valid_bounds(type, bounds, n_bounds))
        return NULL;
    struct llmq_metric *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return NULL;
    f->owner = m;
    f->type = type;
    snprintf(f->name, sizeof(f->name), "%s", name);
    for (int i = 0; label_names != NULL && label_names[i] != NULL; i++) {
        const char *l = label_names[i];
        if (i == LLMQ_METRICS_MAX_LABELS || !valid_name(l, 32, 0) || strncmp(l, "__", 2) == 0 ||
            (type == LLMQ_METRIC_HISTOGRAM && strcmp(l, "le") == 0)) {
            free(f);
            return NULL;
        }
        snprintf(f->label_names[i], sizeof(f->label_names[i]), "%s", l);
        f->n_labels = i + 1;
    }
    if (n_bounds > 0)
        memcpy(f->bounds, bounds, n_bounds * sizeof(bounds[0]));
    f->n_bounds = n_bounds;
    f->help = strdup(help != NULL ? help : "");
    if (f->help == NULL) {
        free(f);
        return NULL;
    }
    if (m->last != NULL)
        m->last->next = f;
    else
        m->first = f;
    m->last = f;
    return f;
}

int llmq_metrics_register_table(struct llmq_metrics *m, const struct llmq_metric_spec *specs,
                                size_t n, void *owner)
{
    for (size_t i = 0; i < n; i++) {
        const struct llmq_metric_spec *f = &specs[i];
        struct llmq_metric *fam =
            llmq_metrics_register(m, f->name, f->help, f->type, f->labels, f->bounds, f->n_bounds);
        *(struct llmq_metric **)(void *)((char *)owner + f->at) = fam;
        if (fam == NULL)
            return 0;
    }
    return 1;
}

static int same_labels(const struct llmq_metric *f, const struct metrics_series *s,
                       const char *const *values)
{
    for (int l = 0; l < f->n_labels; l++) {
        const char *v = values != NULL && values[l] != NULL ? values[l] : "";
        if (strcmp(s->labels[l], v) != 0)
            return 0;
    }
    return 1;
}

/* The series of f named by values: found, or created; NULL with *rc set when
 * it cannot be. */
static struct metrics_series *series_get(struct llmq_metric *f, const char *const *values,
                                         enum llmq_rc *rc)
{
    for (size_t i = 0; i < f->n_series; i++)
        if (same_labels(f, &f->series[i], values))
            return &f->series[i];
    if (f->n_series == LLMQ_METRICS_MAX_SERIES) {
        f->owner->dropped += 1;
        *rc = LLMQ_ETOOBIG;
        return NULL;
    }
    *rc = LLMQ_ENOMEM;
    if (f->n_series == f->cap_series) {
        size_t cap = f->cap_series ? f->cap_series * 2 : 4;
        struct metrics_series *v = realloc(f->series, cap * sizeof(*v));
        if (v == NULL)
            return NULL;
        f->series = v;
        f->cap_series = cap;
    }
    struct metrics_series *s = &f->series[f->n_series];
    memset(s, 0, sizeof(*s));
    if (f->type == LLMQ_METRIC_HISTOGRAM &&
        (s->buckets = calloc(f->n_bounds + 1, sizeof(uint64_t))) == NULL)
        return NULL;
    for (int l = 0; l < f->n_labels; l++) {
        s->labels[l] = strdup(values != NULL && values[l] != NULL ? values[l] : "");
        if (s->labels[l] == NULL) {
            for (int k = 0; k < l; k++)
                free(s->labels[k]);
            free(s->buckets);
            return NULL;
        }
    }
    f->n_series++;
    *rc = LLMQ_OK;
    return s;
}

enum llmq_rc llmq_metrics_add(struct llmq_metric *f, const char *const *label_values, double v)
{
    enum llmq_rc rc = LLMQ_OK;
    if (f == NULL)
        return LLMQ_OK;
    if (f->type == LLMQ_METRIC_HISTOGRAM || (f->type == LLMQ_METRIC_COUNTER && !(v >= 0)))
        return LLMQ_EINVAL;
    struct metrics_series *s = series_get(f, label_values, &rc);
    if (s != NULL)
        s->value += v;
    return rc;
}

enum llmq_rc llmq_metrics_set(struct llmq_metric *f, const char *const *label_values, double v)
{
    enum llmq_rc rc = LLMQ_OK;
    if (f == NULL)
        return LLMQ_OK;
    if (f->type != LLMQ_METRIC_GAUGE)
        return LLMQ_EINVAL;
    struct metrics_series *s = series_get(f, label_values, &rc);
    if (s != NULL)
        s->value = v;
    return rc;
}

enum llmq_rc llmq_metrics_observe(struct llmq_metric *f, const char *const *label_values, double v)
{
    enum llmq_rc rc = LLMQ_OK;
    if (f == NULL)
        return LLMQ_OK;
    if (f->type != LLMQ_METRIC_HISTOGRAM || isnan(v))
        return LLMQ_EINVAL;
    struct metrics_series *s = series_get(f, label_values, &rc);
    if (s == NULL)
        return rc;
    size_t b = 0;
    while (b < f->n_bounds && v > f->bounds[b])
        b++;
    s->buckets[b]++; /* b == n_bounds: only +Inf holds it */
    s->count++;
    s->value += v;
    return LLMQ_OK;
}

/* ---- rendering ---- */

struct text {
    char *buf;
    size_t len, cap;
    int failed;
};

static void text_reserve(struct text *t, size_t more)
{
    if (t->failed || t->len + more + 1 <= t->cap)
        return;
    size_t cap = t->cap ? t->cap : 4096;
    while (cap < t->len + more + 1)
        cap *= 2;
    char *b = realloc(t->buf, cap);
    if (b == NULL) {
        t->failed = 1;
        return;
    }
    t->buf = b;
    t->cap = cap;
}

static void text_put(struct text *t, const char *s, size_t n)
{
    text_reserve(t, n);
    if (t->failed)
        return;
    memcpy(t->buf + t->len, s, n);
    t->len += n;
    t->buf[t->len] = '\0';
}

static void text_puts(struct text *t, const char *s)
{
    text_put(t, s, strlen(s));
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when it is not one. */
static size_t utf8_len(const unsigned char *s)
{
    if (s[0] < 0x80)
        return 1;
    size_t n = (s[0] & 0xE0) == 0xC0   ? 2
               : (s[0] & 0xF0) == 0xE0 ? 3
               : (s[0] & 0xF8) == 0xF0 ? 4
                                       : 0;
    if (n == 0 || (n == 2 && s[0] < 0xC2) || s[0] > 0xF4)
        return 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    if ((n == 3 && s[0] == 0xE0 && s[1] < 0xA0) || (n == 4 && s[0] == 0xF0 && s[1] < 0x90) ||
        (n == 4 && s[0] == 0xF4 && s[1] > 0x8F) || (n == 3 && s[0] == 0xED && s[1] > 0x9F))
        return 0; /* overlong, surrogate or past U+10FFFF */
    return n;
}

/* Appends s escaped: backslash, newline and (in label values, quote) get a
 * backslash; bytes that are not UTF-8 become U+FFFD, since the format is UTF-8. */
static void text_escaped(struct text *t, const char *s, int quote)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p != '\0') {
        size_t n = utf8_len(p);
        if (n == 0) {
            text_puts(t, "\xEF\xBF\xBD");
            p++;
        } else if (*p == '\\') {
            text_puts(t, "\\\\");
            p++;
        } else if (*p == '\n') {
            text_puts(t, "\\n");
            p++;
        } else if (*p == '"' && quote) {
            text_puts(t, "\\\"");
            p++;
        } else {
            text_put(t, (const char *)p, n);
            p += n;
        }
    }
}

/* A float as Prometheus reads it: the shortest %g that reads back exactly. */
static void format_value(double v, char *buf, size_t n)
{
    if (isnan(v)) {
        snprintf(buf, n, "NaN");
    } else if (isinf(v)) {
        snprintf(buf, n, "%s", v > 0 ? "+Inf" : "-Inf");
    } else {
        snprintf(buf, n, "%.15g", v);
        if (strtod(buf, NULL) != v)
            snprintf(buf, n, "%.17g", v);
    }
}

/* name{labels[,le="x"]} value\n; le NULL: no le label. */
static void text_sample(struct text *t, const struct llmq_metric *f, const char *suffix,
                        const struct metrics_series *s, const char *le, double v)
{
    char num[64];
    text_puts(t, f->name);
    text_puts(t, suffix);
    if (f->n_labels > 0 || le != NULL) {
        text_puts(t, "{");
        for (int l = 0; s != NULL && l < f->n_labels; l++) {
            if (l > 0)
                text_puts(t, ",");
            text_puts(t, f->label_names[l]);
            text_puts(t, "=\"");
            text_escaped(t, s->labels[l], 1);
            text_puts(t, "\"");
        }
        if (le != NULL) {
            text_puts(t, f->n_labels > 0 ? ",le=\"" : "le=\"");
            text_puts(t, le);
            text_puts(t, "\"");
        }
        text_puts(t, "}");
    }
    format_value(v, num, sizeof(num));
    text_puts(t, " ");
    text_puts(t, num);
    text_puts(t, "\n");
}

static void render_histogram(struct text *t, const struct llmq_metric *f,
                             const struct metrics_series *s)
{
    char le[64];
    uint64_t cumulative = 0;
    for (size_t b = 0; b <= f->n_bounds; b++) {
        cumulative += s->buckets[b];
        if (b < f->n_bounds)
            format_value(f->bounds[b], le, sizeof(le));
        else
            snprintf(le, sizeof(le), "+Inf");
        text_sample(t, f, "_bucket", s, le, (double)cumulative);
    }
    text_sample(t, f, "_sum", s, NULL, s->value);
    text_sample(t, f, "_count", s, NULL, (double)s->count);
}

static void render_family(struct text *t, const struct llmq_metric *f)
{
    static const char *const types[] = {"counter", "gauge", "histogram"};
    text_puts(t, "# HELP ");
    text_puts(t, f->name);
    text_puts(t, " ");
    text_escaped(t, f->help, 0);
    text_puts(t, "\n# TYPE ");
    text_puts(t, f->name);
    text_puts(t, " ");
    text_puts(t, types[f->type]);
    text_puts(t, "\n");
    if (f->n_labels == 0 && f->n_series == 0 && f->type != LLMQ_METRIC_HISTOGRAM)
        text_sample(t, f, "", NULL, NULL, 0); /* a plain counter or gauge exists from start */
    for (size_t i = 0; i < f->n_series; i++) {
        if (f->type == LLMQ_METRIC_HISTOGRAM)
            render_histogram(t, f, &f->series[i]);
        else
            text_sample(t, f, "", &f->series[i], NULL, f->series[i].value);
    }
}

char *llmq_metrics_render(const struct llmq_metrics *m, size_t *len)
{
    struct text t = {0};
    text_reserve(&t, 0);
    for (const struct llmq_metric *f = m->first; f != NULL; f = f->next)
        render_family(&t, f);
    if (m->dropped > 0) {
        char num[64];
        format_value(m->dropped, num, sizeof(num));
        text_puts(&t, "# HELP llmq_metrics_series_dropped_total Values dropped because a metric "
                      "reached its series cap.\n# TYPE llmq_metrics_series_dropped_total counter\n"
                      "llmq_metrics_series_dropped_total ");
        text_puts(&t, num);
        text_puts(&t, "\n");
    }
    if (t.failed) {
        free(t.buf);
        return NULL;
    }
    if (len != NULL)
        *len = t.len;
    return t.buf;
}
