// An HTTP proxy (kubeconfig proxy-url) that takes the connection and never answers the CONNECT:
// every API request still ends at its own deadline or abort (a request with no socket yet said
// nothing: watches and /readyz probes waited for ever), and the connection to the proxy is
// closed once the CONNECT has had its time (each attempt held one for ever).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { once } from 'node:events';
import { KubeConfig } from '@kubernetes/client-node';
import { ApiConnection } from '../../src/cluster/api.js';
import { apiGet } from '../../src/cluster/list-watch.js';

let proxy: http.Server;
let proxyUrl = '';
const held = new Set<net.Socket>();
let connects = 0;

before(async () => {
  proxy = http.createServer((_req, res) => res.writeHead(405).end());
  proxy.on('connect', (_req: http.IncomingMessage, socket: net.Socket) => {
    connects++;
    held.add(socket);
    // Read on so that the client's close is seen; answer nothing.
    socket.on('data', () => {});
    socket.on('end', () => socket.destroy());
    socket.on('error', () => {});
    socket.on('close', () => held.delete(socket));
  });
  proxy.listen(0, '127.0.0.1');
  await once(proxy, 'listening');
  proxyUrl = `http://127.0.0.1:${(proxy.address() as net.AddressInfo).port}`;
});
after(() => {
  for (const s of held) s.destroy();
  proxy.close();
});

function api(): ApiConnection {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: 'https://api.corp.example:6443', proxyUrl }],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'ctx', cluster: 'c', user: 'u' }],
    currentContext: 'ctx',
  });
  return new ApiConnection(kc, { env: {} });
}

/** The promise's outcome, or "pending" once `ms` have passed. */
function within<T>(p: Promise<T>, ms: number): Promise<{ value?: T; error?: Error } | 'pending'> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'pending'>((r) => (timer = setTimeout(() => r('pending'), ms)));
  return Promise.race([
    p.then(
      (value) => ({ value }),
      (error: Error) => ({ error }),
    ),
    late,
  ]).finally(() => clearTimeout(timer));
}

test('a GET whose CONNECT is never answered ends at its headers deadline', async () => {
  const outcome = await within(apiGet(api(), '/readyz', new AbortController().signal, 500), 10_000);
  assert.notEqual(outcome, 'pending', 'still waiting 10 s after a 500 ms headers deadline');
  assert.match(String((outcome as { error?: Error }).error?.message), /headers timeout: no response from the API server within 500 ms/);
});

test('a GET whose CONNECT is never answered ends when its signal aborts', async () => {
  const outcome = await within(apiGet(api(), '/readyz', AbortSignal.timeout(300), 60_000), 10_000);
  assert.notEqual(outcome, 'pending', 'still waiting 10 s after its signal aborted');
  assert.equal((outcome as { error?: Error }).error?.name, 'AbortError');
});

test('a GET whose signal aborted before it was sent (credentials slow to come) rejects, with no uncaught error', async () => {
  const outcome = await within(apiGet(api(), '/readyz', AbortSignal.abort(), 60_000), 10_000);
  assert.notEqual(outcome, 'pending');
  assert.equal((outcome as { error?: Error }).error?.name, 'AbortError');
  // An 'error' the request emitted with nobody listening would fail this file as an uncaught exception.
  await new Promise((r) => setTimeout(r, 100));
});

test("getJson's timeout (doctor's --request-timeout) counts while the CONNECT is unanswered", async () => {
  const outcome = await within(api().getJson('/version', 500), 10_000);
  assert.notEqual(outcome, 'pending', 'still waiting 10 s after a 500 ms request timeout');
  assert.match(String((outcome as { error?: Error }).error?.message), /^API request timed out after 500 ms \(through proxy http:/);
});

test('the connection to a proxy that never answers the CONNECT is closed, and the error names the proxy', async (t) => {
  process.env.PROXYOUT_TEST_PROXY_CONNECT_MS = '1000';
  t.after(() => delete process.env.PROXYOUT_TEST_PROXY_CONNECT_MS);
  const before = connects;
  const earlier = new Set(held);
  const mine = () => [...held].filter((s) => !earlier.has(s)).length;
  // getJson bounds itself by the socket's idle time, which it never gets: only the CONNECT's own bound ends it.
  const outcome = await within(api().getJson('/version', 60_000), 10_000);
  assert.notEqual(outcome, 'pending', 'still waiting 10 s after a 1 s CONNECT bound');
  assert.match(
    String((outcome as { error?: Error }).error?.message),
    new RegExp(`the proxy ${proxyUrl} \\(from the kubeconfig's proxy-url\\) did not answer the CONNECT to the API server within 1 s`),
  );
  assert.equal(connects, before + 1);
  const deadline = Date.now() + 10_000;
  while (mine() > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  assert.equal(mine(), 0, 'the connection to the silent proxy is still open');
});
