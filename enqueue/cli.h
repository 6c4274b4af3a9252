/* The llmq CLI: shared context, options and exit codes of every subcommand.
 *
 * Conventions: data on stdout, messages on stderr, `--help` on every command;
 * each command's options are a table parsed by cli_opts.h.
 * Exit codes (documented in the README):
 *   0 success; 1 runtime failure (Redis unreachable, a script error);
 *   2 usage error or invalid input; 3 jobs ended in the dead-letter stream. */
#ifndef LLMQ_CLI_H
#define LLMQ_CLI_H

#include <hiredis/hiredis.h>
#include <jansson.h>
#include <stdio.h>

#include "llmq/error.h"
#include "redis/keys.h"

#define LLMQ_EXIT_OK 0
#define LLMQ_EXIT_FAIL 1
#define LLMQ_EXIT_USAGE 2
#define LLMQ_EXIT_DEAD 3

struct llmq_cli {
    const char *redis_url; /* --redis, $LLMQ_REDIS_URL, or the default */
    const char *account;   /* --account, $LLMQ_ACCOUNT, or "default" */
    const char *prog;      /* "llmq limits" etc., for messages */
};

/* The options every subcommand accepts (the parser, cli_opts.h, adds them to
 * each command's table): their getopt codes, and the handler that takes
 * them; it returns 1 if opt was one, 0 otherwise. */
#define LLMQ_CLI_OPT_REDIS 1000
#define LLMQ_CLI_OPT_ACCOUNT 1001

int llmq_cli_common_option(struct llmq_cli *cli, int opt, const char *arg);

/* Writes the key prefix of the CLI's account into prefix (size n); prints
 * what is wrong with the account name and returns -1 when it is invalid. */
int llmq_cli_prefix(const struct llmq_cli *cli, char *prefix, size_t n);

/* llmq_key for a command: builds the key of that kind (name NULL for the
 * kinds without one) of the account with prefix into buf (len bytes);
 * prints what is wrong and returns -1 when it cannot (a name too long). */
int llmq_cli_key(const struct llmq_cli *cli, char *buf, size_t len, const char *prefix,
                 enum llmq_key_kind kind, const char *name);

/* Connects to the CLI's Redis. On failure prints the error, sets *code to the
 * exit code (LLMQ_EXIT_USAGE for a malformed URL, LLMQ_EXIT_FAIL when Redis
 * cannot be reached or refuses) and returns NULL. */
redisContext *llmq_cli_connect(const struct llmq_cli *cli, int *code);

/* Connects again to the CLI's Redis after its connection failed, as the
 * workers do (backoff from 100 ms doubling to 2 s, jittered), until it
 * answers or monotonic time until_ms. Writes "HOST:PORT" (never the URL: it
 * may hold a password) into where. Returns the new connection (the caller
 * owns it), or NULL with err saying the last failure. Prints nothing. */
redisContext *llmq_cli_reconnect(const struct llmq_cli *cli, long long until_ms, char *where,
                                 size_t where_len, struct llmq_error *err);

/* The preamble of a command on the CLI's account: writes the account's key
 * prefix into prefix (n bytes; prefix NULL: the command needs none), then
 * connects. On failure prints what is wrong, sets *code (LLMQ_EXIT_USAGE for
 * an invalid account name or a malformed URL, LLMQ_EXIT_FAIL when Redis
 * cannot be reached or refuses) and returns NULL; else the caller owns the
 * connection (redisFree). */
redisContext *llmq_cli_open(const struct llmq_cli *cli, char *prefix, size_t n, int *code);

/* What a command does once connected to its account (prefix: the account's
 * key prefix; c and prefix borrowed for the call); returns an exit code. */
typedef int llmq_cli_account_fn(const struct llmq_cli *cli, redisContext *c, const char *prefix,
                                void *ud);

/* A command on the CLI's account from start to end: llmq_cli_open, fn, then
 * redisFree. Returns fn's exit code, or that of the failed preamble. */
int llmq_cli_on_account(const struct llmq_cli *cli, llmq_cli_account_fn *fn, void *ud);

/* Job ids are given as the custom_ids they came from (what the input
 * lines and the output lines say): replaces each of ids[0..n) (borrowed)
 * with its job id (new; jobs/job_id.h). Returns 0, or -1 after printing the
 * first that is none (having freed what it replaced). Free with
 * llmq_cli_job_ids_free. */
int llmq_cli_job_ids(const struct llmq_cli *cli, char **ids, size_t n);

/* Frees what llmq_cli_job_ids put in ids[0..n). */
void llmq_cli_job_ids_free(char **ids, size_t n);

/* Parses an integer value in min..max into *out, printing
 * "PROG: NAME: expected an integer in MIN..MAX, got 'ARG'" and returning -1
 * when it is not one. name is printed as given ("--rpm", "result_max"). */
