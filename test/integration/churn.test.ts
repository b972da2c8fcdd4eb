// Connection churn under a small --max-streams: clients that open, use and close connections in
// a loop, never holding more than the limit, must never be refused — a stream stops counting
// when its client is done, not when our tear-down is — and everything returns to idle after.
// (Default transport here; churn-websocket.test.ts runs it on per-stream WebSockets.)
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { once } from 'node:events';
import { randomBytes } from 'node:crypto';
import { startTestCluster, eventually, type TestCluster } from '../helpers/cluster.js';
import { startProxyProcess, testTransport, type ProxyProcess } from '../helpers/proxy-process.js';
import { socks5Connect, splitHostPort, Reader } from '../helpers/socks-client.js';
import { fdCount } from '../helpers/streams.js';

const CLIENTS = 16;
const MAX_STREAMS = 24;
const websocket = testTransport() === 'websocket';
// Bounded counts (a WebSocket upgrade per stream is slower than a SPDY stream).
const SOCKS_CONNECTIONS = websocket ? 800 : 3000;
const CONNECT_CONNECTIONS = websocket ? 400 : 1500;
const FORWARD_REQUESTS = 300;

let cluster: TestCluster;
let proxy: ProxyProcess;
let fdsAtStart = 0;

before(async () => {
  cluster = await startTestCluster();
  proxy = await startProxyProcess([
    '--kubeconfig',
    cluster.kubeconfig,
    '--listen-socks',
    '127.0.0.1:0',
    '--listen-http',
    '127.0.0.1:0',
    '--max-streams',
    String(MAX_STREAMS),
  ]);
  fdsAtStart = fdCount(proxy.proc.pid!);
});

after(async () => {
  // The runtime keeps a stream ~1 s after a FIN (closeGraceMs): the last tests' streams end now, so
  // the stop below has none to drain (teardown, not a test of the drain).
  cluster?.sim.endLingeringStreams();
  assert.equal(await proxy?.stop(), 0);
  await cluster?.close();
});

interface Tally {
  done: number;
  failures: string[];
}

/** CLIENTS loops sharing `total` connections; each loop holds one connection at a time. */
async function churn(total: number, one: () => Promise<void>): Promise<Tally> {
  const tally: Tally = { done: 0, failures: [] };
  let started = 0;
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (started < total) {
        started++;
        try {
          await one();
        } catch (err) {
          tally.failures.push((err as Error).message);
        }
        tally.done++;
      }
    }),
  );
  return tally;
}

async function echoOnce(socket: net.Socket, reader: Reader): Promise<void> {
  const payload = randomBytes(1 + Math.floor(Math.random() * 64));
  socket.write(payload);
  const back = await reader.read(payload.length, 15_000);
  socket.destroy();
  if (!back.equals(payload)) throw new Error('echo mismatch');
}

async function socksEcho(): Promise<void> {
  const { reply, socket, rest } = await socks5Connect(proxy.socks!, 'echo.data', 7000);
  if (reply !== 0) {
    socket.destroy();
    throw new Error(`SOCKS reply ${reply}`);
  }
  if (rest.length > 0) socket.unshift(rest);
  await echoOnce(socket, new Reader(socket));
}

async function connectEcho(): Promise<void> {
  const [host, port] = splitHostPort(proxy.http!);
  const socket = net.connect(port, host);
  await once(socket, 'connect');
  const reader = new Reader(socket);
  socket.write('CONNECT echo.data:7000 HTTP/1.1\r\nHost: echo.data:7000\r\n\r\n');
  let head = '';
  while (!head.includes('\r\n\r\n')) head += (await reader.read(1, 15_000)).toString('latin1');
  if (!head.startsWith('HTTP/1.1 200')) {
    socket.destroy();
    throw new Error(`CONNECT answered ${head.split('\r\n')[0]}`);
  }
  await echoOnce(socket, reader);
}

/** An absolute-form GET on a new client connection; the upstream tunnel goes back to the pool. */
async function forwardGet(): Promise<void> {
  const [host, port] = splitHostPort(proxy.http!);
  const socket = net.connect(port, host);
  await once(socket, 'connect');
  const reader = new Reader(socket);
  socket.write('GET http://web.shop:8080/ HTTP/1.1\r\nHost: web.shop:8080\r\nConnection: close\r\n\r\n');
  const body = (await reader.readAll()).toString('latin1');
  socket.destroy();
  if (!body.startsWith('HTTP/1.1 200') || !body.includes('hello from')) throw new Error(`GET answered ${body.split('\r\n')[0]}`);
}

function assertClean(tally: Tally, total: number, what: string): void {
  assert.equal(tally.done, total);
  const refused = tally.failures.filter((f) => /reply 1\b|503/.test(f)).length;
  assert.equal(refused, 0, `${what}: ${refused} of ${total} refused as over --max-streams ${MAX_STREAMS} with at most ${CLIENTS} held`);
  assert.deepEqual(tally.failures.slice(0, 5), [], `${what}: ${tally.failures.length} failures`);
}

async function backToIdle(what: string): Promise<void> {
  // The kubelet's pairs (SPDY) / per-stream WebSockets, and our file descriptors.
  await eventually(async () => (websocket ? cluster.sim.openPortForwards === 0 : cluster.sim.openSpdyStreamPairs === 0), 5_000, 100).catch(() => {
    throw new Error(
      `${what}: the kubelet still has ${websocket ? `${cluster.sim.openPortForwards} WebSockets` : `${cluster.sim.openSpdyStreamPairs} stream pairs`} open 5 s after the churn`,
    );
  });
  // 10 s: tear-down is bounded (a 2 s quiet grace per stream), but on a loaded 2-core CI host the
  // last client sockets of a 300-request churn once took longer than 5 s to go (34 fds, 25 at start).
  await eventually(async () => fdCount(proxy.proc.pid!) <= fdsAtStart + 8, 10_000, 100).catch(() => {
    throw new Error(`${what}: ${fdCount(proxy.proc.pid!)} fds 10 s after the churn, ${fdsAtStart} at start`);
  });
}

describe(`connection churn with --max-streams ${MAX_STREAMS} (${testTransport()})`, () => {
  test(`SOCKS5: ${SOCKS_CONNECTIONS} echo connections from ${CLIENTS} clients, none refused`, async () => {
    assertClean(await churn(SOCKS_CONNECTIONS, socksEcho), SOCKS_CONNECTIONS, 'SOCKS5');
    await backToIdle('SOCKS5');
  });

  test(`HTTP CONNECT: ${CONNECT_CONNECTIONS} echo connections, none refused`, async () => {
    assertClean(await churn(CONNECT_CONNECTIONS, connectEcho), CONNECT_CONNECTIONS, 'CONNECT');
    await backToIdle('CONNECT');
  });

  test(`HTTP absolute-form: ${FORWARD_REQUESTS} requests over pooled upstream tunnels, none refused`, async () => {
    assertClean(await churn(FORWARD_REQUESTS, forwardGet), FORWARD_REQUESTS, 'absolute-form');
    // Pooled tunnels idle out after 4 s; then the same checks.
    await new Promise((r) => setTimeout(r, 4_000));
    await backToIdle('absolute-form');
  });
});
