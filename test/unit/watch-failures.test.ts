// The watch clients against an API server that fails in ways the simulated cluster cannot
// (test/helpers/fake-api.ts): they must stop when told, and not hammer a failing server.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ClusterCache } from '../../src/cluster/cache.js';
import { ApiStatusError } from '../../src/cluster/api.js';
import { apiGet, closeAgents, getObject, listPage } from '../../src/cluster/list-watch.js';
import { ResilientInformer } from '../../src/cluster/informer.js';
import { SlimWatch } from '../../src/cluster/slim-watch.js';
import { slimService } from '../../src/cluster/slim.js';
import { createLogger } from '../../src/core/log.js';
import { sendStatus, startFakeApi } from '../helpers/fake-api.js';

/** A debug logger whose lines are kept; synced() is each 'watch synced' line's `by`. */
function recordedLogs() {
  const lines: Array<Record<string, unknown>> = [];
  const logger = createLogger('debug', { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  return { logger, synced: () => lines.filter((l) => l.msg === 'watch synced').map((l) => l.by) };
}

// The timer is cleared once decided: left running, it kept the file's process alive after its last test.
const within = <T>(p: Promise<T>, ms: number, what: string): Promise<T> => {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)))]).finally(() =>
    clearTimeout(timer),
  );
};

test("stopping a per-namespace cache while a namespace's first list keeps failing: stop() returns, the waiter is told, no request follows", async (t) => {
  const fake = await startFakeApi((url, res) => {
    if (url.searchParams.get('sendInitialEvents')) return sendStatus(res, 422, 'watch-list is not enabled');
    if (!url.pathname.includes('/namespaces/')) return sendStatus(res, 403, 'not at cluster scope');
    if (url.pathname.includes('/namespaces/other/')) return sendStatus(res, 500, 'etcd unavailable');
    if (url.searchParams.get('watch')) return void res.writeHead(200, { 'Content-Type': 'application/json' }).flushHeaders();
    res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ metadata: { resourceVersion: '10' }, items: [] }));
  });
  t.after(() => fake.close());
  const cache = new ClusterCache(fake.api, createLogger('silent'), 'default');
  await cache.start();
  assert.equal(cache.status().scope, 'namespaces');
  const waiting = cache.ensureNamespace('other');
  waiting.catch(() => undefined);
  await new Promise((r) => setTimeout(r, 1200));
  assert.ok(
    fake.requests.some((u) => u.pathname.includes('/namespaces/other/')),
    'its lists were tried',
  );
  await within(cache.stop(), 3000, 'stop()');
  await assert.rejects(within(waiting, 1000, 'ensureNamespace'), /stopped before its first list/);
  // A request sent just before stop() may still reach the server: count from a moment later.
  await new Promise((r) => setTimeout(r, 300));
  const after = fake.requests.length;
  await new Promise((r) => setTimeout(r, 2500));
  assert.equal(fake.requests.length, after, 'nothing is requested after stop()');
});

/** A server whose lists work and whose every watch is accepted (200), then fails at once with `event`. */
async function failingWatches(event: { code: number; message: string }) {
  return startFakeApi((url, res) => {
    if (url.searchParams.get('sendInitialEvents')) return sendStatus(res, 422, 'watch-list is not enabled');
    res.writeHead(200, { 'Content-Type': 'application/json' });
    if (url.searchParams.get('watch'))
      return res.end(`${JSON.stringify({ type: 'ERROR', object: { kind: 'Status', code: event.code, message: event.message } })}\n`);
    res.end(JSON.stringify({ metadata: { resourceVersion: '10' }, items: [] }));
  });
}

const count = (requests: URL[], watch: boolean) => requests.filter((u) => (u.searchParams.get('watch') === '1') === watch).length;

