/* llmq results: Batch output lines of finished jobs, by id, or all that are
 * kept (done ones from the retention index P done, oldest first, then the
 * dead ones from P dead). With --wait, named jobs are waited for. With
 * --calls, each named job's calls one by one instead (what the dashboard's
 * job view lists: lua/job_fields.lua att, jobs/attempts_log.h). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_opts.h"
#include "jobs/attempts_log.h"
#include "jobs/job_id.h"
#include "jobs/job_idset.h"
#include "jobs/job_result.h"
#include "jobs/job_store.h"
#include "redis/keys.h"
#include "redis/redis.h"
#include "redis/reply_read.h"
#include "redis/script.h"

#define CHUNK 500

/* Prints the result of each of ids[0..n) that has one. fin_ms (NULL: none)
 * holds for each id the fin_ms its index entry names, -1 when unknown: a
 * result whose job ended at another time is a later finish of the id,
 * printed at its own entry, so it is skipped here. */
static int print_ids(const struct llmq_cli *cli, redisContext *c, const char *prefix,
                     const char **ids, const long long *fin_ms, size_t n, FILE *out)
{
    struct llmq_job_result res[CHUNK];
    struct llmq_error err = {0};
    if (n > 0 && llmq_job_result_read(c, prefix, ids, n, res, &err) != LLMQ_OK) {
        llmq_cli_error(cli, "reading results: %s", err.msg);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        int later =
            fin_ms != NULL && fin_ms[i] >= 0 && res[i].fin_ms >= 0 && res[i].fin_ms != fin_ms[i];
        if (res[i].line != NULL && !later)
            fprintf(out, "%s\n", res[i].line);
        llmq_job_result_clear(&res[i]);
    }
    return 1;
}

/* Where --all reads ids, in the order it prints them: the index of older
 * versions (what is left of it: the oldest done results, docs/upgrading.md), the done index P done
 * (finish order), then P dead. */
enum all_source { ALL_OLD, ALL_DONE, ALL_DEAD, ALL_SOURCES };

static redisReply *all_chunk(redisContext *c, enum all_source src, const char *key, long long start,
                             const char *from)
{
    if (src == ALL_OLD)
        return redisCommand(c, "ZRANGE %s %lld %lld", key, start, start + CHUNK - 1);
    if (src == ALL_DONE)
        return redisCommand(c, "LRANGE %s %lld %lld", key, start, start + CHUNK - 1);
    return redisCommand(c, "XRANGE %s %s + COUNT %d", key, from, CHUNK);
}

/* The job id of element e of a chunk of src, or NULL when it names none;
 * *fin_ms the time its entry names (-1: none). Entries of P done are
 * "<fin_ms>:<id>"; those of P dead are stream entries whose fields start
 * {id, <id>} (from: where the next chunk starts). */
static const char *all_id(enum all_source src, const redisReply *e, long long *fin_ms, char *from,
                          size_t from_len)
{
    *fin_ms = -1;
    if (src != ALL_DEAD && e->type != REDIS_REPLY_STRING)
        return NULL;
    if (src == ALL_OLD)
        return e->str;
    if (src == ALL_DONE) {
        char *colon = NULL;
        long long ms = strtoll(e->str, &colon, 10);
        if (colon == e->str || *colon != ':' || colon[1] == '\0')
            return NULL;
        *fin_ms = ms;
        return colon + 1;
    }
    if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
        e->element[1]->type != REDIS_REPLY_ARRAY || e->element[1]->elements < 2 ||
        e->element[1]->element[1]->type != REDIS_REPLY_STRING)
        return NULL;
    snprintf(from, from_len, "(%s", e->element[0]->str);
    return e->element[1]->element[1]->str;
}

