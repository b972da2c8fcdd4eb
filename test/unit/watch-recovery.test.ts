// The one recovery path of every watch (watch-recovery.ts, api-reachability.ts, and the informer
// and slim watch that use them): what follows a 410, a refusal, a failure with no answer, a
// Retry-After, and a server that ends watches at once.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { once } from 'node:events';
import { KubeConfig } from '@kubernetes/client-node';
import { ApiConnection, ApiStatusError } from '../../src/cluster/api.js';
import { ApiReachability } from '../../src/cluster/api-reachability.js';
import { ResilientInformer } from '../../src/cluster/informer.js';
import { SlimWatch } from '../../src/cluster/slim-watch.js';
import { slimService } from '../../src/cluster/slim.js';
import { WatchRecovery } from '../../src/cluster/watch-recovery.js';
import { WatchBackoff } from '../../src/cluster/backoff.js';
import { MAX_RETRY_AFTER_RETRIES } from '../../src/cluster/retry-after.js';
import { createLogger } from '../../src/core/log.js';
import { sendStatus, startFakeApi } from '../helpers/fake-api.js';

const gone = new ApiStatusError(410, 'too old resource version: 5 (9)');
const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6443'), { code: 'ECONNREFUSED' });

test('the first 410 after a healthy watch relists at once; 410s in a row are paced; a healthy watch clears the run', () => {
  const r = new WatchRecovery();
  assert.deepEqual(r.afterError(gone, { starting: false, resuming: true }), { kind: 'relist', delayMs: 0 });
  const second = r.afterError(gone, { starting: false, resuming: true });
  assert.equal(second.kind, 'relist');
  assert.ok(second.kind === 'relist' && second.delayMs >= 400, `second 410 in a row waits: ${JSON.stringify(second)}`);
  r.watchRan(5_000);
  assert.deepEqual(r.afterError(gone, { starting: false, resuming: true }), { kind: 'relist', delayMs: 0 });
});

test('a 410 after an outage relists at once, though the watch before it was short (API servers restarted one after another)', () => {
  const r = new WatchRecovery();
  const resume = { starting: false, resuming: true };
  assert.deepEqual(r.afterError(gone, resume), { kind: 'relist', delayMs: 0 }, 'the first restart');
  r.watchRan(400); // the relisted watch, cut short by the next replica's restart
  assert.equal(r.afterError(refused, resume).kind, 'retry');
  const initialising = new ApiStatusError(429, 'storage is (re)initializing', 1);
  assert.deepEqual(r.afterError(initialising, resume), { kind: 'retry', delayMs: 1000, untilReachable: false });
  assert.deepEqual(r.afterError(gone, resume), { kind: 'relist', delayMs: 0 }, 'its position is gone, the server serves: list now');
});

test('a 410 to a request that resumed nothing (a first list) is a failure retried with backoff, not a relist', () => {
  const next = new WatchRecovery().afterError(gone, { starting: true, resuming: false });
  assert.equal(next.kind, 'retry');
});

test("refusals stop a watch on its first list only; the codes are the owner's", () => {
  const r = new WatchRecovery();
  assert.deepEqual(r.afterError(new ApiStatusError(403, 'forbidden'), { starting: true, resuming: false }), { kind: 'stop' });
  assert.equal(r.afterError(new ApiStatusError(404, 'not found'), { starting: true, resuming: false }).kind, 'retry');
  assert.deepEqual(r.afterError(new ApiStatusError(404, 'not found'), { starting: true, resuming: false, stopOn: [403, 404] }), { kind: 'stop' });
  // Once synced a refusal stops nothing: the watch from a resourceVersion refused is a list again, after the backoff.
  const watchRefused = r.afterError(new ApiStatusError(403, 'forbidden'), { starting: false, resuming: true });
  assert.ok(watchRefused.kind === 'relist' && watchRefused.failed && watchRefused.delayMs > 0, JSON.stringify(watchRefused));
  assert.equal(r.afterError(new ApiStatusError(403, 'forbidden'), { starting: false, resuming: false }).kind, 'retry', 'a refused list is tried again');
});

test('a failure with no answer waits until the server is back; an HTTP error waits its backoff; Retry-After is honoured within 1–30 s', () => {
  const r = new WatchRecovery();
  const noAnswer = r.afterError(refused, { starting: false, resuming: true });
  assert.ok(noAnswer.kind === 'retry' && noAnswer.untilReachable, JSON.stringify(noAnswer));
  // An HTTP error to a watch: listed again after the backoff (client-go's reflector relists for all but 429 and a refused connection).
  const http500 = r.afterError(new ApiStatusError(500, 'etcd'), { starting: false, resuming: true });
  assert.ok(http500.kind === 'relist' && http500.failed && http500.delayMs > 0, JSON.stringify(http500));
  const listFailed = r.afterError(new ApiStatusError(500, 'etcd'), { starting: false, resuming: false });
  assert.ok(listFailed.kind === 'retry' && !listFailed.untilReachable, JSON.stringify(listFailed));
  assert.deepEqual(r.afterError(new ApiStatusError(429, 'storage is (re)initializing', 2), { starting: false, resuming: true }), {
    kind: 'retry',
    delayMs: 2000,
    untilReachable: false,
  });
  assert.deepEqual(r.afterError(new ApiStatusError(503, 'x', 600), { starting: false, resuming: true }), {
    kind: 'retry',
    delayMs: 30_000,
    untilReachable: false,
  });
  assert.deepEqual(r.afterError(new ApiStatusError(503, 'x', 0), { starting: false, resuming: true }), { kind: 'retry', delayMs: 1000, untilReachable: false });
  // A server behind the resourceVersion asked for (another replica of an HA control plane).
  const tooLarge = new ApiStatusError(504, 'Timeout: Too large resource version: 120, current: 118', 1);
  assert.deepEqual(r.afterError(tooLarge, { starting: false, resuming: true }), { kind: 'retry', delayMs: 1000, untilReachable: false });
});

