// Ctrl-C on a `connect` still waiting for its daemon's first sync: the real CLI and a real
// detached daemon, held in its sync by the simulator. The daemon runs in its own session, so the
// terminal's SIGINT reaches only connect; a start the user gave up on must not go on behind them.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { SimCluster } from '../sim/cluster.js';
import { seedSampleCluster } from '../sim/sample.js';
import { eventually } from '../helpers/cluster.js';
import { binPath, runCli } from '../helpers/proxy-process.js';
import { layout } from '../../src/state/paths.js';
import { readEntry } from '../../src/managed/store.js';
import { isAlive } from '../../src/state/process.js';

let sim: SimCluster;
let dir: string;
let kubeconfig: string;
const daemons = new Set<number>();
const env = () => ({ KUBECTL_PROXYOUT_STATE_DIR: path.join(dir, 'state') });

before(async () => {
  sim = await SimCluster.start({ quiet: true, closeGraceMs: 100 });
  await seedSampleCluster(sim);
  dir = mkdtempSync(path.join(tmpdir(), 'proxyout-interrupt-'));
  kubeconfig = path.join(dir, 'kubeconfig');
  await sim.writeKubeconfig(kubeconfig);
});

after(async () => {
  await runCli(['quit'], { env: env() }).catch(() => undefined);
  for (const pid of daemons) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
  await sim?.stop();
  rmSync(dir, { recursive: true, force: true });
});

test('Ctrl-C on a connect whose daemon is still syncing stops that daemon and removes its entry and credentials', async () => {
  // Watches end at once and LISTs are held: the first sync cannot finish until released.
  sim.endWatchesAtOnce(true);
  sim.stallLists(true);
  try {
    const proc = spawn(process.execPath, [binPath, 'connect', '--kubeconfig', kubeconfig, '--listen-socks', '127.0.0.1:0', '--id', 'given-up'], {
      env: { ...process.env, ...env() },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    proc.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    proc.stdout.resume();
    const l = layout(path.join(dir, 'state'));
    const pid = await eventually(async () => {
      const entry = readEntry(l, 'given-up');
      return entry?.phase === 'starting' && entry.pid !== undefined && entry.pid;
    }, 20_000);
    daemons.add(pid);
    proc.kill('SIGINT');
    const [code] = (await once(proc, 'exit')) as [number | null];
    assert.equal(code, 130, stderr);
    assert.match(stderr, /connect was interrupted \(SIGINT\): the proxy it was starting \(given-up\) is stopped/);
    // Released now: a daemon left behind would finish its sync and serve.
    sim.endWatchesAtOnce(false);
    sim.stallLists(false);
    await eventually(async () => !isAlive(pid), 5_000, 50);
    assert.equal(existsSync(l.proxyDir('given-up')), false, 'its directory (kubeconfig, credentials) is gone');
    const status = await runCli(['status', '--json'], { env: env() });
    assert.deepEqual((JSON.parse(status.stdout) as { items: unknown[] }).items, []);
  } finally {
    sim.endWatchesAtOnce(false);
    sim.stallLists(false);
  }
});
