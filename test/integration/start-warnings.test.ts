// Mistakes that do not stop the proxy but would fail clients later, said once it has started:
// on the ready lines of the foreground proxy and of `connect`, naming the flag and value; and a
// start that fails on a config file's route names that route.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { runCli, startProxyProcess } from '../helpers/proxy-process.js';

let cluster: TestCluster;
let stateDir: string;

before(async () => {
  cluster = await startTestCluster();
  stateDir = mkdtempSync(path.join(tmpdir(), 'pxw-'));
});
after(async () => {
  await runCli(['quit'], { env: { KUBECTL_PROXYOUT_STATE_DIR: stateDir } }).catch(() => undefined);
  await cluster?.close();
  rmSync(stateDir, { recursive: true, force: true });
});

const NO_NAMESPACE =
  /^kubectl-proxyout: warning: -n shpo: there is no namespace "shpo" in context sim, so short names \(SERVICE, SERVICE:PORT\) fail; SERVICE\.NAMESPACE names work \(kubectl get namespaces --context sim lists them\)$/m;

async function readyLines(args: string[], kubeconfig = cluster.kubeconfig): Promise<string> {
  const p = await startProxyProcess(['--kubeconfig', kubeconfig, '--listen-socks', '127.0.0.1:0', '--shutdown-grace', '0', ...args]);
  await p.stop();
  return p.stdout.join('\n');
}

test('-n naming a namespace that does not exist is a warning at start, not only a failure on each short name', async () => {
  assert.match(await readyLines(['-n', 'shpo']), NO_NAMESPACE);
  assert.doesNotMatch(await readyLines(['-n', 'shop']), /warning/);
});

test('a user who may not list namespaces is told too (a GET of the namespace answers 404)', async () => {
  const token = cluster.sim.issueToken({ denied: ['list namespaces', 'watch namespaces'] });
  const kubeconfig = path.join(cluster.dir, 'kc-no-namespace-list');
  await cluster.sim.writeKubeconfig(kubeconfig, { token });
  assert.match(await readyLines(['-n', 'shpo'], kubeconfig), NO_NAMESPACE);
  assert.doesNotMatch(await readyLines(['-n', 'shop'], kubeconfig), /warning/);
});

test('connect says it on stderr beside its ready lines', async () => {
  const env = { KUBECTL_PROXYOUT_STATE_DIR: stateDir };
  const r = await runCli(['connect', '--kubeconfig', cluster.kubeconfig, '-n', 'shpo', '--listen-socks', '127.0.0.1:0'], { env, timeoutMs: 60_000 });
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stderr, NO_NAMESPACE);
  assert.doesNotMatch(r.stdout, /warning/, 'stdout stays shell lines only (eval)');
});

test('a port mapping whose target is not there is a warning at start naming the mapping; one that is there is not', async () => {
  const lines = await readyLines([
    '--forward',
    '127.0.0.1:0=nosuch.shop:5432',
    '--forward',
    '127.0.0.1:0=web.shop:9999',
    '--forward',
    '127.0.0.1:0=web.shpo:8080',
    '--forward',
    '127.0.0.1:0=web.shop:8080',
    '--forward',
    '127.0.0.1:0=db.shop:5432',
  ]);
  const warnings = lines.split('\n').filter((l) => l.startsWith('kubectl-proxyout: warning:'));
  assert.deepEqual(warnings, [
    'kubectl-proxyout: warning: --forward 127.0.0.1:0=nosuch.shop:5432: cluster route sim: no Service "nosuch" in namespace "shop"',
    'kubectl-proxyout: warning: --forward 127.0.0.1:0=web.shop:9999: cluster route sim: Service shop/web has no TCP port 9999 (ports: 8080/http)',
    `kubectl-proxyout: warning: --forward 127.0.0.1:0=web.shpo:8080: web.shpo is not served by any route (no route name, include or cluster name matches it) and direct pass-through is off; cluster route sim: web.shpo is no cluster name: as one it would be Service "web" in namespace "shpo", and there is no namespace "shpo"`,
  ]);
});

test('-n with a routing table that has no cluster route is said to have no effect', async () => {
  const config = path.join(cluster.dir, 'direct-only.yaml');
  writeFileSync(config, 'routes:\n  - name: out\n    kind: direct\n');
  const lines = await readyLines(['--config', config, '-n', 'shop']);
  assert.match(lines, /^kubectl-proxyout: warning: -n shop has no effect: no route serves cluster names \(routes: out \(direct\)\)$/m);
});

test('a config file route whose context the kubeconfig lacks: the start error names the file, line and route', async () => {
  const config = path.join(cluster.dir, 'bad-context.yaml');
  writeFileSync(config, 'routes:\n  - name: staging\n    kind: cluster\n    context: staging\n');
  const r = await runCli(['--kubeconfig', cluster.kubeconfig, '--config', config, '--listen-socks', '127.0.0.1:0']);
  assert.equal(r.code, 1, r.stderr);
  // It said only 'context "staging" not found in kubeconfig'.
  assert.equal(
    r.stderr.split('\n').find((l) => l.startsWith('Error: ')),
    `Error: ${config}:2: route staging: context "staging" not found in kubeconfig (known: sim)`,
  );
});
