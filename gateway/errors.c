/* OpenAI-shaped error bodies (see errors.h). */
#include "errors.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int gw_error_set(struct gw_error *e, unsigned int status, const char *type, const char *param,
                 const char *code, const char *fmt, ...)
{
    va_list ap;
    e->status = status;
    e->type = type;
    e->param = param;
    e->code = code;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
    va_end(ap);
    return -1;
}

static json_t *str_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

char *gw_error_body(const struct gw_error *e, size_t *len)
{
    json_t *inner = json_object();
    json_t *outer = json_object();
    char *text = NULL;
    /* a message quoting request bytes that are not UTF-8 is replaced */
    json_t *msg = json_string(e->msg);
    if (msg == NULL)
        msg = json_string("invalid request (the detail is not valid UTF-8)");
    if (inner != NULL && outer != NULL && json_object_set_new(inner, "message", msg) == 0 &&
        json_object_set_new(inner, "type", str_or_null(e->type)) == 0 &&
        json_object_set_new(inner, "param", str_or_null(e->param)) == 0 &&
        json_object_set_new(inner, "code", str_or_null(e->code)) == 0 &&
        json_object_set(outer, "error", inner) == 0)
        text = json_dumps(outer, JSON_COMPACT);
    json_decref(inner);
    json_decref(outer);
    if (text != NULL && len != NULL)
        *len = strlen(text);
    return text;
}
