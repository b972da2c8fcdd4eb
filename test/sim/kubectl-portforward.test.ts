// Fidelity with the real kubectl (when it is on PATH): `kubectl port-forward` speaks only SPDY —
// tunnelled in a WebSocket first, plain SPDY when that is refused or with
// KUBECTL_PORT_FORWARD_WEBSOCKETS=false — and must move 1 MiB intact through the simulator.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join, delimiter } from 'node:path';
import { SimCluster } from './cluster.js';
import { seedSampleCluster, SAMPLE } from './sample.js';

const kubectl = (process.env.PATH ?? '')
  .split(delimiter)
  .map((d) => join(d, 'kubectl'))
  .find((p) => existsSync(p));
const SKIP = 'kubectl not on PATH: port-forward fidelity check skipped';
let sim: SimCluster;
let dir: string;
let kubeconfig: string;
const echoPod = SAMPLE.echo.pods[0];

before(async () => {
  if (!kubectl) return;
  sim = await SimCluster.start({ quiet: true, closeGraceMs: 200 });
  await seedSampleCluster(sim);
  dir = await mkdtemp(join(tmpdir(), 'sim-kubectl-pf-'));
  kubeconfig = join(dir, 'kubeconfig');
  await sim.writeKubeconfig(kubeconfig);
});

after(async () => {
  if (!kubectl) return;
  await sim.stop();
  await rm(dir, { recursive: true, force: true });
});

interface Forward {
  proc: ChildProcess;
  port: number;
  log: () => string;
  stop(): Promise<void>;
}

async function portForward(remote: number, env: Record<string, string> = {}): Promise<Forward> {
  const proc = spawn(
    kubectl!,
    [
      '--kubeconfig',
      kubeconfig,
      '--cache-dir',
      join(dir, 'cache'),
      '-v=6',
      '-n',
      'data',
      'port-forward',
      `pod/${echoPod}`,
      `:${remote}`,
      '--address',
      '127.0.0.1',
    ],
    {
      env: { ...process.env, HOME: dir, KUBECONFIG: '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  proc.stdout!.on('data', (c: Buffer) => (out += c));
  proc.stderr!.on('data', (c: Buffer) => (out += c));
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`kubectl port-forward did not start:\n${out}`)), 15_000);
    const check = () => {
      const m = /Forwarding from 127\.0\.0\.1:(\d+) ->/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    };
    proc.stdout!.on('data', check);
    proc.once('exit', (code) => reject(new Error(`kubectl exited with ${code}:\n${out}`)));
  });
  return {
    proc,
    port,
    log: () => out,
    async stop() {
      if (proc.exitCode === null) {
        proc.kill('SIGTERM');
        await once(proc, 'exit');
      }
    },
  };
}

/** Sends `data` through the forward and returns what the echo pod sent back. */
function echoThrough(port: number, data: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    const got: Buffer[] = [];
    let n = 0;
    s.on('data', (d: Buffer) => {
      got.push(d);
      n += d.length;
      if (n >= data.length) {
        s.end();
        resolve(Buffer.concat(got));
      }
    });
    s.on('error', reject);
    s.on('close', () => n < data.length && reject(new Error(`closed after ${n} of ${data.length} bytes`)));
    s.write(data);
  });
}

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const MiB = randomBytes(1 << 20);

for (const mode of ['tunnelled', 'plain'] as const) {
  test(`kubectl port-forward (${mode} SPDY) moves 1 MiB intact, twice`, async (t) => {
    if (!kubectl) return t.skip(SKIP);
    const fwd = await portForward(7000, mode === 'plain' ? { KUBECTL_PORT_FORWARD_WEBSOCKETS: 'false' } : {});
    try {
      for (let i = 0; i < 2; i++) assert.equal(sha(await echoThrough(fwd.port, MiB)), sha(MiB), `round ${i}`);
      assert.equal(sim.openSpdySessions, 1, 'one session for every connection');
      const upgrade = mode === 'plain' ? /POST https:\/\/\S+\/portforward 101 Switching Protocols/ : /GET https:\/\/\S+\/portforward 101 Switching Protocols/;
      assert.match(fwd.log(), upgrade);
      if (mode === 'tunnelled') assert.doesNotMatch(fwd.log(), /fallback to secondary dialer/);
    } finally {
      await fwd.stop();
    }
  });
}

for (const mode of ['tunnelled', 'plain'] as const) {
  test(`kubectl (Go zlib) decodes our header blocks: non-empty SYN_REPLYs, block after block of one session (${mode})`, async (t) => {
    if (!kubectl) return t.skip(SKIP);
    const fwd = await portForward(7000, mode === 'plain' ? { KUBECTL_PORT_FORWARD_WEBSOCKETS: 'false' } : {});
    try {
      // Sizes cross the 64 KiB stored-block limit; each round's two SYN_REPLYs reuse the session's context.
      for (const [round, size] of [10, 1000, 70_000, 5].entries()) {
        sim.setSpdyReplyHeaders({ 'x-round': String(round), 'x-blob': randomBytes(size).toString('base64'), 'x-empty': '' });
        const payload = randomBytes(64 * 1024);
        assert.equal(sha(await echoThrough(fwd.port, payload)), sha(payload), `round ${round}`);
      }
      assert.equal(sim.openSpdySessions, 1, 'one session carried every round');
      assert.doesNotMatch(fwd.log(), /error|zlib|invalid/i);
    } finally {
      sim.setSpdyReplyHeaders({});
      await fwd.stop();
    }
  });
}

test('kubectl falls back to plain SPDY by itself when the tunnel is off (a 1.29-like server)', async (t) => {
  if (!kubectl) return t.skip(SKIP);
  sim.setSpdyTunnel(false);
  const fwd = await portForward(7000);
  try {
    assert.equal(sha(await echoThrough(fwd.port, MiB)), sha(MiB));
    assert.match(fwd.log(), /fallback to secondary dialer from primary dialer err: .*400 Bad Request/);
    assert.match(fwd.log(), /POST https:\/\/\S+\/portforward 101 Switching Protocols/);
  } finally {
    sim.setSpdyTunnel(true);
    await fwd.stop();
  }
});

test('kubectl reports the kubelet error text for a refused port and gives up the forward', async (t) => {
  if (!kubectl) return t.skip(SKIP);
  const fwd = await portForward(7001);
  const s = net.connect(fwd.port, '127.0.0.1');
  s.on('error', () => {});
  const [code] = (await once(fwd.proc, 'exit')) as [number | null];
  assert.notEqual(code, 0);
  assert.match(fwd.log(), /error forwarding port 7001 to pod [0-9a-f]{64}, uid : .*connect: connection refused/);
  assert.match(fwd.log(), /lost connection to pod/);
});
