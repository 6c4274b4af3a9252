/* The offload table (offload_table.h), from the fields of
 * jobs/offload_stats.h. */
#include "offload_table.h"

#include <stdio.h>

#include "cost/money.h"

static long long jint(const json_t *o, const char *k)
{
    return (long long)json_integer_value(json_object_get(o, k));
}

void llmq_cli_offload_table(FILE *out, const json_t *list, const char *indent, const char *bold,
                            const char *plain, const char *nl)
{
    if (json_array_size(list) == 0)
        return;
    fprintf(out, "%s%s%-28s %-4s %8s %9s %-24s %14s %8s %6s %9s%s%s", indent, bold, "OFFLOAD MODEL",
            "MODE", "STAGED", "OFFLOADED", "BATCHES OPEN", "ENQUEUED/LIMIT", "DONE", "FAILED",
            "SAVED", plain, nl);
    size_t i;
    const json_t *m;
    json_array_foreach(list, i, m)
    {
        char states[25] = "-", tok[40], saved[40];
        size_t k = 0;
        const char *st;
        const json_t *n;
        json_object_foreach((json_t *)json_object_get(m, "batches"), st, n)
        {
            int w = snprintf(states + k, sizeof(states) - k, "%s%.4s:%lld", k ? " " : "", st,
                             (long long)json_integer_value(n));
            if (w < 0 || (size_t)w >= sizeof(states) - k)
                break;
            k += (size_t)w;
        }
        const json_t *lim = json_object_get(m, "queue_limit_tokens");
        if (json_is_integer(lim))
            snprintf(tok, sizeof(tok), "%lld/%lld", jint(m, "enqueued_tokens"),
                     (long long)json_integer_value(lim));
        else
            snprintf(tok, sizeof(tok), "%lld/-", jint(m, "enqueued_tokens"));
        saved[0] = '$';
        llmq_usd_format((long long)(json_real_value(json_object_get(m, "saved_usd")) * 1e9 + 0.5),
                        saved + 1, sizeof(saved) - 1);
        const char *mode = json_string_value(json_object_get(m, "mode"));
        fprintf(out, "%s%-28.28s %-4s %8lld %9lld %-24s %14s %8lld %6lld %9s%s", indent,
                json_string_value(json_object_get(m, "model")), mode ? mode : "-",
                jint(m, "staged"), jint(m, "offloaded"), states, tok, jint(m, "done_ever"),
                jint(m, "failed_ever"), saved, nl);
    }
}
