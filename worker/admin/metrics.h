/* A small metric registry and its Prometheus text rendering (exposition
 * format 0.0.4). Pure: no I/O, no clock, no loop, so a unit test feeds values
 * and compares the text.
 *
 * A registry holds families (one metric name, its help, its type and its
 * label names); a family holds series, one per tuple of label values, created
 * on first use. Counters and gauges hold one number; histograms hold per-bucket
 * counts (rendered cumulative), a sum and a count.
 *
 * Cardinality is bounded: a family keeps at most LLMQ_METRICS_MAX_SERIES
 * series; values for a new series past that are dropped and counted (rendered
 * as llmq_metrics_series_dropped_total), since label values such as a model
 * name come from job data we do not control.
 *
 * Threading: none; one owner calls everything. */
#ifndef LLMQ_WORKER_METRICS_H
#define LLMQ_WORKER_METRICS_H

#include <stddef.h>

#include "llmq/error.h"

#define LLMQ_METRICS_MAX_LABELS 4
#define LLMQ_METRICS_MAX_BUCKETS 24
#define LLMQ_METRICS_MAX_SERIES 1000

enum llmq_metric_type {
    LLMQ_METRIC_COUNTER = 0,
    LLMQ_METRIC_GAUGE,
    LLMQ_METRIC_HISTOGRAM,
};

struct llmq_metrics; /* the registry */
struct llmq_metric;  /* one family, owned by its registry */

/* Returns a new empty registry, or NULL when memory is short. */
struct llmq_metrics *llmq_metrics_new(void);

/* Frees m and all its families. NULL is a no-op. */
void llmq_metrics_free(struct llmq_metrics *m);

/* Adds a family to m and returns it (owned by m), or NULL when name (metric
 * name syntax, < 64 bytes), a label name (label syntax, < 32 bytes, not
 * starting "__", not "le" for a histogram), the label count (at most
 * LLMQ_METRICS_MAX_LABELS) or the bucket bounds (finite, strictly
 * increasing, at most LLMQ_METRICS_MAX_BUCKETS, only for a histogram; the
 * +Inf bucket is implicit) are invalid, or memory is short. label_names is
 * NULL-terminated (NULL: no labels); name, help and label names are copied.
 * Families render in the order they were added. */
struct llmq_metric *llmq_metrics_register(struct llmq_metrics *m, const char *name,
                                          const char *help, enum llmq_metric_type type,
                                          const char *const *label_names, const double *bounds,
                                          size_t n_bounds);

/* One family of a registration table: llmq_metrics_register's arguments
 * and where the family goes (at: offsetof the struct llmq_metric * in the
 * owner struct). */
struct llmq_metric_spec {
    const char *name, *help;
    enum llmq_metric_type type;
    const char *const *labels;
    const double *bounds;
    size_t n_bounds;
    size_t at;
};

/* Registers specs[0..n) in order, storing each family at owner + spec.at.
 * Returns 1 when every one registered, 0 when one did not (those before it
 * stay registered, owned by m, as after llmq_metrics_register). */
int llmq_metrics_register_table(struct llmq_metrics *m, const struct llmq_metric_spec *specs,
                                size_t n, void *owner);

/* Adds v to the counter or gauge series of f named by label_values (one per
 * label name, borrowed and copied on first use; NULL entries mean ""; the
 * array may be NULL for a family without labels). Returns LLMQ_OK, LLMQ_EINVAL
 * for a histogram family or a counter given v < 0, LLMQ_ENOMEM, or LLMQ_ETOOBIG
 * when the series would be past the cap (the value is dropped and counted).
 * f NULL is a no-op returning LLMQ_OK. */
enum llmq_rc llmq_metrics_add(struct llmq_metric *f, const char *const *label_values, double v);

/* Sets a gauge series to v. Same arguments and returns as llmq_metrics_add;
 * LLMQ_EINVAL unless f is a gauge. */
enum llmq_rc llmq_metrics_set(struct llmq_metric *f, const char *const *label_values, double v);

/* Records one observation v (in the family's unit, e.g. seconds) in a
 * histogram series. Same arguments and returns as llmq_metrics_add; LLMQ_EINVAL
 * unless f is a histogram or when v is NaN. */
enum llmq_rc llmq_metrics_observe(struct llmq_metric *f, const char *const *label_values, double v);

/* Renders every family of m as Prometheus text format 0.0.4 (# HELP and
 * # TYPE lines, label values escaped, histograms as _bucket{le=...} cumulative,
 * _sum and _count). Returns new NUL-terminated text (free with free()) and its
 * length in *len (len may be NULL), or NULL when memory is short. */
char *llmq_metrics_render(const struct llmq_metrics *m, size_t *len);

#endif
