// An Apollo gateway over a static supergraph (from compose.mjs), served by Apollo Server.
//   node gateway.mjs SUPERGRAPH_FILE PORT
import { readFileSync } from 'node:fs';
import { ApolloGateway } from '@apollo/gateway';
import { ApolloServer } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';

const [file, port] = process.argv.slice(2);
const gateway = new ApolloGateway({ supergraphSdl: readFileSync(file, 'utf8') });
const server = new ApolloServer({ gateway });
const { url } = await startStandaloneServer(server, { listen: { host: '127.0.0.1', port: Number(port) } });
console.log(JSON.stringify({ ready: url }));
