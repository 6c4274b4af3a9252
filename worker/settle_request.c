/* The settle request's one field table and what it drives; see
 * settle_request.h. */
#include "settle_request.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job_slot.h"

enum field_type {
    FIELD_MODE,     /* enum worker_settle_mode */
    FIELD_CHARS,    /* char array (size: its capacity) */
    FIELD_TEXT,     /* char *, owned; "" when absent */
    FIELD_TEXT_OPT, /* char *, owned; NULL when absent (argv: "") */
    FIELD_INT64,    /* int64_t */
    FIELD_INT,      /* int */
    FIELD_FLAG,     /* int, sent as 0|1 */
    FIELD_KEY_ID,   /* this run's key fingerprint: not the job's, never spooled */
};

struct settle_field {
    const char *name; /* spool JSON key; the name in job_settle.lua's ARGV header */
    enum field_type type;
    size_t offset; /* in struct worker_job */
    size_t size;   /* FIELD_CHARS: capacity */
    int argv;      /* ARGV index in job_settle.lua; 0: spool only */
    int spooled;   /* kept in the spool */
    int required;  /* a spool line without it is unusable */
    int64_t dflt;  /* integers: the value when the spool lacks it */
};

#define AT(member) offsetof(struct worker_job, member)
#define CHARS(member) AT(member), sizeof(((struct worker_job *)0)->member)

/* Every field of the settle request, in ARGV order; spool-only fields last. */
static const struct settle_field fields[] = {
    {"mode", FIELD_MODE, AT(settle.mode), 0, 1, 1, 1, 0},
    {"prio", FIELD_CHARS, CHARS(prio), 2, 1, 1, 0},
    {"eid", FIELD_CHARS, CHARS(eid), 3, 1, 1, 0},
    {"id", FIELD_TEXT, AT(id), 0, 4, 1, 1, 0},
    {"handle", FIELD_TEXT, AT(handle), 0, 5, 1, 0, 0},
    {"actual", FIELD_INT64, AT(settle.actual_tokens), 0, 6, 1, 0, -1},
    {"line", FIELD_TEXT_OPT, AT(settle.line), 0, 7, 1, 0, 0},
    {"reason", FIELD_CHARS, CHARS(settle.reason), 8, 1, 0, 0},
    {"delay_ms", FIELD_INT64, AT(settle.delay_ms), 0, 9, 1, 0, 0},
    {"refund", FIELD_FLAG, AT(settle.refund), 0, 10, 1, 0, 0},
    {"model", FIELD_TEXT, AT(model), 0, 11, 1, 0, 0},
    {"pause_ms", FIELD_INT64, AT(settle.pause_ms), 0, 12, 1, 0, 0},
    {"rem_req", FIELD_INT64, AT(settle.rem_req), 0, 13, 1, 0, -1},
    {"rem_tok", FIELD_INT64, AT(settle.rem_tok), 0, 14, 1, 0, -1},
    {"reset_req_ms", FIELD_INT64, AT(settle.reset_req_ms), 0, 15, 1, 0, -1},
    {"reset_tok_ms", FIELD_INT64, AT(settle.reset_tok_ms), 0, 16, 1, 0, -1},
    {"lim_req", FIELD_INT64, AT(settle.lim_req), 0, 17, 1, 0, -1},
    {"lim_tok", FIELD_INT64, AT(settle.lim_tok), 0, 18, 1, 0, -1},
    {"key_id", FIELD_KEY_ID, 0, 0, 19, 0, 0, 0},
    {"in_tokens", FIELD_INT64, AT(settle.in_tokens), 0, 20, 1, 0, -1},
    {"cached_tokens", FIELD_INT64, AT(settle.cached_tokens), 0, 21, 1, 0, -1},
    {"out_tokens", FIELD_INT64, AT(settle.out_tokens), 0, 22, 1, 0, -1},
    {"endpoint", FIELD_TEXT, AT(endpoint), 0, 23, 1, 0, 0},
    {"outcome", FIELD_CHARS, CHARS(settle.outcome), 24, 1, 0, 0},
    {"latency_ms", FIELD_INT64, AT(settle.latency_ms), 0, 25, 1, 0, -1},
    {"late_ms", FIELD_INT64, AT(settle.late_ms), 0, 26, 1, 0, -1},
    {"nostore", FIELD_INT, AT(settle.nostore), 0, 27, 1, 0, 0},
    {"status", FIELD_CHARS, CHARS(settle.status_label), 28, 1, 0, 0},
    /* Kept so the job's counters survive a restart (the script does not
     * need them). */
    {"cost", FIELD_INT64, AT(cost), 0, 0, 1, 0, 0},
    {"attempts", FIELD_INT, AT(attempts), 0, 0, 1, 0, 0},
    {"max_attempts", FIELD_INT, AT(max_attempts), 0, 0, 1, 0, 0},
};
#define N_FIELDS (sizeof(fields) / sizeof(fields[0]))

/* The spool format's version (member "v"); readers ignore it so far. */
#define SPOOL_FORMAT_VERSION 1

#define FIELD_PTR(job, f, T) ((T *)((char *)(job) + (f)->offset))
#define FIELD_CPTR(job, f, T) ((const T *)((const char *)(job) + (f)->offset))

