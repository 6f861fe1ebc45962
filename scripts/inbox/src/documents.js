// Every GraphQL document the inbox sends, in one place. The inbox is a client of runsgate's
// public API (schema.graphql) and nothing else.
//
// The reviewer-workflow fields (editedArgs, expiresAt, approvals, argsSchema, expiresBefore, decideToolCalls)
// and the run's conversation are asked for only when the server's schema offers them: FEATURES is
// sent once at load, and the documents below are built from its answer (`features`), so the page
// works on a server without them and shows them as soon as the server has them. So are a
// decision's `waitFor` and the `runUpdates` subscription, which the page's progress needs, and the
// `questionId` every decision names (the question its card showed). With the reviewers' queue
// (`reviewQueue`, `claimReview`, `releaseReview`), the page lists the queue instead of one
// listing per agent, and follows it through `reviewQueueEvents` where the server has it.

/** One introspection query: which optional fields and types the server's schema has. */
export const FEATURES = `query InboxFeatures {
  approveInput: __type(name: "ApproveToolCallInput") { inputFields { name } }
  declineInput: __type(name: "DeclineToolCallInput") { inputFields { name } }
  decisionInput: __type(name: "ToolCallDecisionInput") { inputFields { name } }
  toolCall: __type(name: "SuspendedToolCall") { fields { name } }
  run: __type(name: "SuspendedRun") { fields { name } }
  runFilter: __type(name: "SuspendedRunFilter") { inputFields { name } }
  mutation: __type(name: "Mutation") { fields { name } }
  invalidToolArguments: __type(name: "InvalidToolArguments") { name }
  subscription: __type(name: "Subscription") { fields { name } }
  query: __type(name: "Query") { fields { name } }
}`;

/** What the page may use, from FEATURES' data (null data: introspection off, nothing optional). */
export function features(data) {
  const names = (type, key) => new Set(((data && data[type] && data[type][key]) || []).map((f) => f.name));
  const approve = names('approveInput', 'inputFields');
  const decline = names('declineInput', 'inputFields');
  const item = names('decisionInput', 'inputFields');
  const call = names('toolCall', 'fields');
  const run = names('run', 'fields');
  const filter = names('runFilter', 'inputFields');
  const mutation = names('mutation', 'fields');
  const subscription = names('subscription', 'fields');
  const query = names('query', 'fields');
  return {
    editedArgs: approve.has('editedArgs'),
    invalidToolArguments: Boolean(data && data.invalidToolArguments),
    expiresAt: call.has('expiresAt'),
    approvals: call.has('approvalsRequired') && call.has('approvals'),
    argsSchema: call.has('argsSchema'),
    expiresBefore: filter.has('expiresBefore'),
    bulk: mutation.has('decideToolCalls'),
    conversation: run.has('conversation'),
    // a decision answered once recorded (`waitFor: RECORDED`), then followed live (`runUpdates`)
    progress: approve.has('waitFor') && subscription.has('runUpdates'),
    // Approve and Decline name the question the card shows (resumeRun always has), and so does
    // each item of a bulk decision
    questionIds: approve.has('questionId') && decline.has('questionId'),
    bulkQuestionIds: item.has('questionId'),
    // one listing across agents, in the queue's order, with review claims
    reviewQueue: query.has('reviewQueue') && mutation.has('claimReview') && mutation.has('releaseReview'),
    // the queue kept current by its own subscription, instead of each agent's events
    queueEvents: subscription.has('reviewQueueEvents'),
  };
}

/** UTF-8 bytes of conversation text shown per run (SuspendedRun.conversation's `maxBytes`). */
export const CONVERSATION_BYTES = 16 * 1024;

export const AGENTS = `query InboxAgents { agents { id name description } }`;

const conversationFields = `conversation(maxBytes: ${CONVERSATION_BYTES}) {
        totalMessages totalBytes truncated cut { position messages bytes }
        messages { index kind text textBytes truncated toolName toolCallId }
      }`;

/** What the page shows of a run, as `suspendedRuns` and `reviewQueue` list it. */
function runFields(f) {
  const extra = [
    f.expiresAt ? 'expiresAt' : '',
    f.approvals ? 'approvalsRequired approvals { decidedBy decidedAt }' : '',
    f.argsSchema ? 'argsSchema' : '',
  ].join(' ');
  return `runId agentId threadId resourceId parentRunId createdAt suspendedAt
      lastError { type message at }
      ${f.conversation ? conversationFields : ''}
      toolCalls {
        toolCallId toolName args requiresApproval suspendPayload resumeSchema questionId approvalMetadata
        decision { kind decidedAt decidedBy reason }
        ${extra}
      }`;
}

/** The listing of one agent's suspended runs, newest first, one page (Relay cursors). */
export function suspendedRunsQuery(f) {
  return `query InboxRuns($agentId: ID!, $filter: SuspendedRunFilter, $first: Int, $after: String, $last: Int, $before: String) {
  suspendedRuns(agentId: $agentId, filter: $filter, first: $first, after: $after, last: $last, before: $before) {
    totalCount
    pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
    nodes {
      ${runFields(f)}
    }
  }
}`;
}

/** One run as the listings show it (an inbox link's run, when its listing's page lacks it); null
 * when it does not wait. */
export function suspendedRunQuery(f) {
  return `query InboxLinkedRun($agentId: ID!, $runId: ID!) {
  suspendedRun(agentId: $agentId, runId: $runId) {
    ${runFields(f)}
  }
}`;
}

const reviewClaimFields = 'by since until byMe';

