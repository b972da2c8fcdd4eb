// `connect` checks the API server with the user's credentials before it starts the daemon; the
// daemon does not ask again (one discovery request per connect, not two).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
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
