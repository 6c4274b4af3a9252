/* Tokenizer throughput and memory.
 *
 * Usage: bench_tokenizer CORPUS.jsonl [encoding] [seconds]
 * CORPUS.jsonl holds one JSON string (a document) per line; each document is
 * encoded on its own, as requests are. Prints one line of key=value results
 * (MB/s of the best round, tokens, resident memory added by loading the
 * vocabulary) that tests/bench/bench_tokenizer.mjs puts in a table beside the
 * npm tiktoken's numbers for the same corpus. Build without sanitizers for
 * meaningful numbers. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "llmq/tokens.h"

struct doc {
    char *text;
    size_t len;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long rss_kb(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f == NULL)
        return -1;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
        resident = -1;
    fclose(f);
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static struct doc *load_docs(const char *path, size_t *n_docs, size_t *bytes)
{
    FILE *f = fopen(path, "r");
    char *line = NULL;
    size_t cap = 0, n = 0, alloc = 0;
    struct doc *docs = NULL;
    if (f == NULL) {
        perror(path);
        exit(1);
    }
    *bytes = 0;
    while (getline(&line, &cap, f) > 0) {
        json_t *s = json_loads(line, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
        if (!json_is_string(s)) {
            json_decref(s);
            continue;
        }
        if (n == alloc) {
            alloc = alloc ? alloc * 2 : 256;
            docs = realloc(docs, alloc * sizeof(*docs));
        }
        docs[n].len = json_string_length(s);
        docs[n].text = malloc(docs[n].len + 1);
        memcpy(docs[n].text, json_string_value(s), docs[n].len + 1);
        *bytes += docs[n].len;
        n++;
        json_decref(s);
    }
    free(line);
    fclose(f);
    *n_docs = n;
    return docs;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s CORPUS.jsonl [o200k_base|cl100k_base] [seconds]\n", argv[0]);
        return 2;
    }
    enum llmq_encoding e = LLMQ_ENCODING_O200K_BASE;
    if (argc > 2 && llmq_tokens_encoding_parse(argv[2], &e) != LLMQ_OK) {
        fprintf(stderr, "unknown encoding %s\n", argv[2]);
        return 2;
    }
    double budget = argc > 3 ? strtod(argv[3], NULL) : 3.0;
    size_t n_docs, bytes;
    struct doc *docs = load_docs(argv[1], &n_docs, &bytes);
    struct llmq_error err;
    long rss0 = rss_kb();
    double t0 = now_s();
    if (llmq_tokens_load(e, &err) != LLMQ_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    double load_s = now_s() - t0;
    long rss1 = rss_kb();
    double best = 1e30, start = now_s();
    size_t tokens = 0;
    int rounds = 0;
    while (rounds < 3 || (now_s() - start < budget && rounds < 1000)) {
        double r0 = now_s();
        tokens = 0;
        for (size_t i = 0; i < n_docs; i++) {
            size_t n = 0;
            if (llmq_tokens_count(e, docs[i].text, docs[i].len, &n, &err) != LLMQ_OK) {
                fprintf(stderr, "%s\n", err.msg);
                return 1;
            }
            tokens += n;
        }
        double dt = now_s() - r0;
        if (dt < best)
            best = dt;
        rounds++;
    }
    printf("impl=llmq encoding=%s docs=%zu bytes=%zu tokens=%zu rounds=%d best_s=%.6f "
           "mb_per_s=%.3f load_ms=%.1f rss_vocab_kb=%ld vocab_bytes=%zu\n",
           llmq_tokens_encoding_name(e), n_docs, bytes, tokens, rounds, best,
           (double)bytes / best / 1e6, load_s * 1000.0, rss1 - rss0, llmq_tokens_memory_bytes(e));
    for (size_t i = 0; i < n_docs; i++)
        free(docs[i].text);
    free(docs);
    return 0;
}
