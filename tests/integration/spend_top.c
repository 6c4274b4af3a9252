/* `llmq top` in a real terminal (docs/man/llmq-top.md "llmq top"): run in a pseudo-terminal
 * (forkpty) while a tenant's jobs run against openai-sim under a token
 * budget, it shows that run's numbers, refreshing: the model and tenant
 * rows with the jobs done so far and the parked ones queued and marked
 * waiting, the budget with the spend it records; the per-minute rate once
 * two frames were read; and it quits on `q`, restoring the terminal. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>

#include "spend_support.h"

#define N 40

/* Reads from fd into buf (growing) for up to ms. */
static void pty_read(int fd, char **buf, size_t *len, long long ms)
{
    long long until = llmq_test_now_ms() + ms;
    for (;;) {
        long long left = until - llmq_test_now_ms();
        if (left <= 0)
            return;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)left) <= 0)
            continue;
        char chunk[4096];
        ssize_t n = read(fd, chunk, sizeof(chunk));
        if (n <= 0)
            return;
        *buf = realloc(*buf, *len + (size_t)n + 1);
        memcpy(*buf + *len, chunk, (size_t)n);
        *len += (size_t)n;
        (*buf)[*len] = '\0';
    }
}

/* The last whole frame of what top wrote (after its last clear). */
static const char *last_frame(const char *out)
{
    const char *f = out, *p = out;
    while ((p = strstr(p, "\033[H\033[2J")) != NULL) {
        const char *next = strstr(p + 1, "\033[H\033[2J");
        if (next == NULL)
            break;
        f = p;
        p = next;
    }
    return f;
}

/* The line of frame that starts with name (after spaces), copied into line
 * without its end ("\r\n" on a terminal, "\n" elsewhere). */
static int frame_line(const char *frame, const char *name, char *line, size_t n)
{
    const char *p = frame;
    while ((p = strstr(p, name)) != NULL) {
        const char *start = p;
        while (start > frame && start[-1] == ' ')
            start--;
        if (start == frame || start[-1] == '\n') {
            const char *end = strchr(p, '\n');
            size_t len = end ? (size_t)(end - start) : strlen(start);
            if (len > 0 && start[len - 1] == '\r')
                len--;
            snprintf(line, n, "%.*s", (int)len, start);
            return 1;
        }
        p++;
    }
    return 0;
}

static void test_top_in_a_terminal(void **state)
{
    (void)state;
    struct spend_account a;
    spend_account_open(&a, "spendtop");
    struct sim_proc sim;
    const char *sim_args[] = {"--latency-ms", "30", NULL};
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);
    const char *b[] = {"llmq",     "budgets", "set",      "--tenant", "acme",
                       "--tokens", "1200",    "--period", "month",    NULL};
    free(spend_cli(&a, 0, b));
    char file[128];
    snprintf(file, sizeof(file), "/tmp/llmq-spendtop-%d.jsonl", (int)getpid());
    spend_write_jobs(file, "t", N, "acme", NULL, 40);
    worker_enqueue(a.name, file);

    int fd = -1;
    pid_t top = forkpty(&fd, NULL, NULL, NULL);
    assert_true(top >= 0);
    if (top == 0) {
        setenv("LLMQ_REDIS_URL", llmq_test_redis_url(), 1);
        setenv("LLMQ_ACCOUNT", a.name, 1);
        setenv("TERM", "xterm", 1);
        const char *argv[] = {"llmq", "top", "--interval-ms", "200", NULL};
        execv(llmq_test_bin("llmq", 0), (char *const *)argv);
        _exit(127);
    }
    char *out = NULL;
    size_t len = 0;
    pty_read(fd, &out, &len, 600); /* frames of the idle account first */
    char logs[2][128];
    pid_t pids[2];
    worker_start_n(a.name, &sim, "spendtop", 2, logs, pids, NULL);
    const char *groups[] = {"t"};
    const int counts[] = {N};
    assert_true(spend_wait_settled(&a, groups, counts, 1, 30000));
    struct spend_real r = spend_real_read(&a, "t", N);
    assert_true(r.queued > 0 && r.done > 0);
    pty_read(fd, &out, &len, 1000);
    assert_non_null(out);
    const char *f = last_frame(out);
    printf("# last frame:\n%s\n", f);

    char line[512], want[64];
    assert_true(frame_line(f, SPEND_MODEL, line, sizeof(line)));
    snprintf(want, sizeof(want), " %lld ", r.done); /* DONE */
    assert_non_null(strstr(line, want));
    assert_true(frame_line(f, "acme", line, sizeof(line)));
    snprintf(want, sizeof(want), " %lld* ", r.queued); /* QUEUED, waiting */
    assert_non_null(strstr(line, want));
    assert_true(frame_line(f, "t/acme#tokens/month", line, sizeof(line)));
    snprintf(want, sizeof(want), " %lld ", r.total); /* SPENT */
    assert_non_null(strstr(line, want));
    snprintf(want, sizeof(want), "%lld jobs", r.queued); /* waiting for budget */
    assert_non_null(strstr(line, want));
    /* a rate was shown while the jobs ran: some frame's model row has a number for RPM */
    int rated = 0;
    for (const char *p = out; !rated && (p = strstr(p, "\r\n" SPEND_MODEL)) != NULL; p++) {
        char word[32] = "";
        sscanf(p + 2 + strlen(SPEND_MODEL), " %31s", word);
        rated = word[0] >= '1' && word[0] <= '9';
    }
    assert_true(rated);

    /* q quits, and the terminal gets its cursor back */
    assert_int_equal(write(fd, "q", 1), 1);
    assert_int_equal(worker_wait(top, 5000), 0);
    pty_read(fd, &out, &len, 200);
    assert_non_null(strstr(out, "\033[?25h"));
    close(fd);
    free(out);
    spend_workers_stop(pids, 2);
    assert_int_equal(sim_proc_stop(&sim), 0);
    unlink(file);
    unlink(sim.log_file);
    for (int i = 0; i < 2; i++)
        unlink(logs[i]);
    spend_account_close(&a);
}

