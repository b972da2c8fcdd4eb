import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { bulkEcho, cpuSecondsOf, interleavedFirstByteRounds, judge, median, roundTrip } from '../../bench/measure.js';
import { tcpOpener } from '../../bench/multiplex.js';

type Behaviour = 'echo' | 'reset' | 'close' | 'wrong' | 'silent' | 'short';

/** An echo server that misbehaves as asked, connection by connection (the last behaviour repeats). */
async function fakeServer(behaviours: Behaviour[]): Promise<{ port: number; close(): Promise<void> }> {
  let n = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => undefined);
    const how = behaviours[Math.min(n++, behaviours.length - 1)]!;
    let seen = 0;
    s.on('data', (d: Buffer) => {
      if (how === 'echo') s.write(d);
      else if (how === 'reset') s.resetAndDestroy();
      else if (how === 'close') s.end();
      else if (how === 'wrong') s.write(Buffer.alloc(d.length, 0x7e));
      else if (how === 'short') {
        // Echoes the first 100,000 bytes, then closes.
        const keep = Math.max(0, Math.min(d.length, 100_000 - seen));
        seen += d.length;
        if (keep) s.write(d.subarray(0, keep));
        if (seen >= 100_000) s.end();
      }
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise((r) => server.close(() => r()));
    },
  };
}

test('roundTrip says why a round failed: reset, closed, wrong bytes, no echo in time', async () => {
  const server = await fakeServer(['echo', 'reset', 'close', 'wrong', 'silent']);
  try {
    const open = tcpOpener('127.0.0.1', server.port);
    assert.equal(await roundTrip(await open(), Buffer.from('x'), true), undefined);
    assert.match((await roundTrip(await open(), Buffer.from('x'), true)) ?? '', /ECONNRESET|closed after 0 of 1 bytes/);
    assert.equal(await roundTrip(await open(), Buffer.from('x'), true), 'closed after 0 of 1 bytes');
    assert.equal(await roundTrip(await open(), Buffer.from('x'), true), 'wrong bytes came back');
    assert.equal(await roundTrip(await open(), Buffer.from('x'), true, 200), 'no echo within 200 ms (0 of 1 bytes)');
  } finally {
    await server.close();
  }
});

test('first-byte rounds stop on the first failed round, naming the path, the round and the reason', async () => {
  const good = await fakeServer(['echo']);
  const bad = await fakeServer(['echo', 'echo', 'close']);
  const refused = await fakeServer(['echo']);
  await refused.close();
  try {
    const paths = [
      { name: 'direct', echo: tcpOpener('127.0.0.1', good.port) },
      { name: 'proxy', echo: tcpOpener('127.0.0.1', bad.port) },
    ];
    await assert.rejects(interleavedFirstByteRounds(paths, 5), { message: 'proxy: first byte, round 3 of 5: closed after 0 of 1 bytes' });
    await assert.rejects(
      interleavedFirstByteRounds([{ name: 'kubectl', echo: tcpOpener('127.0.0.1', refused.port) }], 1),
      /^Error: kubectl: first byte, round 1 of 1: opening failed: .*ECONNREFUSED/,
    );
    await assert.rejects(interleavedFirstByteRounds(paths, 0), RangeError);
  } finally {
    await Promise.all([good.close(), bad.close()]);
  }
});

test('bulkEcho fails, naming the path, on a short read, wrong bytes or a reset; never returns a rate for them', async () => {
  const server = await fakeServer(['echo', 'short', 'wrong', 'reset']);
  try {
    const open = tcpOpener('127.0.0.1', server.port);
    assert.ok((await bulkEcho(open, 1 << 20, 'direct')) > 0);
    await assert.rejects(
      bulkEcho(open, 1 << 20, 'bare port-forward, round 2'),
      /^Error: bare port-forward, round 2: bulk echo of 1048576 bytes: (closed|ended) after 100000 of 1048576 bytes$/,
    );
    await assert.rejects(bulkEcho(open, 1 << 20, 'proxy'), /^Error: proxy: bulk echo of 1048576 bytes: wrong bytes at offset 0$/);
    await assert.rejects(
      bulkEcho(open, 1 << 20, 'kubectl'),
      /^Error: kubectl: bulk echo of 1048576 bytes: (stream error after 0 of 1048576 bytes: .*ECONNRESET|closed after 0 of 1048576 bytes)/,
    );
  } finally {
    await server.close();
  }
});

test('median of nothing is NaN, and judge() will not call a target met on missing data or failures', () => {
  assert.ok(Number.isNaN(median([])));
  assert.equal(median([3, 1, 2]), 2);
  assert.equal(judge(true, [1, 2]), 'met');
  assert.equal(judge(false, [1, 2]), 'NOT met');
  assert.equal(judge(true, [median([]), 2]), 'cannot be judged: a figure is missing');
  assert.equal(judge(true, [1 / 0]), 'cannot be judged: a figure is missing');
  assert.equal(
    judge(
      true,
      [1, 2],
      [
        ['proxy', 0],
        ['kubectl port-forward', 3],
      ],
    ),
    'cannot be judged: kubectl port-forward had 3 failures',
  );
});

test(
  "cpuSecondsOf counts a process's CPU time to the millisecond, not in 10 ms clock ticks",
  { skip: existsSync('/proc/self/schedstat') ? false : 'no /proc/PID/schedstat here (it falls back to clock ticks)' },
  () => {
    // 23 ms of CPU by getrusage (µs): in ticks the same work reads as 20 or 30 ms.
    const ownBefore = process.cpuUsage();
    const before = cpuSecondsOf(process.pid);
    let own = 0;
    while (own < 23_000) {
      const u = process.cpuUsage(ownBefore);
      own = u.user + u.system;
    }
    const measured = cpuSecondsOf(process.pid) - before;
    const ownAfter = process.cpuUsage(ownBefore);
    // Both count every thread; the bounds take the reads themselves in.
    assert.ok(measured >= own / 1e6 - 0.002, `${measured} s measured for at least ${own / 1e6} s of CPU`);
    assert.ok(measured <= (ownAfter.user + ownAfter.system) / 1e6 + 0.002, `${measured} s measured for at most ${(ownAfter.user + ownAfter.system) / 1e6} s`);
  },
);
