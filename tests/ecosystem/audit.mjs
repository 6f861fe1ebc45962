// GraphQL over HTTP conformance: graphql-http's server audit against a running server.
//   node audit.mjs http://127.0.0.1:PORT/graphql
// Prints one JSON array on stdout: [{id, name, status: "ok"|"notice"|"warn"|"error", reason?, responseStatus?, responseContentType?}]
import { auditServer } from 'graphql-http';

const url = process.argv[2];
if (!url) {
  console.error('usage: node audit.mjs URL');
  process.exit(2);
}
const results = await auditServer({ url });
const out = [];
for (const result of results) {
  const row = { id: result.id, name: result.name, status: result.status };
  if (result.status !== 'ok') {
    row.reason = result.reason;
    row.responseStatus = result.response.status;
    row.responseContentType = result.response.headers.get('content-type');
  }
  out.push(row);
}
process.stdout.write(JSON.stringify(out, null, 1) + '\n');
