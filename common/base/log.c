/* Structured logging to stderr: text or JSON lines, one line per event. Each
 * line is formatted into one buffer and written with a single write(2) so lines
 * from concurrent processes sharing a file do not interleave. */
#include "base/log.h"

#include "base/clock.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/uio.h>
#include <unistd.h>

enum llmq_log_level llmq_log_min_level = LLMQ_LOG_INFO;
static enum llmq_log_format log_format = LLMQ_LOG_TEXT;

static const char *const level_names[] = {"debug", "info", "warn", "error", "off"};

void llmq_log_configure(enum llmq_log_level level, enum llmq_log_format format)
{
    llmq_log_min_level = level;
    log_format = format;
}

int llmq_log_level_parse(const char *s, enum llmq_log_level *out)
{
    for (int i = 0; i <= LLMQ_LOG_OFF; i++) {
        if (strcmp(s, level_names[i]) == 0) {
            *out = (enum llmq_log_level)i;
            return 0;
        }
    }
    return -1;
}

static void format_timestamp(char *buf, size_t n)
{
    int64_t ms = llmq_wall_ms();
    time_t s = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&s, &tm);
    size_t len = strftime(buf, n, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + len, n - len, ".%03dZ", (int)(ms % 1000));
}

void llmq_log_write(enum llmq_log_level level, const char *account, const char *job_id,
                    const char *fmt, ...)
{
    char msg[1024];
    char ts[40];
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    format_timestamp(ts, sizeof(ts));

    int len;
    if (log_format == LLMQ_LOG_JSON) {
        json_t *o = json_pack("{s:s, s:s, s:s}", "ts", ts, "level", level_names[level], "msg", msg);
        if (o == NULL)
            return;
        if (account != NULL)
            json_object_set_new(o, "account", json_string(account));
        if (job_id != NULL)
            json_object_set_new(o, "job", json_string(job_id));
        char *s = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        if (s == NULL)
            return;
        /* Escaping can make the JSON longer than any fixed buffer: write it
         * whole, with its newline, in one writev so it stays one line. */
        struct iovec iov[2] = {{s, strlen(s)}, {"\n", 1}};
        ssize_t w = writev(STDERR_FILENO, iov, 2);
        (void)w;
        free(s);
        return;
    } else {
        len = snprintf(line, sizeof(line), "%s %s%s%s%s%s %s\n", ts, level_names[level],
                       account ? " account=" : "", account ? account : "", job_id ? " job=" : "",
                       job_id ? job_id : "", msg);
    }
    if (len < 0)
        return;
    if ((size_t)len >= sizeof(line)) { /* cut, but still one line */
        len = sizeof(line) - 1;
        line[len - 1] = '\n';
    }
    ssize_t w = write(STDERR_FILENO, line, (size_t)len);
    (void)w;
}
