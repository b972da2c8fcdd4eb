// Watches on a dead path: our list+watch client, ResilientInformer (real HTTP to the simulated API server), with short deadlines so the dead path shows in seconds, not minutes.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { startTestCluster, eventually, type TestCluster } from '../helpers/cluster.js';
import { loadKubeConfig } from '../../src/cluster/kubeconfig.js';
import { ApiConnection } from '../../src/cluster/api.js';
import { ResilientInformer } from '../../src/cluster/informer.js';
import { slimService, type SlimService } from '../../src/cluster/slim.js';
import { createLogger } from '../../src/core/log.js';

let cluster: TestCluster;
const lines: Array<Record<string, unknown>> = [];
const log = createLogger(
  'debug',
  new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString().split('\n')) if (l) lines.push(JSON.parse(l) as Record<string, unknown>);
      cb();
    },
  }) as never,
);

before(async () => {
  cluster = await startTestCluster();
});

after(async () => {
  await cluster?.close();
});

function servicesInformer(deadlines: { watchTimeoutSeconds: number; graceMs: number; headersTimeoutMs: number }): ResilientInformer<SlimService> {
  const { kc } = loadKubeConfig({ kubeconfig: cluster.kubeconfig });
  return new ResilientInformer(new ApiConnection(kc), '/api/v1/namespaces/shop/services', log, () => undefined, slimService, deadlines);
}

const has = (inf: ResilientInformer<SlimService>, name: string) => inf.get(`shop/${name}`) !== undefined;

test('a watch that goes silent without ending is cut after its server-side timeout + grace; new objects show up again', async () => {
  const inf = servicesInformer({ watchTimeoutSeconds: 1, graceMs: 500, headersTimeoutMs: 5_000 });
  await inf.start();
  try {
    await cluster.sim.createService({ namespace: 'shop', name: 'before-freeze', selector: { app: 'x' }, ports: [{ port: 80 }] });
    await eventually(async () => has(inf, 'before-freeze'), 5_000, 20);
    // The sim honours timeoutSeconds: a frozen watch no longer ends by itself and sends nothing.
    assert.ok(cluster.sim.freezeWatches() >= 1);
    await cluster.sim.createService({ namespace: 'shop', name: 'while-frozen', selector: { app: 'x' }, ports: [{ port: 80 }] });
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(has(inf, 'while-frozen'), false, 'the frozen watch delivered nothing');
    // Deadline: 1–2 s of timeoutSeconds + 0.5 s grace.
    await eventually(async () => has(inf, 'while-frozen'), 10_000, 50);
    assert.ok(lines.some((l) => l.msg === 'watch silent past its server-side end; the connection is presumed dead, watching again'));
    assert.equal(inf.status, 'synced');
  } finally {
    await inf.stop();
  }
});

test('healthy watches end at timeoutSeconds and resume without a deadline cut', async () => {
  const cuts = () => lines.filter((l) => String(l.msg).startsWith('watch silent past')).length;
  const before = cuts();
  const inf = servicesInformer({ watchTimeoutSeconds: 1, graceMs: 1_500, headersTimeoutMs: 5_000 });
  await inf.start();
  try {
    cluster.sim.resetCounters();
    await new Promise((r) => setTimeout(r, 4_500));
    assert.ok(cluster.sim.counters.watch >= 2, `the watch was renewed at its timeoutSeconds: ${cluster.sim.counters.watch} watch requests`);
    await cluster.sim.createService({ namespace: 'shop', name: 'after-rewatches', selector: { app: 'x' }, ports: [{ port: 80 }] });
    await eventually(async () => has(inf, 'after-rewatches'), 5_000, 20);
    assert.equal(cuts(), before, 'no watch was taken for dead');
  } finally {
    await inf.stop();
  }
});

test('a watch request whose headers never come times out and is retried', async () => {
  const inf = servicesInformer({ watchTimeoutSeconds: 30, graceMs: 5_000, headersTimeoutMs: 500 });
  cluster.sim.stallWatches(true);
  const started = inf.start();
  try {
    // The list works; the watch hangs: the informer must report a failure instead of hanging for good.
    await eventually(async () => inf.status === 'retrying', 5_000, 20);
    assert.match(String(inf.lastError?.message), /timeout/i);
    cluster.sim.stallWatches(false);
    await started;
    await cluster.sim.createService({ namespace: 'shop', name: 'after-stall', selector: { app: 'x' }, ports: [{ port: 80 }] });
    await eventually(async () => has(inf, 'after-stall'), 10_000, 50);
  } finally {
    cluster.sim.stallWatches(false);
    await inf.stop();
  }
});

test('watches the server ends as soon as they start are renewed about once a second, not in a hot loop', async () => {
  const inf = servicesInformer({ watchTimeoutSeconds: 30, graceMs: 5_000, headersTimeoutMs: 5_000 });
  await inf.start();
  cluster.sim.endWatchesAtOnce(true);
  try {
    cluster.sim.dropWatches();
    cluster.sim.resetCounters();
    await new Promise((r) => setTimeout(r, 3_000));
    const watches = cluster.sim.counters.watch;
    assert.ok(watches >= 1 && watches <= 5, `${watches} watch requests in 3 s`);
  } finally {
    cluster.sim.endWatchesAtOnce(false);
  }
  await cluster.sim.createService({ namespace: 'shop', name: 'after-cuts', selector: { app: 'x' }, ports: [{ port: 80 }] });
  await eventually(async () => has(inf, 'after-cuts'), 5_000, 20);
  await inf.stop();
});
