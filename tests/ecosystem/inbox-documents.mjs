// The inbox's GraphQL documents (scripts/inbox/src/documents.js) against two schemas:
//   node inbox-documents.mjs SCHEMA_FILE
// the given SDL (runsgate's schema.graphql) as it is, and the same with issue 18's additions
// (ISSUE_18 below, with the names that issue fixes), since the page asks for those only when
// the server's introspection shows them. For each schema: the features the page would detect
// (FEATURES executed against it) and the validation errors of every document it would then
// send. Prints JSON: {current: {features, errors}, issue18: {features, errors}}.
import { readFileSync } from 'node:fs';
import { buildSchema, graphqlSync, parse, validate } from 'graphql';
import * as docs from '../../scripts/inbox/src/documents.js';

const ISSUE_18 = `
extend input ApproveToolCallInput { editedArgs: JSON }
type Approval { decidedBy: String decidedAt: DateTime! }
extend type SuspendedToolCall { expiresAt: DateTime approvalsRequired: Int! approvals: [Approval!]! }
extend type SuspendedRun { expiresAt: DateTime }
extend input SuspendedRunFilter { expiresBefore: DateTime }
type ToolArgumentProblem { path: [String!]! message: String! }
type InvalidToolArguments implements UserError { code: ErrorCode! message: String! problems: [ToolArgumentProblem!]! }
extend union DecisionResult = InvalidToolArguments
input ToolCallDecisionInput { runId: ID! toolCallId: ID! kind: DecisionKind! reason: String editedArgs: JSON resumeData: JSON }
input DecideToolCallsInput { agentId: ID! decisions: [ToolCallDecisionInput!]! idempotencyKey: String }
type DecideToolCallsResult { results: [DecisionResult!]! }
extend type Mutation { decideToolCalls(input: DecideToolCallsInput!): DecideToolCallsResult! }
`;

const sdl = readFileSync(process.argv[2], 'utf8');

function check(source) {
  const schema = buildSchema(source, { assumeValidSDL: true });
  const found = graphqlSync({ schema, source: docs.FEATURES });
  if (found.errors) throw new Error(JSON.stringify(found.errors));
  const f = docs.features(found.data);
  const documents = {
    FEATURES: docs.FEATURES,
    AGENTS: docs.AGENTS,
    suspendedRuns: docs.suspendedRunsQuery(f),
    approve: docs.approveMutation(f),
    decline: docs.declineMutation(f),
    resume: docs.resumeMutation(f),
    RUN_EVENTS: docs.RUN_EVENTS,
    ...(f.bulk ? { decideMany: docs.decideManyMutation(f) } : {}),
  };
  const errors = {};
  for (const [name, text] of Object.entries(documents)) {
    const problems = validate(schema, parse(text)).map((e) => e.message);
    if (problems.length) errors[name] = problems;
  }
  return { features: f, documents: Object.keys(documents), errors };
}

process.stdout.write(JSON.stringify({ current: check(sdl), issue18: check(sdl + ISSUE_18) }) + '\n');
