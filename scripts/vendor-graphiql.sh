#!/usr/bin/env bash
# Copy the GraphiQL page's browser assets into server/static/graphiql/, so /graphql works offline.
#
# Strawberry's GraphiQL page loads React, GraphiQL and its explorer plugin from unpkg.com. runsgate
# serves the very same files itself (server/view/graphiql.py rewrites the page's URLs), fetched here
# from the npm registry with `npm pack` at the versions the page names. The page's
# `integrity` (SRI sha384) attributes are kept, so the browser checks each file; so does
# tests/server/test_graphiql_assets.py. Run it again after upgrading strawberry-graphql.
set -euo pipefail
cd "$(dirname "$0")/.."
html="$(./dev run python -c 'from strawberry.http.ides import get_graphql_ide_html; print(get_graphql_ide_html("graphiql"))')"
dest=server/static/graphiql
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
rm -rf "$dest"
# each URL: https://unpkg.com/<package>@<version>/<file>
for url in $(grep -oE 'https://unpkg\.com/[^"]+' <<<"$html" | sort -u); do
  rel="${url#https://unpkg.com/}"
  spec="$(sed -E 's#^((@[^/]+/)?[^/@]+@[^/]+)/.*#\1#' <<<"$rel")"
  file="${rel#"$spec"/}"
  tgz_dir="$work/$(tr '/@' '__' <<<"$spec")"
  if [ ! -d "$tgz_dir" ]; then
    mkdir -p "$tgz_dir"
    (cd "$tgz_dir" && npm pack --silent "$spec" >/dev/null && tar -xzf ./*.tgz)
  fi
  mkdir -p "$dest/$(dirname "$rel")"
  cp "$tgz_dir/package/$file" "$dest/$rel"
  echo "$rel"
done
