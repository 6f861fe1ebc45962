#!/usr/bin/env bash
# Install Debian packages that are missing, quietly, and say in one line what was installed.
#   bash scripts/apt-install.sh PACKAGE...
# Only what is needed: `apt-get install --no-install-recommends --no-upgrade` of the packages not
# yet installed (no recommended packages; a package already installed is not upgraded, and apt
# upgrades another package only when a new one depends on a newer version of it; never
# `apt-get upgrade`). apt's output goes to ~/.cache/runsgate/logs/apt.log, shown (its end) only on failure.
# Exits 0 at once when every package is installed; 1 when one is missing and we are not root
# or apt-get failed. Two at once (two ./dev test, say) take turns: the second says it waits for
# the first (flock on ~/.cache/runsgate/apt.lock) and then installs only what is still missing; apt
# run by anything else is waited for up to 10 minutes (DPkg::Lock::Timeout).
set -euo pipefail
. "$(dirname "$0")/build-lib.sh"
missing_packages() {
  missing=()
  for package in "$@"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
  done
}
missing_packages "$@"
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "apt-install: ${missing[*]} not installed, and installing needs root and apt-get" >&2
  exit 1
fi
cache="${RUNSGATE_CACHE:-$HOME/.cache/runsgate}"
mkdir -p "$cache"
exec 8>>"$cache/apt.lock"
take_turn 8 "$cache/apt.lock" apt-install "apt-get install of runsgate's packages"
missing_packages "$@"
[ ${#missing[@]} -eq 0 ] && exit 0
log="$(build_log apt)"
echo "apt-install: installing ${missing[*]} (log: $log)" >&2
logged "$log" apt-install "apt-get update" apt-get update -q -o DPkg::Lock::Timeout=600 || exit 1
logged "$log" apt-install "apt-get install ${missing[*]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -q -o DPkg::Lock::Timeout=600 --no-install-recommends --no-upgrade "${missing[@]}" || exit 1
summary="$(grep -E '^[0-9]+ upgraded, [0-9]+ newly installed' "$log" | tail -n 1 || true)"
echo "apt-install: installed ${missing[*]} (${summary:-see the log})" >&2
