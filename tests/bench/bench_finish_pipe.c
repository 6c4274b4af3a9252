/* The finishes of bench_job_memory.sh as a redis-cli --pipe stream: for each
 * Batch line on stdin, one FCALL of the job_finish function FN (lua/
 * job_finish.lua, as a settle ends a job) that ends its job done with an
 * output line as long as the input line, shaped as the worker writes a chat
 * completion's, its answer letters and spaces at random as
 * bench_job_memory.sh's prompts are (another sequence: no copy of the
 * prompt). With "packed" the line
 * goes packed, as this version's worker sends a done job's
 * (worker/job_settle.c); with "text" as it is, as versions before did.
 * With "call" the finish records the one call that ended the job, as a
 * settle does since records keep a job's calls (lua/lib/attempts.lua; a
 * 200 of 850 ms, 40 tokens in and 64 out, the account's key).
 *
 * usage: bench_finish_pipe FN PREFIX packed|text [call] < jobs.jsonl | redis-cli --pipe
 * Deterministic (a fixed seed). Exit 2 on bad usage, 1 on a line without a
 * custom_id or out of memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs/job_pack.h"

/* One RESP bulk string. */
static void bulk(const char *s, size_t n)
{
    printf("$%zu\r\n", n);
    fwrite(s, 1, n, stdout);
    fputs("\r\n", stdout);
}

/* The output line of job id as long as want bytes (at least its head and
 * tail) into buf (cap bytes). Returns its length. */
static size_t output_line(char *buf, size_t cap, const char *id, size_t want, unsigned *seed)
{
    int h = snprintf(buf, cap,
                     "{\"id\":\"batch_req_%s\",\"custom_id\":\"%s\",\"response\":{\"status_code\":"
                     "200,\"body\":{\"object\":\"chat.completion\",\"choices\":[{\"message\":{"
                     "\"role\":\"assistant\",\"content\":\"",
                     id, id);
    const char *tail = "\"},\"finish_reason\":\"stop\"}]}},\"error\":null}";
    size_t t = strlen(tail), at = (size_t)h;
    while (at + t < want && at + t + 1 < cap) {
        *seed = *seed * 1103515245u + 12345u;
        buf[at++] = (*seed >> 16) % 7 == 0 ? ' ' : (char)('a' + (*seed >> 8) % 26);
    }
    memcpy(buf + at, tail, t + 1);
    return at + t;
}

int main(int argc, char **argv)
{
    if (argc < 4 || argc > 5 || (strcmp(argv[3], "packed") != 0 && strcmp(argv[3], "text") != 0) ||
        (argc == 5 && strcmp(argv[4], "call") != 0)) {
        fprintf(stderr, "usage: bench_finish_pipe FN PREFIX packed|text [call] < jobs.jsonl\n");
        return 2;
    }
    /* a call as job_settle.lua records one: its start a fixed unix ms */
    const char *call = argc == 5 ? "done 200 1765000000000 850 40 64 - gpt-4o-mini" : NULL;
    int pack = strcmp(argv[3], "packed") == 0;
    struct llmq_job_packer *pk = pack ? llmq_job_packer_new() : NULL;
    size_t cap = 4u << 20;
    char *in = malloc(cap), *out = malloc(cap);
    if (in == NULL || out == NULL || (pack && pk == NULL))
        return 1;
    unsigned seed = 25;
    while (fgets(in, (int)cap, stdin) != NULL) {
        size_t len = strcspn(in, "\n");
        const char *k = strstr(in, "\"custom_id\":\"");
        const char *end = k != NULL ? strchr(k + 13, '"') : NULL;
        if (end == NULL) {
            fprintf(stderr, "bench_finish_pipe: a line without a custom_id\n");
            return 1;
        }
        char id[256];
        snprintf(id, sizeof(id), "%.*s", (int)(end - (k + 13)), k + 13);
        size_t n = output_line(out, cap, id, len, &seed);
        char *packed = NULL;
        size_t packed_len = 0;
        if (pack && llmq_job_packer_pack(pk, out, n, &packed, &packed_len, NULL) != LLMQ_OK)
            return 1;
        fputs(call != NULL ? "*9\r\n" : "*8\r\n", stdout);
        bulk("FCALL", 5);
        bulk(argv[1], strlen(argv[1]));
        bulk("1", 1);
        bulk(argv[2], strlen(argv[2]));
        bulk(id, strlen(id));
        bulk("done", 4);
        if (packed != NULL)
            bulk(packed, packed_len);
        else
            bulk(out, n);
        bulk("", 0); /* reason: none for done */
        if (call != NULL)
            bulk(call, strlen(call));
        free(packed);
    }
    llmq_job_packer_free(pk);
    free(in);
    free(out);
    return 0;
}
