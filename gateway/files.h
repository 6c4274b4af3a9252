/* Files API pieces batches.c shares. */
#ifndef LLMQ_GW_FILES_H
#define LLMQ_GW_FILES_H

#include "http.h"

#define GW_FILE_OUT_PREFIX "file-out_" /* + batch id: a batch's output file */
#define GW_FILE_ERR_PREFIX "file-err_" /* + batch id: its error file */

/* Writes a new random id "<prefix><24 hex>" into buf (n >= strlen(prefix) + 25). */
void gw_new_id(const char *prefix, char *buf, size_t n);

/* Seconds since the epoch (Redis keeps the gateway's clock here: ids and
 * times of objects are the gateway's, as OpenAI's are its servers'). */
long long gw_unix_s(void);

/* 1 when a batch with this status (NULL: none) may be seen: a batch being
 * created (validating) is hidden from every read until it is whole
 * (batches.c). */
int gw_batch_visible(const char *status);

#endif
