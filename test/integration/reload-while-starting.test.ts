// SIGHUP while the foreground proxy is still starting (its cluster slow to answer): it must not
// end the proxy, as the signal's default action would. The table is read again once the proxy has
// started, so an edit made meanwhile takes effect. Real CLI, real curl, the simulated cluster
// behind a TCP gate that holds the API connections until released.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { startTestCluster, eventually, type TestCluster } from '../helpers/cluster.js';
import { startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { startTcpGate, type TcpGate } from '../helpers/tcp-gate.js';
import { curl } from '../helpers/curl.js';

let cluster: TestCluster;
let gate: TcpGate;
let proxy: ProxyProcess | undefined;
before(async () => {
  cluster = await startTestCluster();
  const api = new URL(cluster.sim.server);
  gate = await startTcpGate({ host: api.hostname, port: Number(api.port) }, 'hold');
  await cluster.sim.writeKubeconfig(cluster.kubeconfig, { namespace: 'shop', server: gate.url });
});
after(async () => {
  cluster.sim.endLingeringStreams();
  await proxy?.stop();
  await gate.close();
  await cluster.close();
});

test('SIGHUP during start-up: the proxy starts, then reads the edited config file', async () => {
  const config = path.join(cluster.dir, 'config.yaml');
  writeFileSync(config, 'routes:\n  - {name: sim, kind: cluster, context: sim}\n');
  let child: ChildProcess | undefined;
  const starting = startProxyProcess(['--kubeconfig', cluster.kubeconfig, '--config', config, '--listen-socks', '127.0.0.1:0'], {
    onSpawn: (p) => (child = p),
  });
  starting.catch(() => undefined);
  // The proxy is waiting on the held API server: it is past reading its table, not ready yet.
  await eventually(async () => gate.connections > 0, 10_000, 20);
  writeFileSync(config, 'routes:\n  - {name: sim, kind: cluster, context: sim}\n  - {name: ads, kind: reject, include: [ads.example.com]}\n');
  child!.kill('SIGHUP');
  await new Promise((r) => setTimeout(r, 300));
  gate.set('pass');
  proxy = await starting;

  await eventually(async () => proxy!.logs.find((l) => l.msg === 'routing table reloaded'), 10_000, 50);
  assert.ok(proxy.logs.some((l) => l.msg === 'SIGHUP while starting: the routing table is read again once the proxy has started'));
  const served = await curl(['-sS', '--max-time', '10', '-x', `socks5h://${proxy.socks}`, 'http://web.shop:8080/']);
  assert.match(served.stdout, /hello from/, served.stderr);
  const blocked = await curl(['-sS', '--max-time', '10', '-x', `socks5h://${proxy.socks}`, 'http://ads.example.com/']);
  assert.notEqual(blocked.code, 0);
  assert.ok(
    proxy.logs.some((l) => String(l.msg).startsWith('stream failed: ads.example.com is blocked by route ads') && l.socksReply === 2),
    'the new reject route answers',
  );
});
