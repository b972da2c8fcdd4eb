// `connect` to a cluster whose first sync takes longer than connect's wait but keeps getting
// further (a big cluster behind a slow link): connect waits as long as the daemon does, instead
// of SIGKILLing it at a fixed deadline. The API server is the simulator behind a relay that
// carries its answers at a few hundred KiB/s; connect's wait is shortened by its test hook.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { once } from 'node:events';
import os from 'node:os';
import path from 'node:path';
import { SimCluster } from '../sim/cluster.js';
import { loadBigCluster } from '../sim/realistic.js';
import { runCli } from '../helpers/proxy-process.js';
import { TEST_READY_WAIT_ENV } from '../../src/managed/start-progress.js';

const WAIT_MS = 2_500;
const BYTES_PER_SECOND = 256 * 1024;

let sim: SimCluster;
let dir: string;
let link: net.Server;
let kubeconfig: string;
const env = () => ({ KUBECTL_PROXYOUT_STATE_DIR: path.join(dir, 'state'), [TEST_READY_WAIT_ENV]: String(WAIT_MS) });

/** A loopback relay to `port` that carries what the server sends at BYTES_PER_SECOND per connection. */
async function slowLink(port: number): Promise<net.Server> {
  const server = net.createServer((client) => {
    const upstream = net.connect(port, '127.0.0.1');
    client.pipe(upstream);
    upstream.on('data', (chunk: Buffer) => {
      client.write(chunk);
      upstream.pause();
      setTimeout(() => upstream.resume(), (chunk.length / BYTES_PER_SECOND) * 1000);
    });
    upstream.on('end', () => client.end());
    const cut = () => (client.destroy(), upstream.destroy());
    client.on('error', cut).on('close', cut);
    upstream.on('error', cut).on('close', cut);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return server;
}

before(async () => {
  sim = await SimCluster.start({ quiet: true });
  // About 4 MB of Services and EndpointSlices: some 15 s over the link, far past connect's wait.
  loadBigCluster(sim, { pods: 0, services: 2000, namespaces: 10, nodes: 10 });
  dir = await mkdtemp(path.join(os.tmpdir(), 'proxyout-slow-sync-'));
  link = await slowLink(Number(new URL(sim.server).port));
  kubeconfig = path.join(dir, 'kubeconfig');
  await writeFile(kubeconfig, sim.kubeconfigYaml({ server: `https://127.0.0.1:${(link.address() as net.AddressInfo).port}` }), { mode: 0o600 });
});

after(async () => {
  await runCli(['quit'], { env: env() }).catch(() => undefined);
  link?.close();
  await sim?.stop();
  await rm(dir, { recursive: true, force: true });
});

test('a first sync that keeps getting further outlasts connect’s wait: connect waits, status shows where it listens meanwhile', async () => {
  const started = Date.now();
  const connecting = runCli(['connect', '--kubeconfig', kubeconfig, '--listen-socks', '127.0.0.1:0', '--no-proxy-auth', '--id', 'slow', '--json'], {
    env: env(),
    timeoutMs: 90_000,
  });
  // While it syncs, status already says where it listens (port 0 resolved): clients may connect.
  type Item = { state: string; socks: string | null; cache: { state: string } };
  const item = async () => (JSON.parse((await runCli(['status', 'slow', '--json'], { env: env() })).stdout) as { items: Item[] }).items[0];
  let starting: Item | undefined;
  while (!starting && Date.now() - started < 30_000) {
    const now = await item().catch(() => undefined);
    if (now?.state === 'starting' && now.socks !== null) starting = now;
    else await new Promise((resolve) => setTimeout(resolve, 200));
  }
  assert.match(starting?.socks ?? 'none', /^127\.0\.0\.1:[1-9]\d*$/, 'the listen address while starting');
  const r = await connecting;
  assert.equal(r.code, 0, r.stderr);
  assert.ok(Date.now() - started > 2 * WAIT_MS, `the sync took longer than the wait (${Date.now() - started} ms)`);
  const out = JSON.parse(r.stdout) as { state: string; existing: boolean };
  assert.deepEqual([out.state, out.existing], ['running', false]);
  const running = (await item())!;
  assert.deepEqual([running.state, running.cache.state], ['running', 'synced']);
  assert.equal(running.socks, starting!.socks, 'the same address once running');
  assert.equal((await runCli(['disconnect', 'slow'], { env: env() })).code, 0);
});
