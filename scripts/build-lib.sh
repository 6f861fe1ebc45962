# Sourced by the install scripts (install-ferretdb.sh, install-documentdb.sh, apt-install.sh), not run:
#   . "$(dirname "$0")/build-lib.sh"
# Two installs at once take turns on a lock file; the one that waits says what for. A build's
# output goes to a log file under the cache folder, and only its end is shown, when it fails.

# take_turn FD LOCK PREFIX WHAT: hold the lock file LOCK, opened on descriptor FD (`exec 9>>"$LOCK"`,
# which does not truncate it), until the script exits. When another process holds it, say first
# "PREFIX: waiting for another WHAT (pid, its parent's command, since when) to finish (lock LOCK)",
# and once it is ours, how long the wait took. The holder writes who it is into LOCK, for the next
# one to name.
take_turn() {
  local fd="$1" lock="$2" prefix="$3" what="$4" holder waited
  if ! flock -n "$fd"; then
    holder="$(head -c 300 "$lock" 2>/dev/null || true)"
    echo "$prefix: waiting for another $what${holder:+ ($holder)} to finish (lock $lock)" >&2
    waited=$SECONDS
    flock "$fd"
    echo "$prefix: the other $what ended after $((SECONDS - waited)) s; going on" >&2
  fi
  printf 'pid %s, %s, since %s' "$$" "$(ps -o args= -p "$PPID" 2>/dev/null | cut -c 1-80)" "$(date +%H:%M:%S)" >"$lock"
}

# build_log NAME: the path of the log file NAME.log under the cache folder, created empty.
build_log() {
  local dir="${RUNSGATE_CACHE:-$HOME/.cache/runsgate}/logs"
  mkdir -p "$dir"
  : >"$dir/$1.log"
  echo "$dir/$1.log"
}

# logged LOG PREFIX WHAT COMMAND...: run COMMAND with its output appended to LOG; when it fails,
# `failed LOG PREFIX WHAT` and return 1.
logged() {
  local log="$1" prefix="$2" what="$3"
  shift 3
  "$@" >>"$log" 2>&1 || { failed "$log" "$prefix" "$what"; return 1; }
}

# failed LOG PREFIX WHAT: show LOG's last 40 lines, then "PREFIX: WHAT failed (...; all of it in LOG)".
failed() {
  tail -n 40 "$1" >&2
  echo "$2: $3 failed (the end of its output above; all of it in $1)" >&2
}
