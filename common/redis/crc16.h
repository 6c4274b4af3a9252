/* The hash slot of a Redis Cluster key, as Redis computes it (cluster.c
 * keyHashSlot): CRC16-CCITT in its XMODEM form (polynomial 0x1021, initial
 * value 0, no reflection, no final xor) of the key's hash tag, modulo 16384.
 * The hash tag is what lies between the first '{' and the first '}' after
 * it, when that is not empty; otherwise the whole key is hashed.
 *
 * Every llmq key of an account is "llmq:{ACCOUNT}:...", so the slot of an
 * account is the slot of its name (account names hold no '{' or '}').
 * Pure: no I/O, no allocation, no globals. */
#ifndef LLMQ_CRC16_H
#define LLMQ_CRC16_H

#include <stddef.h>
#include <stdint.h>

#define LLMQ_CLUSTER_SLOTS 16384

/* CRC16/XMODEM of buf[0..len). crc16("123456789") is 0x31C3. */
uint16_t llmq_crc16_xmodem(const void *buf, size_t len);

/* The slot (0..16383) of the key key[0..len), hash tags honoured. */
int llmq_cluster_key_slot(const char *key, size_t len);

/* The slot of every key of account (borrowed, NUL-terminated): the slot of
 * "{ACCOUNT}". */
int llmq_cluster_account_slot(const char *account);

#endif