test('a watch the server ends: resumed at once, unless it ends them as soon as they start, again and again', () => {
  const r = new WatchRecovery();
  assert.equal(r.afterEnd(60_000, 1000), 0, 'a routine end');
  assert.equal(r.afterEnd(20, 1000), 0, 'one quick end (a watch opened just before a restart)');
  assert.ok(r.afterEnd(20, 1000) >= 800, 'the second in a row waits');
  r.watchRan(3_000);
  assert.equal(r.afterEnd(20, 1000), 0, 'a healthy watch in between starts over');
});

test('Retry-After reaches the error from the response', async (t) => {
  // A LIST honours Retry-After on each of its retries before it fails: those ask for no wait
  // (0 s); the last answer's 3 s is the one the error must carry.
  let lists = 0;
  const fake = await startFakeApi((url, res) => {
    const retryAfter = url.searchParams.get('watch') || lists++ < MAX_RETRY_AFTER_RETRIES ? '0' : '3';
    res.writeHead(429, { 'Content-Type': 'application/json', 'Retry-After': retryAfter });
    res.end(JSON.stringify({ kind: 'Status', code: 429, message: 'storage is (re)initializing' }));
  });
  t.after(() => fake.close());
  const inf = new ResilientInformer(fake.api, '/api/v1/services', createLogger('silent'), () => undefined, slimService, {
    watchTimeoutSeconds: 30,
    graceMs: 5000,
    headersTimeoutMs: 5000,
  });
  void inf.start();
  t.after(() => inf.stop());
  while (!inf.lastError) await new Promise((r) => setTimeout(r, 20));
  assert.ok(inf.lastError instanceof ApiStatusError && inf.lastError.retryAfterSeconds === 3, String(inf.lastError));
});

test("an ERROR 410 as the watch's last line, without a newline, relists (not a resume from the same resourceVersion again)", async (t) => {
  let lists = 0;
  const fake = await startFakeApi((url, res) => {
    if (url.searchParams.get('sendInitialEvents')) return sendStatus(res, 422, 'watch-list is not enabled');
    res.writeHead(200, { 'Content-Type': 'application/json' });
    if (!url.searchParams.get('watch')) return res.end(JSON.stringify({ metadata: { resourceVersion: lists++ === 0 ? '10' : '20' }, items: [] }));
    if (url.searchParams.get('resourceVersion') === '10')
      return res.end(JSON.stringify({ type: 'ERROR', object: { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version: 10 (15)' } }));
    res.flushHeaders(); // from 20: a quiet watch
  });
  t.after(() => fake.close());
  const watch = new SlimWatch({
    api: fake.api,
    path: '/apis/networking.k8s.io/v1/ingresses',
    log: createLogger('silent'),
    extract: () => 1,
    changed: () => undefined,
    settled: () => undefined,
  });
  await watch.start();
  t.after(() => watch.stop());
  const resumed = () => fake.requests.filter((u) => u.searchParams.get('watch') && !u.searchParams.get('sendInitialEvents'));
  for (let i = 0; i < 100 && !resumed().some((u) => u.searchParams.get('resourceVersion') === '20'); i++) await new Promise((r) => setTimeout(r, 20));
  await new Promise((r) => setTimeout(r, 300));
  assert.deepEqual(
    resumed().map((u) => u.searchParams.get('resourceVersion')),
    ['10', '20'],
    'one watch from the compacted version, then from the new list',
  );
});

/** A plain HTTP API server on a fixed port that can go away and come back. */
async function flakyServer(): Promise<{ api: ApiConnection; down(): Promise<void>; up(): Promise<void>; readyz: () => number; close(): Promise<void> }> {
  let readyz = 0;
  const handler = (req: http.IncomingMessage, res: http.ServerResponse) => {
    if (req.url === '/readyz') readyz++;
    res.writeHead(200).end('ok');
  };
  let server = http.createServer(handler).listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as { port: number }).port;
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'c', cluster: 'c', user: 'u' }],
    currentContext: 'c',
  });
  const stop = async () => {
    server.closeAllConnections();
    server.close();
    await once(server, 'close');
  };
  return {
    api: new ApiConnection(kc),
    down: stop,
    async up() {
      server = http.createServer(handler).listen(port, '127.0.0.1');
      await once(server, 'listening');
    },
    readyz: () => readyz,
    close: () => (server.listening ? stop() : Promise.resolve()),
  };
}

