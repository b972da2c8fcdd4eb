// The start-up probe of a cluster route (guest-cluster.ts probeApi) against an API server that asks
// it to wait: API priority and fairness answers a flow over its share 429 with Retry-After.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { probeApi } from '../../src/routes/guest-cluster/guest-cluster.js';
import { createLogger } from '../../src/core/log.js';
import { sendStatus, startFakeApi } from '../helpers/fake-api.js';

test('a 429 with Retry-After at start is waited out, as kubectl does, not a failed start', async (t) => {
  let refusals = 2;
  const fake = await startFakeApi((url, res) => {
    if (url.pathname === '/api' && refusals-- > 0) {
      res.writeHead(429, { 'Retry-After': '1', 'Content-Type': 'text/plain; charset=utf-8' });
      return void res.end('Too many requests, please try again later.\n');
    }
    res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ kind: 'APIVersions', versions: ['v1'] }));
  });
  t.after(() => fake.close());
  const lines: Array<Record<string, unknown>> = [];
  const log = createLogger('info', { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  const t0 = Date.now();
  await probeApi(fake.api, 'fake', 'http://fake', log);
  assert.equal(fake.requests.filter((u) => u.pathname === '/api').length, 3);
  assert.ok(Date.now() - t0 >= 1800, `waited both Retry-Afters: ${Date.now() - t0} ms`);
  // The wait is said: a start that pauses up to 30 s without a word looks hung.
  assert.deepEqual(
    lines.map((l) => [l.msg, l.waitSeconds]),
    Array(2).fill(['the API server asks to wait (Retry-After); waiting before starting', 1]),
  );
});

test('a 500 without Retry-After still fails the start at once, in one line', async (t) => {
  const fake = await startFakeApi((_url, res) => sendStatus(res, 500, 'etcdserver: request timed out'));
  t.after(() => fake.close());
  await assert.rejects(probeApi(fake.api, 'fake', 'http://fake'), /^StartupError: the API server http:\/\/fake answered 500: etcdserver: request timed out$/);
  assert.equal(fake.requests.length, 1);
});
