// cluster/cache.ts: the lines of a first sync say what is so. Its progress lines say what moved: an
// API server that lists nothing (unreachable behind a proxy, stalled) gave three identical lines
// every interval for the whole sync, again at each retry and each reload of a managed daemon.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ServerResponse } from 'node:http';
import { ClusterCache } from '../../src/cluster/cache.js';
import { createLogger } from '../../src/core/log.js';
import { sendStatus, startFakeApi } from '../helpers/fake-api.js';

test('a first sync that gets nothing logs each kind once, then only every ten intervals', async () => {
  const held: ServerResponse[] = [];
  const fake = await startFakeApi((_url, res) => void held.push(res));
  const lines: Array<{ msg: string; kind?: string; listed?: number }> = [];
  const log = createLogger('info', { write: (l: string) => void lines.push(JSON.parse(l)) } as never);
  const intervalMs = 10;
  const cache = new ClusterCache(fake.api, log, 'default', undefined, { progressIntervalMs: intervalMs });
  const started = Date.now();
  const starting = cache.start().catch(() => undefined);
  try {
    await new Promise((r) => setTimeout(r, 600));
    const elapsed = Date.now() - started;
    const progress = lines.filter((l) => l.msg === 'syncing the cluster cache');
    const perKind = new Map<string, number>();
    for (const l of progress) perKind.set(l.kind!, (perKind.get(l.kind!) ?? 0) + 1);
    assert.ok(perKind.size > 0, 'a sync that takes a while says so');
    // At most one line per ten intervals (and the first): without the pacing, one per interval.
    const allowed = Math.ceil(elapsed / intervalMs / 10) + 1;
    for (const [kind, n] of perKind) assert.ok(n <= allowed, `${kind}: ${n} lines in ${elapsed} ms (at most ${allowed})`);
    assert.ok(
      progress.every((l) => l.listed === 0),
      'nothing listed',
    );
  } finally {
    await cache.stop();
    for (const res of held) res.destroy();
    await starting;
    await fake.close();
  }
});

test('a sync stopped before the namespace list came says nothing of permissions; a refused list still does', async () => {
  const held: ServerResponse[] = [];
  const refuseNamespaces = { on: false };
  const fake = await startFakeApi((url, res) => {
    if (refuseNamespaces.on && url.pathname === '/api/v1/namespaces') return sendStatus(res, 403, 'namespaces is forbidden');
    held.push(res);
  });
  const run = async () => {
    const lines: Array<{ msg: string; reason?: string }> = [];
    const log = createLogger('info', { write: (l: string) => void lines.push(JSON.parse(l)) } as never);
    const cache = new ClusterCache(fake.api, log, 'default');
    const starting = cache.start().catch(() => undefined);
    await new Promise((r) => setTimeout(r, 300));
    await cache.stop();
    for (const res of held.splice(0)) res.destroy();
    await starting;
    await new Promise((r) => setImmediate(r));
    return lines.filter((l) => l.msg === 'not allowed to list namespaces; only watched namespaces count as known');
  };
  try {
    assert.deepEqual(await run(), [], 'stopped (a start given up, a reload refused): no refusal to report');
    refuseNamespaces.on = true;
    const refused = await run();
    assert.equal(refused.length, 1);
    assert.match(refused[0]!.reason!, /forbidden/);
  } finally {
    for (const res of held) res.destroy();
    await fake.close();
  }
});
