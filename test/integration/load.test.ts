// Load and limits: 1,000 concurrent streams through one proxy, and --max-streams.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { startTestCluster, eventually, type TestCluster } from '../helpers/cluster.js';
import { startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';
import { socks5Connect } from '../helpers/socks-client.js';
import { Download, closedWithin, fdCount, openStream, roundTrip, sendGet, sleep, type OpenStream } from '../helpers/streams.js';

const STREAMS = 1000;
/** A stream that moves no byte for this long counts as stalled (a bound, not a speed target). */
const STALL_MS = 45_000;
const ECHO_SIZES = [1, 100, 1024, 16 << 10, 64 << 10, 200 << 10, 1 << 20];
const DOWNLOAD_SIZES = [1024, 64 << 10, 512 << 10, 2 << 20];
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

let cluster: TestCluster;
before(async () => {
  cluster = await startTestCluster();
});
after(async () => {
  await cluster?.close();
});

/** Rejects when `progress` stops moving for STALL_MS before `done` settles. */
async function noStall<T>(done: Promise<T>, progress: () => number, what: string): Promise<T> {
  let last = -1;
  let since = Date.now();
  let timer: NodeJS.Timeout | undefined;
  const watch = new Promise<never>((_, reject) => {
    timer = setInterval(() => {
      const now = progress();
      if (now !== last) [last, since] = [now, Date.now()];
      else if (Date.now() - since > STALL_MS) reject(new Error(`${what} stalled at ${now} bytes`));
    }, 500);
  });
  try {
    return await Promise.race([done, watch]);
  } finally {
    clearInterval(timer);
  }
}

async function echoStream(socks: string, size: number, graceful: boolean): Promise<void> {
  const s = await openStream(socks, 'echo.data', 7000);
  const payload = randomBytes(size);
  let got = 0;
  s.socket.on('data', (c: Buffer) => (got += c.length));
  const back = await noStall(roundTrip(s, payload, 120_000), () => got, `echo of ${size} bytes`);
  assert.equal(sha(back), sha(payload), `echo of ${size} bytes came back changed`);
  if (graceful) s.socket.end();
  else s.socket.destroy();
  await closedWithin(s.socket, 30_000, 'an echo stream after its last byte');
}

async function downloadStream(socks: string, size: number): Promise<void> {
  const s = await openStream(socks, 'web.shop', 8080);
  s.reader.detach();
  sendGet(s, `/bytes/${size}`, true);
  const d = new Download(s.socket);
  await noStall(closedWithin(s.socket, 120_000, 'a download'), () => d.received, `download of ${size} bytes`);
  assert.equal(d.status, 200);
  assert.equal(d.received, size, `download of ${size} bytes: got ${d.received}`);
  assert.ok(!d.corrupt, `download of ${size} bytes came back changed`);
}

describe('1,000 concurrent streams through one proxy', () => {
  let proxy: ProxyProcess;
  before(async () => {
    // 1,000 TLS handshakes at once on two busy cores can take longer than the default 15 s to
    // open; this test is about integrity and leaks, not speed.
    proxy = await startProxyProcess(['--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--log-level', 'warn', '--connect-timeout', '90s']);
  });
  after(async () => {
    assert.equal(await proxy?.stop(), 0);
  });

  test('mixed sizes: every byte intact (sha256), no stream stalls, no file descriptor leaked', async () => {
    const socks = proxy.socks!;
    const pid = proxy.proc.pid!;
    // Warm up: every pod port accepted once (no confirm waits), caches synced, lazy modules loaded.
    for (let i = 0; i < 3; i++) await downloadStream(socks, 1024);
    await echoStream(socks, 10, false);
    await sleep(1500);
    const fdsBefore = fdCount(pid);

    const jobs = Array.from({ length: STREAMS }, (_, i) =>
      i % 5 === 0 ? downloadStream(socks, DOWNLOAD_SIZES[(i / 5) % DOWNLOAD_SIZES.length]) : echoStream(socks, ECHO_SIZES[i % ECHO_SIZES.length], i % 2 === 0),
    );
    const results = await Promise.allSettled(jobs);
    const failures = results.flatMap((r, i) => (r.status === 'rejected' ? [`#${i}: ${(r.reason as Error).message}`] : []));
    assert.deepEqual(failures.slice(0, 5), [], `${failures.length} of ${STREAMS} streams failed`);
    assert.equal(proxy.logs.filter((l) => String(l.msg).startsWith('stream failed')).length, 0, 'no stream was refused');

    // Every stream's sockets and WebSocket are released once the streams are closed.
    let fdsAfter = 0;
    await eventually(async () => (fdsAfter = fdCount(pid)) <= fdsBefore, 15_000, 250).catch(() => {
      assert.fail(`the proxy holds ${fdsAfter} file descriptors, ${fdsAfter - fdsBefore} more than before the streams`);
    });
    await eventually(async () => cluster.sim.openPortForwards === 0, 10_000, 100);
  });
});

describe('--max-streams', () => {
  let proxy: ProxyProcess;
  before(async () => {
    proxy = await startProxyProcess([
      '--kubeconfig',
      cluster.kubeconfig,
      '--listen-socks',
      '127.0.0.1:0',
      '--listen-http',
      '127.0.0.1:0',
      '--max-streams',
      '3',
    ]);
  });

  test('beyond the limit: SOCKS 0x01 and HTTP 503 with one log line each; a freed slot is usable again', async () => {
    const held: OpenStream[] = [];
    for (let i = 0; i < 3; i++) held.push(await openStream(proxy.socks!, 'echo.data', 7000));
    const over = await socks5Connect(proxy.socks!, 'echo.data', 7000);
    assert.equal(over.reply, 0x01, 'SOCKS5 general failure');
    over.socket.destroy();
    const forward = await curl(['-x', `http://${proxy.http}`, '-o', '/dev/null', '-w', '%{http_code}', 'http://web.shop:8080/']);
    assert.equal(forward.stdout, '503');
    const tunnel = await curl(['-p', '-x', `http://${proxy.http}`, 'http://web.shop:8080/']);
    assert.notEqual(tunnel.code, 0);
    assert.match(tunnel.stderr, /503/);
    const refused = await eventually(
      async () => {
        const lines = proxy.logs.filter((l) => l.reason === 'overloaded');
        return lines.length === 3 && lines;
      },
      5_000,
      50,
    );
    assert.match(String(refused[0].msg), /too many concurrent streams: 3 open, the limit is 3/);
    // The held streams are untouched, and closing one frees its slot.
    assert.equal((await roundTrip(held[0], Buffer.from('still here\n'))).toString(), 'still here\n');
    // A client FIN is a half-close to the proxy: the slot is free once the tunnel lingered out.
    held[0].socket.end();
    let refusedMeanwhile = 0;
    const again = await eventually(
      async () => {
        const r = await socks5Connect(proxy.socks!, 'echo.data', 7000);
        if (r.reply !== 0) {
          refusedMeanwhile++;
          r.socket.destroy();
        }
        return r.reply === 0 && r.socket;
      },
      10_000,
      250,
    );
    again.destroy();
    for (const s of held) s.socket.destroy();
    assert.equal(await proxy.stop(), 0, 'never a crash');
    const stopped = proxy.logs.find((l) => l.msg === 'stopped') as { failuresByReason?: Record<string, number> } | undefined;
    assert.equal(stopped?.failuresByReason?.overloaded, 3 + refusedMeanwhile, 'counted in the stream statistics');
  });
});
