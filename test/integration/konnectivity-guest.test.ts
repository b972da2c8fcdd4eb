// A simulated guest cluster whose ClusterIPs and Pod IPs answer only through the simulated
// konnectivity server (the pods' backends do not listen on their pod IPs; the server maps the
// addresses as the guest's pod network and kube-proxy would). The routing table claims the names,
// KonnectivityRoute resolves them (here through the API, as the watch cache would) and dials
// through the server.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { Duplex } from 'node:stream';
import { SimCluster } from '../sim/cluster.js';
import { SAMPLE, seedSampleCluster } from '../sim/sample.js';
import { SimPki } from '../sim/pki.js';
import { SimGuestNetwork } from '../sim/guest-network.js';
import { SimKonnectivityServer } from '../sim/konnectivity-server.js';
import { apiGet } from '../helpers/cluster.js';
import { parseConfig } from '../../src/config/validate.js';
import { tableFrom } from '../../src/config/load.js';
import { RouteMatcher, type Claim } from '../../src/routing/table.js';
import { KonnectivityRoute, type KonnectivityTarget } from '../../src/routing/konnectivity-route.js';
import { createLogger } from '../../src/core/log.js';
import { HostUnreachableError, replyFor, SocksReply } from '../../src/core/errors.js';

/** What the lead's resolver does from the watch cache, done here through the API. */
async function resolveThroughApi(sim: SimCluster, claim: Claim, port: number): Promise<KonnectivityTarget[]> {
  if (claim.isIp) return [{ ip: claim.host, port }];
  const n = claim.name;
  if (n?.kind === 'service') {
    const svc = await apiGet(sim, `/api/v1/namespaces/${n.namespace}/services/${n.service}`);
    return [{ ip: svc.spec.clusterIP, port }];
  }
  if (n?.kind === 'pod-hostname') {
    const pods = await apiGet(sim, `/api/v1/namespaces/${n.namespace}/pods`);
    const pod = pods.items.find((p: any) => p.spec.hostname === n.hostname && p.spec.subdomain === n.service);
    return pod ? [{ ip: pod.status.podIP, port }] : [];
  }
  throw new HostUnreachableError(`${claim.host} is not a Service or pod name`);
}

function httpGet(stream: Duplex, path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    stream.setEncoding('utf8');
    stream.on('data', (c: string) => {
      text += c;
      const m = /Content-Length: (\d+)\r\n[\s\S]*?\r\n\r\n/i.exec(text);
      if (m && text.length >= text.indexOf('\r\n\r\n') + 4 + Number(m[1])) resolve(text);
    });
    stream.once('error', reject);
    stream.write(`GET ${path} HTTP/1.1\r\nHost: guest\r\n\r\n`);
  });
}

for (const mode of ['grpc', 'http-connect'] as const) {
  describe(`a guest cluster reachable only through konnectivity (${mode})`, () => {
    let sim: SimCluster;
    let server: SimKonnectivityServer;
    let route: KonnectivityRoute;
    let matcher: RouteMatcher;
    const signal = () => AbortSignal.timeout(10_000);
    const open = async (host: string, port: number) => {
      const decision = matcher.match({ host, port, type: net.isIP(host) ? 'ipv4' : 'domain' });
      assert.ok(decision.claimed, `the table claims ${host}`);
      return route.open({ destination: { host, port, type: net.isIP(host) ? 'ipv4' : 'domain' }, frontEnd: 'socks5', client: 'test', signal: signal() }, decision, signal());
    };

    before(async () => {
      sim = await SimCluster.start({ quiet: true, isolatePodIps: true });
      await seedSampleCluster(sim);
      const pki = new SimPki();
      const serving = pki.servingCert();
      server = await SimKonnectivityServer.start({ mode, network: new SimGuestNetwork(sim), tls: { keyPem: serving.keyPem, certPem: serving.certPem, caPem: pki.caPem } });
      const client = pki.clientCert('proxyout');
      const yaml = `routes:\n  - name: guest\n    kind: konnectivity\n    default: true\n    cidrs: [127.10.0.0/16, 127.96.0.0/16]\n    konnectivity: {server: "${server.address}", mode: ${mode}}\n`;
      const table = tableFrom(parseConfig(yaml, 'config.yaml', 'cluster.local'), { contexts: [], clusterDomain: 'cluster.local' });
      matcher = new RouteMatcher(table);
      const spec = table.routes[0]!;
      assert.ok(spec.kind === 'konnectivity');
      route = new KonnectivityRoute('guest', { ...spec.konnectivity }, {
        log: createLogger('silent'),
        resolve: (claim, port) => resolveThroughApi(sim, claim, port),
        // The TLS material comes from files in real use; the PEMs are handed over directly here.
        makeDialer: async (s) => {
          const { createKonnectivityDialer } = await import('../../src/konnectivity/dialer.js');
          const { writeFile, mkdtemp } = await import('node:fs/promises');
          const dir = await mkdtemp('/tmp/proxyout-konn-guest-');
          await writeFile(`${dir}/ca`, pki.caPem);
          await writeFile(`${dir}/cert`, client.certPem);
          await writeFile(`${dir}/key`, client.keyPem, { mode: 0o600 });
          return createKonnectivityDialer({ ...s, ca: `${dir}/ca`, cert: `${dir}/cert`, key: `${dir}/key` });
        },
      });
      await route.start();
    });
    after(async () => {
      await server.stop();
      route.close().catch(() => {});
      await sim.stop();
    });

    it('a pod IP is refused when dialled directly, and answers through the route', async () => {
      const pod = SAMPLE.api.pods[0];
      const ip = sim.podIP(SAMPLE.api.namespace, pod);
      const err = await new Promise<NodeJS.ErrnoException>((resolve) => net.connect(SAMPLE.api.containerPort, ip).once('error', resolve));
      assert.equal(err.code, 'ECONNREFUSED');
      const opened = await open(ip, SAMPLE.api.containerPort);
      assert.match(await httpGet(opened.stream, '/'), new RegExp(`hello from ${pod} \\(shop\\) port 8080`));
      opened.stream.destroy();
    });

    it('a Service name goes to its ClusterIP, which the guest network sends to a ready pod on the targetPort', async () => {
      const opened = await open('web.shop.guest', SAMPLE.web.servicePort);
      assert.match(opened.via, /^konnectivity https:\/\/127\.0\.0\.1:\d+ → 127\.96\.\d+\.\d+:8080$/);
      assert.match(await httpGet(opened.stream, '/'), /hello from web-[a-z0-9-]+ \(shop\) port 8081/);
      opened.stream.destroy();
    });

    it('a headless pod name reaches that pod', async () => {
      const opened = await open('db-1.db.shop.svc.cluster.local', SAMPLE.db.servicePort);
      const banner = await new Promise<string>((resolve) => opened.stream.once('data', (c: Buffer) => resolve(c.toString())));
      assert.equal(banner, 'banner db-1\n');
      opened.stream.destroy();
    });

    it('a port the Service does not have is refused (SOCKS 0x05)', async () => {
      const err = await open('web.shop.guest', 9999).then(() => undefined, (e: unknown) => e);
      assert.equal(replyFor(err).socks, SocksReply.connectionRefused, String(err));
    });
  });
}