int llmq_cli_parse_int64(const struct llmq_cli *cli, const char *name, const char *arg,
                         long long min, long long max, long long *out);

/* 1 when r (a field of a bucket hash: requests or tokens) sets a limit: a
 * number above 0 (0 and absent mean no limit on that dimension). */
int llmq_limit_value_set(const redisReply *r);

/* Prints "PROG: message" to stderr. */
void llmq_cli_error(const struct llmq_cli *cli, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Reports a failed Redis command or script as "PROG: what: message" (what
 * NULL: "PROG: message"): the message is the error reply's text, else err's
 * (r NULL: no reply; err may be NULL), else "unexpected reply". Takes r
 * (freed; NULL is fine). Returns LLMQ_EXIT_FAIL. */
int llmq_cli_reply_failed(const struct llmq_cli *cli, const char *what, redisReply *r,
                          const struct llmq_error *err);

/* Subcommands: argv[0] is the subcommand name; return an exit code. */
int llmq_cmd_limits(struct llmq_cli *cli, int argc, char **argv);
int llmq_cmd_enqueue(struct llmq_cli *cli, int argc, char **argv);
int llmq_cmd_status(struct llmq_cli *cli, int argc, char **argv);
int llmq_cmd_results(struct llmq_cli *cli, int argc, char **argv);
int llmq_cmd_dead(struct llmq_cli *cli, int argc, char **argv);
int llmq_cmd_settings(struct llmq_cli *cli, int argc, char **argv);
int llmq_cmd_keys(struct llmq_cli *cli, int argc, char **argv);
int llmq_cmd_account(struct llmq_cli *cli, int argc, char **argv);
int llmq_cmd_endpoints(struct llmq_cli *cli, int argc, char **argv);
int llmq_cmd_budgets(struct llmq_cli *cli, int argc, char **argv);
int llmq_cmd_prices(struct llmq_cli *cli, int argc, char **argv);
int llmq_cmd_spend(struct llmq_cli *cli, int argc, char **argv);
int llmq_cmd_estimate(struct llmq_cli *cli, int argc, char **argv);
int llmq_cmd_top(struct llmq_cli *cli, int argc, char **argv);
int llmq_cmd_offload(struct llmq_cli *cli, int argc, char **argv);
int llmq_cmd_cache(struct llmq_cli *cli, int argc, char **argv);

/* cmd_budgets.c: the account's budgets (lua/budget_list.lua) as a new JSON
 * array of {id, scope, unit, period, on_exhaust, limit, spent,
 * period_start_ms, period_end_ms, parked_nodes, waiting_jobs} (limit and
 * spent in tokens or nano-USD), or NULL with err filled. */
json_t *llmq_cli_budgets_json(redisContext *c, const char *prefix, struct llmq_error *err);
/* cmd_prices.c: the prices (lua/price_list.lua) of model (NULL: all) as a
 * new JSON object {taken, from, unit, prices: [{model, input, cached_input,
 * output (nano-USD per token), source}]}, or NULL with err filled. */
json_t *llmq_cli_prices_json(redisContext *c, const char *prefix, const char *model,
                             struct llmq_error *err);
/* cmd_prices.c: the batch prices of model (NULL: all), what an offloaded
 * job is charged (lua/lib/pbatch.lua pbatch_price), in the same object as
 * llmq_cli_prices_json, or NULL with err filled. */
json_t *llmq_cli_batch_prices_json(redisContext *c, const char *prefix, const char *model,
                                   struct llmq_error *err);

/* cmd_keys.c: finds the one gateway key whose hash (64 hex digits) starts
 * with id (8+ hex digits, as `llmq keys list` shows); returns 0 and fills
 * out, -1 when none or several match or id is no key id (printed), -2 on a
 * Redis failure (printed). */
int llmq_cli_gw_key_resolve(const struct llmq_cli *cli, redisContext *c, const char *prefix,
                            const char *id, char out[65]);

/* cmd_account.c: the account's auth pause (keys.h P auth_pause) as a new
 * JSON object {key_id, status, since_ms, job}, or NULL when not paused (or
 * on a Redis error: c->err says). prefix is the account's key prefix. */
#include <jansson.h>
#include <stdio.h>
json_t *llmq_cli_auth_pause(redisContext *c, const char *prefix);
/* Prints the one line that says the account is paused, and why (p from
 * llmq_cli_auth_pause, borrowed). */
void llmq_cli_auth_pause_line(FILE *out, const json_t *p);

/* cmd_endpoints.c: the account's endpoints as lua/endpoint_list.lua
 * reports them (returns new; NULL with err filled on failure), printed as
 * indented rows (o borrowed), and one endpoint's state as text into buf. */
json_t *llmq_cli_endpoints(redisContext *c, const char *prefix, struct llmq_error *err);
void llmq_cli_endpoints_print(FILE *out, const json_t *o);
void llmq_cli_endpoint_state(const json_t *e, long long now_ms, char *buf, size_t n);

#endif
