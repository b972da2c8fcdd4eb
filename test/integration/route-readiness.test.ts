// What a client meets while its cluster route is not ready: the connect timeout runs out during
// the first sync → SOCKS 0x06 / HTTP 504 (docs/usage.md, timeouts), saying what it waited for.
// Real CLI against the simulated cluster.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { once } from 'node:events';
import { spawn } from 'node:child_process';
import { startTestCluster, eventually, type TestCluster } from '../helpers/cluster.js';
import { binPath } from '../helpers/proxy-process.js';
import { socks5Connect } from '../helpers/socks-client.js';
import { curl } from '../helpers/curl.js';

/** A loopback port nothing listens on right now. */
async function freePort(): Promise<number> {
  const server = net.createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  server.close();
  await once(server, 'close');
  return port;
}

let cluster: TestCluster;
before(async () => {
  cluster = await startTestCluster();
});
after(async () => {
  cluster.sim.stallWatches(false);
  cluster.sim.stallLists(false);
  await cluster.close();
});

test('the connect timeout running out while the first sync runs is a timeout (0x06 / 504) that says so', async () => {
  cluster.sim.stallWatches(true);
  cluster.sim.stallLists(true);
  // It listens at once but prints its addresses only once synced: the ports are chosen here.
  const [socksPort, httpPort] = [await freePort(), await freePort()];
  const proc = spawn(
    process.execPath,
    [
      binPath,
      '--kubeconfig',
      cluster.kubeconfig,
      '--listen-socks',
      `127.0.0.1:${socksPort}`,
      '--listen-http',
      `127.0.0.1:${httpPort}`,
      '--connect-timeout',
      '1s',
    ],
    { stdio: 'ignore' },
  );
  const exited = once(proc, 'exit');
  try {
    const { reply, socket } = await eventually(async () => socks5Connect(`127.0.0.1:${socksPort}`, 'web.shop', 8080).catch(() => undefined), 10_000, 100);
    socket.destroy();
    assert.equal(reply, 6, 'TTL expired: the connect timeout');
    const viaHttp = await curl(['-s', '-w', '%{http_code}', '--proxy', `http://127.0.0.1:${httpPort}`, 'http://web.shop:8080/']);
    assert.match(viaHttp.stdout, /within 1000 ms: cluster route \S+ is still syncing its cache[^\n]*\n504$/);
  } finally {
    cluster.sim.stallWatches(false);
    cluster.sim.stallLists(false);
    proc.kill('SIGTERM');
    await exited;
  }
});
