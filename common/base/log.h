/* Logging: one macro that checks the level before formatting anything.
 *
 * Lines go to stderr, as text ("2026-11-30T05:00:00.123Z warn message") or as
 * JSON lines, chosen once at start. A line about a job carries its job id and
 * account (LLMQ_LOG_JOB). API keys and Authorization headers must never be
 * passed to these macros. */
#ifndef LLMQ_LOG_H
#define LLMQ_LOG_H

enum llmq_log_level {
    LLMQ_LOG_DEBUG = 0,
    LLMQ_LOG_INFO,
    LLMQ_LOG_WARN,
    LLMQ_LOG_ERROR,
    LLMQ_LOG_OFF
};

enum llmq_log_format { LLMQ_LOG_TEXT = 0, LLMQ_LOG_JSON };

extern enum llmq_log_level llmq_log_min_level;

/* Sets the level and format for the process. Not thread-safe: call at start. */
void llmq_log_configure(enum llmq_log_level level, enum llmq_log_format format);

/* Parses "debug|info|warn|error|off"; returns 0 and sets *out, or -1. */
int llmq_log_level_parse(const char *s, enum llmq_log_level *out);

/* Writes one line. job_id and account may be NULL. Use the macros instead. */
void llmq_log_write(enum llmq_log_level level, const char *account, const char *job_id,
                    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#define LLMQ_LOG(level, ...)                                                                       \
    do {                                                                                           \
        if ((level) >= llmq_log_min_level)                                                         \
            llmq_log_write((level), NULL, NULL, __VA_ARGS__);                                      \
    } while (0)

#define LLMQ_LOG_JOB(level, account, job_id, ...)                                                  \
    do {                                                                                           \
        if ((level) >= llmq_log_min_level)                                                         \
            llmq_log_write((level), (account), (job_id), __VA_ARGS__);                             \
    } while (0)

#endif
