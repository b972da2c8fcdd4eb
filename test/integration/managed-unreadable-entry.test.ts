// A proxies/<id>/state.json the user cannot read (another owner, mode 000; here a directory in its
// place, which root cannot read either): the commands say which one in a line, and `quit` still
// stops the proxies it can, saying so, and leaves that entry (its daemon may run).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { SimCluster } from '../sim/cluster.js';
import { seedSampleCluster } from '../sim/sample.js';
import { runCli } from '../helpers/proxy-process.js';
import { layout } from '../../src/state/paths.js';

let sim: SimCluster;
let dir: string;
let kubeconfig: string;
const env = () => ({ KUBECTL_PROXYOUT_STATE_DIR: path.join(dir, 'state') });

before(async () => {
  sim = await SimCluster.start({ quiet: true, closeGraceMs: 100 });
  await seedSampleCluster(sim);
  dir = mkdtempSync(path.join(tmpdir(), 'proxyout-unreadable-'));
  kubeconfig = path.join(dir, 'kubeconfig');
  await sim.writeKubeconfig(kubeconfig);
});

after(async () => {
  rmSync(path.join(dir, 'state', 'proxies', 'locked'), { recursive: true, force: true });
  await runCli(['quit'], { env: env() }).catch(() => undefined);
  await sim?.stop();
  rmSync(dir, { recursive: true, force: true });
});

test('an unreadable entry: status and quit name it in one line; quit stops the others first', async () => {
  const up = await runCli(['connect', '--kubeconfig', kubeconfig, '--listen-socks', '127.0.0.1:0', '--no-proxy-auth', '--id', 'fine'], { env: env() });
  assert.equal(up.code, 0, up.stderr);
  const l = layout(path.join(dir, 'state'));
  mkdirSync(l.stateFile('locked'), { recursive: true });
  const wanted = /^Error: cannot read the state of proxy locked \(\S+state\.json: EISDIR\): make it yours again \(chown, chmod 600\), or remove \S+locked\n$/;

  const status = await runCli(['status'], { env: env() });
  assert.equal(status.code, 1);
  assert.match(status.stderr, wanted);

  const quit = await runCli(['quit'], { env: env() });
  assert.equal(quit.code, 1);
  assert.match(quit.stdout, /disconnected fine/);
  assert.match(quit.stderr, wanted);
  assert.equal(existsSync(l.proxyDir('fine')), false);
  assert.equal(existsSync(l.stateFile('locked')), true);
});
