/* Helpers of the openai-sim integration tests (openai_sim_*.c): start and
 * stop the server on a free port, send requests with libcurl, read answers.
 * Header-only (static inline) because each test file is its own executable. */
#ifndef OPENAI_SIM_SUPPORT_H
#define OPENAI_SIM_SUPPORT_H

#include <curl/curl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testsupport.h"

struct sim_proc {
    pid_t pid;
    int port;
    char port_file[128];
    char log_file[128];
};

/* Starts openai-sim with --port 0 and an access log plus args (NULL-ended).
 * Returns 0 once it has written its port file, -1 otherwise. */
static inline int sim_proc_start(struct sim_proc *p, const char *const *args)
{
    static int seq;
    memset(p, 0, sizeof(*p));
    snprintf(p->port_file, sizeof(p->port_file), "/tmp/openai-sim-test-%d-%d.port", (int)getpid(),
             ++seq);
    snprintf(p->log_file, sizeof(p->log_file), "/tmp/openai-sim-test-%d-%d.log", (int)getpid(),
             seq);
    unlink(p->port_file);
    unlink(p->log_file);
    const char *argv[64] = {"openai-sim", "--port",       "0",         "--port-file",
                            p->port_file, "--access-log", p->log_file, "--quiet"};
    int argc = 8;
    for (int i = 0; args != NULL && args[i] != NULL && argc < 62; i++)
        argv[argc++] = args[i];
    argv[argc] = NULL;
    const char *bin = llmq_test_bin("openai-sim", 0);
    p->pid = llmq_test_fork();
    if (p->pid < 0)
        return -1;
    if (p->pid == 0) {
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    p->port = llmq_test_wait_port_file(p->port_file, p->pid, 10000);
    if (p->port == -1)
        p->pid = 0;
    return p->port > 0 ? 0 : -1;
}

/* Sends SIGTERM and waits; returns the exit status (0 expected), -1 on a signal. */
static inline int sim_proc_stop(struct sim_proc *p)
{
    int st = 0;
    if (p->pid <= 0)
        return -1;
    kill(p->pid, SIGTERM);
    if (waitpid(p->pid, &st, 0) != p->pid)
        return -1;
    p->pid = 0;
    unlink(p->port_file);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

struct sim_resp {
    long status;
    CURLcode rc;
    char *body;
    size_t body_len;
    char *head;
    size_t head_len;
};

static inline size_t sim_resp_grow(char **buf, size_t *len, const char *p, size_t n)
{
    char *b = realloc(*buf, *len + n + 1);
    if (b == NULL)
        return 0;
    memcpy(b + *len, p, n);
    *len += n;
    b[*len] = '\0';
    *buf = b;
    return n;
}

static inline size_t sim_on_body(char *p, size_t sz, size_t n, void *ud)
{
    struct sim_resp *r = ud;
    return sim_resp_grow(&r->body, &r->body_len, p, sz * n);
}

static inline size_t sim_on_head(char *p, size_t sz, size_t n, void *ud)
{
    struct sim_resp *r = ud;
    return sim_resp_grow(&r->head, &r->head_len, p, sz * n);
}

static inline void sim_resp_free(struct sim_resp *r)
{
    free(r->body);
    free(r->head);
    memset(r, 0, sizeof(*r));
}

/* POSTs body (NULL: a GET) to path on the sim with the given extra header
 * lines (NULL-ended, may be NULL). Reuses one easy handle per process so
 * requests share a keep-alive connection. */
static inline void sim_http(const struct sim_proc *p, const char *path, const char *body,
                            const char *const *headers, struct sim_resp *r)
{
    static CURL *easy;
    if (easy == NULL)
        easy = curl_easy_init();
    curl_easy_reset(easy);
    memset(r, 0, sizeof(*r));
    char url[512];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", p->port, path);
    struct curl_slist *hl = curl_slist_append(NULL, "Content-Type: application/json");
    hl = curl_slist_append(hl, "Expect:");
    for (int i = 0; headers != NULL && headers[i] != NULL; i++)
        hl = curl_slist_append(hl, headers[i]);
    curl_easy_setopt(easy, CURLOPT_URL, url);
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, hl);
    if (body != NULL)
        curl_easy_setopt(easy, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, sim_on_body);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, sim_on_head);
    curl_easy_setopt(easy, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(easy, CURLOPT_TIMEOUT, 60L);
    r->rc = curl_easy_perform(easy);
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &r->status);
    curl_slist_free_all(hl);
}

/* Value of header name in r (static buffer), or NULL. */
static inline const char *sim_header(const struct sim_resp *r, const char *name)
{
    static char val[512];
    size_t n = strlen(name);
    for (const char *l = r->head; l != NULL && *l != '\0';) {
        const char *eol = strstr(l, "\r\n");
        if (eol == NULL)
            break;
        if ((size_t)(eol - l) > n && strncasecmp(l, name, n) == 0 && l[n] == ':') {
            const char *v = l + n + 1;
            while (*v == ' ')
                v++;
            snprintf(val, sizeof(val), "%.*s", (int)(eol - v), v);
            return val;
        }
        l = eol + 2;
    }
    return NULL;
}

/* The body of r as JSON (new reference), or NULL. */
static inline json_t *sim_json(const struct sim_resp *r)
{
    return r->body ? json_loads(r->body, 0, NULL) : NULL;
}

/* json path helpers: integer/string member of an object, -1/NULL when absent. */
static inline long long sim_jint(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    return json_is_integer(v) ? json_integer_value(v) : -1;
}

static inline const char *sim_jstr(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

#endif
