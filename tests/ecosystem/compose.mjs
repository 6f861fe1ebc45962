// Compose a supergraph from running subgraphs with Apollo's composition library.
//   node compose.mjs OUT_SUPERGRAPH_FILE NAME=URL [NAME=URL ...]
// Each subgraph's SDL is read from its `_service { sdl }`. Prints JSON on stdout:
// {errors: [message...], hints: [message...], subgraphs: {NAME: sdl}}; writes the supergraph
// SDL to OUT_SUPERGRAPH_FILE when composition succeeds.
import { writeFileSync } from 'node:fs';
import { composeServices } from '@apollo/composition';
import { parse } from 'graphql';

const [out, ...specs] = process.argv.slice(2);
const services = [];
const sdls = {};
for (const spec of specs) {
  const [name, url] = spec.split(/=(.*)/s);
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify({ query: '{ _service { sdl } }' }),
  });
  const body = await response.json();
  if (!body.data?._service?.sdl) throw new Error(`${name}: no _service.sdl: ${JSON.stringify(body)}`);
  sdls[name] = body.data._service.sdl;
  services.push({ name, url, typeDefs: parse(sdls[name]) });
}
const result = composeServices(services);
const errors = (result.errors ?? []).map((e) => e.message);
const hints = (result.hints ?? []).map((h) => h.toString());
if (errors.length === 0) writeFileSync(out, result.supergraphSdl);
process.stdout.write(JSON.stringify({ errors, hints, subgraphs: sdls }) + '\n');
