#!/usr/bin/env bash
# ctest gateway_openai_sdk: e2e.mjs with the official openai npm package,
# through stack.sh. Without node or the package the test FAILS with a message
# (scripts/bootstrap installs both): it never passes by skipping.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:?BIN_DIR}
if ! command -v node >/dev/null; then
    echo "gateway_openai_sdk: node is not installed (run scripts/bootstrap)" >&2
    exit 1
fi
if [ ! -f "$here/node_modules/openai/package.json" ]; then
    echo "gateway_openai_sdk: the openai npm package is not in tests/gateway/node_modules" \
        "(run scripts/bootstrap, or: npm ci --prefix tests/gateway)" >&2
    exit 1
fi
exec "$here/stack.sh" "$bin" node "$here/e2e.mjs"
