import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { once } from 'node:events';
import { concurrentIntact, connectionsPerSecond, multiplexTargets, tcpOpener, type PathFigures } from '../../bench/multiplex.js';

const figures = (over: Partial<PathFigures> = {}): PathFigures => ({ throughput: 100, p50: 1, p99: 2, cps: 500, cpsFailures: {}, ...over });

test('a target line is judged only when neither side failed a connection; the concurrent line names every failure', () => {
  const clean = multiplexTargets(
    { '(a) proxy': figures({ p50: 0.4 }), '(b) ws': figures(), '(c) kubectl': figures({ throughput: 90 }) },
    10,
    { intact: 10, failures: {} },
    1,
  );
  assert.deepEqual(clean, [
    '10 concurrent streams through a fresh proxy (a): 10 intact (64 KiB each way, each byte checked) over 1 tunnel; failures: none',
    'target (a) p50 ≤ 0.50 × (b): 0.40 × — met',
    'target (a) throughput ≥ 1.00 × (c): 1.11 × — met',
    'target 10 concurrent streams intact: met',
  ]);
  const failing = multiplexTargets(
    {
      '(a) proxy': figures({ p50: 0.4, cpsFailures: { 'SOCKS reply 5': 2 } }),
      '(b) ws': figures(),
      '(c) kubectl': figures({ throughput: 90, cpsFailures: { 'opening failed: ECONNREFUSED': 1 } }),
    },
    10,
    { intact: 8, failures: { 'closed after 0 of 65536 bytes': 2 } },
    1,
  );
  assert.equal(
    failing[0],
    '10 concurrent streams through a fresh proxy (a): 8 intact (64 KiB each way, each byte checked) over 1 tunnel; failures: 2 × closed after 0 of 65536 bytes',
  );
  assert.equal(failing[1], 'target (a) p50 ≤ 0.50 × (b): 0.40 × — cannot be judged: (a) proxy had 2 failures');
  assert.equal(failing[2], 'target (a) throughput ≥ 1.00 × (c): 1.11 × — cannot be judged: (a) proxy had 2 failures, (c) kubectl had 1 failure');
  assert.equal(failing[3], 'target 10 concurrent streams intact: NOT met');
});

test('conn/s and concurrent streams count a server that closes some connections, with the reason, and do not hang', async () => {
  let n = 0;
  const server = net.createServer((s) => {
    s.on('error', () => undefined);
    // Every third connection is closed without an echo.
    if (++n % 3 === 0) s.end();
    else s.pipe(s);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  try {
    const open = tcpOpener('127.0.0.1', (server.address() as net.AddressInfo).port);
    const cps = await connectionsPerSecond(open, 300, 2);
    assert.ok((cps.failures['closed after 0 of 1 bytes'] ?? 0) > 0, JSON.stringify(cps.failures));
    n = 0;
    const run = await concurrentIntact(open, 6);
    assert.equal(run.intact, 4);
    assert.deepEqual(run.failures, { 'closed after 0 of 65536 bytes': 2 });
  } finally {
    server.close();
  }
});
