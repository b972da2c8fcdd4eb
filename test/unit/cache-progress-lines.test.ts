// cluster/cache.ts: the progress lines of a first sync say what moved. An API server that lists
// nothing (unreachable behind a proxy, stalled) gave three identical lines every interval for
// the whole sync, again at each retry and each reload of a managed daemon: ~180 lines a minute.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ServerResponse } from 'node:http';
import { ClusterCache } from '../../src/cluster/cache.js';
import { createLogger } from '../../src/core/log.js';
import { startFakeApi } from '../helpers/fake-api.js';

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
