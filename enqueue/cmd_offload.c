/* llmq offload: the offload policy per model (P offload, lua/lib/pbatch.lua)
 * and the provider batches llmq-worker made of offloaded jobs
 * (lua/pbatch_list.lua; docs/DESIGN.md §3.10).
 *
 *   set MODEL --mode off|all|auto [--poll-ms N] [--horizon-s N] [--max-requests N]
 *       [--max-bytes N]    writes the model's policy (fields not given keep
 *                          their stored value, else the default)
 *   get [MODEL]            prints one policy, or every stored one
 *   --tenant T (set, get)  tenant T's own policy of MODEL (field MODEL/t/T)
 *   list                   the staged jobs per model and url, and the provider
 *                          batches, newest first
 *   show ID                one provider batch's record
 *   cancel ID              cancels provider batch ID and its jobs (lua/pbatch_cancel.lua)
 *   cancel --job JOB       cancels one job not sent yet (lua/job_cancel.lua): a staged
 *                          or offloaded one ends cancelled at once; its provider batch
 *                          is cancelled once none of its jobs is left
 *
 * A model with endpoints (`llmq endpoints`) offloads on them: each provider
 * batch goes to one of the endpoints its jobs would run on
 * (lua/lib/pbatch_ep.lua). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_opts.h"
#include "jobs/job.h"
#include "llmq/error.h"
#include "redis/redis.h"
#include "redis/script.h"

struct offload_opts {
    const char *verb, *model, *mode, *tenant, *job;
    const char *field; /* the policy's field of P offload: MODEL or MODEL/t/TENANT */
    long long poll_ms, horizon_s, max_requests, max_bytes, limit;
};

static int take_tenant(const struct llmq_cli *cli, const char *name, const char *arg, void *target)
{
    if (!llmq_name_valid(arg)) {
        llmq_cli_error(cli, "%s: '%s' is not a valid tenant name", name, arg);
        return LLMQ_EXIT_USAGE;
    }
    *(const char **)target = arg;
    return 0;
}

static const struct llmq_cli_opt options[] = {
    LLMQ_CLI_OPT_STR("mode", "off|all|auto", struct offload_opts, mode, "set: the policy"),
    LLMQ_CLI_OPT_INT("poll-ms", "N", struct offload_opts, poll_ms, 10, 86400000,
                     "set: poll open provider batches every N ms (default 30000)"),
    LLMQ_CLI_OPT_INT("horizon-s", "N", struct offload_opts, horizon_s, 1, 86400,
                     "set: auto's horizon (default 1800)"),
    LLMQ_CLI_OPT_INT("max-requests", "N", struct offload_opts, max_requests, 1, 50000,
                     "set: lines per input file (default 50000)"),
    LLMQ_CLI_OPT_INT("max-bytes", "N", struct offload_opts, max_bytes, 1024, 200000000,
                     "set: bytes per input file (default 200000000)"),
    LLMQ_CLI_OPT_INT("limit", "N", struct offload_opts, limit, 1, 100000,
                     "list: at most N batches (default 50)"),
    LLMQ_CLI_OPT_CALL("tenant", "T", struct offload_opts, tenant, take_tenant,
                      "set, get: tenant T's own policy of the model"),
    LLMQ_CLI_OPT_STR("job", "JOB", struct offload_opts, job, "cancel: one job that was not sent"),
    LLMQ_CLI_OPT_END,
};

