#!/usr/bin/env bash
# Build the reviewer inbox's browser files into server/static/inbox/, so /inbox needs no build step
# (and no CDN) at run time.
#
# The sources are scripts/inbox/src/ (React, @rjsf/core with a validator on @cfworker/json-schema,
# graphql-ws), pinned by scripts/inbox/package-lock.json; esbuild bundles and minifies them into
# inbox.js and inbox.css. integrity.json records each file's SRI sha384, which server/inbox.py puts
# in the page's `integrity` attributes (the browser checks each file) and
# tests/server/test_inbox.py checks against the committed files. Run it again after changing the
# sources or the pinned versions, and commit what it writes. With a folder argument it writes
# there instead (tests/ecosystem/test_inbox_bundle.py rebuilds into one and compares).
set -euo pipefail
cd "$(dirname "$0")/.."
src=scripts/inbox
dest="${1:-server/static/inbox}"
(cd "$src" && npm ci --no-audit --no-fund --silent)
mkdir -p "$dest"
rm -f "$dest"/*
"$src/node_modules/.bin/esbuild" "$src/src/main.jsx" \
  --bundle --minify --format=iife --target=es2020 --jsx=automatic \
  --alias:@rjsf/validator-ajv8=./scripts/inbox/src/no-ajv.js \
  --define:process.env.NODE_ENV='"production"' --legal-comments=none \
  --outfile="$dest/inbox.js" --log-level=warning
"$src/node_modules/.bin/esbuild" "$src/src/inbox.css" --bundle --minify --outfile="$dest/inbox.css" --log-level=warning
if grep -q 'unpkg\.com\|jsdelivr\|cdnjs' "$dest/inbox.js"; then
  echo "the bundle names a CDN" >&2
  exit 1
fi
{
  echo "{"
  sep=""
  for file in inbox.css inbox.js; do
    printf '%s  "%s": "sha384-%s"' "$sep" "$file" "$(openssl dgst -sha384 -binary "$dest/$file" | openssl base64 -A)"
    sep=$',\n'
  done
  printf '\n}\n'
} >"$dest/integrity.json"
cat "$dest/integrity.json"
