// A managed proxy (`connect --config`) whose table has konnectivity routes. The daemon reads no
// kubeconfig of the user's: each route with a context gets a private one. Konnectivity routes got
// none, so a table of them alone failed to start ("kubeconfig …/proxies/ID/kubeconfig does not
// exist"), and beside a default cluster route one read that route's file, which lacks its context.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { startKonnectivityBed, echoRoundTrip, GUEST, type KonnectivityBed } from '../helpers/konnectivity.js';
import { runCli } from '../helpers/proxy-process.js';
import { socks5Connect } from '../helpers/socks-client.js';

let cluster: TestCluster;
let bed: KonnectivityBed;
let dir: string;
let kubeconfigs: string;

before(async () => {
  cluster = await startTestCluster();
  bed = await startKonnectivityBed('grpc', 'tls');
  dir = await mkdtemp(path.join(os.tmpdir(), 'proxyout-managed-konn-'));
  // Two contexts of one simulated cluster, from two files merged as $KUBECONFIG lists them.
  const guestFile = path.join(dir, 'guest-kubeconfig');
  await cluster.sim.writeKubeconfig(guestFile, { context: 'guest', namespace: 'shop' });
  kubeconfigs = `${cluster.kubeconfig}${path.delimiter}${guestFile}`;
});
after(async () => {
  await bed?.close();
  await cluster?.close();
  await rm(dir, { recursive: true, force: true });
});

const konnectivityRoute = (name: string, context: string) => [
  `  - name: ${name}`,
  '    kind: konnectivity',
  `    context: ${context}`,
  '    cidrs: [127.77.0.0/16]',
  '    konnectivity:',
  `      server: ${bed.spec.server}`,
  '      mode: grpc',
  `      ca: ${bed.spec.ca}`,
  `      cert: ${bed.spec.cert}`,
  `      key: ${bed.spec.key}`,
];

async function echoThrough(socks: string): Promise<void> {
  const r = await socks5Connect(socks, GUEST.echo.ip, GUEST.echo.port, { atyp: 'ipv4' });
  assert.equal(r.reply, 0, 'SOCKS reply');
  if (r.rest.length) r.socket.unshift(r.rest);
  r.socket.resume();
  const payload = randomBytes(4096);
  assert.deepEqual(await echoRoundTrip(r.socket, payload), payload);
  r.socket.destroy();
}

for (const [what, routes] of [
  ['a konnectivity route alone', () => ['routes:', ...konnectivityRoute('guest', 'sim')]],
  [
    'a konnectivity route with its own context beside a default cluster route',
    () => ['routes:', '  - name: home', '    kind: cluster', '    context: sim', '    default: true', ...konnectivityRoute('guest', 'guest')],
  ],
] as const) {
  test(`connect --config with ${what}: the daemon starts and the route carries streams`, async () => {
    const stateDir = await mkdtemp(path.join(dir, 'state-'));
    const config = path.join(dir, `${randomBytes(4).toString('hex')}.yaml`);
    await writeFile(config, [...routes(), ''].join('\n'));
    const cli = (args: string[]) => runCli(args, { env: { KUBECTL_PROXYOUT_STATE_DIR: stateDir, KUBECONFIG: kubeconfigs }, timeoutMs: 60_000 });
    const r = await cli(['connect', '--config', config, '--listen-socks', '127.0.0.1:0', '--no-proxy-auth', '--json']);
    try {
      assert.equal(r.code, 0, r.stderr);
      await echoThrough((JSON.parse(r.stdout) as { socks: string }).socks);
    } finally {
      await cli(['disconnect', '--all']);
    }
  });
}