static const struct llmq_cli_spec spec = {
    .usage = "usage: llmq offload set MODEL --mode off|all|auto [--poll-ms N] [--horizon-s N]\n"
             "                            [--max-requests N] [--max-bytes N] [--tenant T]\n"
             "       llmq offload get [MODEL [--tenant T]]\n"
             "       llmq offload list [--limit N]\n"
             "       llmq offload show ID\n"
             "       llmq offload cancel ID | --job JOB\n",
    .about = "Offload runs jobs that may wait (marked completion_window \"24h\":\n"
             "`llmq enqueue --completion-window 24h`, a Batch line's\n"
             "\"llmq\": {\"completion_window\": \"24h\"}) in the provider's Batch API at the\n"
             "batch price (data/prices.json batch_discount, 50% at OpenAI;\n"
             "`llmq prices set MODEL@batch` overrides). Policy per model:\n"
             "  off   (default) every job runs live, as without offload\n"
             "  all   every marked job goes to a provider batch, never live; llmq-worker\n"
             "        builds input files (at most --max-requests lines, default 50000, and\n"
             "        --max-bytes, default 200000000), uploads them, creates the batches,\n"
             "        polls them every --poll-ms (default 30000, growing while one runs)\n"
             "        and stores each answer as the job's result\n"
             "  auto  marked jobs are queued live at priority low (after every urgent job)\n"
             "        and run live while the model's live limit has room; the part of them\n"
             "        that limit would not finish within --horizon-s (default 1800) after\n"
             "        the urgent work ahead goes to provider batches as under all; a job\n"
             "        already sent live is never offloaded\n"
             "--tenant T: tenant T's own policy of the model, which wins over the model's for\n"
             "T's jobs (get prints it as MODEL/t/T); files and polls follow the model's\n"
             "policy, and so does auto's horizon when the model's policy is auto too.\n"
             "Unmarked jobs, and jobs enqueued before the policy was all or auto, run live;\n"
             "setting a model back to off sends its staged jobs live. A model with\n"
             "endpoints (`llmq endpoints`) offloads on them: each provider batch goes to one\n"
             "endpoint its jobs may use (OpenAI, Azure OpenAI global batch, or a compatible\n"
             "server with /v1/batches), submitted by a worker that holds its key, within the\n"
             "endpoint's file limits (`llmq endpoints set NAME --batch-max-requests N\n"
             "--batch-max-bytes N`) and its queue limit (`llmq limits set MODEL --endpoint\n"
             "NAME --batch-queue-tokens N`).\n"
             "list shows the staged jobs and the provider batches (newest first, --limit,\n"
             "default 50); show one batch: its provider batch id, state and counts. TOKENS\n"
             "(show: qtok): the estimated prompt tokens of its jobs, what the provider's\n"
             "enqueued-token limit counts while it runs. llmq status and llmq top show\n"
             "offload per model.\n"
             "cancel ID ends every job still in provider batch ID cancelled and has a worker\n"
             "cancel the batch at the provider (lines that come back are ignored); cancel\n"
             "--job JOB cancels one job that was not sent (queued, staged, offloaded): its\n"
             "provider batch is cancelled once none of its jobs is left.\n",
    .opts = options,
    .exit = "Exit: 0 ok; 1 Redis failure; 2 usage error (or ID unknown).\n",
};

/* One stored policy as a line: MODEL mode=... poll_ms=... */
static void print_policy(const char *model, const char *json)
{
    json_t *p = json ? json_loads(json, 0, NULL) : NULL;
    const char *mode = json_string_value(json_object_get(p, "mode"));
    printf("%s mode=%s", model, mode ? mode : "off");
    static const char *const nums[] = {"poll_ms", "horizon_s", "max_requests", "max_bytes"};
    for (size_t i = 0; i < 4; i++) {
        json_t *v = json_object_get(p, nums[i]);
        if (json_is_integer(v))
            printf(" %s=%lld", nums[i], (long long)json_integer_value(v));
    }
    printf("%s\n", p == NULL ? " (default)" : "");
    json_decref(p);
}