// client-go's reflector: 0.8 s (ours 0.5 s) doubling to 30 s, reset only after 2 minutes without a retry. Over
// 4 s that is three or four attempts, plus the first 410's relist at once (watch-recovery.ts) and
// the refused watch-list (counted as a watch); a backoff reset by every accepted watch made eight
// or more, and a 410 relisted every second (SlimWatch: thousands of times a second). The four
// cases run side by side, each against its own server.
test('a server that accepts every watch and fails it at once (ERROR 500, ERROR 410) is retried with a growing backoff', { concurrency: true }, async (t) => {
  const cases = [
    ['ERROR 500', { code: 500, message: 'etcd unavailable' }],
    ['ERROR 410', { code: 410, message: 'too old resource version' }],
  ] as const;
  const runs: Array<Promise<void>> = [];
  for (const [what, event] of cases) {
    runs.push(
      t.test(`informer, ${what}`, async (tt) => {
        const fake = await failingWatches(event);
        tt.after(() => fake.close());
        const inf = new ResilientInformer(fake.api, '/api/v1/namespaces/shop/services', createLogger('silent'), () => undefined, slimService, {
          watchTimeoutSeconds: 30,
          graceMs: 5000,
          headersTimeoutMs: 5000,
        });
        await inf.start();
        tt.after(() => inf.stop());
        await new Promise((r) => setTimeout(r, 4000));
        const watches = count(fake.requests, true);
        assert.ok(watches >= 2 && watches <= 6, `${watches} watches (and ${count(fake.requests, false)} lists) in 4 s`);
      }),
    );
    runs.push(
      t.test(`SlimWatch, ${what}`, async (tt) => {
        const fake = await failingWatches(event);
        tt.after(() => fake.close());
        const watch = new SlimWatch({
          api: fake.api,
          path: '/apis/networking.k8s.io/v1/ingresses',
          log: createLogger('silent'),
          extract: () => 1,
          changed: () => undefined,
          settled: () => undefined,
        });
        await watch.start();
        tt.after(() => watch.stop());
        await new Promise((r) => setTimeout(r, 4000));
        const [watches, lists] = [count(fake.requests, true), count(fake.requests, false)];
        assert.ok(watches >= 2 && watches <= 6 && lists <= 5, `${watches} watches and ${lists} lists in 4 s`);
      }),
    );
  }
  await Promise.all(runs);
});

test('lists and watches share kept-alive connections: ten list pages over one', async (t) => {
  const fake = await startFakeApi((url, res) => {
    const page = Number(url.searchParams.get('continue') ?? 0);
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ metadata: { resourceVersion: '10', ...(page < 9 ? { continue: String(page + 1) } : {}) }, items: [] }));
  });
  t.after(() => fake.close());
  let token: string | undefined;
  let pages = 0;
  do {
    token = (await listPage(fake.api, '/api/v1/services', 500, token, new AbortController().signal, 5000)).continueToken;
    pages++;
  } while (token);
  closeAgents(fake.api);
  assert.equal(pages, 10);
  assert.equal(fake.connections(), 1, `${fake.connections()} connections for 10 pages`);
});

test('an error response whose body never ends is given up after the headers timeout', async (t) => {
  const fake = await startFakeApi((_url, res) => {
    res.writeHead(503, { 'Content-Type': 'application/json' });
    res.write('{"kind":"Status",');
  });
  t.after(() => fake.close());
  const started = Date.now();
  await assert.rejects(
    within(apiGet(fake.api, '/api/v1/services?watch=1', new AbortController().signal, 400), 3000, 'apiGet'),
    (err: Error) => err instanceof ApiStatusError && err.statusCode === 503,
  );
  assert.ok(Date.now() - started < 2000);
  closeAgents(fake.api);
});

test('a watch-list that ends before its initial events are complete (a plain bookmark on the way) falls back to a paged LIST', async (t) => {
  const service = (name: string) => ({
    metadata: { namespace: 'shop', name, resourceVersion: '7', uid: name },
    spec: { clusterIP: '10.96.0.1', ports: [{ port: 80 }] },
  });
  const fake = await startFakeApi((url, res) => {
    res.writeHead(200, { 'Content-Type': 'application/json' });
    if (url.searchParams.get('sendInitialEvents')) {
      // One object, a bookmark without the initial-events-end annotation, then the end.
      return res.end(
        [
          { type: 'ADDED', object: service('a') },
          { type: 'BOOKMARK', object: { metadata: { resourceVersion: '20' } } },
        ]
          .map((e) => `${JSON.stringify(e)}\n`)
          .join(''),
      );
    }
    if (url.searchParams.get('watch')) return res.flushHeaders();
    res.end(JSON.stringify({ metadata: { resourceVersion: '21' }, items: [service('a'), service('b')] }));
  });
  t.after(() => fake.close());
  const logs = recordedLogs();
  const inf = new ResilientInformer(fake.api, '/api/v1/namespaces/shop/services', logs.logger, () => undefined, slimService, {
    watchTimeoutSeconds: 30,
    graceMs: 5000,
    headersTimeoutMs: 5000,
  });
  t.after(() => inf.stop());
  await within(inf.start(), 5000, 'first sync');
  assert.deepEqual([...inf.list()].map((s) => s.name).sort(), ['a', 'b'], 'the whole picture, from the LIST');
  assert.ok(
    fake.requests.some((u) => !u.searchParams.get('watch')),
    'a LIST was made',
  );
  assert.deepEqual(logs.synced(), ['paged list'], 'the sync says how it came');
});

