// @kubernetes/client-node 1.x as an independent client of the simulator: informers (list + watch,
// 410 relist) and the PortForward class (v4 WebSocket).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { createHash, randomBytes } from 'node:crypto';
import * as k8s from '@kubernetes/client-node';
import { SimCluster } from './cluster.js';
import { seedSampleCluster, SAMPLE } from './sample.js';
import { sleep } from './testkit.js';

let sim: SimCluster;
let kc: k8s.KubeConfig;

before(async () => {
  sim = await SimCluster.start({ quiet: true, closeGraceMs: 100 });
  await seedSampleCluster(sim);
  kc = new k8s.KubeConfig();
  kc.loadFromString(sim.kubeconfigYaml());
});

after(async () => {
  await sim.stop();
});

async function waitFor(pred: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await sleep(20);
  }
}

test('makeInformer on services: initial sync, add/delete, relist after 410', async () => {
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const informer = k8s.makeInformer(kc, '/api/v1/services', () => core.listServiceForAllNamespaces());
  const added: string[] = [];
  const deleted: string[] = [];
  const errors: unknown[] = [];
  informer.on('add', (s) => added.push(`${s.metadata?.namespace}/${s.metadata?.name}`));
  informer.on('delete', (s) => deleted.push(`${s.metadata?.namespace}/${s.metadata?.name}`));
  informer.on('error', (e) => errors.push(e));
  await informer.start();
  try {
    await waitFor(() => added.includes('shop/web') && added.includes('data/echo'), 'initial list');
    assert.equal(informer.get('web', 'shop')?.spec?.clusterIP, (await core.readNamespacedService({ name: 'web', namespace: 'shop' })).spec?.clusterIP);

    await sim.createService({ namespace: 'shop', name: 'late', selector: { app: 'late' }, ports: [{ port: 9 }] });
    await waitFor(() => added.includes('shop/late'), 'watch ADDED');
    await sim.deleteService('shop', 'late');
    await waitFor(() => deleted.includes('shop/late'), 'watch DELETED');

    // Forget history and cut the watch: the informer re-watches from its resourceVersion, gets an
    // ERROR event with code 410, relists, and keeps going.
    sim.resetCounters();
    await sim.createService({ namespace: 'shop', name: 'before-compact', selector: { app: 'x' }, ports: [{ port: 9 }] });
    await waitFor(() => added.includes('shop/before-compact'), 'ADDED before compaction');
    sim.compact();
    sim.dropWatches();
    await waitFor(() => sim.counters.list >= 1 && sim.counters.watch >= 2, 'relist after 410');
    await sim.createService({ namespace: 'shop', name: 'after-compact', selector: { app: 'x' }, ports: [{ port: 9 }] });
    await waitFor(() => added.includes('shop/after-compact'), 'ADDED after relist');
    assert.deepEqual(errors, []);
  } finally {
    await informer.stop();
  }
});

test('PortForward (v4) moves bytes to the echo backend and back', async () => {
  const pf = new k8s.PortForward(kc);
  const output = new PassThrough();
  const input = new PassThrough();
  const errOut = new PassThrough();
  const chunks: Buffer[] = [];
  output.on('data', (c: Buffer) => chunks.push(c));
  const ws = await pf.portForward(SAMPLE.echo.namespace, SAMPLE.echo.pods[0], [SAMPLE.echo.containerPort], output, errOut, input);
  const data = randomBytes(256 * 1024);
  input.write(data);
  await waitFor(() => Buffer.concat(chunks).length >= data.length, 'echo through client-node PortForward');
  assert.equal(createHash('sha256').update(Buffer.concat(chunks)).digest('hex'), createHash('sha256').update(data).digest('hex'));
  input.end(); // client-node closes the WebSocket on input end (no half-close in v4)
  const sock = ws as unknown as { readyState: number; once(ev: string, f: () => void): void };
  if (sock.readyState !== 3) await new Promise<void>((r) => sock.once('close', r));
});

test('PortForward error channel carries the refused-dial text', async () => {
  const pf = new k8s.PortForward(kc);
  const errOut = new PassThrough();
  let errText = '';
  errOut.on('data', (c: Buffer) => {
    errText += c.toString();
  });
  await pf.portForward('data', SAMPLE.echo.pods[0], [7999], new PassThrough(), errOut, new PassThrough());
  await waitFor(() => errText.includes('connection refused'), 'error text');
  assert.match(errText, /^error forwarding port 7999 to pod [0-9a-f]{64}, uid : /);
});

test('client-node with the client-certificate and exec kubeconfigs', async () => {
  for (const auth of ['cert', 'exec'] as const) {
    const k = new k8s.KubeConfig();
    k.loadFromString(sim.kubeconfigYaml({ auth, namespace: 'shop' }));
    const core = k.makeApiClient(k8s.CoreV1Api);
    const list = await core.listNamespacedPod({ namespace: 'shop', labelSelector: 'app=web' });
    assert.equal(list.items.length, SAMPLE.web.pods.length, auth);
  }
});