static int policy_set(const struct llmq_cli *cli, redisContext *c, const char *prefix,
                      const struct offload_opts *o)
{
    char key[LLMQ_KEY_FIXED_MAX + 256];
    if (llmq_cli_key(cli, key, sizeof(key), prefix, LLMQ_KEY_OFFLOAD, NULL) != 0)
        return LLMQ_EXIT_USAGE;
    redisReply *r = llmq_redis_command(c, "HGET %s %s", key, o->field);
    if (r == NULL || (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_NIL))
        return llmq_cli_reply_failed(cli, NULL, r, NULL);
    json_t *p = r->type == REDIS_REPLY_STRING ? json_loads(r->str, 0, NULL) : NULL;
    freeReplyObject(r);
    if (!json_is_object(p)) {
        json_decref(p);
        p = json_object();
    }
    json_object_set_new(p, "mode", json_string(o->mode));
    const struct {
        const char *name;
        long long v;
    } nums[] = {{"poll_ms", o->poll_ms},
                {"horizon_s", o->horizon_s},
                {"max_requests", o->max_requests},
                {"max_bytes", o->max_bytes}};
    for (size_t i = 0; i < 4; i++)
        if (nums[i].v > 0)
            json_object_set_new(p, nums[i].name, json_integer(nums[i].v));
    char *text = json_dumps(p, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(p);
    if (text == NULL) {
        llmq_cli_error(cli, "out of memory");
        return LLMQ_EXIT_FAIL;
    }
    r = llmq_redis_command(c, "HSET %s %s %s", key, o->field, text);
    if (r == NULL || r->type == REDIS_REPLY_ERROR) {
        free(text);
        return llmq_cli_reply_failed(cli, NULL, r, NULL);
    }
    freeReplyObject(r);
    print_policy(o->field, text);
    free(text);
    return LLMQ_EXIT_OK;
}

static int policy_get(const struct llmq_cli *cli, redisContext *c, const char *prefix,
                      const struct offload_opts *o)
{
    char key[LLMQ_KEY_FIXED_MAX];
    if (llmq_cli_key(cli, key, sizeof(key), prefix, LLMQ_KEY_OFFLOAD, NULL) != 0)
        return LLMQ_EXIT_USAGE;
    redisReply *r = o->model ? llmq_redis_command(c, "HGET %s %s", key, o->field)
                             : llmq_redis_command(c, "HGETALL %s", key);
    if (r == NULL || r->type == REDIS_REPLY_ERROR)
        return llmq_cli_reply_failed(cli, NULL, r, NULL);
    if (o->model != NULL)
        print_policy(o->field, r->type == REDIS_REPLY_STRING ? r->str : NULL);
    for (size_t i = 0; o->model == NULL && r->type == REDIS_REPLY_ARRAY && i + 1 < r->elements;
         i += 2)
        print_policy(r->element[i]->str, r->element[i + 1]->str);
    freeReplyObject(r);
    return LLMQ_EXIT_OK;
}

/* The value of field name in a flat field/value array from index from. */
static const char *field(const redisReply *a, size_t from, const char *name)
{
    for (size_t i = from; a != NULL && i + 1 < a->elements; i += 2)
        if (a->element[i]->type == REDIS_REPLY_STRING && strcmp(a->element[i]->str, name) == 0)
            return a->element[i + 1]->type == REDIS_REPLY_STRING ? a->element[i + 1]->str : "";
    return "";
}

static const char *or_dash(const char *s)
{
    return s && s[0] ? s : "-";
}

static int batches_list(const struct llmq_cli *cli, redisContext *c, const char *prefix,
                        const struct offload_opts *o)
{
    char limit[24];
    snprintf(limit, sizeof(limit), "%lld", o->limit > 0 ? o->limit : 50);
    const char *argv[] = {prefix, "", limit};
    struct llmq_error err = {0};
    redisReply *r = llmq_script_run(c, LLMQ_SCRIPT_PBATCH_LIST, 1, 3, argv, NULL, &err);
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 1)
        return llmq_cli_reply_failed(cli, NULL, r, &err);
    const redisReply *st = r->element[0];
    for (size_t i = 0; st->type == REDIS_REPLY_ARRAY && i + 1 < st->elements; i += 2)
        printf("staged %s: %lld jobs\n", st->element[i]->str, st->element[i + 1]->integer);
    printf("%-28s %-10s %-20s %-6s %-10s %-36s %6s %7s %5s %10s\n", "ID", "STATE", "MODEL", "JOBS",
           "STATUS", "PROVIDER_BATCH", "DONE", "RETRIED", "DEAD", "TOKENS");
    for (size_t i = 1; i < r->elements; i++) {
        const redisReply *b = r->element[i];
        if (b->type != REDIS_REPLY_ARRAY || b->elements < 1)
            continue;
        printf("%-28s %-10s %-20s %-6s %-10s %-36s %6s %7s %5s %10s\n", b->element[0]->str,
               field(b, 1, "state"), field(b, 1, "model"), field(b, 1, "n"),
               or_dash(field(b, 1, "status")), or_dash(field(b, 1, "batch_id")),
               field(b, 1, "done"), field(b, 1, "retried"), field(b, 1, "dead"),
               or_dash(field(b, 1, "qtok")));
    }
    freeReplyObject(r);
    return LLMQ_EXIT_OK;
}