/** One page of the reviewers' queue across agents, earliest deadline first, then the oldest
 * (issue 45's `reviewQueue`); sent only when `features().reviewQueue`. Each item's run is the
 * whole run: the page finds the item's call in it by its toolCallId and questionId. */
export function reviewQueueQuery(f) {
  return `query InboxQueue($filter: ReviewQueueFilter, $first: Int, $after: String) {
  reviewQueue(filter: $filter, first: $first, after: $after) {
    totalCount
    pageInfo { hasNextPage endCursor }
    nodes {
      agentId runId toolCallId questionId toolName waitedSeconds expiresAt escalated
      reviewClaim { ${reviewClaimFields} }
      run {
        ${runFields(f)}
      }
    }
  }
}`;
}

const claimResult = `fragment InboxClaimResult on ReviewClaimResult {
  __typename
  ... on ReviewClaimed { runId toolCallId questionId reviewClaim { ${reviewClaimFields} } }
  ... on UserError { code message }
  ... on ReviewAlreadyClaimed { held: reviewClaim { ${reviewClaimFields} } }
}`;

/** Mark the question (its run, call and questionId) as being reviewed by the caller. */
export const CLAIM_REVIEW = `mutation InboxClaimReview($input: ReviewClaimInput!) {
  claimReview(input: $input) { ...InboxClaimResult }
}
${claimResult}`;

/** End the caller's review claim on the question. */
export const RELEASE_REVIEW = `mutation InboxReleaseReview($input: ReviewClaimInput!) {
  releaseReview(input: $input) { ...InboxClaimResult }
}
${claimResult}`;

function decisionResult(f) {
  const toolArgs = f.invalidToolArguments ? '... on InvalidToolArguments { toolArgumentProblems: problems { path message } }' : '';
  return `fragment InboxDecisionResult on DecisionResult {
  __typename
  ... on RunOutcome { runId status error }
  ... on UserError { code message }
  ... on ToolCallAlreadyDecided { decision { kind decidedAt decidedBy reason } }
  ... on QuestionNotPending { questionId }
  ... on InvalidResumeData { problems { path message } }
  ... on Forbidden { requiredScope }
  ... on WrongToolCallKind { expected }
  ${toolArgs}
}`;
}

export function approveMutation(f) {
  return `mutation InboxApprove($input: ApproveToolCallInput!) {
  approveToolCall(input: $input) { ...InboxDecisionResult }
}
${decisionResult(f)}`;
}

export function declineMutation(f) {
  return `mutation InboxDecline($input: DeclineToolCallInput!) {
  declineToolCall(input: $input) { ...InboxDecisionResult }
}
${decisionResult(f)}`;
}

export function resumeMutation(f) {
  return `mutation InboxResume($input: ResumeRunInput!) {
  resumeRun(input: $input) { ...InboxDecisionResult }
}
${decisionResult(f)}`;
}

/** Bulk decisions (issue 18's `decideToolCalls`); sent only when `features().bulk`. */
export function decideManyMutation(f) {
  return `mutation InboxDecideMany($input: DecideToolCallsInput!) {
  decideToolCalls(input: $input) { results { ...InboxDecisionResult } }
}
${decisionResult(f)}`;
}

/** Live events of one agent's runs (graphql-transport-ws on /graphql). */
export const RUN_EVENTS = `subscription InboxEvents($agentId: ID!) {
  suspendedRunEvents(agentId: $agentId) { id type at by runId threadId resourceId data }
}`;

/** The reviewers' queue kept current (graphql-transport-ws on /graphql), with the listing's
 * filter: what each run event did to one question of the caller's queue; sent only when
 * `features().queueEvents`. `afterEventId` (a message's `id`) resumes after that message. */
export const REVIEW_QUEUE_EVENTS = `subscription InboxQueueEvents($filter: ReviewQueueFilter, $afterEventId: ID) {
  reviewQueueEvents(filter: $filter, afterEventId: $afterEventId) {
    id eventId cause change at by agentId runId toolCallId questionId toolName
    item { toolCall { args } }
  }
}`;

/** The events that end one run's continuation (suspended, completed, failed), after
 * `afterEventId`: how the queue's page, which follows no agent's events, learns the outcome of a
 * run whose progress stream stopped early. */
export const RUN_OUTCOME_EVENTS = `subscription InboxRunOutcome($agentId: ID!, $runId: ID!, $afterEventId: ID) {
  suspendedRunEvents(agentId: $agentId, filter: {runId: $runId, kinds: [SUSPENDED, COMPLETED, FAILED]}, afterEventId: $afterEventId) {
    id type at by runId
  }
}`;

const progressRun = 'runId status lastError { type message } toolCalls { toolCallId toolName requiresApproval decision { kind } }';

/** The progress of one run after a decision (graphql-transport-ws on /graphql); sent only when
 * `features().progress`. */
export const RUN_UPDATES = `subscription InboxRunUpdates($agentId: ID!, $runId: ID!) {
  runUpdates(agentId: $agentId, runId: $runId) {
    id kind at text toolCallId toolName args result error reason decidedBy output truncated
    run { ${progressRun} }
  }
}`;

/** The run as stored, and its events, oldest first: what the page shows when its progress stream
 * ended before the outcome (the server shutting down, the store unavailable, the socket closed),
 * and the data of a decision the queue's stream reports. */
export const RUN_NOW = `query InboxRunNow($agentId: ID!, $runId: ID!) {
  suspendedRun(agentId: $agentId, runId: $runId) { ${progressRun} }
  runEvents(agentId: $agentId, runId: $runId) { id type at by data }
}`;
