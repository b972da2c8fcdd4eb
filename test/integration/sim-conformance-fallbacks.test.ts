// The simulator held to upstream where the proxy falls back: the simulator without its SPDY tunnel,
// without WatchList and without anonymous requests, against kube-apiserver v1.37.2 with the
// PortForwardWebsockets and WatchList feature gates off and --anonymous-auth=false, behind a node
// that does not tunnel SPDY in a WebSocket (an older kubelet). The same requests to both, the
// answers compared after the normalisation of test/helpers/wire-shapes.ts: what an offer of each
// port-forward subprotocol gets, the refused tunnel, the refused watch-list and the paged list the
// caches use instead, 401 for every path. docs/simulated-cluster.md ("Checked against upstream").
// Skips with a reason when the real test bed is not built (fails instead under
// PROXYOUT_REQUIRE_REAL_CLUSTER=1).
import { after, before, describe, test } from 'node:test';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { SimCluster } from '../sim/cluster.js';
import { skipUnlessRealCluster, startRealCluster, type RealCluster } from '../helpers/real-cluster.js';
import { httpContainer, manifests, pod, webService } from '../helpers/real-cluster-objects.js';
import { httpRequest, spdyTunnel, watch, webSocket, type ProbeTarget } from '../helpers/wire-probe.js';
import { answerShape, handshakeShape, v4Frames, sameOnBoth } from '../helpers/wire-shapes.js';

const skip = skipUnlessRealCluster();

const MANIFESTS = manifests(pod({ name: 'web-0', labels: { app: 'web' }, containers: [httpContainer('app')] }), webService());

async function startSim(): Promise<{ side: ProbeTarget; sim: SimCluster }> {
  const sim = await SimCluster.start({ quiet: true, spdyTunnel: false, anonymousAuth: false });
  sim.setWatchList(false);
  await sim.createNamespace('shop');
  await sim.createPod({ namespace: 'shop', name: 'web-0', labels: { app: 'web' }, ports: [{ name: 'http', containerPort: 8080, backend: 'http' }] });
  await sim.createService({ namespace: 'shop', name: 'web', selector: { app: 'web' }, ports: [{ name: 'http', port: 80, targetPort: 'http' }] });
  const side = { label: 'sim', server: sim.server, caPem: sim.caPem, tokens: { admin: sim.adminToken, limited: sim.issueToken({ namespaces: ['shop'] }) } };
  return { side, sim };
}

async function startReal(): Promise<{ side: ProbeTarget; cluster: RealCluster }> {
  const cluster = await startRealCluster({
    apiServerFlags: ['--feature-gates=PortForwardWebsockets=false,WatchList=false', '--anonymous-auth=false'],
    nodeFlags: ['--websocket-tunnel=false'],
  });
  await cluster.kubectl(['apply', '-f', '-'], { input: MANIFESTS });
  await cluster.kubectl(['-n', 'shop', 'wait', '--for=condition=Ready', 'pod/web-0', '--timeout=60s']);
  const caPem = await readFile(path.join(cluster.dir, 'pki', 'ca.crt'));
  return { side: { label: 'real', server: cluster.server, caPem, tokens: cluster.tokens }, cluster };
}

describe('the simulator without its newer features answers as upstream with them off', { skip, timeout: 180_000 }, () => {
  let sim: SimCluster | undefined;
  let cluster: RealCluster | undefined;
  const sides: { sim?: ProbeTarget; real?: ProbeTarget } = {};

  before(async () => {
    const [s, r] = await Promise.all([startSim(), startReal()]);
    [sim, sides.sim, cluster, sides.real] = [s.sim, s.side, r.cluster, r.side];
  });
  after(async () => {
    await Promise.all([sim?.stop(), cluster?.stop()]);
  });

  const same = (probe: (side: ProbeTarget) => Promise<unknown>) => sameOnBoth(sides.sim!, sides.real!, probe);
  const pf = (query: string) => `/api/v1/namespaces/shop/pods/web-0/portforward${query}`;

  test('port-forward: what each subprotocol offer gets; the SPDY tunnel refused; a v4 stream still works', () =>
    same(async (side) => {
      const out: Record<string, unknown> = {};
      for (const offer of [
        ['v4.channel.k8s.io'],
        ['v4.base64.channel.k8s.io'],
        ['SPDY/3.1+portforward.k8s.io'],
        ['SPDY/3.1+portforward.k8s.io', 'v4.channel.k8s.io'],
        [],
      ]) {
        const ws = await webSocket(side, pf('?ports=8080'), offer);
        out[offer.join(', ') || '(none)'] = handshakeShape(ws);
        ws.destroy();
      }
      // What the proxy's SPDY transport sends: the tunnel offer alone, no ports in the query.
      const tunnel = await spdyTunnel(side, pf(''));
      out.tunnel = { handshake: handshakeShape(tunnel.ws), spdy: tunnel.spdy !== undefined };
      tunnel.ws.destroy();
      const working = await webSocket(side, pf('?ports=8080'), ['v4.channel.k8s.io']);
      await new Promise((r) => setTimeout(r, 500));
      working.destroy();
      out.working = v4Frames(working);
      return out;
    }));

  test('watch-list refused (422), the paged list served', () =>
    same(async (side) => {
      const w = await watch(side, '/api/v1/namespaces/shop/pods?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan', {
        maxMs: 1500,
      });
      const page = await httpRequest(side, '/api/v1/namespaces/shop/pods?limit=1');
      const list = JSON.parse(page.body) as { items: Array<{ metadata: { name: string } }> };
      return {
        watchList: {
          status: w.status,
          refusal: w.body === undefined ? undefined : answerShape({ status: w.status, headers: { 'content-type': 'application/json' }, body: w.body }),
        },
        page: { status: page.status, names: list.items.map((i) => i.metadata.name) },
      };
    }));

  test('no anonymous requests: 401 for every path, health and version included', () =>
    same(async (side) => {
      const out: Record<string, unknown> = {};
      for (const p of ['/version', '/healthz', '/readyz', '/api', '/api/v1/namespaces/shop/pods', pf('?ports=8080')]) {
        out[p] = answerShape(await httpRequest(side, p, { as: 'none' }));
      }
      out['an unknown token'] = answerShape(await httpRequest(side, '/api/v1/namespaces/shop/pods', { as: 'unknown' }));
      return out;
    }));
});
