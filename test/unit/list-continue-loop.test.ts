// cluster/list-watch.ts listAll against a server (or a front that drops the `continue` parameter)
// that answers every page with the same continue token: the LIST must fail, saying so, not ask
// for the same page back to back for ever.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { listAll } from '../../src/cluster/list-watch.js';
import { slimService } from '../../src/cluster/slim.js';
import { startFakeApi } from '../helpers/fake-api.js';

test('a continue token answered with itself fails the LIST instead of looping', { timeout: 20_000 }, async (t) => {
  const fake = await startFakeApi((_url, res) => {
    const item = { metadata: { name: 'web', namespace: 'shop', resourceVersion: '5' }, spec: { clusterIP: '10.96.0.10', ports: [{ port: 80 }] } };
    res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ metadata: { resourceVersion: '10', continue: 'same' }, items: [item] }));
  });
  t.after(() => fake.close());
  const stop = new AbortController();
  t.after(() => stop.abort());
  const listing = listAll(fake.api, '/api/v1/services', slimService, {
    pageSize: 500,
    signal: stop.signal,
    headersTimeoutMs: 5_000,
    onPage: () => undefined,
    onRestart: () => undefined,
  });
  const late = new Promise<string>((r) => setTimeout(() => r('still listing after 5 s'), 5_000).unref());
  const outcome = await Promise.race([
    listing.then(
      () => 'listed',
      (err: Error) => err.message,
    ),
    late,
  ]);
  assert.match(outcome, /\/api\/v1\/services.*same continue token/);
  assert.ok(fake.requests.length <= 3, `${fake.requests.length} requests`);
});
