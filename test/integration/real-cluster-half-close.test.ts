// Clients that half-close (nc -N: the request, then FIN) against the real API server and streaming
// server, under both transports; each must get all the pod sends, as through `kubectl
// port-forward`. A slow container runtime: the node stand-in waits (proxyout.test/dial-delay)
// before it dials the pod's port, as a runtime whose dial retries the SYN of a pod with a full
// accept backlog — the tear-down after the client's FIN must not run out before the pod is
// reached. A slow reader on the per-stream WebSocket: the client stops reading before its FIN and
// reads the echo later — the pod's silence while we hold it back is not its end. Skips with a
// reason when the real-cluster binaries are not built.
import { after, before, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { skipUnlessRealCluster, type RealCluster } from '../helpers/real-cluster.js';
import { bulkContainer, manifests, pod } from '../helpers/real-cluster-objects.js';
import { endpointSlicesCaughtUp, startClusterLogged, startProxies, stopProxiesAndCluster } from '../helpers/real-cluster-setup.js';
import type { ProxyProcess } from '../helpers/proxy-process.js';
import { socks5Connect } from '../helpers/socks-client.js';

const skip = skipUnlessRealCluster();

const TRANSPORTS = ['spdy', 'websocket'] as const;
type Transport = (typeof TRANSPORTS)[number];
/** Longer than the relay's 2 s tear-down grace and the v4 stream's 1 s linger. */
const DIAL_DELAY_MS = 3_000;

const SLOW_ECHO = pod({
  name: 'slow-echo',
  annotations: { 'proxyout.test/dial-delay': `${DIAL_DELAY_MS}ms` },
  containers: [{ name: 'echo', image: 'proxyout/echo', ports: [{ containerPort: 7000 }] }],
});

const ECHO = pod({ name: 'echo', containers: [{ name: 'echo', image: 'proxyout/echo', ports: [{ containerPort: 7000 }] }] });

const BULK_BYTES = 64 << 20;
const BULK = pod({ name: 'bulk', containers: [bulkContainer('bulk', BULK_BYTES, 9000)] });

let cluster: RealCluster | undefined;
let proxies = new Map<Transport, ProxyProcess>();
let podIP = '';
let echoIP = '';
let bulkIP = '';

before(async () => {
  if (skip) return;
  cluster = await startClusterLogged();
  await cluster.kubectl(['apply', '-f', '-'], { input: manifests(SLOW_ECHO, ECHO, BULK) });
  await cluster.kubectl(['-n', 'shop', 'wait', '--for=condition=Ready', 'pod/slow-echo', 'pod/echo', 'pod/bulk', '--timeout=60s']);
  await endpointSlicesCaughtUp(cluster);
  const ipOf = async (name: string) => (await cluster!.get<{ status: { podIP: string } }>(`/api/v1/namespaces/shop/pods/${name}`)).status.podIP;
  [podIP, echoIP, bulkIP] = await Promise.all([ipOf('slow-echo'), ipOf('echo'), ipOf('bulk')]);
  proxies = await startProxies(cluster, TRANSPORTS);
});

after(async () => {
  const codes = await stopProxiesAndCluster(cluster, proxies);
  for (const code of codes) assert.equal(code, 0, 'the proxy exits 0 on SIGTERM');
});

/**
 * Sends `request` and FIN at once, reading nothing for `readAfterMs`; everything the pod sends
 * until the stream ends.
 */
async function halfCloseExchange(socks: string, ip: string, request: Buffer, readAfterMs = 0): Promise<{ answer: Buffer; ms: number }> {
  const t0 = Date.now();
  const { reply, socket, rest } = await socks5Connect(socks, ip, 7000);
  assert.equal(reply, 0, 'SOCKS reply');
  const chunks: Buffer[] = [rest];
  socket.on('data', (c: Buffer) => chunks.push(c));
  const ended = new Promise<void>((resolve, reject) => {
    socket.once('end', resolve);
    socket.once('error', reject);
  });
  socket.pause(); // socks5Connect hands it over paused; the 'data' listener does not undo that
  socket.end(request);
  await delay(readAfterMs);
  socket.resume();
  await ended;
  socket.destroy();
  return { answer: Buffer.concat(chunks), ms: Date.now() - t0 };
}

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

for (const transport of TRANSPORTS) {
  test(`${transport}: a half-closing client gets the answer of a pod the runtime dials slowly`, { timeout: 30_000 }, async (t: TestContext) => {
    if (skip) return t.skip(skip);
    const { answer, ms } = await halfCloseExchange(proxies.get(transport)!.socks!, podIP, Buffer.from('hello\n'));
    t.diagnostic(`answer after ${ms} ms`);
    assert.equal(answer.toString(), 'hello\n', 'the request echoed after the dial delay, not a clean empty end');
    assert.ok(ms >= DIAL_DELAY_MS, `the answer came after the dial (${ms} ms)`);
  });
}

// v4 cannot pass the FIN on, so the runtime keeps the pod's connection: only our own linger could
// cut it. (Under SPDY the FIN reaches the runtime, which gives the pod's answer one more second,
// as containerd does: a client that does not read for longer loses the rest, as with kubectl.)
test(`websocket: a client that reads its echo only seconds after its FIN gets all of it`, { timeout: 30_000 }, async (t: TestContext) => {
  if (skip) return t.skip(skip);
  const sent = randomBytes(32 << 20);
  const { answer } = await halfCloseExchange(proxies.get('websocket')!.socks!, echoIP, sent, 2_500);
  assert.equal(answer.length, sent.length, 'every byte echoed, none cut off while the client was not reading');
  assert.equal(sha(answer), sha(sent));
});

// The bulk pod sends and closes without reading: what the client sent makes its kernel reset the
// runtime's connection, and the runtime loses the download's tail. Its data FIN comes
// before the kubelet's text ("reset by peer"); a client given a FIN would take the short download
// for a whole one (it is reset, as over TCP, or through the per-stream WebSocket the API server
// resets). The client sends once and then only reads: one still writing may read an EOF before its
// write meets the reset (Linux hands the reset to whichever call asks first).
for (const transport of TRANSPORTS) {
  test(`${transport}: a download cut short by the pod's reset is reset for the client, never ended short`, { timeout: 60_000 }, async (t: TestContext) => {
    if (skip) return t.skip(skip);
    for (let round = 0; round < 3; round++) {
      const { reply, socket, rest } = await socks5Connect(proxies.get(transport)!.socks!, bulkIP, 9000);
      assert.equal(reply, 0, 'SOCKS reply');
      let got = rest.length;
      let ended = false;
      let error: string | undefined;
      socket.on('data', (c: Buffer) => (got += c.length));
      socket.on('end', () => (ended = true));
      socket.on('error', (err: NodeJS.ErrnoException) => (error = err.code));
      const closed = new Promise((resolve) => socket.once('close', resolve));
      socket.resume();
      socket.write(randomBytes(64 * 1024));
      await closed;
      t.diagnostic(`round ${round}: ${got} of ${BULK_BYTES} bytes, ${ended ? 'FIN' : `reset (${error ?? 'none'})`}`);
      if (got < BULK_BYTES) assert.equal(ended, false, `a FIN after ${got} of ${BULK_BYTES} bytes`);
    }
  });
}