test('the watch a watch-list goes on as, ending after its initial events, is resumed from its resourceVersion, not listed again', async (t) => {
  const service = { metadata: { namespace: 'shop', name: 'a', resourceVersion: '7', uid: 'a' }, spec: { clusterIP: '10.96.0.1', ports: [{ port: 80 }] } };
  const fake = await startFakeApi((url, res) => {
    res.writeHead(200, { 'Content-Type': 'application/json' });
    if (url.searchParams.get('sendInitialEvents')) {
      res.write(
        [
          { type: 'ADDED', object: service },
          { type: 'BOOKMARK', object: { metadata: { resourceVersion: '20', annotations: { 'k8s.io/initial-events-end': 'true' } } } },
        ]
          .map((e) => `${JSON.stringify(e)}\n`)
          .join(''),
      );
      // Then the connection breaks (an API server restarting).
      return void setTimeout(() => res.destroy(), 100);
    }
    if (url.searchParams.get('watch')) return res.flushHeaders();
    res.end(JSON.stringify({ metadata: { resourceVersion: '21' }, items: [service] }));
  });
  t.after(() => fake.close());
  const logs = recordedLogs();
  const inf = new ResilientInformer(fake.api, '/api/v1/namespaces/shop/services', logs.logger, () => undefined, slimService, {
    watchTimeoutSeconds: 30,
    graceMs: 5000,
    headersTimeoutMs: 5000,
  });
  t.after(() => inf.stop());
  await within(inf.start(), 5000, 'first sync');
  assert.deepEqual(logs.synced(), ['watch-list'], 'the sync says how it came');
  await new Promise((r) => setTimeout(r, 2500));
  // The break is a failure with no answer: /readyz is asked whether the server went away (api-reachability.ts); that is no LIST.
  assert.equal(fake.requests.filter((u) => !u.searchParams.get('watch') && u.pathname !== '/readyz').length, 0, 'no LIST');
  assert.ok(
    fake.requests.some((u) => u.searchParams.get('watch') && u.searchParams.get('resourceVersion') === '20'),
    'a watch from the bookmark',
  );
});

test('a LIST page or GET the server asks to wait (429 or 5xx with Retry-After) is sent again after the wait, as client-go does', async (t) => {
  let refusals = 0;
  const fake = await startFakeApi((url, res) => {
    // Two APF refusals for each path, then the answer; a 503 without Retry-After is never retried.
    if (url.pathname.endsWith('/no-wait')) return sendStatus(res, 503, 'etcd leader changed');
    if (refusals++ % 3 < 2) {
      res.writeHead(url.pathname.endsWith('/pods') ? 429 : 503, { 'Content-Type': 'text/plain; charset=utf-8', 'Retry-After': '1' });
      return res.end('Too many requests, please try again later.\n');
    }
    if (url.pathname.endsWith('/pods')) {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      return res.end(JSON.stringify({ kind: 'PodList', metadata: { resourceVersion: '7' }, items: [{ metadata: { name: 'a' } }] }));
    }
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ kind: 'Pod', metadata: { name: 'a' } }));
  });
  t.after(async () => {
    closeAgents(fake.api);
    await fake.close();
  });
  let t0 = Date.now();
  const page = await listPage(fake.api, '/api/v1/namespaces/shop/pods', 10, undefined, AbortSignal.timeout(10_000), 5_000);
  assert.deepEqual(
    page.items.map((i) => i.metadata.name),
    ['a'],
  );
  assert.ok(Date.now() - t0 >= 1900, `waited Retry-After twice: ${Date.now() - t0} ms`);
  t0 = Date.now();
  assert.equal((await getObject(fake.api, '/api/v1/namespaces/shop/pods/a', AbortSignal.timeout(10_000), 5_000))?.metadata.name, 'a');
  assert.ok(Date.now() - t0 >= 1900, `a 503 with Retry-After too: ${Date.now() - t0} ms`);

  t0 = Date.now();
  await assert.rejects(getObject(fake.api, '/api/v1/namespaces/shop/pods/no-wait', AbortSignal.timeout(10_000), 5_000), (err: unknown) => {
    assert.ok(err instanceof ApiStatusError && err.statusCode === 503);
    return true;
  });
  assert.ok(Date.now() - t0 < 900, 'no Retry-After: the answer at once');

  // The caller's deadline ends the wait: its error is the server's answer, not an AbortError.
  refusals = 0;
  t0 = Date.now();
  await assert.rejects(listPage(fake.api, '/api/v1/namespaces/shop/pods', 10, undefined, AbortSignal.timeout(500), 5_000), (err: unknown) => {
    assert.ok(err instanceof ApiStatusError && err.statusCode === 429, String(err));
    assert.match(err.message, /Too many requests/);
    return true;
  });
  assert.ok(Date.now() - t0 < 900, `given up at the deadline: ${Date.now() - t0} ms`);
});

