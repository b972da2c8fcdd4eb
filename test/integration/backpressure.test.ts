// 1 GiB to a client that keeps stalling: every byte arrives, and the proxy's memory stays flat
// (it must stop reading from the tunnel while the client does not read, not buffer the gigabyte).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { once } from 'node:events';
import { repoRoot, startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { socks5Connect } from '../helpers/socks-client.js';
import { deterministicSha256 } from '../sim/backends.js';

const TOTAL = 1 << 30;
const PAUSE_EVERY = 32 << 20;
const PAUSE_MS = 250;
/**
 * What "flat" allows: the young generation and the young read buffers V8 lets pile up before a
 * scavenge (core/gc-guard.ts: twice the semi-space). Node 24's V8 grows the young generation to
 * twice Node 20's (new space 64 MiB against 32), and RSS growth there was 60–75 MiB for the same
 * transfer. Buffering the gigabyte would be ten times either bound.
 */
const RSS_GROWTH_MAX_MIB = Number(process.versions.node.split('.')[0]) >= 22 ? 96 : 64;

let sim: ChildProcess;
let dir: string;
let proxy: ProxyProcess;

before(async () => {
  // The simulated cluster runs in its own process so the test's reader does not share its core.
  dir = await mkdtemp(path.join(os.tmpdir(), 'proxyout-bp-'));
  const kubeconfig = path.join(dir, 'kubeconfig');
  sim = spawn(process.execPath, [path.join(repoRoot, 'dist/test/sim/main.js'), kubeconfig], { stdio: ['ignore', 'pipe', 'inherit'] });
  await once(sim.stdout!, 'data');
  proxy = await startProxyProcess(['--kubeconfig', kubeconfig, '--listen-socks', '127.0.0.1:0', '--log-level', 'warn']);
});

after(async () => {
  await proxy?.stop();
  sim?.kill('SIGTERM');
  if (sim) await once(sim, 'exit');
  await rm(dir, { recursive: true, force: true });
});

function rss(pid: number): number {
  return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) * 1024;
}

async function download(bytes: number, stall: boolean, onProgress?: () => void): Promise<{ length: number; sha256: string }> {
  const { reply, socket, rest } = await socks5Connect(proxy.socks!, 'web.shop.svc.cluster.local', 8080);
  assert.equal(reply, 0);
  socket.write(`GET /bytes/${bytes} HTTP/1.1\r\nHost: web\r\nConnection: close\r\n\r\n`);
  const hash = createHash('sha256');
  let head = Buffer.from(rest);
  let inBody = false;
  let length = 0;
  let sincePause = 0;
  const take = (chunk: Buffer) => {
    if (!inBody) {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      inBody = true;
      chunk = head.subarray(end + 4);
    }
    hash.update(chunk);
    length += chunk.length;
    sincePause += chunk.length;
    onProgress?.();
    if (stall && sincePause >= PAUSE_EVERY) {
      sincePause = 0;
      socket.pause();
      setTimeout(() => socket.resume(), PAUSE_MS);
    }
  };
  if (rest.length) take(Buffer.alloc(0));
  socket.on('data', take);
  socket.resume();
  await once(socket, 'end');
  return { length, sha256: hash.digest('hex') };
}

test('1 GiB to a stalling client: intact, and proxy RSS stays flat', { timeout: 180_000 }, async () => {
  const pid = proxy.proc.pid!;
  await download(8 << 20, false); // warm up code paths and buffers before the baseline
  const baseline = rss(pid);
  let peak = baseline;
  let lastSample = 0;
  const result = await download(TOTAL, true, () => {
    const now = Date.now();
    if (now - lastSample < 100) return;
    lastSample = now;
    peak = Math.max(peak, rss(pid));
  });
  assert.equal(result.length, TOTAL);
  assert.equal(result.sha256, deterministicSha256(TOTAL));
  const growthMiB = (peak - baseline) / (1 << 20);
  console.log(`# proxy RSS baseline ${(baseline / (1 << 20)).toFixed(1)} MiB, peak growth ${growthMiB.toFixed(1)} MiB over a 1 GiB transfer`);
  assert.ok(
    growthMiB < RSS_GROWTH_MAX_MIB,
    `proxy RSS grew by ${growthMiB.toFixed(1)} MiB (at most ${RSS_GROWTH_MAX_MIB} allowed on Node ${process.versions.node})`,
  );
});
