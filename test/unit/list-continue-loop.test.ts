// cluster/list-watch.ts against a broken server (or a front): a LIST whose every page carries the
// same continue token (a front that drops the `continue` parameter) must fail, saying so, not ask
// for the same page back to back for ever; a watch line that is JSON but no event is named.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { apiGet, listAll, streamEvents } from '../../src/cluster/list-watch.js';
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

test('a watch line that is JSON but no event (null) fails the watch saying so, not with a TypeError', async (t) => {
  const fake = await startFakeApi((_url, res) => {
    res.writeHead(200, { 'Content-Type': 'application/json' }).end('null\n');
  });
  t.after(() => fake.close());
  const res = await apiGet(fake.api, '/api/v1/services?watch=1', AbortSignal.timeout(5_000), 5_000);
  // As the informer's store reads an event.
  await assert.rejects(
    streamEvents(res, (ev) => void ev.object?.metadata, '/api/v1/services'),
    (err: Error) => err instanceof SyntaxError && /a watch event from \/api\/v1\/services is not an object: null/.test(err.message),
  );
});