/* Prints every done result (oldest first) then every dead one. */
static int print_all(const struct llmq_cli *cli, redisContext *c, const char *prefix, FILE *out)
{
    static const enum llmq_key_kind kinds[ALL_SOURCES] = {LLMQ_KEY_OLD_RESULTS, LLMQ_KEY_DONE,
                                                          LLMQ_KEY_DEAD};
    for (int src = 0; src < ALL_SOURCES; src++) {
        char from[64] = "-";
        char key[LLMQ_KEY_FIXED_MAX];
        if (llmq_cli_key(cli, key, sizeof(key), prefix, kinds[src], NULL) != 0)
            return LLMQ_EXIT_USAGE;
        for (long long start = 0;; start += CHUNK) {
            redisReply *r = all_chunk(c, (enum all_source)src, key, start, from);
            if (src == ALL_OLD && r != NULL && r->type == REDIS_REPLY_ERROR &&
                strncmp(r->str, "WRONGTYPE", 9) == 0) {
                freeReplyObject(r); /* not an index of ours: nothing to print from it */
                break;
            }
            if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
                llmq_cli_error(cli, "reading results: %s",
                               r && r->type == REDIS_REPLY_ERROR ? r->str : "no reply");
                if (r != NULL)
                    freeReplyObject(r);
                return LLMQ_EXIT_FAIL;
            }
            const char *ids[CHUNK];
            long long fin_ms[CHUNK];
            size_t n = 0;
            for (size_t i = 0; i < r->elements && n < CHUNK; i++) {
                const char *id =
                    all_id((enum all_source)src, r->element[i], &fin_ms[n], from, sizeof(from));
                if (id != NULL)
                    ids[n++] = id;
            }
            size_t got = r->elements;
            int ok = print_ids(cli, c, prefix, ids, fin_ms, n, out);
            freeReplyObject(r);
            if (!ok)
                return LLMQ_EXIT_FAIL;
            if (got < CHUNK)
                break;
        }
    }
    return LLMQ_EXIT_OK;
}

/* Names the ids that are no job at all (never enqueued, or gone with their
 * result past retention) on stderr. Returns how many, -1 on a Redis error, or
 * -2 when an id is too long to be a job's (named on stderr). */
static long unknown_ids(const struct llmq_cli *cli, redisContext *c, const char *prefix, char **ids,
                        size_t n)
{
    char jk[LLMQ_KEY_FIXED_MAX + LLMQ_JOB_ID_MAX], rk[sizeof(jk)], wk[sizeof(jk)];
    for (size_t i = 0; i < n; i++) /* all keys first: a bad id sends nothing */
        if (llmq_cli_key(cli, jk, sizeof(jk), prefix, LLMQ_KEY_JOB, ids[i]) != 0)
            return -2;
    for (size_t i = 0; i < n; i++) {
        /* the job's record (waiting) or hash, or its result: one slot, so
         * one EXISTS of the three */
        llmq_key(jk, sizeof(jk), prefix, LLMQ_KEY_JOB, ids[i], NULL);
        llmq_key(rk, sizeof(rk), prefix, LLMQ_KEY_RESULT, ids[i], NULL);
        llmq_key(wk, sizeof(wk), prefix, LLMQ_KEY_JOB_RECORD, ids[i], NULL);
        redisAppendCommand(c, "EXISTS %s %s %s", wk, jk, rk);
    }
    long unknown = 0;
    int failed = 0;
    for (size_t i = 0; i < n; i++) {
        redisReply *r = NULL;
        if (redisGetReply(c, (void **)&r) != REDIS_OK)
            return -1;
        if (r->type != REDIS_REPLY_INTEGER)
            failed = 1;
        else if (r->integer == 0) {
            char cid[LLMQ_JOB_ID_MAX + 1];
            llmq_cli_error(cli,
                           "%s: no such job (never enqueued in account %s, or its result "
                           "is past retention)",
                           llmq_job_id_to_custom(ids[i], cid, sizeof(cid)), cli->account);
            unknown++;
        }
        freeReplyObject(r);
    }
    return failed ? -1 : unknown;
}

