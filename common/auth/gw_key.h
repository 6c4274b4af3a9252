/* Gateway keys (llmq-gateway's own API keys, `llmq keys`): how one is made and
 * how it is known in Redis. A key is shown once when created; Redis holds only
 * the SHA-256 of its text (common/keys.h, P gw:key:<sha256>). Pure, no I/O
 * beyond the system's random source. */
#ifndef LLMQ_GW_KEY_H
#define LLMQ_GW_KEY_H

#include <stddef.h>

#include "llmq/error.h"

/* Text of a key: "llmqgw-" + 48 hex digits (192 random bits). Chosen not to
 * look like an OpenAI key ("sk-..."), so a scanner tells them apart. */
#define LLMQ_GW_KEY_PREFIX "llmqgw-"
#define LLMQ_GW_KEY_LEN (7 + 48)
#define LLMQ_GW_KEY_HASH_LEN 64

/* Writes a new random key into buf (n > LLMQ_GW_KEY_LEN). Returns LLMQ_OK, or
 * LLMQ_EIO when the random source fails. */
enum llmq_rc llmq_gw_key_generate(char *buf, size_t n, struct llmq_error *err);

/* Writes the lower-case hex SHA-256 of key[0..len) (borrowed) into out
 * (LLMQ_GW_KEY_HASH_LEN + 1 bytes). */
void llmq_gw_key_hash(const char *key, size_t len, char out[LLMQ_GW_KEY_HASH_LEN + 1]);

#endif
