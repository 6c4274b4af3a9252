/* Lists the data-driven cases under tests/data/ (see data_files.h). */
#include "data_files.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *llmq_test_source_path(char *buf, size_t n, const char *rel)
{
    const char *src = getenv("LLMQ_SOURCE_DIR");
    if (src == NULL || src[0] == '\0') {
        fprintf(stderr, "test: LLMQ_SOURCE_DIR is not set (run under ctest)\n");
        exit(1);
    }
    snprintf(buf, n, "%s/%s", src, rel);
    return buf;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *copy_or_die(const char *s)
{
    char *c = strdup(s);
    if (c == NULL) {
        fprintf(stderr, "test: out of memory\n");
        exit(1);
    }
    return c;
}

void llmq_test_data_files(struct llmq_test_files *f, const char *sub, const char *suffix)
{
    char rel[512];
    snprintf(rel, sizeof(rel), "tests/data/%s", sub);
    memset(f, 0, sizeof(*f));
    llmq_test_source_path(f->dir, sizeof(f->dir), rel);
    DIR *d = opendir(f->dir);
    if (d == NULL) {
        fprintf(stderr, "test: cannot open %s\n", f->dir);
        exit(1);
    }
    size_t cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || (suffix != NULL && !ends_with(e->d_name, suffix)))
            continue;
        if (f->n == cap) {
            cap = cap ? 2 * cap : 16;
            f->names = realloc(f->names, cap * sizeof(*f->names));
            if (f->names == NULL) {
                fprintf(stderr, "test: out of memory\n");
                exit(1);
            }
        }
        f->names[f->n++] = copy_or_die(e->d_name);
    }
    closedir(d);
    qsort(f->names, f->n, sizeof(*f->names), by_name);
    f->paths = calloc(f->n ? f->n : 1, sizeof(*f->paths));
    for (size_t i = 0; f->paths != NULL && i < f->n; i++) {
        char path[2048];
        snprintf(path, sizeof(path), "%s/%s", f->dir, f->names[i]);
        f->paths[i] = copy_or_die(path);
    }
    if (f->paths == NULL) {
        fprintf(stderr, "test: out of memory\n");
        exit(1);
    }
}

void llmq_test_files_free(struct llmq_test_files *f)
{
    for (size_t i = 0; i < f->n; i++) {
        free(f->names[i]);
        free(f->paths[i]);
    }
    free(f->names);
    free(f->paths);
    memset(f, 0, sizeof(*f));
}

char *llmq_test_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    size_t cap = 4096, n = 0, k;
    char *buf = malloc(cap + 1);
    while (buf != NULL && (k = fread(buf + n, 1, cap - n, f)) > 0) {
        n += k;
        if (n == cap) {
            char *more = realloc(buf, 2 * cap + 1);
            if (more == NULL)
                free(buf);
            buf = more;
            cap *= 2;
        }
    }
    int failed = ferror(f);
    fclose(f);
    if (buf == NULL || failed) {
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    if (len != NULL)
        *len = n;
    return buf;
}
