/* Bucket paths, and the bucket names derived from them. */
#include "limiter/path.h"

#include <stdio.h>
#include <string.h>

#include "redis/redis.h"

static enum llmq_rc copy_part(char *dst, const char *src, const char *what, int optional,
                              struct llmq_error *err)
{
    if (src == NULL || src[0] == '\0') {
        if (!optional)
            return llmq_error_set(err, LLMQ_EINVAL, "path: %s is missing", what);
        dst[0] = '\0';
        return LLMQ_OK;
    }
    if (!llmq_name_valid(src))
        return llmq_error_set(err, LLMQ_EINVAL,
                              "path: %s '%.40s' must be 1..%d bytes without whitespace, control "
                              "characters, '/', '|', '{' or '}'",
                              what, src, LLMQ_NAME_MAX);
    memcpy(dst, src, strlen(src) + 1);
    return LLMQ_OK;
}

enum llmq_rc llmq_path_init(struct llmq_path *out, const char *account, const char *model,
                            const char *tenant, const char *user, struct llmq_error *err)
{
    enum llmq_rc rc;
    if ((rc = copy_part(out->account, account, "account", 0, err)) != LLMQ_OK ||
        (rc = copy_part(out->model, model, "model", 0, err)) != LLMQ_OK ||
        (rc = copy_part(out->tenant, tenant, "tenant", 1, err)) != LLMQ_OK ||
        (rc = copy_part(out->user, user, "user", 1, err)) != LLMQ_OK)
        return rc;
    return LLMQ_OK;
}

enum llmq_rc llmq_path_parse(const char *text, struct llmq_path *out, struct llmq_error *err)
{
    char parts[4][LLMQ_NAME_MAX + 1] = {{0}};
    int n = 0;
    const char *p = text;
    if (text == NULL || text[0] == '\0')
        return llmq_error_set(err, LLMQ_EINVAL, "path: empty");
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        if (n == 4)
            return llmq_error_set(err, LLMQ_EINVAL,
                                  "path: more than 4 parts (ACCOUNT/MODEL[/TENANT[/USER]])");
        if (len > LLMQ_NAME_MAX)
            return llmq_error_set(err, LLMQ_EINVAL, "path: part %d longer than %d bytes", n + 1,
                                  LLMQ_NAME_MAX);
        memcpy(parts[n], p, len);
        parts[n][len] = '\0';
        n++;
        if (slash == NULL)
            break;
        p = slash + 1;
    }
    if (n < 2)
        return llmq_error_set(err, LLMQ_EINVAL, "path: expected ACCOUNT/MODEL[/TENANT[/USER]]");
    return llmq_path_init(out, parts[0], parts[1], parts[2], parts[3], err);
}

/* The user bucket name of user under model and tenant ("" none), as
 * lua/lib/limiter.lua's limiter_user_bucket writes it. */
static int user_bucket(char *buf, size_t n, const char *model, const char *tenant, const char *user)
{
    return tenant[0] != '\0' ? snprintf(buf, n, "%s/t/%s/u/%s", model, tenant, user)
                             : snprintf(buf, n, "%s/u/%s", model, user);
}

int llmq_path_bucket_names(const struct llmq_path *path, char names[3][LLMQ_BUCKET_NAME_MAX])
{
    int n = 0;
    snprintf(names[n++], LLMQ_BUCKET_NAME_MAX, "%s", path->model);
    if (path->tenant[0] != '\0')
        snprintf(names[n++], LLMQ_BUCKET_NAME_MAX, "%s/t/%s", path->model, path->tenant);
    if (path->user[0] != '\0')
        user_bucket(names[n++], LLMQ_BUCKET_NAME_MAX, path->model, path->tenant, path->user);
    return n;
}

/* A tenant or user name of llmq limits: a valid name or "*" (the default). */
static int name_or_default(const char *s)
{
    return strcmp(s, "*") == 0 || llmq_name_valid(s);
}

enum llmq_rc llmq_bucket_name(char *buf, size_t n, const char *model, const char *tenant,
                              const char *user, struct llmq_error *err)
{
    int len;
    int has_tenant = tenant != NULL && tenant[0] != '\0',
        has_user = user != NULL && user[0] != '\0';
    if (!llmq_name_valid(model))
        return llmq_error_set(err, LLMQ_EINVAL, "bad model name");
    if (has_tenant && !name_or_default(tenant))
        return llmq_error_set(err, LLMQ_EINVAL, "bad tenant name");
    if (has_user && !name_or_default(user))
        return llmq_error_set(err, LLMQ_EINVAL, "bad user name");
    if (has_tenant && has_user && strcmp(tenant, "*") == 0)
        return llmq_error_set(err, LLMQ_EINVAL,
                              "tenant '*' with a user: a user's limit in every tenant is the "
                              "user's without a tenant (--user U alone)");
    if (has_user)
        len = user_bucket(buf, n, model, has_tenant ? tenant : "", user);
    else if (has_tenant)
        len = snprintf(buf, n, "%s/t/%s", model, tenant);
    else
        len = snprintf(buf, n, "%s", model);
    if (len < 0 || (size_t)len >= n)
        return llmq_error_set(err, LLMQ_EINVAL, "bucket name too long");
    return LLMQ_OK;
}
