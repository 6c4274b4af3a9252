/* CRC16/XMODEM and the key slot; see crc16.h. Bitwise rather than table
 * driven: a slot is computed once per connection, never per command. */
#include "redis/crc16.h"

#include <string.h>

uint16_t llmq_crc16_xmodem(const void *buf, size_t len)
{
    const unsigned char *p = buf;
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)(p[i] << 8);
        for (int bit = 0; bit < 8; bit++)
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
    }
    return crc;
}

int llmq_cluster_key_slot(const char *key, size_t len)
{
    const char *open = memchr(key, '{', len);
    if (open != NULL) {
        size_t rest = len - (size_t)(open - key) - 1;
        const char *close = memchr(open + 1, '}', rest);
        if (close != NULL && close > open + 1)
            return llmq_crc16_xmodem(open + 1, (size_t)(close - open - 1)) &
                   (LLMQ_CLUSTER_SLOTS - 1);
    }
    return llmq_crc16_xmodem(key, len) & (LLMQ_CLUSTER_SLOTS - 1);
}

int llmq_cluster_account_slot(const char *account)
{
    return llmq_crc16_xmodem(account, strlen(account)) & (LLMQ_CLUSTER_SLOTS - 1);
}
