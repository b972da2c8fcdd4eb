// `connect` checks the API server with the user's credentials before it starts the daemon; the
// daemon does not ask again (one discovery request per connect, not two).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import net from 'node:net';
import { once } from 'node:events';
import { startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { runCli } from '../helpers/proxy-process.js';

let cluster: TestCluster;
before(async () => {
  cluster = await startTestCluster();
});
after(async () => {
  await cluster?.close();
});

test('one GET /api per connect: the daemon trusts the check connect just made', async () => {
  const env = { KUBECTL_PROXYOUT_STATE_DIR: path.join(cluster.dir, 'state') };
  cluster.sim.resetCounters();
  const c = await runCli(['connect', '--socks', '--no-proxy-auth', '--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--json'], { env });
  assert.equal(c.code, 0, c.stderr);
  const { id } = JSON.parse(c.stdout) as { id: string };
  try {
    assert.equal(cluster.sim.counters.byPath['/api'], 1, JSON.stringify(cluster.sim.counters.byPath));
  } finally {
    assert.equal((await runCli(['disconnect', id], { env })).code, 0);
  }
});

test('connect --listen-socks localhost:PORT checks ::1 too, where the daemon would also listen: refused before any daemon starts', async () => {
  const env = { KUBECTL_PROXYOUT_STATE_DIR: path.join(cluster.dir, 'state-localhost') };
  const taken = net.createServer().listen(0, '::1');
  await once(taken, 'listening');
  const port = (taken.address() as net.AddressInfo).port;
  try {
    const c = await runCli(['connect', '--no-proxy-auth', '--kubeconfig', cluster.kubeconfig, '--listen-socks', `localhost:${port}`], { env });
    assert.equal(c.code, 1, c.stdout);
    assert.match(c.stderr, new RegExp(`^Error: --listen-socks localhost:${port}: \\[::1\\]: the address is already in use by another program; pick another`));
    const s = await runCli(['status', '--json'], { env });
    assert.deepEqual((JSON.parse(s.stdout) as { items: unknown[] }).items, [], 'no daemon was started');
  } finally {
    taken.close();
  }
});

test("connect on a port a managed proxy holds on one of localhost's addresses names that proxy, not another program", async () => {
  const env = { KUBECTL_PROXYOUT_STATE_DIR: path.join(cluster.dir, 'state-localhost-owner') };
  const free = net.createServer().listen(0, '127.0.0.1');
  await once(free, 'listening');
  const port = (free.address() as net.AddressInfo).port;
  await new Promise((r) => free.close(r));
  const connect = (listen: string, id: string) =>
    runCli(['connect', '--no-proxy-auth', '--kubeconfig', cluster.kubeconfig, '--listen-socks', listen, '--id', id, '--json'], { env });
  for (const [held, wanted] of [
    [`[::1]:${port}`, `localhost:${port}`],
    [`localhost:${port}`, `[::1]:${port}`],
  ] as const) {
    const first = await connect(held, 'holder');
    assert.equal(first.code, 0, first.stderr);
    try {
      const c = await connect(wanted, 'second');
      assert.equal(c.code, 1, c.stdout);
      assert.match(c.stderr, /the address is taken by managed proxy holder/, `${held}, then ${wanted}`);
    } finally {
      assert.equal((await runCli(['disconnect', 'holder'], { env })).code, 0);
    }
  }
});
