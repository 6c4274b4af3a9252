/* Unit tests for common/httpd/httpd.c: bad addresses are refused with
 * LLMQ_EINVAL, a port in use with LLMQ_EIO; a request served on the loop,
 * suspended and resumed later from a timer, is answered once resumed, and
 * the completion callback runs once for it. The client is libcurl on a
 * thread of its own (the loop is this thread). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <ev.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "httpd/httpd.h"

struct fixture {
    struct ev_loop *loop;
    struct llmq_httpd *h;
    struct MHD_Connection *suspended;
    ev_timer resume_timer, poll_timer;
    int resumed, calls_after_resume, completed;
    volatile int client_done;
    int port;
    long status;
    char body[64];
};

static enum MHD_Result answer_later(void *cls, struct MHD_Connection *conn, const char *url,
                                    const char *method, const char *version,
                                    const char *upload_data, size_t *upload_data_size,
                                    void **con_cls)
{
    (void)url;
    (void)method;
    (void)version;
    (void)upload_data;
    (void)upload_data_size;
    struct fixture *f = cls;
    if (*con_cls == NULL) { /* headers only: wait for the next call */
        *con_cls = f;
        return MHD_YES;
    }
    if (!f->resumed) {
        f->suspended = conn;
        MHD_suspend_connection(conn);
        ev_timer_start(f->loop, &f->resume_timer);
        return MHD_YES;
    }
    f->calls_after_resume++;
    static const char done[] = "done";
    struct MHD_Response *r =
        MHD_create_response_from_buffer(4, (void *)done, MHD_RESPMEM_PERSISTENT);
    enum MHD_Result rc = MHD_queue_response(conn, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return rc;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)conn;
    (void)con_cls;
    (void)toe;
    struct fixture *f = cls;
    f->completed++;
}

static void on_resume_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)revents;
    struct fixture *f = t->data;
    struct MHD_Connection *c = f->suspended;
    f->suspended = NULL;
    f->resumed = 1;
    llmq_httpd_resume(f->h, c);
}

static void on_poll_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)revents;
    struct fixture *f = t->data;
    if (f->client_done)
        ev_break(loop, EVBREAK_ALL);
}

static size_t on_data(char *p, size_t sz, size_t n, void *ud)
{
    struct fixture *f = ud;
    size_t have = strlen(f->body);
    size_t take = sz * n < sizeof(f->body) - 1 - have ? sz * n : sizeof(f->body) - 1 - have;
    memcpy(f->body + have, p, take);
    f->body[have + take] = '\0';
    return sz * n;
}

static void *client(void *arg)
{
    struct fixture *f = arg;
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/x", f->port);
    CURL *c = curl_easy_init();
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, f);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 60000L);
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &f->status);
    curl_easy_cleanup(c);
    f->client_done = 1;
    return NULL;
}

static struct llmq_httpd_config config(struct fixture *f, const char *host, int port)
{
    struct llmq_httpd_config hc = {
        .host = host,
        .port = port,
        .allow_any_port = 1,
        .suspend_resume = 1,
        .max_connections = 8,
        .idle_timeout_s = 30,
        .log_name = "test http",
        .on_request = answer_later,
        .request_cls = f,
        .on_completed = on_completed,
        .completed_cls = f,
    };
    return hc;
}

static void test_bad_addresses_are_einval(void **state)
{
    (void)state;
    struct fixture f = {.loop = ev_loop_new(0)};
    struct llmq_error err = {0};
    struct llmq_httpd_config hc = config(&f, "localhost", 0);
    assert_null(llmq_httpd_start(f.loop, &hc, NULL, &err));
    assert_int_equal(err.rc, LLMQ_EINVAL);
    assert_non_null(strstr(err.msg, "bad listen address localhost:0"));
    hc = config(&f, "127.0.0.1", 0);
    hc.allow_any_port = 0;
    assert_null(llmq_httpd_start(f.loop, &hc, NULL, &err));
    assert_int_equal(err.rc, LLMQ_EINVAL);
    hc = config(&f, "127.0.0.1", 65536);
    assert_null(llmq_httpd_start(f.loop, &hc, NULL, &err));
    assert_int_equal(err.rc, LLMQ_EINVAL);
    ev_loop_destroy(f.loop);
}

static void test_port_in_use_is_eio(void **state)
{
    (void)state;
    struct fixture f = {.loop = ev_loop_new(0)};
    struct llmq_error err = {0};
    struct llmq_httpd_config hc = config(&f, "127.0.0.1", 0);
    int port = 0;
    struct llmq_httpd *a = llmq_httpd_start(f.loop, &hc, &port, &err);
    assert_non_null(a);
    assert_true(port > 0);
    hc.port = port;
    assert_null(llmq_httpd_start(f.loop, &hc, NULL, &err));
    assert_int_equal(err.rc, LLMQ_EIO);
    assert_non_null(strstr(err.msg, "cannot listen on 127.0.0.1:"));
    llmq_httpd_free(a);
    llmq_httpd_free(NULL);
    ev_loop_destroy(f.loop);
}

static void test_suspended_request_answered_after_resume(void **state)
{
    (void)state;
    struct fixture f = {.loop = ev_loop_new(0)};
    struct llmq_error err = {0};
    struct llmq_httpd_config hc = config(&f, "127.0.0.1", 0);
    f.h = llmq_httpd_start(f.loop, &hc, &f.port, &err);
    assert_non_null(f.h);
    ev_timer_init(&f.resume_timer, on_resume_timer, 0.05, 0.0);
    f.resume_timer.data = &f;
    ev_timer_init(&f.poll_timer, on_poll_timer, 0.01, 0.01);
    f.poll_timer.data = &f;
    ev_timer_start(f.loop, &f.poll_timer);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, client, &f), 0);
    ev_run(f.loop, 0);
    pthread_join(t, NULL);
    assert_int_equal(f.status, 200);
    assert_string_equal(f.body, "done");
    assert_int_equal(f.resumed, 1);
    assert_int_equal(f.calls_after_resume, 1);
    ev_timer_stop(f.loop, &f.poll_timer);
    llmq_httpd_free(f.h); /* closes the kept-alive connection */
    assert_int_equal(f.completed, 1);
    ev_loop_destroy(f.loop);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_addresses_are_einval),
        cmocka_unit_test(test_port_in_use_is_eio),
        cmocka_unit_test(test_suspended_request_answered_after_resume),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