// A balancer whose idle timeout cuts each watch abruptly (no end of the chunked response): the
// watch had run fine, so it resumes at once from where it was, as client-go's reflector does
// (a lost connection is a watch's end there): no warning, no backoff growing with each cut (it
// reached seconds, then 30 s, with the cache stale meanwhile), no relist.
test('watches cut abruptly after running a while resume at once from their resourceVersion, no warning, no backoff', async (t) => {
  const fake = await startFakeApi((url, res) => {
    if (url.searchParams.get('sendInitialEvents')) return sendStatus(res, 422, 'watch-list is not enabled');
    if (url.searchParams.get('watch')) {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.write(`${JSON.stringify({ type: 'BOOKMARK', object: { metadata: { resourceVersion: '11' } } })}\n`);
      setTimeout(() => res.socket?.destroy(), 1_100);
      return;
    }
    res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ metadata: { resourceVersion: '10' }, items: [] }));
  });
  const lines: Array<Record<string, unknown>> = [];
  const logger = createLogger('debug', { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  const inf = new ResilientInformer(fake.api, '/api/v1/services', logger, () => undefined, slimService);
  t.after(async () => {
    await inf.stop();
    await fake.close();
  });
  await inf.start();
  // Counted, not timed: a busy machine stretches each round, and a backoff shows in the log.
  const watchRequests = () => fake.requests.filter((u) => u.searchParams.get('watch') === '1' && !u.searchParams.get('sendInitialEvents'));
  for (const deadline = Date.now() + 30_000; watchRequests().length < 4 && Date.now() < deadline;) await new Promise((r) => setTimeout(r, 100));
  const watches = watchRequests();
  assert.ok(watches.length >= 4, `resumed after each cut: ${watches.length} watches in 30 s`);
  const resumes = lines.filter((l) => l.msg === 'watch connection lost; resuming');
  assert.ok(resumes.length >= 3, `each cut was taken as a lost connection: ${resumes.length}`);
  assert.deepEqual(
    resumes.map((l) => l.inMs),
    resumes.map(() => 0),
    'resumed at once',
  );
  assert.ok(
    watches.slice(1).every((u) => u.searchParams.get('resourceVersion') === '11'),
    'from the last resourceVersion',
  );
  assert.equal(fake.requests.filter((u) => !u.searchParams.get('watch')).length, 1, 'no relist');
  assert.deepEqual(
    lines.filter((l) => l.level === 40).map((l) => l.msg),
    [],
  );
  assert.equal(inf.status, 'synced');
});

// Go's transport sends a request again when the kept-alive connection it reused was closed
// before any answer; Node leaves that to the caller. Unhandled, each such race failed a watch
// (a warning and a backoff) or a Pod look-up (a client's connection refused).
test('a GET on a kept-alive connection the server closes unanswered is sent again on a new one', async (t) => {
  const served = new WeakMap<object, number>();
  const fake = await startFakeApi((_url, res) => {
    const socket = res.socket!;
    const n = (served.get(socket) ?? 0) + 1;
    served.set(socket, n);
    // The second request on a connection: closed unanswered, as by an idle timeout racing it.
    if (n === 2) return void socket.destroy();
    res.writeHead(200, { 'Content-Type': 'application/json' }).end('{}');
  });
  t.after(() => fake.close());
  (await apiGet(fake.api, '/readyz', AbortSignal.timeout(5_000), 5_000)).resume();
  await new Promise((r) => setTimeout(r, 50)); // the connection is back in the pool
  const res = await apiGet(fake.api, '/readyz', AbortSignal.timeout(5_000), 5_000);
  res.resume();
  assert.equal(res.statusCode, 200);
  assert.equal(fake.requests.length, 3);
  assert.equal(fake.connections(), 2);
  closeAgents(fake.api);
});