struct printing {
    FILE *out;
    size_t dead;
    struct llmq_job_idset *index; /* id (borrowed from argv) -> its position */
    char *printed;                /* per position */
};

static void print_result(const char *id, int dead, const char *line, void *ud)
{
    struct printing *p = ud;
    long i = 0;
    p->dead += dead != 0;
    fprintf(p->out, "%s\n", line);
    if (llmq_job_idset_get(p->index, id, &i))
        p->printed[i] = 1;
}

/* The state of job id that has no result, whatever its layout (a record
 * while it waits: lua/job_fields.lua), written into state (n bytes);
 * returns state. */
static const char *job_state(redisContext *c, const char *prefix, const char *id, char *state,
                             size_t n)
{
    snprintf(state, n, "state unknown");
    const char *argv[] = {prefix, id, "state"};
    redisReply *r = llmq_script_run(c, LLMQ_SCRIPT_JOB_FIELDS, 1, 3, argv, NULL, NULL);
    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
        r->element[0]->type == REDIS_REPLY_STRING)
        snprintf(state, n, "%s", r->element[0]->str);
    if (r != NULL)
        freeReplyObject(r);
    return state;
}

/* Names the jobs of ids that printed no result, with their state. */
static void report_unfinished(const struct llmq_cli *cli, redisContext *c, const char *prefix,
                              char **ids, size_t n, const struct printing *p)
{
    for (size_t i = 0; i < n; i++) {
        long first = (long)i;
        llmq_job_idset_get(p->index, ids[i], &first);
        if (p->printed[first] || first != (long)i)
            continue; /* printed, or a repeat of an earlier id */
        char cid[LLMQ_JOB_ID_MAX + 1], state[32];
        llmq_cli_error(cli, "%s: no result yet (job %s)",
                       llmq_job_id_to_custom(ids[i], cid, sizeof(cid)),
                       job_state(c, prefix, ids[i], state, sizeof(state)));
    }
}

/* 0 when every one of ids[0..n) is a job; else the exit code, with the
 * cause on stderr: each unknown id (usage, 2) or the failed read (1). */
static int named_ids_checked(const struct llmq_cli *cli, redisContext *c, const char *prefix,
                             char **ids, size_t n)
{
    long unknown = unknown_ids(cli, c, prefix, ids, n);
    if (unknown == 0)
        return 0;
    if (unknown == -1)
        llmq_cli_error(cli, "reading jobs: %s",
                       c->err ? llmq_redis_context_error(c) : "unexpected reply");
    return unknown == -1 ? LLMQ_EXIT_FAIL : LLMQ_EXIT_USAGE;
}

/* Prints the named results; with wait, waits for the missing ones. An id
 * that is no job is a usage error (2) named on stderr, before any wait. */
static int print_named(const struct llmq_cli *cli, redisContext *c, const char *prefix, char **ids,
                       size_t n, int wait, long long timeout_s, FILE *out)
{
    int bad = named_ids_checked(cli, c, prefix, ids, n);
    if (bad != 0)
        return bad;
    struct printing p = {out, 0, llmq_job_idset_new(n), calloc(n + 1, 1)};
    struct llmq_error err = {0};
    size_t done = 0;
    for (size_t i = 0; p.index != NULL && i < n; i++)
        if (llmq_job_idset_add(p.index, ids[i], (long)i, NULL) < 0)
            break;
    if (p.index == NULL || p.printed == NULL || llmq_job_idset_count(p.index) == 0) {
        llmq_cli_error(cli, "out of memory");
        llmq_job_idset_free(p.index);
        free(p.printed);
        return LLMQ_EXIT_FAIL;
    }
    struct llmq_job_waiter w = {.on_result = print_result, .ud = &p};
    enum llmq_rc rc =
        llmq_job_store_wait(c, prefix, (const char *const *)ids, n,
                            wait ? (timeout_s < 0 ? -1 : timeout_s * 1000) : 0, &w, &done, &err);
    if (rc == LLMQ_ETIMEOUT) {
        report_unfinished(cli, c, prefix, ids, n, &p);
        if (wait)
            llmq_cli_error(cli, "%s", err.msg);
        else
            llmq_cli_error(cli, "%zu of %zu job(s) have no result", n - done, n);
    } else if (rc != LLMQ_OK) {
        llmq_cli_error(cli, "%s", err.msg);
    }
    llmq_job_idset_free(p.index);
    free(p.printed);
    if (rc != LLMQ_OK)
        return LLMQ_EXIT_FAIL;
    return p.dead > 0 ? LLMQ_EXIT_DEAD : LLMQ_EXIT_OK;
}

