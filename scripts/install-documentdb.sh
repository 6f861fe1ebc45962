#!/usr/bin/env bash
# Build FerretDB v2.5.0 and the PostgreSQL extensions it runs on (DocumentDB 0.106.0, pgvector
# 0.8.0, pg_cron 1.6.3), once per machine, and print the FerretDB binary's path.
#   RUNSGATE_VENDOR_DIR=DIR bash scripts/install-documentdb.sh
# Used by ./dev test, ./dev documentdb, ./dev bench and ./dev chaos; tests/_documentdb.py starts
# PostgreSQL and FerretDB from what it installs (docs/storage.md "FerretDB 2 on DocumentDB").
#
# - Debian packages: PostgreSQL 15 with its server headers, PostGIS and RUM (both required by
#   DocumentDB), libbson, PCRE2 and Intel's decimal math library (scripts/apt-install.sh).
# - The three extensions are built from their source archives, checked against the SHA-256 below,
#   and installed into the system's PostgreSQL 15 folders (root, or sudo). An archive is looked for
#   in the folder named by RUNSGATE_VENDOR_DIR, then in ~/.cache/runsgate/vendor, else downloaded
#   there once from where it is published (curl). One already installed at the right version (its
#   .control file's default_version, and its library) is not built again, and then needs no
#   archive. Without an archive it needs (no copy, no download), the script says which one, its
#   checksum and where it is published, and exits 1.
# - FerretDB v2.5.0, the release built for that DocumentDB tag, comes from the Go module proxy and
#   is cached as ~/.cache/runsgate/bin/ferretdb-v2.5.0 (RUNSGATE_CACHE moves the cache).
# Builds run at nice 10: about 10 minutes on 2 cores. Two at once take turns (flock on the binary's
# .lock file): the second says it waits, then finds what the first installed. Each build's output
# goes to a log under ~/.cache/runsgate/logs (documentdb.log, ferretdb-v2.5.0.log, ...), shown (its
# end) only when the build fails.
set -euo pipefail
scripts="$(cd "$(dirname "$0")" && pwd)"
. "$scripts/build-lib.sh"
ferretdb_version=v2.5.0
cache="${RUNSGATE_CACHE:-$HOME/.cache/runsgate}"
bin="$cache/bin/ferretdb-$ferretdb_version"
pg_major=15
pg_config="/usr/lib/postgresql/$pg_major/bin/pg_config"
packages=(
  "postgresql-$pg_major" "postgresql-server-dev-$pg_major" "postgresql-$pg_major-rum" "postgresql-$pg_major-postgis-3"
  libbson-dev libpcre2-dev libintelrdfpmath-dev libkrb5-dev libicu-dev pkg-config make gcc git
)

# name|archive|sha256|published at|extension control files and default_version they must have|libraries
components=(
  "pgvector|pgvector-0.8.0.tar.gz|f735d37c1f8a32a0c46f29db63860bdc1ed06a423d4280767afbd38f1fe58778|https://github.com/pgvector/pgvector/archive/refs/tags/v0.8.0.tar.gz|vector=0.8.0|vector.so"
  "pg_cron|pg_cron-1.6.3.tar.gz|105b669241ea200f0e9a5ffbc2c4e8c33b0dfaba2b13e06cdb4621382b7995d5|https://github.com/citusdata/pg_cron/archive/refs/tags/v1.6.3.tar.gz|pg_cron=1.6|pg_cron.so"
  "documentdb|documentdb-0.106.0-ferretdb-2.5.0.tar.gz|c06c5b2287ac9e439c9fbcfc1095c605d81975e1e6792aa83eb4c9f7008b7eff|https://github.com/FerretDB/documentdb/archive/refs/tags/v0.106.0-ferretdb-2.5.0.tar.gz|documentdb_core=0.106-0,documentdb=0.106-0|pg_documentdb_core.so,pg_documentdb.so"
)

say() { echo "install-documentdb: $*" >&2; }