test('watches accepted and then failing on their body are one warning, not "recovered" and a warning per retry', { timeout: 30_000 }, async (t) => {
  let broken = true;
  const fake = await startFakeApi((url, res) => {
    if (url.searchParams.get('sendInitialEvents')) return sendStatus(res, 422, 'watch-list is not enabled');
    if (!url.searchParams.get('watch'))
      return void res.writeHead(200, { 'Content-Type': 'application/json' }).end('{"metadata":{"resourceVersion":"10"},"items":[]}');
    // A sign-in front answering 200 with its page (or a server failing each watch on its first event).
    if (broken) return void res.writeHead(200, { 'Content-Type': 'text/html' }).end('<!DOCTYPE html>\n<title>Sign in</title>\n');
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.write(`${JSON.stringify({ type: 'BOOKMARK', object: { metadata: { resourceVersion: '11' } } })}\n`);
  });
  const lines: Array<Record<string, unknown>> = [];
  const logger = createLogger('debug', { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  const inf = new ResilientInformer(fake.api, '/api/v1/services', logger, () => undefined, slimService);
  t.after(async () => {
    await inf.stop();
    await fake.close();
  });
  await inf.start();
  const watches = () => fake.requests.filter((u) => u.searchParams.get('watch') === '1' && !u.searchParams.get('sendInitialEvents')).length;
  for (const deadline = Date.now() + 20_000; watches() < 4 && Date.now() < deadline;) await new Promise((r) => setTimeout(r, 50));
  assert.ok(watches() >= 4, `${watches()} watches`);
  const said = (msg: string) => lines.filter((l) => l.msg === msg).length;
  assert.equal(said('watch failed, retrying with backoff'), 1, 'one warning for the failure');
  assert.equal(said('watch recovered'), 0, 'never called recovered while every watch failed');
  assert.equal(inf.status, 'retrying');
  broken = false;
  const status = (): string => inf.status;
  for (const deadline = Date.now() + 20_000; status() !== 'synced' && Date.now() < deadline;) await new Promise((r) => setTimeout(r, 50));
  assert.equal(status(), 'synced');
  assert.equal(said('watch recovered'), 1);
});

test(
  'a watch-list whose end bookmark has no resourceVersion is listed in pages, not resumed from "" (deleted objects kept)',
  { timeout: 30_000 },
  async (t) => {
    const event = (type: string, name: string, resourceVersion?: string, annotations?: Record<string, string>) =>
      `${JSON.stringify({ type, object: { metadata: { name, namespace: 'ns', resourceVersion, annotations } } })}\n`;
    const fake = await startFakeApi((url, res) => {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      if (url.searchParams.get('sendInitialEvents'))
        return void res.end(event('ADDED', 'a', '5') + event('ADDED', 'b', '6') + event('BOOKMARK', '', undefined, { 'k8s.io/initial-events-end': 'true' }));
      // b is gone by now: the LIST has a alone; a watch from "" would replay a alone, as ADDED.
      if (!url.searchParams.get('watch'))
        return void res.end(
          JSON.stringify({ metadata: { resourceVersion: '10' }, items: [{ metadata: { name: 'a', namespace: 'ns', resourceVersion: '5' } }] }),
        );
      res.write(event('ADDED', 'a', '5'));
    });
    const inf = new ResilientInformer(fake.api, '/api/v1/services', createLogger('silent'), () => undefined, slimService);
    t.after(async () => {
      await inf.stop();
      await fake.close();
    });
    await inf.start();
    const watches = () => fake.requests.filter((u) => u.searchParams.get('watch') === '1' && !u.searchParams.get('sendInitialEvents'));
    for (const deadline = Date.now() + 10_000; watches().length < 1 && Date.now() < deadline;) await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual(
      watches().map((u) => u.searchParams.get('resourceVersion')),
      ['10'],
      'the watch resumes from the LIST',
    );
    assert.deepEqual(
      [...inf.list()].map((s) => s.key),
      ['ns/a'],
    );
  },
);
