// The test helper that finds a key written twice in a JSON log line (test/helpers/log-lines.ts),
// and the proxy's own lines that had one: a route's warnings repeated the route name its logger
// is bound with.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import pino from 'pino';
import { duplicateKeys } from '../helpers/log-lines.js';
import { RouteLifecycle } from '../../src/routes/guest-cluster/lifecycle.js';
import type { Logger } from '../../src/core/log.js';

test('duplicateKeys finds a key twice in one object, nested objects apart, strings with quotes and colons skipped', () => {
  assert.deepEqual(duplicateKeys('{"level":40,"route":"prod","route":"prod","msg":"x"}'), ['route']);
  assert.deepEqual(duplicateKeys('{"a":{"b":1},"b":2,"c":[{"b":1},{"b":2}]}'), []);
  assert.deepEqual(duplicateKeys('{"a":{"b":1,"b":2}}'), ['b']);
  assert.deepEqual(duplicateKeys('{"msg":"a \\"route\\": b","route":"x","s":"{\\"route\\":1}"}'), []);
  assert.deepEqual(duplicateKeys('{"k": 1, "k" :2}'), ['k']);
});

test("a route's 'not available' warning does not repeat the route its logger is bound with", async () => {
  const lines: string[] = [];
  const sink = new Writable({ write: (chunk: Buffer, _enc, done) => (lines.push(chunk.toString()), done()) });
  const log = pino({ level: 'info' }, sink).child({ route: 'prod' }) as unknown as Logger;
  const life = new RouteLifecycle(
    'cluster',
    'prod',
    log,
    {
      connect: async () => {
        throw new Error('cannot reach the API server');
      },
      reset: async () => {},
    },
    { retryMinMs: 20 },
  );
  const isWarning = (l: string) => l.includes('route not available; trying again later');
  await assert.rejects(life.start());
  // The first start's failure is its caller's to report (proxy.ts); a retry's is logged here.
  assert.deepEqual(lines.filter(isWarning), [], 'the first start logs nothing');
  for (let i = 0; i < 100 && !lines.some(isWarning); i++) await new Promise((r) => setTimeout(r, 10));
  life.close();
  const warned = lines.filter(isWarning);
  assert.equal(warned.length, 1, lines.join(''));
  assert.deepEqual(duplicateKeys(warned[0]!), []);
  assert.equal((JSON.parse(warned[0]!) as { route: string }).route, 'prod');
});
