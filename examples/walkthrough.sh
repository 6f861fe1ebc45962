#!/usr/bin/env bash
# The README walk-through with curl: start a refund run, list the agent's suspended runs,
# approve the pending tool call with an edited amount, check that the run finished and is no
# longer listed, then decide a run's two refunds in one bulk request (approve one, decline one).
# A step the server refuses (a UserError, e.g. a tool rule's) prints its code and message; exit 1.
# JSON is written and read with python3's json module, so nothing else needs installing.
# With authentication on, put an API key (runsgate new-key, with the scopes runs:read, runs:decide
# and runs:start) in RUNSGATE_TOKEN: it is sent as `Authorization: Bearer <key>` (from a file
# descriptor, so it never shows in the process list). Without one, a server with authentication on
# answers 401, and the script stops saying so.
#
# Usage: bash examples/walkthrough.sh [GRAPHQL_URL]    # default http://127.0.0.1:4000/graphql
#        RUNSGATE_TOKEN=rg_... bash examples/walkthrough.sh [GRAPHQL_URL]
set -euo pipefail
URL="${1:-http://127.0.0.1:4000/graphql}"
AGENT="refund-agent"

# authorization: the header line for curl's `-H @FILE`, or nothing without RUNSGATE_TOKEN.
authorization() {
  if [ -n "${RUNSGATE_TOKEN:-}" ]; then printf 'Authorization: Bearer %s\n' "$RUNSGATE_TOKEN"; fi
}

# graphql DOCUMENT VARIABLES_JSON: POST one operation and print its `data`; exit on a status other
# than 200 (401: saying which variable to set) or on top-level errors.
graphql() {
  local answer status
  answer=$(python3 -c 'import json, sys; print(json.dumps({"query": sys.argv[1], "variables": json.loads(sys.argv[2])}))' "$1" "$2" \
    | curl -sS "$URL" -H 'content-type: application/json' -H @<(authorization) --data-binary @- -w '\n%{http_code}')
  status="${answer##*$'\n'}"
  answer="${answer%$'\n'*}"
  if [ "$status" = 401 ]; then
    echo "walkthrough.sh: $URL answered 401 ($answer): set RUNSGATE_TOKEN to an API key with the scopes" \
      "runs:read, runs:decide and runs:start (runsgate new-key)" >&2
    exit 1
  fi
  [ "$status" = 200 ] || { echo "walkthrough.sh: $URL answered HTTP $status: $answer" >&2; exit 1; }
  python3 -c 'import json, sys; r = json.load(sys.stdin); r.get("errors") and sys.exit("GraphQL errors: " + json.dumps(r["errors"])); print(json.dumps(r["data"]))' <<<"$answer"
}

# get JSON KEY...: the value at a path of keys and list indexes (a string as is, anything else as JSON).
get() {
  python3 - "$@" <<'PY'
import json, sys
value = json.loads(sys.argv[1])
for key in sys.argv[2:]:
    value = value[int(key)] if isinstance(value, list) else value[key]
print(value if isinstance(value, str) else json.dumps(value))
PY
}

START_RUN='mutation StartRun($input: StartRunInput!) {
  startRun(input: $input) {
    __typename
    ... on RunOutcome { runId status run { toolCalls { toolCallId questionId toolName args requiresApproval } } }
    ... on UserError { code message }
  }
}'
SUSPENDED_RUNS='query SuspendedRuns($agentId: ID!, $filter: SuspendedRunFilter) {
  suspendedRuns(agentId: $agentId, filter: $filter) { totalCount nodes { runId toolCalls { toolCallId toolName } } }
}'
DECIDE='mutation Decide($input: DecideToolCallsInput!) {
  decideToolCalls(input: $input) { results { __typename ... on RunOutcome { status output } ... on UserError { code message } } }
}'
APPROVE='mutation Approve($input: ApproveToolCallInput!) {
  approveToolCall(input: $input) {
    __typename
    ... on RunOutcome { status output }
    ... on UserError { code message }
  }
}'

