// A managed daemon stopped with SIGSTOP (or hung): its pid lives, it answers nothing. `status`
// says so; `connect` for its ID and `exec --id` hand out its addresses, and must say so too; a
// `disconnect` of it given up on (Ctrl-C) must not leave it "stopping" for every later connect.
// And a healthy daemon whose control socket file was removed listens on it again.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { SimCluster } from '../sim/cluster.js';
import { seedSampleCluster } from '../sim/sample.js';
import { binPath, runCli } from '../helpers/proxy-process.js';
import { eventually } from '../helpers/cluster.js';
import { layout } from '../../src/state/paths.js';
import { readEntry } from '../../src/managed/store.js';
import { isAlive } from '../../src/state/process.js';
import { TEST_CONTROL_CHECK_ENV } from '../../src/managed/control-keeper.js';

let sim: SimCluster;
let dir: string;
let kubeconfig: string;
let pid: number | undefined;
const env = () => ({ KUBECTL_PROXYOUT_STATE_DIR: path.join(dir, 'state') });
const connectArgs = (id = 'frozen') => ['connect', '--kubeconfig', kubeconfig, '--listen-socks', '127.0.0.1:0', '--listen-http', '127.0.0.1:0', '--id', id];
const HUNG = /frozen: does not answer on its control socket \(stopped or hung\?\).*disconnect frozen/;

before(async () => {
  sim = await SimCluster.start({ quiet: true, closeGraceMs: 100 });
  await seedSampleCluster(sim);
  dir = mkdtempSync(path.join(tmpdir(), 'proxyout-frozen-'));
  kubeconfig = path.join(dir, 'kubeconfig');
  await sim.writeKubeconfig(kubeconfig);
});

after(async () => {
  if (pid !== undefined) {
    try {
      process.kill(pid, 'SIGCONT');
    } catch {
      /* gone */
    }
  }
  await runCli(['quit'], { env: env() }).catch(() => undefined);
  await sim?.stop();
  rmSync(dir, { recursive: true, force: true });
});

test('connect and exec --id name a running proxy that does not answer, as status does', async () => {
  const first = await runCli([...connectArgs(), '--json'], { env: env() });
  assert.equal(first.code, 0, first.stderr);
  pid = (JSON.parse(first.stdout) as { pid: number }).pid;
  const again = await runCli(connectArgs(), { env: env() });
  assert.equal(again.code, 0, again.stderr);
  assert.doesNotMatch(again.stderr, HUNG, 'a daemon that answers');

  process.kill(pid, 'SIGSTOP');
  try {
    const frozen = await runCli(connectArgs(), { env: env() });
    assert.equal(frozen.code, 0, frozen.stderr);
    assert.match(frozen.stderr, /frozen is already running/);
    assert.match(frozen.stderr, HUNG);
    const json = await runCli([...connectArgs(), '--json'], { env: env() });
    assert.match(json.stderr, HUNG);
    const exec = await runCli(['exec', '--id', 'frozen', '--', process.execPath, '-e', ''], { env: env() });
    assert.equal(exec.code, 0, exec.stderr);
    assert.match(exec.stderr, HUNG);
  } finally {
    process.kill(pid, 'SIGCONT');
  }
});

test('a disconnect of a stopped daemon interrupted by Ctrl-C: the next connect finishes that stop and starts afresh', async () => {
  const l = layout(path.join(dir, 'state'));
  const first = await runCli([...connectArgs('left'), '--json'], { env: env() });
  assert.equal(first.code, 0, first.stderr);
  const old = (JSON.parse(first.stdout) as { pid: number }).pid;
  pid = old;
  process.kill(old, 'SIGSTOP');
  const disconnecting = spawn(process.execPath, [binPath, 'disconnect', 'left'], { env: { ...process.env, ...env() }, stdio: 'ignore' });
  await eventually(async () => readEntry(l, 'left')?.phase === 'stopping', 10_000, 50);
  disconnecting.kill('SIGINT');
  await once(disconnecting, 'exit');

  const again = await runCli([...connectArgs('left'), '--json'], { env: env(), timeoutMs: 30_000 });
  assert.equal(again.code, 0, again.stderr);
  const now = JSON.parse(again.stdout) as { pid: number; existing: boolean };
  pid = now.pid;
  assert.equal(now.existing, false);
  assert.notEqual(now.pid, old);
  assert.equal(isAlive(old), false, 'the stopped daemon is gone');
});

test('a control socket removed while the daemon runs is listened on again: status answers, reload works', async () => {
  const l = layout(path.join(dir, 'state'));
  const up = await runCli([...connectArgs('unlinked'), '--json'], { env: { ...env(), [TEST_CONTROL_CHECK_ENV]: '200' } });
  assert.equal(up.code, 0, up.stderr);
  pid = (JSON.parse(up.stdout) as { pid: number }).pid;
  unlinkSync(l.controlSocket('unlinked'));
  const answering = async () => {
    const r = await runCli(['status', 'unlinked', '--json'], { env: env() });
    return (JSON.parse(r.stdout) as { items: Array<{ answering?: boolean }> }).items[0]?.answering;
  };
  await eventually(async () => (await answering()) === true, 10_000, 200);
  const reload = await runCli(['reload', 'unlinked'], { env: env() });
  assert.equal(reload.code, 0, reload.stderr);
  const down = await runCli(['disconnect', 'unlinked'], { env: env() });
  assert.match(down.stdout + down.stderr, /disconnected unlinked \(context [^)]*\)\n/, 'a graceful stop, not a kill');
});
