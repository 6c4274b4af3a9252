#!/usr/bin/env bash
# ctest dashboard_browser: the dashboard in a real browser (browser.mjs):
# Debian's chromium, headless, driven by puppeteer-core, against a real
# gateway, redis-server, workers and two openai-sims, through
# tests/gateway/stack.sh.
#   tests/dashboard/run.sh BIN_DIR SHOTS_DIR
# Screenshots go to SHOTS_DIR (their paths are printed). Without chromium,
# node or puppeteer-core the test FAILS with a message (scripts/bootstrap
# installs them): it never passes by skipping.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:?BIN_DIR}
export DASH_SHOTS_DIR=${2:?SHOTS_DIR}
mkdir -p "$DASH_SHOTS_DIR"
export CHROMIUM=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
if [ -z "$CHROMIUM" ]; then
    echo "dashboard_browser: chromium is not installed (run scripts/bootstrap)" >&2
    exit 1
fi
if ! command -v node >/dev/null; then
    echo "dashboard_browser: node is not installed (run scripts/bootstrap)" >&2
    exit 1
fi
if [ ! -f "$here/node_modules/puppeteer-core/package.json" ]; then
    echo "dashboard_browser: puppeteer-core is not in tests/dashboard/node_modules" \
        "(run scripts/bootstrap, or: npm ci --prefix tests/dashboard)" >&2
    exit 1
fi
exec "$here/../gateway/stack.sh" "$bin" node "$here/browser.mjs"
