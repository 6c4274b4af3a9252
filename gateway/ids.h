/* Ids and times of the gateway's own objects (files, batches, the gateway's
 * lease name), as OpenAI spells theirs: a prefix and random hex. Pure but
 * for the system's random source and clock; thread-safe. */
#ifndef LLMQ_GW_IDS_H
#define LLMQ_GW_IDS_H

#include <stddef.h>

#define GW_FILE_OUT_PREFIX "file-out_" /* + batch id: a batch's output file */
#define GW_FILE_ERR_PREFIX "file-err_" /* + batch id: its error file */

/* Writes a new random id "<prefix><24 hex>" into buf (n >= strlen(prefix) + 25). */
void gw_new_id(const char *prefix, char *buf, size_t n);

/* Seconds since the epoch (Redis keeps the gateway's clock here: ids and
 * times of objects are the gateway's, as OpenAI's are its servers'). */
long long gw_unix_s(void);

#endif
