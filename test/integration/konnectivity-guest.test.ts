// A simulated guest cluster whose ClusterIPs and Pod IPs answer only through the simulated
// konnectivity server (the pods' backends do not listen on their pod IPs; the server maps the
// addresses as the guest's pod network and kube-proxy would). End to end but for the guest
// cluster's lifecycle (konnectivity-lifecycle.test.ts has it): real curl → the SOCKS5 listener →
// the routing table → KonnectivityStreams, resolving
// through a real watch cache of the guest (konnectivityResolve) → the dialer → the server.
import assert from 'node:assert/strict';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import { SimCluster } from '../sim/cluster.js';
import { SAMPLE, seedSampleCluster } from '../sim/sample.js';
import { SimPki } from '../sim/pki.js';
import { SimGuestNetwork } from '../sim/guest-network.js';
import { SimKonnectivityServer } from '../sim/konnectivity-server.js';
import { curl } from '../helpers/curl.js';
import { startProxyProcess } from '../helpers/proxy-process.js';
import { parseConfig } from '../../src/config/validate.js';
import { tableFrom } from '../../src/config/load.js';
import { RouteMatcher, refusalError } from '../../src/routing/table.js';
import { KonnectivityStreams } from '../../src/routes/konnectivity/streams.js';
import { konnectivityResolve } from '../../src/routes/konnectivity/resolve.js';
import { loadKubeConfig } from '../../src/cluster/kubeconfig.js';
import { ApiConnection } from '../../src/cluster/api.js';
import { ClusterCache } from '../../src/cluster/cache.js';
import { startSocksListener } from '../../src/listeners/socks-server.js';
import type { Listener } from '../../src/listeners/listener.js';
import { StreamStats } from '../../src/listeners/stream-stats.js';
import { createLogger } from '../../src/core/log.js';
import { httpGet } from '../helpers/streams.js';
import { replyFor, SocksReply } from '../../src/core/errors.js';
import type { OpenRequest, StreamOpener } from '../../src/core/types.js';

