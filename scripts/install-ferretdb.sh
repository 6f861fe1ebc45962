#!/usr/bin/env bash
# Build FerretDB v1.24.2 (embedded SQLite backend) with Go from the Go module proxy, once per
# machine, and print the binary's path. Used by the test command; tests start and stop it.
#
# `go install github.com/FerretDB/FerretDB/cmd/ferretdb@v1.24.2` builds a binary that panics at
# start ("Invalid build/version/version.txt"), because that generated file is not part of the
# module. So we take the same module from the proxy (`go mod download`), add version.txt, and
# `go build` it. Two at once take turns (flock on the binary's .lock file): the second says it
# waits, then finds the first's binary. Go's output goes to ~/.cache/runsgate/logs/ferretdb-v1.24.2.log,
# shown (its end) only when the build fails.
set -euo pipefail
. "$(dirname "$0")/build-lib.sh"
version=v1.24.2
cache="${RUNSGATE_CACHE:-$HOME/.cache/runsgate}"
bin="$cache/bin/ferretdb-$version"
say() { echo "install-ferretdb: $*" >&2; }
mkdir -p "$cache/bin"
exec 9>>"$bin.lock"
take_turn 9 "$bin.lock" install-ferretdb "build of FerretDB $version"
if [ -x "$bin" ] && "$bin" --version >/dev/null 2>&1; then
  echo "$bin"; exit 0
fi
command -v go >/dev/null || { say "Go is required to build FerretDB"; exit 1; }
log="$(build_log "ferretdb-$version")"
say "building FerretDB $version with Go, once per machine (a few minutes; log: $log)"
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
cd "$work"
module="$(go mod download -json "github.com/FerretDB/FerretDB@$version" 2>>"$log")" || {
  echo "$module" >>"$log"
  failed "$log" install-ferretdb "downloading FerretDB $version"
  exit 1
}
src=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])' <<<"$module")
cp -r "$src" "$work/src"
chmod -R u+w "$work/src"
echo "$version" > "$work/src/build/version/version.txt"
(cd "$work/src" && logged "$log" install-ferretdb "building FerretDB $version" go build -o "$bin.tmp" ./cmd/ferretdb) || exit 1
mv "$bin.tmp" "$bin"
logged "$log" install-ferretdb "starting the FerretDB $version just built" "$bin" --version || exit 1
say "built $bin"
echo "$bin"
