/* The offload table of `llmq status` and `llmq top` (one printer for both):
 * per model with offload its policy, jobs staged and offloaded, open
 * provider batches by state, the provider's enqueued tokens against its
 * queue limit, and jobs done, failed and money saved by offload. */
#ifndef LLMQ_CLI_OFFLOAD_TABLE_H
#define LLMQ_CLI_OFFLOAD_TABLE_H

#include <jansson.h>
#include <stdio.h>

/* Prints list (borrowed; jobs/offload_stats.h's array) to out as a header
 * and one row per model; nothing when list is empty. Each line starts with
 * indent and ends with nl ("\n", or a terminal's clear-to-end first); bold
 * and plain wrap the header ("" for none). */
void llmq_cli_offload_table(FILE *out, const json_t *list, const char *indent, const char *bold,
                            const char *plain, const char *nl);

#endif