/* One JSON line of job id's calls: {"id": its custom_id, "job": id, "state",
 * "calls_total", "calls": [...]} (jobs/attempts_log.h). Returns 0, or -1
 * (said on stderr) when Redis fails or the line cannot be made. */
static int print_job_calls(const struct llmq_cli *cli, redisContext *c, const char *prefix,
                           const char *id, FILE *out)
{
    const char *argv[] = {prefix, id, "state", "att"};
    struct llmq_error err = {0};
    redisReply *r = llmq_script_run(c, LLMQ_SCRIPT_JOB_FIELDS, 1, 4, argv, NULL, &err);
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
        llmq_cli_error(cli, "reading job %s: %s", id, r == NULL ? err.msg : "unexpected reply");
        if (r != NULL)
            freeReplyObject(r);
        return -1;
    }
    const redisReply *att = r->element[1];
    long long total = 0;
    json_t *calls = att->type == REDIS_REPLY_STRING
                        ? llmq_attempts_log_json(att->str, att->len, &total)
                        : json_array();
    char cid[LLMQ_JOB_ID_MAX + 1];
    json_t *o = calls == NULL ? NULL
                              : json_pack("{s:s, s:s, s:s, s:I, s:o}", "id",
                                          llmq_job_id_to_custom(id, cid, sizeof(cid)), "job", id,
                                          "state", llmq_reply_str_or(r->element[0], ""),
                                          "calls_total", (json_int_t)total, "calls", calls);
    freeReplyObject(r);
    char *line = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (line == NULL) {
        llmq_cli_error(cli, "job %s: cannot print its calls (out of memory, or not UTF-8)", id);
        return -1;
    }
    fprintf(out, "%s\n", line);
    free(line);
    return 0;
}

/* --calls: the calls of each of ids[0..n); an id that is no job is a usage
 * error (2), named on stderr before anything is printed. */
static int print_calls(const struct llmq_cli *cli, redisContext *c, const char *prefix, char **ids,
                       size_t n, FILE *out)
{
    int bad = named_ids_checked(cli, c, prefix, ids, n);
    if (bad != 0)
        return bad;
    for (size_t i = 0; i < n; i++)
        if (print_job_calls(cli, c, prefix, ids[i], out) != 0)
            return LLMQ_EXIT_FAIL;
    return LLMQ_EXIT_OK;
}

struct results_opts {
    int wait, all, calls;
    long long timeout_s;
    const char *output;
    char **ids; /* once checked (none: --all) */
    size_t n;
};

/* ud: the checked struct results_opts */
static int print_to_output(const struct llmq_cli *cli, redisContext *c, const char *prefix,
                           void *ud)
{
    const struct results_opts *o = ud;
    FILE *out = o->output ? fopen(o->output, "w") : stdout;
    if (out == NULL) {
        llmq_cli_error(cli, "%s: cannot open for writing", o->output);
        return LLMQ_EXIT_FAIL;
    }
    int code = o->all     ? print_all(cli, c, prefix, out)
               : o->calls ? print_calls(cli, c, prefix, o->ids, o->n, out)
                          : print_named(cli, c, prefix, o->ids, o->n, o->wait, o->timeout_s, out);
    if ((out != stdout ? fclose(out) : fflush(out)) != 0 && code == LLMQ_EXIT_OK) {
        llmq_cli_error(cli, "writing results failed");
        code = LLMQ_EXIT_FAIL;
    }
    return code;
}