static int batch_show(const struct llmq_cli *cli, redisContext *c, const char *prefix,
                      const struct offload_opts *o)
{
    const char *argv[] = {prefix, o->model, "1"};
    struct llmq_error err = {0};
    redisReply *r = llmq_script_run(c, LLMQ_SCRIPT_PBATCH_LIST, 1, 3, argv, NULL, &err);
    if (r == NULL || r->type != REDIS_REPLY_ARRAY)
        return llmq_cli_reply_failed(cli, NULL, r, &err);
    if (r->elements == 0) {
        llmq_cli_error(cli, "no provider batch %s", o->model);
        freeReplyObject(r);
        return LLMQ_EXIT_USAGE;
    }
    printf("id: %s\n", o->model);
    for (size_t i = 0; i + 1 < r->elements; i += 2)
        if (strcmp(r->element[i]->str, "owner") != 0 || r->element[i + 1]->str[0])
            printf("%s: %s\n", r->element[i]->str, r->element[i + 1]->str);
    freeReplyObject(r);
    return LLMQ_EXIT_OK;
}

/* cancel ID (a provider batch) or cancel --job JOB. */
static int batch_cancel(const struct llmq_cli *cli, redisContext *c, const char *prefix,
                        const struct offload_opts *o)
{
    struct llmq_error err = {0};
    redisReply *r;
    if (o->job != NULL) {
        const char *argv[] = {prefix, "", o->job};
        r = llmq_script_run(c, LLMQ_SCRIPT_JOB_CANCEL, 1, 3, argv, NULL, &err);
    } else {
        const char *argv[] = {prefix, o->model};
        r = llmq_script_run(c, LLMQ_SCRIPT_PBATCH_CANCEL, 1, 2, argv, NULL, &err);
    }
    if (r != NULL && r->type == REDIS_REPLY_ERROR && strstr(r->str, "LLMQ_ENOTFOUND")) {
        llmq_cli_error(cli, "no provider batch %s", o->model);
        freeReplyObject(r);
        return LLMQ_EXIT_USAGE;
    }
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 2)
        return llmq_cli_reply_failed(cli, NULL, r, &err);
    if (o->job != NULL) {
        long long cancelled = r->element[0]->integer, running = r->element[1]->integer;
        printf("job %s: %s\n", o->job,
               cancelled ? "cancelled"
               : running ? "running live: it ends cancelled if it is handed back"
                         : "already ended (or unknown): nothing to cancel");
    } else {
        printf("provider batch %s: %lld jobs cancelled (it was %s)%s\n", o->model,
               r->element[0]->integer,
               r->element[1]->type == REDIS_REPLY_STRING ? r->element[1]->str : "?",
               r->element[1]->type == REDIS_REPLY_STRING &&
                       (strcmp(r->element[1]->str, "ended") == 0 ||
                        strcmp(r->element[1]->str, "collecting") == 0)
                   ? ""
                   : "; a worker cancels it at the provider");
    }
    freeReplyObject(r);
    return LLMQ_EXIT_OK;
}

