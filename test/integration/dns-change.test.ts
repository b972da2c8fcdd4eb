// The API server's name starts resolving to another address (a load balancer replaced, a VPN that
// hands out another route) while the old address goes silent: nothing resets what was open to
// it. The route must find the new address by itself and renew its watches there, so a Service
// created meanwhile is reachable within seconds, without a restart. The name is resolved through
// /etc/hosts (a line this test adds and removes; skipped where /etc/hosts cannot be written); two
// relays on 127.0.0.2 and 127.0.0.3 (the same port) stand for the two addresses.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { accessSync, constants, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { startTestCluster, eventually, type TestCluster } from '../helpers/cluster.js';
import { startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { startTcpGate, type TcpGate } from '../helpers/tcp-gate.js';
import { curl } from '../helpers/curl.js';

const HOSTS = '/etc/hosts';
const NAME = `proxyout-api-${process.pid}.test`;
const writable = (() => {
  try {
    accessSync(HOSTS, constants.W_OK);
    return true;
  } catch {
    return false;
  }
})();
const skip = writable ? false : `${HOSTS} cannot be written here: the name's address cannot be changed`;

/** Points NAME at `ip` (replacing this test's line), or removes the line. */
function resolveTo(ip: string | undefined): void {
  const kept = readFileSync(HOSTS, 'utf8')
    .split('\n')
    .filter((l) => !l.endsWith(` ${NAME}`) && l !== '');
  writeFileSync(HOSTS, [...kept, ...(ip ? [`${ip} ${NAME}`] : [])].join('\n') + '\n');
}

let cluster: TestCluster;
let first: TcpGate;
let second: TcpGate;
let proxy: ProxyProcess;
before(async () => {
  if (skip) return;
  cluster = await startTestCluster();
  const api = new URL(cluster.sim.server);
  const target = { host: api.hostname, port: Number(api.port) };
  first = await startTcpGate(target, 'pass', { host: '127.0.0.2' });
  second = await startTcpGate(target, 'pass', { host: '127.0.0.3', port: Number(new URL(first.url).port) });
  resolveTo('127.0.0.2');
  const kubeconfig = path.join(cluster.dir, 'by-name');
  // The serving certificate names 127.0.0.1 and localhost, not this test's name.
  await cluster.sim.writeKubeconfig(kubeconfig, { namespace: 'shop', server: `https://${NAME}:${new URL(first.url).port}`, insecureSkipTlsVerify: true });
  // Short keepalives: the tunnel open across the move is found dead in seconds, not 25 s.
  proxy = await startProxyProcess([
    '--kubeconfig',
    kubeconfig,
    '--listen-socks',
    '127.0.0.1:0',
    '--connect-timeout',
    '5s',
    '--keepalive',
    '2s',
    '--keepalive-timeout',
    '2s',
  ]);
});
after(async () => {
  if (skip) return;
  resolveTo(undefined);
  cluster.sim.endLingeringStreams();
  await proxy?.stop();
  await first?.close();
  await second?.close();
  await cluster.close();
});

test(
  "the API server's name resolves to another address while the old one goes silent: a Service created meanwhile answers within seconds",
  { skip },
  async () => {
    assert.match((await curl(['-sS', '-x', `socks5h://${proxy.socks}`, 'http://web.shop:8080/'])).stdout, /hello from/);
    // The old address goes silent for good (what was open to it too); the name moves to the new one.
    first.set('blackhole');
    first.forget();
    resolveTo('127.0.0.3');
    const movedAt = Date.now();
    await cluster.sim.createPod({ namespace: 'shop', name: 'moved-1', labels: { app: 'moved' }, ports: [{ containerPort: 8080, backend: 'http' }] });
    await cluster.sim.createService({ namespace: 'shop', name: 'moved', selector: { app: 'moved' }, ports: [{ name: 'http', port: 80, targetPort: 8080 }] });
    // The tunnel open across the move stops answering its pings: the route asks for the server,
    // which answers at its new address, and renews what was open (its watches) there.
    await eventually(
      async () => /hello from/.test((await curl(['-sS', '--max-time', '3', '-x', `socks5h://${proxy.socks}`, 'http://moved.shop/'])).stdout),
      20_000,
      250,
    );
    assert.ok(Date.now() - movedAt <= 15_000, `the Service created meanwhile answered ${Date.now() - movedAt} ms after the move`);
    assert.ok(second.connections > 0, 'the new address is used');
  },
);
