// Plain-HTTP forwarding over a real Router whose table changes: the HTTP listener pools upstream
// tunnels per host:port, and a pooled tunnel must not keep a name on the route a reload took it
// from (a name moved to another cluster, or to a reject route).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { NotAllowedError } from '../../src/core/errors.js';
import { startHttpListener } from '../../src/listeners/http-server.js';
import { RouteMatcher } from '../../src/routing/table.js';
import { Router, type TableGeneration } from '../../src/routing/router.js';
import type { Route } from '../../src/routes/route.js';
import { tableFromYaml } from '../helpers/routing-decisions.js';
import { LOOPBACK, quietContext, tcpStream } from './socks-fixtures.test.js';

/** An origin that answers with its own name. */
async function origin(name: string): Promise<http.Server> {
  const server = http.createServer({ keepAliveTimeout: 60_000 }, (_req, res) => res.end(name));
  server.listen(0, LOOPBACK);
  await once(server, 'listening');
  return server;
}

/** A route whose every stream goes to `server`; a route without one refuses, as a reject route. */
function standIn(name: string, server?: http.Server): Route {
  return {
    name,
    kind: server ? 'direct' : 'reject',
    start: async () => {},
    status: () => ({ name, kind: server ? 'direct' : 'reject', state: 'ready' }),
    close: async () => {},
    async open() {
      if (!server) throw new NotAllowedError(`refused by reject route ${name}`);
      return tcpStream((server.address() as AddressInfo).port, name);
    },
  };
}

const prodOrigin = await origin('prod');
const stagingOrigin = await origin('staging');
const routes = new Map<string, Route>([
  ['prod', standIn('prod', prodOrigin)],
  ['staging', standIn('staging', stagingOrigin)],
  ['blocked', standIn('blocked')],
]);

function generation(prod: string[], staging: string[], blocked: string[]): TableGeneration {
  const list = (xs: string[]) => `[${xs.join(', ')}]`;
  const yaml = `
routes:
  - {name: prod, kind: direct, include: ${list(prod)}}
  - {name: staging, kind: direct, include: ${list(staging)}}
  - {name: blocked, kind: reject, include: ${list(blocked)}}
`;
  return { matcher: new RouteMatcher(tableFromYaml(yaml)), routes };
}

const router = new Router(generation(['shop.example.com'], ['other.example.com'], ['ads.example.com']), { connectTimeoutMs: 2000 });
const listener = await startHttpListener(LOOPBACK, 0, quietContext(router));

after(async () => {
  await listener.close(100);
  prodOrigin.close();
  stagingOrigin.close();
  prodOrigin.closeAllConnections();
  stagingOrigin.closeAllConnections();
});

/** One request through the HTTP listener, on a new client connection each time (as curl in a loop). */
function get(url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: LOOPBACK, port: listener.address.port, path: url, agent: false }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode!, body }));
    });
    req.on('error', reject);
  });
}

test('a name a reload moves to another route: the next request goes there, not down the pooled tunnel', async () => {
  assert.equal((await get('http://web.shop.example.com/')).body, 'prod');
  assert.equal((await get('http://web.shop.example.com/')).body, 'prod', 'a second request, on the pooled tunnel');
  router.swap(generation([], ['other.example.com', 'shop.example.com'], ['ads.example.com']));
  assert.equal((await get('http://web.shop.example.com/')).body, 'staging');
});

test('a name a reload gives to a reject route is refused at once, though a tunnel to it was pooled', async () => {
  assert.equal((await get('http://app.other.example.com/')).body, 'staging');
  router.swap(generation([], ['shop.example.com'], ['ads.example.com', 'other.example.com']));
  const refused = await get('http://app.other.example.com/');
  assert.equal(refused.status, 403);
  assert.match(refused.body, /blocked/);
});

test('a reload that leaves the name where it was keeps reusing the pooled tunnel', async () => {
  assert.equal((await get('http://kept.shop.example.com/')).body, 'staging');
  const before = router.current;
  router.swap({ matcher: new RouteMatcher(before.matcher.table), routes });
  const opened: string[] = [];
  const inner = router.open.bind(router);
  router.open = (request) => (opened.push(request.destination.host), inner(request));
  try {
    assert.equal((await get('http://kept.shop.example.com/')).body, 'staging');
  } finally {
    router.open = inner;
  }
  assert.deepEqual(opened, [], 'no new stream was opened');
});
