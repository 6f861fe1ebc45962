// Helpers shared by the Node tests: GraphQL over HTTP to a runsgate instance.

export const AGENT = 'refund-agent';

/** POST a GraphQL document to `${baseUrl}/graphql`; throws on transport or GraphQL errors. */
export async function graphql(baseUrl, query, variables = {}) {
  const response = await fetch(`${baseUrl}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify({ query, variables }),
  });
  const body = await response.json();
  if (!response.ok || body.errors) {
    throw new Error(`GraphQL request failed (${response.status}): ${JSON.stringify(body)}`);
  }
  return body.data;
}

const START_RUN = `
  mutation Start($input: StartRunInput!) {
    startRun(input: $input) {
      __typename
      ... on RunOutcome { runId status run { toolCalls { toolCallId toolName } } }
      ... on UserError { code message }
    }
  }`;

const APPROVE = `
  mutation Approve($input: ApproveToolCallInput!) {
    approveToolCall(input: $input) {
      __typename
      ... on RunOutcome { runId status output }
      ... on UserError { code message }
    }
  }`;

/** Start a refund run that suspends on `issue_refund`; returns the RunOutcome. */
export async function startRefundRun(baseUrl, { resourceId, threadId }) {
  const data = await graphql(baseUrl, START_RUN, {
    input: { agentId: AGENT, prompt: 'Please refund order 1042', resourceId, threadId },
  });
  const outcome = data.startRun;
  if (outcome.__typename !== 'RunOutcome' || outcome.status !== 'SUSPENDED') {
    throw new Error(`the run did not suspend: ${JSON.stringify(outcome)}`);
  }
  return outcome;
}

/** Approve one tool call; returns the RunOutcome. */
export async function approve(baseUrl, runId, toolCallId) {
  const data = await graphql(baseUrl, APPROVE, { input: { agentId: AGENT, runId, toolCallId } });
  return data.approveToolCall;
}

/** The WebSocket URL of an instance's GraphQL endpoint. */
export function wsUrl(baseUrl) {
  return `${baseUrl.replace(/^http/, 'ws')}/graphql`;
}