for (const mode of ['grpc', 'http-connect'] as const) {
  describe(`a guest cluster reachable only through konnectivity (${mode})`, () => {
    let sim: SimCluster;
    let server: SimKonnectivityServer;
    let route: KonnectivityStreams;
    let matcher: RouteMatcher;
    let cache: ClusterCache;
    let socks: Listener;
    let dir: string;
    let configFile = '';
    let kubeconfigFile = '';
    const signal = () => AbortSignal.timeout(10_000);
    const open = async (host: string, port: number) => {
      const type = net.isIP(host) ? 'ipv4' : 'domain';
      const decision = matcher.match({ host, port, type });
      assert.ok(decision.claimed, `the table claims ${host}`);
      return route.open({ destination: { host, port, type }, frontEnd: 'socks5', client: 'test', signal: signal() }, decision, signal());
    };
    const viaSocks = (url: string) => curl(['--socks5-hostname', `127.0.0.1:${socks.address.port}`, url]);

    before(async () => {
      sim = await SimCluster.start({ quiet: true, isolatePodIps: true });
      await seedSampleCluster(sim);
      dir = await mkdtemp(path.join(os.tmpdir(), 'proxyout-konn-guest-'));
      const kubeconfig = path.join(dir, 'kubeconfig');
      await sim.writeKubeconfig(kubeconfig, { namespace: 'shop', context: 'guest' });
      const pki = new SimPki();
      const serving = pki.servingCert();
      const client = pki.clientCert('proxyout');
      await writeFile(path.join(dir, 'ca.crt'), pki.caPem);
      await writeFile(path.join(dir, 'client.crt'), client.certPem);
      await writeFile(path.join(dir, 'client.key'), client.keyPem, { mode: 0o600 });
      server = await SimKonnectivityServer.start({
        mode,
        network: new SimGuestNetwork(sim),
        tls: { keyPem: serving.keyPem, certPem: serving.certPem, caPem: pki.caPem },
      });
      const yaml = [
        'routes:',
        '  - name: guest',
        '    kind: konnectivity',
        '    default: true',
        '    konnectivity:',
        `      server: "${server.address}"`,
        `      mode: ${mode}`,
        `      ca: ${path.join(dir, 'ca.crt')}`,
        `      cert: ${path.join(dir, 'client.crt')}`,
        `      key: ${path.join(dir, 'client.key')}`,
      ].join('\n');
      configFile = path.join(dir, 'config.yaml');
      kubeconfigFile = kubeconfig;
      await writeFile(configFile, `${yaml}\n`);
      const table = tableFrom(parseConfig(yaml, 'config.yaml', 'cluster.local'), { contexts: [], clusterDomain: 'cluster.local' });
      const spec = table.routes[0]!;
      assert.ok(spec.kind === 'konnectivity');
      const log = createLogger('silent');
      const kube = loadKubeConfig({ kubeconfig });
      cache = new ClusterCache(new ApiConnection(kube.kc), log, kube.namespace);
      await cache.start();
      const view = {
        knowsIp: (ip: string) => cache.knowsIp(ip),
        namespaceExists: (ns: string) => cache.namespaceExists(ns),
        defaultNamespace: cache.defaultNamespace,
      };
      matcher = new RouteMatcher(table, new Map([['guest', view]]));
      route = new KonnectivityStreams('guest', spec.konnectivity, { log, resolve: konnectivityResolve(cache) });
      await route.start();
      // What the Router does: match once, refuse what no route claims, hand the claim over.
      const opener: StreamOpener = {
        open: (request: OpenRequest) => {
          const decision = matcher.match(request.destination);
          if (!decision.claimed) return Promise.reject(refusalError(decision));
          return route.open(request, decision, AbortSignal.any([request.signal, AbortSignal.timeout(10_000)]));
        },
      };
      socks = await startSocksListener('127.0.0.1', 0, { opener, stats: new StreamStats(log), log, handshakeTimeoutMs: 10_000 });
    });
    after(async () => {
      await socks.close(0);
      await server.stop();
      await route.close();
      await cache.stop();
      await sim.stop();
      await rm(dir, { recursive: true, force: true });
    });

    it('a pod IP is refused when dialled directly, and answers through the route', async () => {
      const pod = SAMPLE.api.pods[0];
      const ip = sim.podIP(SAMPLE.api.namespace, pod);
      const direct = await new Promise<string>((resolve) => {
        const s = net.connect(SAMPLE.api.containerPort, ip);
        s.once('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? 'error'));
        s.once('connect', () => {
          s.destroy();
          resolve('connected');
        });
      });
      assert.equal(direct, 'ECONNREFUSED', `a direct dial of ${ip} must find nothing there`);
      const opened = await open(ip, SAMPLE.api.containerPort);
      assert.match(await httpGet(opened.stream, '/'), new RegExp(`hello from ${pod} \\(shop\\) port 8080`));
      opened.stream.destroy();
      const r = await viaSocks(`http://${ip}:${SAMPLE.api.containerPort}/`);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /hello from api-/);
    });

    it('curl by Service name: its ClusterIP, which the guest network sends to a ready pod on the targetPort', async () => {
      const opened = await open('web.shop.guest', SAMPLE.web.servicePort);
      assert.match(opened.via, /^konnectivity https:\/\/127\.0\.0\.1:\d+ → 127\.96\.\d+\.\d+:8080$/);
      opened.stream.destroy();
      for (const host of ['web.shop.guest', 'web.shop.svc.cluster.local', 'web']) {
        const r = await viaSocks(`http://${host}:${SAMPLE.web.servicePort}/`);
        assert.equal(r.code, 0, `${host}: ${r.stderr}`);
        assert.match(r.stdout, /hello from web-[a-z0-9-]+ \(shop\) port 8081/);
      }
    });

    it('a headless pod name reaches that pod', async () => {
      const opened = await open('db-1.db.shop.svc.cluster.local', SAMPLE.db.servicePort);
      const banner = await new Promise<string>((resolve) => opened.stream.once('data', (c: Buffer) => resolve(c.toString())));
      assert.equal(banner, 'banner db-1\n');
      opened.stream.destroy();
    });

    it('the real CLI with this config file: the composition root builds the konnectivity route', async () => {
      const proxy = await startProxyProcess(['--kubeconfig', kubeconfigFile, '--config', configFile, '--listen-socks', '127.0.0.1:0']);
      try {
        for (const host of ['web.shop.guest', 'web']) {
          const r = await curl(['--socks5-hostname', proxy.socks!, `http://${host}:${SAMPLE.web.servicePort}/`]);
          assert.equal(r.code, 0, `${host}: ${r.stderr}`);
          assert.match(r.stdout, /hello from web-[a-z0-9-]+ \(shop\) port 8081/);
        }
        assert.ok(
          proxy.logs.some((l) => l.msg === 'stream open' && String(l.via).startsWith('konnectivity ')),
          'streams went through the konnectivity server',
        );
      } finally {
        assert.equal(await proxy.stop(), 0);
      }
    });

    it('a port the Service does not have is refused (SOCKS 0x05); a name outside the table is not allowed (0x02)', async () => {
      const err = await open('web.shop.guest', 9999).then(
        () => undefined,
        (e: unknown) => e,
      );
      assert.equal(replyFor(err).socks, SocksReply.connectionRefused, String(err));
      const refused = await viaSocks(`http://web.shop.guest:9999/`);
      assert.notEqual(refused.code, 0);
      assert.match(refused.stderr, /Can't complete SOCKS5 connection to web\.shop\.guest\. \(5\)/);
      const outside = await viaSocks('http://example.com/');
      assert.match(outside.stderr, /Can't complete SOCKS5 connection to example\.com\. \(2\)/);
    });
  });
}
