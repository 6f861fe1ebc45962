// A second federation subgraph for the gateway test: orders, each tied to a runsgate run.
//   node orders-subgraph.mjs PORT
// It extends runsgate's SuspendedRun entity (key runId) with `order`, and points each Order at
// its run, so a gateway query joins both ways. Orders live in memory; `recordOrder` adds one.
import { ApolloServer } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';
import { buildSubgraphSchema } from '@apollo/subgraph';
import { parse } from 'graphql';

const typeDefs = parse(`
  extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", import: ["@key"])

  type Order {
    number: Int!
    amount: Float!
    currency: String!
    "The runsgate run this order waits on (null once the run is gone)."
    run: SuspendedRun
  }

  type SuspendedRun @key(fields: "runId") {
    runId: ID!
    "The order this run is about."
    order: Order
  }

  type Query {
    orders: [Order!]!
  }

  type Mutation {
    recordOrder(number: Int!, amount: Float!, runId: ID!): Order!
  }
`);

const orders = [];

const resolvers = {
  Query: { orders: () => orders },
  Mutation: {
    recordOrder: (_, { number, amount, runId }) => {
      const order = { number, amount, currency: 'USD', runId };
      orders.push(order);
      return order;
    },
  },
  Order: { run: (order) => ({ __typename: 'SuspendedRun', runId: order.runId }) },
  SuspendedRun: {
    __resolveReference: (ref) => ({ runId: ref.runId }),
    order: (run) => orders.find((o) => o.runId === run.runId) ?? null,
  },
};

const port = Number(process.argv[2]);
const server = new ApolloServer({ schema: buildSubgraphSchema({ typeDefs, resolvers }) });
const { url } = await startStandaloneServer(server, { listen: { host: '127.0.0.1', port } });
console.log(JSON.stringify({ ready: url }));
