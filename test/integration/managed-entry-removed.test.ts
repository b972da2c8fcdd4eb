// A daemon whose state entry is removed under it (the state directory cleaned by hand, `disconnect
// --forget` from another machine) or taken by another proxy: nothing could see or stop it any more,
// so it stops by itself, frees its ports, and leaves another proxy's entry as it found it.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { SimCluster } from '../sim/cluster.js';
import { seedSampleCluster } from '../sim/sample.js';
import { runCli } from '../helpers/proxy-process.js';
import { eventually } from '../helpers/cluster.js';
import { layout } from '../../src/state/paths.js';
import { readEntry, writeEntry } from '../../src/managed/store.js';
import { isAlive } from '../../src/state/process.js';
import { TEST_ENTRY_CHECK_ENV } from '../../src/managed/entry-watch.js';

let sim: SimCluster;
let dir: string;
let kubeconfig: string;
const pids = new Set<number>();
const env = () => ({ KUBECTL_PROXYOUT_STATE_DIR: path.join(dir, 'state'), [TEST_ENTRY_CHECK_ENV]: '200' });

before(async () => {
  sim = await SimCluster.start({ quiet: true, closeGraceMs: 100 });
  await seedSampleCluster(sim);
  dir = mkdtempSync(path.join(tmpdir(), 'proxyout-entry-'));
  kubeconfig = path.join(dir, 'kubeconfig');
  await sim.writeKubeconfig(kubeconfig);
});

after(async () => {
  await runCli(['quit'], { env: env() }).catch(() => undefined);
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
  await sim?.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function start(id: string): Promise<{ pid: number; port: number }> {
  const r = await runCli(
    ['connect', '--kubeconfig', kubeconfig, '--listen-socks', '127.0.0.1:0', '--no-proxy-auth', '--shutdown-grace', '0', '--id', id, '--json'],
    {
      env: env(),
    },
  );
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout) as { pid: number; socks: string };
  pids.add(out.pid);
  return { pid: out.pid, port: Number(out.socks.split(':').pop()) };
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

test('a daemon whose entry was removed stops within seconds and frees its port', async () => {
  const l = layout(path.join(dir, 'state'));
  const { pid, port } = await start('removed');
  rmSync(l.proxyDir('removed'), { recursive: true, force: true });
  await eventually(async () => !isAlive(pid), 10_000, 100);
  assert.ok(await portFree(port), 'its port is free again');
  assert.match(readFileSync(l.logFile('removed'), 'utf8'), /"reason":"state entry removed".*"msg":"daemon stopping"/);
  const status = await runCli(['status'], { env: env() });
  assert.doesNotMatch(status.stdout, /removed/);
});

test("a daemon whose entry another proxy took stops, and leaves that proxy's entry and files alone", async () => {
  const l = layout(path.join(dir, 'state'));
  const { pid } = await start('taken');
  const theirs = { ...readEntry(l, 'taken')!, createdAt: new Date(Date.now() + 1000).toISOString(), pid: process.pid, phase: 'running' as const };
  writeEntry(l, theirs);
  await eventually(async () => !isAlive(pid), 10_000, 100);
  assert.deepEqual(readEntry(l, 'taken'), theirs, 'not marked stopping, not removed');
  assert.ok(readFileSync(l.kubeconfigFile('taken'), 'utf8').length > 0, 'its kubeconfig stays');
});