static int act(const struct llmq_cli *cli, redisContext *c, const char *prefix, void *ud)
{
    const struct offload_opts *o = ud;
    if (strcmp(o->verb, "set") == 0)
        return policy_set(cli, c, prefix, o);
    if (strcmp(o->verb, "get") == 0)
        return policy_get(cli, c, prefix, o);
    if (strcmp(o->verb, "list") == 0)
        return batches_list(cli, c, prefix, o);
    if (strcmp(o->verb, "cancel") == 0)
        return batch_cancel(cli, c, prefix, o);
    return batch_show(cli, c, prefix, o);
}

int llmq_cmd_offload(struct llmq_cli *cli, int argc, char **argv)
{
    struct offload_opts o = {0};
    char *pos[3];
    int n = 0;
    int rc = llmq_cli_parse(cli, &spec, argc, argv, &o, pos, 3, &n);
    if (rc >= 0)
        return rc;
    const char *verbs[] = {"set", "get", "list", "show", "cancel"};
    const int min_args[] = {2, 1, 1, 2, 1}, max_args[] = {2, 2, 1, 2, 2};
    size_t v = 0;
    while (n > 0 && v < 5 && strcmp(pos[0], verbs[v]) != 0)
        v++;
    if (n == 0 || v == 5) {
        llmq_cli_error(cli, "expected set, get, list, show or cancel (see --help)");
        return LLMQ_EXIT_USAGE;
    }
    if (v == 4 && (n == 2) == (o.job != NULL)) {
        llmq_cli_error(cli, "cancel takes a provider batch ID or --job JOB (one of them)");
        return LLMQ_EXIT_USAGE;
    }
    if (o.job != NULL && (v != 4 || !llmq_name_valid(o.job))) {
        llmq_cli_error(cli, v != 4 ? "--job goes with cancel" : "--job: '%s' is not a valid id",
                       o.job);
        return LLMQ_EXIT_USAGE;
    }
    if (n < min_args[v] || n > max_args[v]) {
        llmq_cli_error(cli, "%s takes %s", verbs[v],
                       v == 0   ? "MODEL"
                       : v == 1 ? "at most MODEL"
                       : v == 2 ? "nothing"
                                : "ID");
        return LLMQ_EXIT_USAGE;
    }
    o.verb = verbs[v];
    o.model = n > 1 ? pos[1] : NULL;
    if (o.model != NULL && !llmq_name_valid(o.model)) {
        llmq_cli_error(cli, "'%s' is not a valid %s", o.model, v >= 3 ? "id" : "model name");
        return LLMQ_EXIT_USAGE;
    }
    char field[512];
    if (o.tenant != NULL && (v > 1 || o.model == NULL)) {
        llmq_cli_error(cli, "--tenant belongs to 'offload set|get MODEL'");
        return LLMQ_EXIT_USAGE;
    }
    snprintf(field, sizeof(field), "%s%s%s", o.model ? o.model : "", o.tenant ? "/t/" : "",
             o.tenant ? o.tenant : "");
    o.field = field;
    if (v == 0) {
        if (o.mode == NULL) {
            llmq_cli_error(cli, "set needs --mode off|all|auto");
            return LLMQ_EXIT_USAGE;
        }
        if (strcmp(o.mode, "off") != 0 && strcmp(o.mode, "all") != 0 &&
            strcmp(o.mode, "auto") != 0) {
            llmq_cli_error(cli, "--mode: expected off, all or auto, got '%s'", o.mode);
            return LLMQ_EXIT_USAGE;
        }
    }
    return llmq_cli_on_account(cli, act, &o);
}
