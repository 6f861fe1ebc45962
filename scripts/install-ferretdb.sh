#!/usr/bin/env bash
# Build FerretDB v1.24.2 (embedded SQLite backend) with Go from the Go module proxy, once per
# machine, and print the binary's path. Used by the test command; tests start and stop it.
#
# `go install github.com/FerretDB/FerretDB/cmd/ferretdb@v1.24.2` builds a binary that panics at
# start ("Invalid build/version/version.txt"), because that generated file is not part of the
# module. So we take the same module from the proxy (`go mod download`), add version.txt, and
# `go build` it. Two at once take turns (flock on the binary's .lock file): the second finds the
# first's binary.
set -euo pipefail
version=v1.24.2
cache="${RUNSGATE_CACHE:-$HOME/.cache/runsgate}"
bin="$cache/bin/ferretdb-$version"
mkdir -p "$cache/bin"
exec 9>"$bin.lock"
flock 9
if [ -x "$bin" ] && "$bin" --version >/dev/null 2>&1; then
  echo "$bin"; exit 0
fi
command -v go >/dev/null || { echo "install-ferretdb: Go is required to build FerretDB" >&2; exit 1; }
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
cd "$work"
src=$(go mod download -json "github.com/FerretDB/FerretDB@$version" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
cp -r "$src" "$work/src"
chmod -R u+w "$work/src"
echo "$version" > "$work/src/build/version/version.txt"
mkdir -p "$cache/bin"
(cd "$work/src" && go build -o "$bin.tmp" ./cmd/ferretdb) >&2
mv "$bin.tmp" "$bin"
"$bin" --version >&2
echo "$bin"
