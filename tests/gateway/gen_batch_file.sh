#!/usr/bin/env bash
# Writes a valid Batch file of N chat requests, each with a ~1,800-character
# prompt (N = 20,000: ~11 MB), for the tests and benchmarks of large uploads.
#   tests/gateway/gen_batch_file.sh N FILE
set -euo pipefail
awk -v n="${1:?N}" 'BEGIN {
    pad = ""
    for (i = 0; i < 40; i++) pad = pad "the quick brown fox jumps over the lazy dog "
    for (i = 0; i < n; i++)
        printf "{\"custom_id\":\"r-%d\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\",\"body\":{\"model\":\"gpt-4o-mini\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":\"%d %s\"}]}}\n", i, i, pad
}' >"${2:?FILE}"
