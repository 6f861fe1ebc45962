#!/usr/bin/env bash
# Install what tests/ecosystem needs, idempotently (fast when it is already there):
# - its pinned Node packages: `npm ci` in tests/ecosystem, skipped while node_modules matches package-lock.json;
# - Debian's chromium package for the GraphiQL browser test, when /usr/bin/chromium is missing (as root, by
#   scripts/apt-install.sh: no recommended packages, no unrelated upgrades, one line of output).
# No browser build is ever downloaded (playwright-core drives the Debian one).
# Without node/npm (or chromium as non-root) the matching tests are skipped, and fail under CI=true.
set -euo pipefail
cd "$(dirname "$0")/../tests/ecosystem"

if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
  stamp=node_modules/.runsgate-package-lock.sha256
  want="$(sha256sum package-lock.json | cut -d' ' -f1)"
  if [ -f node_modules/.package-lock.json ] && [ ! -f "$stamp" ] && [ ! package-lock.json -nt node_modules/.package-lock.json ]; then
    echo "$want" >"$stamp" # just installed by ./dev (npm ci of this lock): not again
  fi
  if [ ! -f node_modules/.package-lock.json ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "install-ecosystem: npm ci in tests/ecosystem" >&2
    PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error >&2
    echo "$want" >"$stamp"
  fi
else
  echo "install-ecosystem: node/npm not found: the ecosystem tests are skipped (and fail under CI=true)" >&2
fi

if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    bash ../../scripts/apt-install.sh chromium
  else
    echo "install-ecosystem: /usr/bin/chromium is missing and we are not root: the browser test is skipped" >&2
  fi
fi