/* The ETA top shows for queued jobs at rpm jobs a minute. */
static void eta_of(long long queued, long long rpm, char *buf, size_t n)
{
    long long s = (long long)((double)queued / (double)rpm * 60.0 + 0.5);
    if (s < 60)
        snprintf(buf, n, "%llds", s);
    else if (s < 3600)
        snprintf(buf, n, "%lldm%02llds", s / 60, s % 60);
    else
        snprintf(buf, n, "%lldh%02lldm", s / 3600, (s % 3600) / 60);
}

/* `llmq top --once` into a pipe (issue 33 item 10), right after a run that a
 * budget stopped: plain text, no ANSI code; its one frame has the rates,
 * which are what Redis counted in the last minute, not what top saw grow
 * since it started: the model's and the tenant's RPM are the jobs of the run
 * and TPM their tokens, exactly; the parked jobs' ETA is at that pace. */
static void test_top_once_to_a_pipe(void **state)
{
    (void)state;
    struct spend_account a;
    spend_account_open(&a, "toponce");
    struct sim_proc sim;
    const char *sim_args[] = {"--latency-ms", "30", NULL};
    assert_int_equal(sim_proc_start(&sim, sim_args), 0);
    const char *b[] = {"llmq",     "budgets", "set",      "--tenant", "acme",
                       "--tokens", "1200",    "--period", "month",    NULL};
    free(spend_cli(&a, 0, b));
    char file[128];
    snprintf(file, sizeof(file), "/tmp/llmq-toponce-%d.jsonl", (int)getpid());
    spend_write_jobs(file, "t", N, "acme", NULL, 40);
    worker_enqueue(a.name, file);
    char logs[2][128];
    pid_t pids[2];
    worker_start_n(a.name, &sim, "toponce", 2, logs, pids, NULL);
    const char *groups[] = {"t"};
    const int counts[] = {N};
    assert_true(spend_wait_settled(&a, groups, counts, 1, 30000));
    struct spend_real r = spend_real_read(&a, "t", N);
    spend_workers_stop(pids, 2);
    assert_true(r.queued > 0 && r.done > 0);

    const char *argv[] = {"llmq", "top", "--once", NULL};
    char *out = spend_cli(&a, 0, argv);
    printf("# llmq top --once:\n%s", out);
    int ansi = strchr(out, '\033') != NULL;
    char line[512], tline[512], name[64], queued[32] = "", eta[32] = "", want_eta[32];
    long long rpm = -1, tpm = -1, trpm = -1;
    if (frame_line(out, SPEND_MODEL, line, sizeof(line)))
        sscanf(line, "%63s %lld %lld %*s %*s %31s %31s", name, &rpm, &tpm, queued, eta);
    if (frame_line(out, "acme", tline, sizeof(tline)))
        sscanf(tline, "%63s %lld", name, &trpm);
    free(out);
    eta_of(r.queued, r.done, want_eta, sizeof(want_eta));
    printf("# run: %lld done (%lld tokens), %lld parked; want ETA %s\n", r.done, r.total, r.queued,
           want_eta);
    /* cleaned up first: a failed assertion leaves at once */
    int sim_rc = sim_proc_stop(&sim);
    unlink(file);
    unlink(sim.log_file);
    for (int i = 0; i < 2; i++)
        unlink(logs[i]);
    spend_account_close(&a);
    assert_int_equal(sim_rc, 0);
    assert_false(ansi);
    assert_int_equal(rpm, r.done);
    assert_int_equal(trpm, r.done);
    assert_int_equal(tpm, r.total);
    assert_int_equal(strtoll(queued, NULL, 10), r.queued);
    assert_string_equal(eta, want_eta);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_top_in_a_terminal),
        cmocka_unit_test(test_top_once_to_a_pipe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