/* Runs the parsed command on the ids (none: --all). */
static int run(const struct llmq_cli *cli, struct results_opts *o, char **ids, size_t n)
{
    if (o->all == (n > 0) || (o->all && o->wait)) {
        llmq_cli_error(cli, "give job ids or --all (--wait only with ids; see --help)");
        return LLMQ_EXIT_USAGE;
    }
    if (o->calls && (o->all || o->wait)) {
        llmq_cli_error(cli, "--calls takes job ids, without --all or --wait (see --help)");
        return LLMQ_EXIT_USAGE;
    }
    if (o->timeout_s >= 0 && !o->wait) {
        llmq_cli_error(cli, "--timeout only applies with --wait (see --help)");
        return LLMQ_EXIT_USAGE;
    }
    if (llmq_cli_job_ids(cli, ids, n) != 0)
        return LLMQ_EXIT_USAGE;
    o->ids = ids;
    o->n = n;
    int code = llmq_cli_on_account(cli, print_to_output, o);
    llmq_cli_job_ids_free(ids, n);
    return code;
}

static const struct llmq_cli_opt options[] = {
    LLMQ_CLI_OPT_FLAG("wait", struct results_opts, wait, "wait for the named jobs to end"),
    LLMQ_CLI_OPT_FLAG("all", struct results_opts, all,
                      "every result kept (done jobs oldest first, then dead ones)"),
    LLMQ_CLI_OPT_FLAG("calls", struct results_opts, calls,
                      "instead of results: each job's calls one by one, the last 8 (one JSON "
                      "line a job)"),
    LLMQ_CLI_OPT_INT("timeout", "S", struct results_opts, timeout_s, 0, 1LL << 31,
                     "with --wait: wait at most S seconds"),
    LLMQ_CLI_OPT_STR("output", "FILE", struct results_opts, output,
                     "write the results there instead of stdout"),
    LLMQ_CLI_OPT_END,
};

static const struct llmq_cli_spec spec = {
    .usage = "usage: llmq results ID... [--wait [--timeout S]] [--output FILE]\n"
             "       llmq results --all [--output FILE]\n"
             "       llmq results --calls ID... [--output FILE]\n",
    .about = "Prints the Batch output line of each job (one JSON object per line):\n"
             "{\"id\", \"custom_id\", \"response\": {\"status_code\", \"request_id\", \"body\"}, "
             "\"error\"}.\n"
             "With --calls, each job's calls instead: {\"id\" (its custom_id), \"job\", "
             "\"state\",\n"
             "\"calls_total\", \"calls\": [{\"mode\", \"status\", \"start_ms\", "
             "\"took_ms\", \"in_tokens\",\n"
             "\"out_tokens\", \"endpoint\", \"model\"}]}.\n",
    .opts = options,
    .exit = "Exit: 0 ok; 1 a job has no result yet (or the wait timed out), Redis failure;\n"
            "2 usage error, or an id that is no job (named on stderr); 3 some job was\n"
            "dead-lettered.\n",
};

int llmq_cmd_results(struct llmq_cli *cli, int argc, char **argv)
{
    struct results_opts o = {.timeout_s = -1};
    char **ids = calloc((size_t)argc + 1, sizeof(*ids));
    int n_ids = 0;
    if (ids == NULL)
        return LLMQ_EXIT_FAIL;
    int code = llmq_cli_parse(cli, &spec, argc, argv, &o, ids, argc, &n_ids);
    if (code < 0)
        code = run(cli, &o, ids, (size_t)n_ids);
    free(ids);
    return code;
}
