/* The account pause after the API refused the key (401/403; DESIGN.md flow
 * 5): the key is wrong, not the jobs, so the account stops taking jobs and
 * every job stays queued.
 *
 * Who does what:
 *   - call.c classifies a 401/403 (classify.h: LLMQ_CALL_AUTH) and settles
 *     the job with mode authpause: lua/job_settle.lua hands it back (its
 *     attempt uncounted, the reservation refunded) and writes P auth_pause
 *     with the fingerprint of the refused key (cfg key_id: 16 hex digits of
 *     its SHA-256; never the key);
 *   - lua/dispatch.lua grants nothing while P auth_pause exists and replies
 *     LLMQ_AUTH_PAUSED; dispatch.c then asks again every AUTH_POLL_MS, so an
 *     operator's `llmq account resume` is noticed within that;
 *   - at its first connection a worker runs lua/account_resume.lua with its
 *     own key's fingerprint: a pause for another key is lifted (the key was
 *     fixed and the worker restarted).
 * Logged at error level once per pause, with a reminder every
 * AUTH_REMIND_MS; /readyz and llmq_account_auth_paused show it. */
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "auth_pause.h"
#include "redis/script.h"
#include "worker.h"

#define AUTH_REMIND_MS 60000

static void log_paused(struct worker_account *a, const char *what)
{
    LLMQ_LOG_JOB(LLMQ_LOG_ERROR, a->cfg->name, NULL,
                 "%s: %s. The account is paused and its jobs stay queued: fix the API key and "
                 "restart the worker, or run `llmq account resume --account %s`",
                 what, a->auth.why, a->cfg->name);
    a->auth.logged_ms = llmq_monotonic_ms();
}

void llmq_worker_auth_refused(struct worker_account *a, long status, const char *detail)
{
    if (a->auth.paused)
        return; /* one line per pause: the calls in flight with it say the same */
    a->auth.paused = 1;
    snprintf(a->auth.why, sizeof(a->auth.why), "the API refused key %s with http %ld%s%.80s",
             a->cfg->key_id, status, detail && detail[0] ? ": " : "", detail ? detail : "");
    log_paused(a, "API key refused");
}

void llmq_worker_auth_paused_reply(struct worker_account *a, const char *why)
{
    int64_t now = llmq_monotonic_ms();
    if (!a->auth.paused) {
        a->auth.paused = 1;
        snprintf(a->auth.why, sizeof(a->auth.why), "%s", why);
        log_paused(a, "account paused (by a worker whose key the API refused)");
    } else if (now - a->auth.logged_ms >= AUTH_REMIND_MS) {
        log_paused(a, "account still paused");
    }
}

const char *llmq_worker_auth_pause_why(const struct worker_account *a)
{
    return a->auth.paused ? a->auth.why : NULL;
}

void llmq_worker_auth_ok(struct worker_account *a)
{
    if (!a->auth.paused)
        return;
    a->auth.paused = 0;
    a->auth.why[0] = '\0';
    LLMQ_LOG_JOB(LLMQ_LOG_WARN, a->cfg->name, NULL, "account resumed: taking jobs again");
}

static void on_resumed(redisAsyncContext *ac, redisReply *r, void *privdata)
{
    (void)ac;
    struct worker_account *a = privdata;
    if (r == NULL) {
        a->auth.checked = 0; /* the connection went: check at the next one */
        return;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        LLMQ_LOG_JOB(LLMQ_LOG_ERROR, a->cfg->name, NULL, "account_resume: %s", r->str);
        return;
    }
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[0]->type == REDIS_REPLY_INTEGER && r->element[0]->integer == 1 &&
        r->element[1]->type == REDIS_REPLY_STRING)
        LLMQ_LOG_JOB(LLMQ_LOG_WARN, a->cfg->name, NULL,
                     "account was paused because the API refused key %s; this worker's key is "
                     "%s: resumed",
                     r->element[1]->str, a->cfg->key_id);
}

void llmq_worker_auth_resume_check(struct worker_account *a, redisAsyncContext *ac)
{
    if (a->auth.checked || a->cfg->api_key == NULL)
        return; /* a worker of endpoints only holds no account key to judge a pause by */
    const char *argv[2] = {a->prefix, a->cfg->key_id};
    if (llmq_script_run_async(ac, LLMQ_SCRIPT_ACCOUNT_RESUME, 1, 2, argv, NULL, on_resumed, a) ==
        LLMQ_OK)
        a->auth.checked = 1;
}