const char *llmq_worker_settle_argv_name(int index)
{
    for (size_t i = 0; i < N_FIELDS; i++)
        if (fields[i].argv == index && index > 0)
            return fields[i].name;
    return NULL;
}

/* One field's value as text (borrowed from job, key_id or num). */
static const char *field_text(const struct worker_job *job, const struct settle_field *f,
                              const char *key_id, char *num, size_t n)
{
    switch (f->type) {
    case FIELD_MODE:
        return llmq_worker_settle_mode_name(*FIELD_CPTR(job, f, enum worker_settle_mode));
    case FIELD_CHARS:
        return FIELD_CPTR(job, f, char);
    case FIELD_TEXT:
    case FIELD_TEXT_OPT: {
        const char *s = *FIELD_CPTR(job, f, char *);
        return s != NULL ? s : "";
    }
    case FIELD_INT64:
        snprintf(num, n, "%" PRId64, *FIELD_CPTR(job, f, int64_t));
        return num;
    case FIELD_INT:
        snprintf(num, n, "%d", *FIELD_CPTR(job, f, int));
        return num;
    case FIELD_FLAG:
        return *FIELD_CPTR(job, f, int) ? "1" : "0";
    case FIELD_KEY_ID:
        return key_id != NULL ? key_id : "";
    }
    return "";
}

int llmq_worker_settle_argv(const struct worker_job *job, const char *prefix, const char *key_id,
                            struct worker_settle_argv *out)
{
    if (llmq_worker_settle_mode_name(job->settle.mode) == NULL)
        return -1;
    out->argv[0] = prefix;
    for (size_t i = 0; i < N_FIELDS; i++) {
        const struct settle_field *f = &fields[i];
        if (f->argv > 0 && f->argv < LLMQ_WORKER_SETTLE_ARGC)
            out->argv[f->argv] =
                field_text(job, f, key_id, out->numbers[f->argv], sizeof(out->numbers[f->argv]));
    }
    return LLMQ_WORKER_SETTLE_ARGC;
}

json_t *llmq_worker_settle_to_json(const struct worker_job *job, enum worker_settle_mode mode)
{
    json_t *o = json_pack("{s:i}", "v", SPOOL_FORMAT_VERSION);
    for (size_t i = 0; o != NULL && i < N_FIELDS; i++) {
        const struct settle_field *f = &fields[i];
        json_t *v = NULL;
        if (!f->spooled)
            continue;
        switch (f->type) {
        case FIELD_MODE:
            v = json_string(llmq_worker_settle_mode_name(mode));
            break;
        case FIELD_CHARS:
            v = json_string(FIELD_CPTR(job, f, char));
            break;
        case FIELD_TEXT:
        case FIELD_TEXT_OPT: {
            const char *s = *FIELD_CPTR(job, f, char *);
            if (s == NULL && f->type == FIELD_TEXT_OPT)
                continue;
            v = json_string(s != NULL ? s : "");
            break;
        }
        case FIELD_INT64:
            v = json_integer((json_int_t)*FIELD_CPTR(job, f, int64_t));
            break;
        case FIELD_INT:
        case FIELD_FLAG:
            v = json_integer(*FIELD_CPTR(job, f, int));
            break;
        case FIELD_KEY_ID:
            continue;
        }
        if (v == NULL || json_object_set_new(o, f->name, v) != 0) {
            json_decref(o);
            o = NULL;
        }
    }
    return o;
}

static int64_t int_member(const json_t *v, int64_t dflt)
{
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : dflt;
}

/* Sets field f of job from v (NULL: missing). Returns 0, or -1 when f is
 * required and v is missing or does not fit, or memory ran out. */
static int field_from_json(struct worker_job *job, const struct settle_field *f, const json_t *v)
{
    const char *s = json_string_value(v);
    switch (f->type) {
    case FIELD_MODE: {
        enum worker_settle_mode m = llmq_worker_settle_mode_parse(s);
        *FIELD_PTR(job, f, enum worker_settle_mode) = m;
        return m == WORKER_SETTLE_UNSET && f->required ? -1 : 0;
    }
    case FIELD_CHARS:
        if (s == NULL && f->required)
            return -1;
        if (s != NULL && strlen(s) >= f->size)
            return -1;
        snprintf(FIELD_PTR(job, f, char), f->size, "%s", s != NULL ? s : "");
        return 0;
    case FIELD_TEXT:
    case FIELD_TEXT_OPT:
        if (s == NULL && f->required)
            return -1;
        if (s == NULL && f->type == FIELD_TEXT_OPT)
            return 0;
        *FIELD_PTR(job, f, char *) = strdup(s != NULL ? s : "");
        return *FIELD_PTR(job, f, char *) != NULL ? 0 : -1;
    case FIELD_INT64:
        *FIELD_PTR(job, f, int64_t) = int_member(v, f->dflt);
        return 0;
    case FIELD_INT:
    case FIELD_FLAG:
        *FIELD_PTR(job, f, int) = (int)int_member(v, f->dflt);
        return 0;
    case FIELD_KEY_ID:
        return 0;
    }
    return -1;
}

int llmq_worker_settle_from_json(struct worker_job *job, const json_t *o)
{
    if (!json_is_object(o))
        return -1;
    for (size_t i = 0; i < N_FIELDS; i++)
        if (fields[i].spooled &&
            field_from_json(job, &fields[i], json_object_get(o, fields[i].name)) != 0)
            return -1;
    return 0;
}
