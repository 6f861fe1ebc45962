// The inbox's GraphQL documents (scripts/inbox/src/documents.js) against a schema:
//   node inbox-documents.mjs SCHEMA_FILE
// the given SDL (runsgate's schema.graphql): the features the page would detect (FEATURES
// executed against it) and the validation errors of every document it would then send.
// Prints JSON: {current: {features, documents, errors, texts}}: texts maps each document's name to its text.
import { readFileSync } from 'node:fs';
import { buildSchema, graphqlSync, parse, validate } from 'graphql';
import * as docs from '../../scripts/inbox/src/documents.js';

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
    ...(f.reviewQueue ? { reviewQueue: docs.reviewQueueQuery(f), CLAIM_REVIEW: docs.CLAIM_REVIEW, RELEASE_REVIEW: docs.RELEASE_REVIEW } : {}),
    ...(f.progress ? { RUN_UPDATES: docs.RUN_UPDATES, RUN_NOW: docs.RUN_NOW } : {}),
    ...(f.queueEvents ? { REVIEW_QUEUE_EVENTS: docs.REVIEW_QUEUE_EVENTS, RUN_OUTCOME_EVENTS: docs.RUN_OUTCOME_EVENTS } : {}),
  };
  const errors = {};
  for (const [name, text] of Object.entries(documents)) {
    const problems = validate(schema, parse(text)).map((e) => e.message);
    if (problems.length) errors[name] = problems;
  }
  return { features: f, documents: Object.keys(documents), errors, texts: documents };
}

process.stdout.write(JSON.stringify({ current: check(sdl) }) + '\n');
