// Fidelity check with the real kubectl (when it is on PATH): discovery, server-side tables,
// JSON output, and the token, client-certificate and exec kubeconfig variants.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, delimiter } from 'node:path';
import { existsSync } from 'node:fs';
import { SimCluster } from './cluster.js';
import { seedSampleCluster, SAMPLE } from './sample.js';

const kubectl = (process.env.PATH ?? '')
  .split(delimiter)
  .map((d) => join(d, 'kubectl'))
  .find((p) => existsSync(p));
let sim: SimCluster;
let dir: string;

before(async () => {
  if (!kubectl) return;
  sim = await SimCluster.start({ quiet: true });
  await seedSampleCluster(sim);
  dir = await mkdtemp(join(tmpdir(), 'sim-kubectl-'));
});

after(async () => {
  if (!kubectl) return;
  await sim.stop();
  await rm(dir, { recursive: true, force: true });
});

function run(kubeconfig: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      kubectl!,
      ['--kubeconfig', kubeconfig, '--cache-dir', join(dir, 'cache'), '--request-timeout', '20s', ...args],
      { timeout: 30_000, env: { ...process.env, HOME: dir, KUBECONFIG: '' } },
      (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
    );
  });
}

test('kubectl get svc,pods,endpointslices -A shows the seeded objects (token kubeconfig)', async (t) => {
  if (!kubectl) return t.skip('kubectl not on PATH: fidelity check skipped');
  const kc = join(dir, 'token.yaml');
  await sim.writeKubeconfig(kc);
  const r = await run(kc, ['get', 'svc,pods,endpointslices', '-A']);
  assert.equal(r.code, 0, r.stderr);
  for (const name of [
    'service/web',
    'service/api',
    'service/db',
    'service/external',
    'service/echo',
    'service/hello',
    ...SAMPLE.web.pods.map((p) => `pod/${p}`),
    'pod/db-0',
    'endpointslice.discovery.k8s.io/web-',
  ]) {
    assert.ok(r.stdout.includes(name), `${name} in:\n${r.stdout}`);
  }
  assert.match(r.stdout, /shop\s+service\/db\s+ClusterIP\s+None/);
  assert.match(r.stdout, /shop\s+service\/external\s+ExternalName\s+<none>\s+external\.example\.com/);
  const ns = await run(kc, ['get', 'ns']);
  assert.equal(ns.code, 0, ns.stderr);
  for (const n of ['shop', 'data', 'default']) assert.match(ns.stdout, new RegExp(`^${n}\\s+Active`, 'm'));
});

test('kubectl get svc web -n shop -o json parses; -o yaml lists the namespace', async (t) => {
  if (!kubectl) return t.skip('kubectl not on PATH: fidelity check skipped');
  const kc = join(dir, 'token.yaml');
  await sim.writeKubeconfig(kc);
  const r = await run(kc, ['get', 'svc', 'web', '-n', 'shop', '-o', 'json']);
  assert.equal(r.code, 0, r.stderr);
  const svc = JSON.parse(r.stdout);
  assert.equal(svc.kind, 'Service');
  assert.equal(svc.spec.ports[0].targetPort, 'http');
  const y = await run(kc, ['get', 'svc', '-n', 'shop', '-o', 'yaml']);
  assert.equal(y.code, 0, y.stderr);
  assert.match(y.stdout, /^kind: List$/m);
  assert.match(y.stdout, /name: web$/m);
  const missing = await run(kc, ['get', 'pod', 'nope', '-n', 'shop']);
  assert.notEqual(missing.code, 0);
  assert.match(missing.stderr, /pods "nope" not found/);
});

test('kubectl with client-certificate and exec kubeconfigs', async (t) => {
  if (!kubectl) return t.skip('kubectl not on PATH: fidelity check skipped');
  for (const auth of ['cert', 'exec'] as const) {
    const kc = join(dir, `${auth}.yaml`);
    await sim.writeKubeconfig(kc, { auth, namespace: 'shop' });
    const r = await run(kc, ['get', 'pods', '-l', 'app=web', '-o', 'name']);
    assert.equal(r.code, 0, `${auth}: ${r.stderr}`);
    assert.deepEqual(
      r.stdout.trim().split('\n').sort(),
      SAMPLE.web.pods.map((p) => `pod/${p}`),
    );
  }
  const scoped = join(dir, 'scoped.yaml');
  await sim.writeKubeconfig(scoped, { token: sim.issueToken({ namespaces: ['shop'] }) });
  const denied = await run(scoped, ['get', 'svc', '-A']);
  assert.notEqual(denied.code, 0);
  assert.match(denied.stderr, /Forbidden|forbidden/);
});

test('kubectl get --chunk-size pages through limit/continue (table and JSON), with the same objects as one list', async (t) => {
  if (!kubectl) return t.skip('kubectl not on PATH: fidelity check skipped');
  const kc = join(dir, 'token.yaml');
  await sim.writeKubeconfig(kc);
  const whole = await run(kc, ['get', 'pods,svc', '-A', '-o', 'name', '--chunk-size=0']);
  assert.equal(whole.code, 0, whole.stderr);
  sim.resetCounters();
  const paged = await run(kc, ['get', 'pods,svc', '-A', '-o', 'name', '--chunk-size=2']);
  assert.equal(paged.code, 0, paged.stderr);
  assert.deepEqual(paged.stdout.trim().split('\n').sort(), whole.stdout.trim().split('\n').sort());
  assert.ok(sim.counters.continued >= 2, `continue requests: ${JSON.stringify(sim.counters)}`);
  sim.resetCounters();
  const table = await run(kc, ['get', 'pods', '-A', '--chunk-size=1']);
  assert.equal(table.code, 0, table.stderr);
  for (const p of SAMPLE.web.pods) assert.match(table.stdout, new RegExp(`^shop\\s+${p}\\s`, 'm'));
  assert.ok(sim.counters.continued >= SAMPLE.web.pods.length, 'one page per pod');
});