test('waiting for the API server: woken within about a second of its return; not woken when it never went away', async (t) => {
  const s = await flakyServer();
  t.after(() => s.close());
  const reach = new ApiReachability(s.api, 200);
  // Up all along: the wait runs its course (a failing watch on a server that answers keeps its backoff).
  const startedUp = Date.now();
  assert.equal(await reach.waitForReturn(700), false);
  assert.ok(Date.now() - startedUp >= 650);
  assert.ok(s.readyz() >= 2, `probed while waiting: ${s.readyz()}`);
  // Away, then back: woken soon after.
  await s.down();
  const waiting = reach.waitForReturn(20_000);
  await new Promise((r) => setTimeout(r, 600));
  const backAt = Date.now();
  await s.up();
  assert.equal(await waiting, true);
  assert.ok(Date.now() - backAt < 1500, `woken ${Date.now() - backAt} ms after the return`);
  assert.equal(reach.last?.serving, true);
  // Nobody waits: no probes.
  const probes = s.readyz();
  await new Promise((r) => setTimeout(r, 600));
  assert.equal(s.readyz(), probes, 'no probe without a waiter');
});

test('a wall clock that jumps a day forward (a laptop waking the next day) resets no backoff: durations are monotonic', (t) => {
  const real = Date.now;
  let offset = 0;
  t.mock.method(Date, 'now', () => real.call(Date) + offset);
  const backoff = new WatchBackoff();
  const first = backoff.next();
  offset += 86_400_000;
  const second = backoff.next();
  // 500 ms ±20 %, then 1 s ±20 %: a reset (the wall clock's two minutes "passed") would give ~500 ms again.
  assert.ok(second >= 800 && second > first, `${first} ms, then ${second} ms`);
});

test('a paged LIST is followed by its watch at once, not taken for a watch the server ended', async (t) => {
  const lines: Array<{ msg?: string }> = [];
  const log = createLogger('debug', { write: (s: string) => void lines.push(JSON.parse(s) as { msg?: string }) });
  const fake = await startFakeApi((url, res) => {
    if (url.searchParams.get('sendInitialEvents')) return sendStatus(res, 422, 'watch-list is not enabled');
    res.writeHead(200, { 'Content-Type': 'application/json' });
    if (!url.searchParams.get('watch')) return res.end(JSON.stringify({ metadata: { resourceVersion: '10' }, items: [] }));
    res.flushHeaders();
  });
  t.after(() => fake.close());
  const inf = new ResilientInformer(fake.api, '/api/v1/services', log, () => undefined, slimService, {
    watchTimeoutSeconds: 30,
    graceMs: 5000,
    headersTimeoutMs: 5000,
  });
  t.after(() => inf.stop());
  await inf.start();
  for (let i = 0; i < 50 && !fake.requests.some((u) => u.searchParams.get('resourceVersion') === '10'); i++) await new Promise((r) => setTimeout(r, 20));
  assert.ok(
    fake.requests.some((u) => u.searchParams.get('resourceVersion') === '10'),
    'watching from the list',
  );
  assert.deepEqual(
    lines.filter((l) => l.msg === 'watch ended by the API server; resuming'),
    [],
  );
});

test('a watch refused after its list (list allowed, watch not): listed again after the backoff, shown failing, never served stale for ever', async (t) => {
  let lists = 0;
  const fake = await startFakeApi((url, res) => {
    if (url.searchParams.get('sendInitialEvents')) return sendStatus(res, 422, 'watch-list is not enabled');
    if (url.searchParams.get('watch')) return sendStatus(res, 403, 'services is forbidden: User "u" cannot watch resource "services"');
    lists++;
    const items =
      lists > 1 ? [{ metadata: { namespace: 'default', name: 'new', resourceVersion: String(10 + lists) }, spec: { clusterIP: '10.96.0.9', ports: [] } }] : [];
    res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ metadata: { resourceVersion: String(10 + lists) }, items }));
  });
  t.after(() => fake.close());
  const inf = new ResilientInformer(fake.api, '/api/v1/namespaces/default/services', createLogger('silent'), () => undefined, slimService);
  t.after(() => inf.stop());
  await inf.start();
  assert.equal(inf.size, 0);
  // The backoff starts at ~0.5 s: a second list comes within a few seconds, with what changed meanwhile.
  for (let i = 0; i < 100 && lists < 2; i++) await new Promise((r) => setTimeout(r, 50));
  assert.ok(lists >= 2, `listed ${lists} time(s)`);
  for (let i = 0; i < 40 && !inf.get('default/new'); i++) await new Promise((r) => setTimeout(r, 25));
  assert.ok(inf.get('default/new'), 'the Service created after the first list is known');
  assert.match(inf.lastError?.message ?? '', /cannot watch resource "services"/);
});