mkdir -p "$cache/bin"
exec 9>>"$bin.lock"
take_turn 9 "$bin.lock" install-documentdb "build of FerretDB $ferretdb_version and DocumentDB"

bash "$scripts/apt-install.sh" "${packages[@]}"
[ -x "$pg_config" ] || { say "$pg_config is missing (postgresql-server-dev-$pg_major)"; exit 1; }
sharedir="$("$pg_config" --sharedir)/extension"
pkglibdir="$("$pg_config" --pkglibdir)"

installed() { # whether every control file names its version and every library is there
  local controls="$1" libraries="$2" pair name version library
  for pair in ${controls//,/ }; do
    name="${pair%%=*}" version="${pair#*=}"
    grep -qx "default_version = '$version'" "$sharedir/$name.control" 2>/dev/null || return 1
  done
  for library in ${libraries//,/ }; do
    [ -f "$pkglibdir/$library" ] || return 1
  done
}

as_root() {
  if [ "$(id -u)" = 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    say "installing into $pkglibdir and $sharedir needs root (or sudo)"
    return 1
  fi
}

missing=()
for component in "${components[@]}"; do
  IFS='|' read -r name archive sha url controls libraries <<<"$component"
  installed "$controls" "$libraries" || missing+=("$component")
done

archive_of=() # the path of each missing component's checked archive, in the order of missing
if [ ${#missing[@]} -gt 0 ]; then
  vendor="${RUNSGATE_VENDOR_DIR:-}"
  downloads="$cache/vendor"
  absent=()
  for component in "${missing[@]}"; do
    IFS='|' read -r name archive sha url controls libraries <<<"$component"
    found=""
    for candidate in ${vendor:+"$vendor/$archive"} "$downloads/$archive"; do
      [ -f "$candidate" ] && { found="$candidate"; break; }
    done
    if [ -z "$found" ] && command -v curl >/dev/null 2>&1; then
      # not in RUNSGATE_VENDOR_DIR: fetched once from where it is published, into the cache
      say "downloading $archive from $url"
      mkdir -p "$downloads"
      if curl -fsSL --retry 2 --connect-timeout 20 -o "$downloads/$archive.part" "$url"; then
        mv "$downloads/$archive.part" "$downloads/$archive"
        found="$downloads/$archive"
      else
        rm -f "$downloads/$archive.part"
        say "could not download $url"
      fi
    fi
    if [ -z "$found" ]; then
      absent+=("$component")
    elif ! echo "$sha  $found" | sha256sum --check --status; then
      say "$found does not have the SHA-256 $sha"
      exit 1
    else
      archive_of+=("$found")
    fi
  done
  if [ ${#absent[@]} -gt 0 ]; then
    say "the PostgreSQL extensions below are not installed; building them needs their source archives"
    say "in a folder named by RUNSGATE_VENDOR_DIR${vendor:+ (now $vendor)}, or in $downloads:"
    for component in "${absent[@]}"; do
      IFS='|' read -r name archive sha url controls libraries <<<"$component"
      say "  $archive  sha256 $sha"
      say "    published at $url"
    done
    exit 1
  fi
fi

work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
pgxs=(PG_CONFIG="$pg_config" with_llvm=no) # no JIT bitcode: half the build time

for index in "${!missing[@]}"; do
  IFS='|' read -r name archive sha url controls libraries <<<"${missing[$index]}"
  log="$(build_log "$name")"
  say "building $name from $archive (a few minutes; log: $log)"
  tar -xzf "${archive_of[$index]}" -C "$work"
  src="$work/${archive%.tar.gz}"
  if [ "$name" = documentdb ]; then
    # DocumentDB's Makefiles ask pkg-config for `intelmathlib`, which Debian's libintelrdfpmath-dev
    # ships as a static library without a .pc file.
    bid="$(dpkg -L libintelrdfpmath-dev | grep '/libbidgcc000\.a$' | head -n 1)"
    mkdir -p "$work/pkgconfig"
    printf 'Name: intelmathlib\nDescription: Intel decimal floating-point math library\nVersion: 2.0\nLibs: %s\nCflags: -I/usr/include\n' \
      "$bid" >"$work/pkgconfig/intelmathlib.pc"
    export PKG_CONFIG_PATH="$work/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    # Built from an archive, not a git checkout, the version string would read `sha:unknown` (and
    # FerretDB warn at every start): name the tag's commit, which the archive records.
    commit="$(git get-tar-commit-id <"${archive_of[$index]}" 2>/dev/null || true)"
    if [ -n "$commit" ]; then
      for dir in pg_documentdb_core:documentdb_core pg_documentdb:documentdb; do
        mkdir -p "$src/${dir%%:*}/build/include/metadata"
        version="$(sed -n "s/^default_version = '\(.*\)'$/\1/p" "$src/${dir%%:*}/${dir#*:}.control")"
        printf '// runsgate: the tag %s\n#define EXTENSION_VERSION_STR "%s"\n#define GIT_VERSION "HEAD sha:%s buildId:0"\n' \
          "${archive%.tar.gz}" "${version/-/.}" "${commit:0:10}" >"$src/${dir%%:*}/build/include/metadata/documentdb_extension_version.h"
      done
    fi
    # Debian 12's libbson (1.23) lacks BSON_SUBTYPE_SENSITIVE, the only change the sources need.
    copt=(COPT="-DBSON_SUBTYPE_SENSITIVE=0x08 -Wno-error=switch")
    targets=("$src/pg_documentdb_core" "$src/pg_documentdb")
    for target in "${targets[@]}"; do
      logged "$log" install-documentdb "building $name" nice -n 10 make -C "$target" -j "$(nproc)" "${pgxs[@]}" "${copt[@]}" ||
        exit 1
    done
  else
    targets=("$src")
    logged "$log" install-documentdb "building $name" nice -n 10 make -C "$src" -j "$(nproc)" "${pgxs[@]}" || exit 1
  fi
  for target in "${targets[@]}"; do
    logged "$log" install-documentdb "installing $name" as_root make -C "$target" "${pgxs[@]}" install || exit 1
  done
  installed "$controls" "$libraries" || { say "$name was installed but its version is not $controls"; exit 1; }
  say "installed $name into $pkglibdir"
done

if [ -x "$bin" ] && "$bin" --version >/dev/null 2>&1; then
  echo "$bin"; exit 0
fi
command -v go >/dev/null || { say "Go is required to build FerretDB $ferretdb_version"; exit 1; }
log="$(build_log "ferretdb-$ferretdb_version")"
say "building FerretDB $ferretdb_version with Go (about 5 minutes; log: $log)"
cd "$work"
module="$(go mod download -json "github.com/FerretDB/FerretDB/v2@$ferretdb_version" 2>>"$log")" || {
  echo "$module" >>"$log"
  failed "$log" install-documentdb "downloading FerretDB $ferretdb_version"
  exit 1
}
src=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])' <<<"$module")
cp -r "$src" "$work/ferretdb"
chmod -R u+w "$work/ferretdb"
# not part of the module (generated at release), as for v1: without it the binary panics at start
echo "$ferretdb_version" >"$work/ferretdb/build/version/version.txt"
# cmd/ferretdb/gomaxprocs.go is `//go:build !go1.25` (Go 1.25 sets GOMAXPROCS from the cgroup
# itself), and nothing else defines setGOMAXPROCS: a no-op for newer Go.
cat >"$work/ferretdb/cmd/ferretdb/gomaxprocs_go125.go" <<'EOF'
//go:build go1.25

package main

import "log/slog"

func setGOMAXPROCS(*slog.Logger) {}
EOF
mkdir -p "$cache/bin"
(cd "$work/ferretdb" && logged "$log" install-documentdb "building FerretDB $ferretdb_version" nice -n 10 go build -o "$bin.tmp" ./cmd/ferretdb) ||
  exit 1
mv "$bin.tmp" "$bin"
logged "$log" install-documentdb "starting the FerretDB $ferretdb_version just built" "$bin" --version || exit 1
say "built $bin"
echo "$bin"
