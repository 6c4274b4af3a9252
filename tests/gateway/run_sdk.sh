#!/usr/bin/env bash
# ctest gateway_openai_sdk, gateway_sdk_keys, gateway_tenant_users: SCRIPT (e2e.mjs unless
# given) with the official openai npm package, through stack.sh.
#   tests/gateway/run_sdk.sh BIN_DIR [SCRIPT]
# Without node or the package the test FAILS with a message
# (scripts/bootstrap installs both): it never passes by skipping.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:?BIN_DIR}
script=${2:-e2e.mjs}
if ! command -v node >/dev/null; then
    echo "$script: node is not installed (run scripts/bootstrap)" >&2
    exit 1
fi
if [ ! -f "$here/node_modules/openai/package.json" ]; then
    echo "$script: the openai npm package is not in tests/gateway/node_modules" \
        "(run scripts/bootstrap, or: npm ci --prefix tests/gateway)" >&2
    exit 1
fi
exec "$here/stack.sh" "$bin" node "$here/$script"