# 1. start a run that stops at a tool call needing approval
started=$(graphql "$START_RUN" \
  "{\"input\": {\"agentId\": \"$AGENT\", \"prompt\": \"Please refund order 1042\", \"threadId\": \"t-1\"}}")
[ "$(get "$started" startRun __typename)" = RunOutcome ] || { echo "startRun failed: $started"; exit 1; }
run_id=$(get "$started" startRun runId)
tool_call_id=$(get "$started" startRun run toolCalls 0 toolCallId)
question_id=$(get "$started" startRun run toolCalls 0 questionId)
echo "started run $run_id: $(get "$started" startRun status)"
echo "waiting on $(get "$started" startRun run toolCalls 0 toolName) $(get "$started" startRun run toolCalls 0 args)"

# 2. list the agent's suspended runs in that thread
listed=$(graphql "$SUSPENDED_RUNS" "{\"agentId\": \"$AGENT\", \"filter\": {\"threadId\": \"t-1\"}}")
echo "$AGENT has $(get "$listed" suspendedRuns totalCount) suspended run(s) in thread t-1"
if get "$listed" suspendedRuns nodes | grep -q "\"$run_id\""; then echo "listed: True"; else echo "listed: False"; fi

# 3. approve the question shown with an edited amount: the tool runs with it and the run finishes
edited='{"order_id": 1042, "amount": 25}'
approved=$(graphql "$APPROVE" "{\"input\": {\"agentId\": \"$AGENT\", \"runId\": \"$run_id\", \
  \"toolCallId\": \"$tool_call_id\", \"questionId\": \"$question_id\", \"editedArgs\": $edited}}")
[ "$(get "$approved" approveToolCall __typename)" = RunOutcome ] || { echo "approveToolCall failed: $approved"; exit 1; }
echo "approved with $edited: $(get "$approved" approveToolCall status) with output $(get "$approved" approveToolCall output)"

# 4. the finished run is gone from the listing
after=$(graphql "$SUSPENDED_RUNS" "{\"agentId\": \"$AGENT\", \"filter\": {\"threadId\": \"t-1\"}}")
if get "$after" suspendedRuns nodes | grep -q "\"$run_id\""; then echo "still listed: True"; else echo "still listed: False"; fi

# 5. a run with two refunds: approve one and decline the other in one bulk request
started=$(graphql "$START_RUN" \
  "{\"input\": {\"agentId\": \"$AGENT\", \"prompt\": \"Please refund orders 1042 and 1043\", \"threadId\": \"t-2\"}}")
[ "$(get "$started" startRun __typename)" = RunOutcome ] || { echo "startRun failed: $started"; exit 1; }
run_id=$(get "$started" startRun runId)
echo "started run $run_id with $(get "$started" startRun run toolCalls | python3 -c 'import json, sys; print(len(json.load(sys.stdin)))') pending calls"
shown() { # the run, call and question the n-th card shows
  echo "\"runId\": \"$run_id\", \"toolCallId\": \"$(get "$started" startRun run toolCalls "$1" toolCallId)\",
   \"questionId\": \"$(get "$started" startRun run toolCalls "$1" questionId)\""
}
decisions="[{$(shown 0), \"kind\": \"APPROVED\"}, {$(shown 1), \"kind\": \"DECLINED\", \"reason\": \"Refunded by phone\"}]"
decided=$(graphql "$DECIDE" "{\"input\": {\"agentId\": \"$AGENT\", \"decisions\": $decisions}}")
# each decision answers on its own: stop at the first the server refused, naming it
python3 - "$decided" <<'PY'
import json, sys
for number, result in enumerate(json.loads(sys.argv[1])["decideToolCalls"]["results"], start=1):
    if result["__typename"] != "RunOutcome":
        print(f"decideToolCalls refused decision {number}: {result['code']}: {result['message']}")
        sys.exit(1)
PY
echo "decided in bulk: $(get "$decided" decideToolCalls results 0 status), $(get "$decided" decideToolCalls results 1 status) \
with output $(get "$decided" decideToolCalls results 1 output)"
