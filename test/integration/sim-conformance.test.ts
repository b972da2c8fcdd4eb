// The simulator (test/sim) held to upstream: the same objects in a simulated cluster and in the
// real control plane (test/helpers/real-cluster.ts: kube-apiserver v1.37.2, etcd, the
// controllers, a node serving the upstream CRI streaming port-forward), the same requests to both,
// and what the proxy reads of the answers compared after explicit normalisation (names of users,
// UIDs, resourceVersions, sandbox IDs, timestamps). Each test is one kind of answer: Status
// errors (404, 403, 401), watch-list, paged lists, 410 after a compaction, EndpointSlice
// conditions, the port-forward handshakes, error texts and frame order. docs/simulated-cluster.md
// ("Checked against upstream") names what each covers. Skips with a reason when the real test bed
// is not built (fails instead under PROXYOUT_REQUIRE_REAL_CLUSTER=1).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { SimCluster } from '../sim/cluster.js';
import { skipUnlessRealCluster, startRealCluster, type RealCluster } from '../helpers/real-cluster.js';
import { eventually } from '../helpers/cluster.js';
import { httpContainer, manifests, multiContainers, multiService, namespace, pod, service, webService } from '../helpers/real-cluster-objects.js';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { httpRequest, spdyTunnel, watch, webSocket, type ProbeTarget } from '../helpers/wire-probe.js';
import { answerShape, eventShape, handshakeShape, normText, sliceShape, sorted, v4Frames, sameOnBoth } from '../helpers/wire-shapes.js';

const skip = skipUnlessRealCluster();

const unnamedHttp = [httpContainer('app', 8080, null)];
const MANIFESTS = manifests(
  namespace('other'),
  service('web', { namespace: 'other', ports: [{ port: 80, targetPort: 8080 }] }),
  pod({ name: 'web-0', labels: { app: 'web' }, containers: [httpContainer('app')] }),
  webService(),
  pod({ name: 'notready-0', labels: { app: 'notready' }, annotations: { 'proxyout.test/ready': 'false' }, containers: unnamedHttp }),
  service('notready', { ports: [{ port: 80, targetPort: 8080 }] }),
  service('empty', { selector: { app: 'nothing' }, ports: [{ port: 80, targetPort: 8080 }] }),
  // A targetPort name the web pod lacks: its endpoint, with no port.
  service('typo', { selector: { app: 'web' }, ports: [{ name: 'http', port: 80, targetPort: 'htpp' }] }),
  pod({ name: 'db-0', labels: { app: 'db' }, spec: { hostname: 'db-0', subdomain: 'db' }, containers: [httpContainer('app')] }),
  service('db', { clusterIP: 'None', ports: [{ name: 'http', port: 8080 }] }),
  pod({ name: 'multi-0', labels: { app: 'multi' }, containers: multiContainers('app') }),
  multiService(),
  pod({ name: 'refuse-0', labels: { app: 'refuse' }, containers: [{ name: 'app', image: 'proxyout/none', ports: [{ containerPort: 8080 }] }] }),
  pod({
    name: 'term-0',
    labels: { app: 'term' },
    annotations: { 'proxyout.test/stop-delay': '300s' },
    spec: { terminationGracePeriodSeconds: 600 },
    containers: unnamedHttp,
  }),
  // No node will take it: Pending, never scheduled.
  pod({ name: 'pending-0', labels: { app: 'pending' }, spec: { nodeSelector: { 'proxyout.test/nowhere': 'true' } }, containers: unnamedHttp }),
  service('term', { ports: [{ port: 80, targetPort: 8080 }] }),
);

const APF_NO_SEATS = `apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata:
  name: proxyout-no-seats
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 0
    lendablePercent: 0
    borrowingLimitPercent: 0
    limitResponse:
      type: Reject
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata:
  name: proxyout-limited-configmaps
spec:
  priorityLevelConfiguration:
    name: proxyout-no-seats
  matchingPrecedence: 100
  distinguisherMethod:
    type: ByUser
  rules:
  - subjects:
    - kind: User
      user:
        name: proxyout-limited
    resourceRules:
    - verbs: ['*']
      apiGroups: ['']
      resources: ['configmaps']
      namespaces: ['*']
`;

/** One side of the comparison: the wire target, and how to compact it and reach its pods. */
interface Side extends ProbeTarget {
  compact(): Promise<void>;
  /** A write, so that a compaction has something to drop. */
  touch(name: string): Promise<void>;
}

async function startSim(): Promise<{ side: Side; sim: SimCluster }> {
  // Deleted pods stay terminating (their endpoints serving) as long as the real one's stop-delay.
  const sim = await SimCluster.start({ quiet: true, terminatingMs: 300_000 });
  for (const ns of ['shop', 'other']) await sim.createNamespace(ns);
  const http = (name: string, containerPort: number) => ({ name, containerPort, backend: 'http' as const });
  await sim.createService({ namespace: 'other', name: 'web', selector: { app: 'web' }, ports: [{ port: 80, targetPort: 8080 }] });
  await sim.createPod({ namespace: 'shop', name: 'web-0', labels: { app: 'web' }, ports: [http('http', 8080)] });
  await sim.createService({ namespace: 'shop', name: 'web', selector: { app: 'web' }, ports: [{ name: 'http', port: 80, targetPort: 'http' }] });
  await sim.createPod({ namespace: 'shop', name: 'notready-0', labels: { app: 'notready' }, ready: false, ports: [{ containerPort: 8080, backend: 'http' }] });
  await sim.createService({ namespace: 'shop', name: 'notready', selector: { app: 'notready' }, ports: [{ port: 80, targetPort: 8080 }] });
  await sim.createService({ namespace: 'shop', name: 'empty', selector: { app: 'nothing' }, ports: [{ port: 80, targetPort: 8080 }] });
  await sim.createService({ namespace: 'shop', name: 'typo', selector: { app: 'web' }, ports: [{ name: 'http', port: 80, targetPort: 'htpp' }] });
  await sim.createPod({ namespace: 'shop', name: 'db-0', labels: { app: 'db' }, hostname: 'db-0', subdomain: 'db', ports: [http('http', 8080)] });
  await sim.createService({ namespace: 'shop', name: 'db', headless: true, selector: { app: 'db' }, ports: [{ name: 'http', port: 8080 }] });
  await sim.createPod({
    namespace: 'shop',
    name: 'multi-0',
    labels: { app: 'multi' },
    ports: [http('web', 8080), http('alt', 9090), { name: 'echo', containerPort: 9000, backend: 'echo' }],
  });
  await sim.createService({
    namespace: 'shop',
    name: 'multi',
    selector: { app: 'multi' },
    ports: [
      { name: 'web', port: 80, targetPort: 'web' },
      { name: 'alt', port: 8090, targetPort: 9090 },
      { name: 'echo', port: 7000, targetPort: 'echo' },
    ],
  });
  await sim.createPod({ namespace: 'shop', name: 'refuse-0', labels: { app: 'refuse' }, ports: [{ containerPort: 8080, backend: 'http' }] });
  sim.refusePort('shop', 'refuse-0', 8080);
  await sim.createPod({ namespace: 'shop', name: 'term-0', labels: { app: 'term' }, ports: [{ containerPort: 8080, backend: 'http' }] });
  await sim.createPod({ namespace: 'shop', name: 'pending-0', labels: { app: 'pending' }, scheduled: false, ports: [{ containerPort: 8080 }] });
  await sim.createService({ namespace: 'shop', name: 'term', selector: { app: 'term' }, ports: [{ port: 80, targetPort: 8080 }] });
  await sim.deletePod('shop', 'term-0', { stopDelayMs: 300_000 });
  const side: Side = {
    label: 'sim',
    server: sim.server,
    caPem: sim.caPem,
    tokens: { admin: sim.adminToken, limited: sim.issueToken({ namespaces: ['shop'] }) },
    compact: async () => sim.compact(),
    touch: async (name) => sim.createNamespace(name),
  };
  return { side, sim };
}

async function startReal(): Promise<{ side: Side; cluster: RealCluster }> {
  const cluster = await startRealCluster();
  await cluster.kubectl(['apply', '-f', '-'], { input: MANIFESTS });
  await cluster.kubectl(['-n', 'shop', 'wait', '--for=condition=Ready', 'pod/web-0', 'pod/db-0', 'pod/multi-0', 'pod/refuse-0', 'pod/term-0', '--timeout=60s']);
  await cluster.kubectl(['-n', 'shop', 'delete', 'pod', 'term-0', '--wait=false']);
  const slices = async (svc: string) =>
    (
      await cluster.get<{ items: Array<{ endpoints?: Array<{ conditions?: Record<string, boolean> }> }> }>(
        `/apis/discovery.k8s.io/v1/namespaces/shop/endpointslices?labelSelector=kubernetes.io/service-name%3D${svc}`,
      )
    ).items.flatMap((s) => s.endpoints ?? []);
  // A Ready pod is in its Service's slice only once the EndpointSlice controller has caught up.
  const settled = async () =>
    (await slices('term')).some((e) => e.conditions?.terminating) &&
    (await slices('notready')).length === 1 &&
    (await Promise.all(['web', 'db', 'multi'].map(slices))).every((eps) => eps.some((e) => e.conditions?.ready));
  await eventually(settled, 30_000);
  const caPem = await readFile(path.join(cluster.dir, 'pki', 'ca.crt'));
  const side: Side = {
    label: 'real',
    server: cluster.server,
    caPem,
    tokens: cluster.tokens,
    compact: async () => void (await cluster.compact()),
    touch: async (name) => void (await cluster.kubectl(['create', 'namespace', name])),
  };
  return { side, cluster };
}

describe('the simulator answers as upstream does', { skip, timeout: 240_000 }, () => {
  let sim: SimCluster;
  let cluster: RealCluster;
  const sides: { sim?: Side; real?: Side } = {};

  before(async () => {
    const [s, r] = await Promise.all([startSim(), startReal()]);
    [sim, sides.sim, cluster, sides.real] = [s.sim, s.side, r.cluster, r.side];
  });
  after(async () => {
    await Promise.all([sim?.stop(), cluster?.stop()]);
  });

  const same = (probe: (side: Side) => Promise<unknown>) => sameOnBoth(sides.sim!, sides.real!, probe);
  const answers = (requests: Array<[string, string, 'admin' | 'limited' | 'unknown' | 'none']>) => (side: Side) =>
    Promise.all(requests.map(async ([label, p, as]) => [label, answerShape(await httpRequest(side, p, { as }))] as const)).then(Object.fromEntries);

  test('404: a missing pod, Service, EndpointSlice, namespace; an unknown resource path', () =>
    same(
      answers([
        ['pod', '/api/v1/namespaces/shop/pods/missing', 'admin'],
        ['pod in a missing namespace', '/api/v1/namespaces/nowhere/pods/missing', 'admin'],
        ['namespace', '/api/v1/namespaces/nowhere', 'admin'],
        ['service', '/api/v1/namespaces/shop/services/missing', 'admin'],
        ['endpointslice', '/apis/discovery.k8s.io/v1/namespaces/shop/endpointslices/missing', 'admin'],
        ['services of a missing namespace', '/api/v1/namespaces/nowhere/services', 'admin'],
        ['unknown resource', '/api/v1/namespaces/shop/widgets', 'admin'],
        ['port-forward to a missing pod, no upgrade', '/api/v1/namespaces/shop/pods/missing/portforward?ports=8080', 'admin'],
        ['port-forward, no upgrade', '/api/v1/namespaces/shop/pods/web-0/portforward?ports=8080', 'admin'],
      ]),
    ));

  test('401 without credentials; 403 for the namespace-limited user (RBAC wording)', () =>
    same(
      answers([
        ['anonymous', '/api/v1/namespaces/shop/pods', 'none'],
        ['anonymous, discovery', '/api', 'none'],
        ['anonymous, version', '/version', 'none'],
        ['unknown token', '/api/v1/namespaces/shop/pods', 'unknown'],
        ['own namespace', '/api/v1/namespaces/shop/services', 'limited'],
        ['own namespace object', '/api/v1/namespaces/shop', 'limited'],
        ['services, cluster scope', '/api/v1/services', 'limited'],
        ['pods, cluster scope, watch', '/api/v1/pods?watch=1', 'limited'],
        ['endpointslices, cluster scope', '/apis/discovery.k8s.io/v1/endpointslices', 'limited'],
        ['services of another namespace', '/api/v1/namespaces/other/services', 'limited'],
        ['a service of another namespace', '/api/v1/namespaces/other/services/web', 'limited'],
        ['another namespace object', '/api/v1/namespaces/other', 'limited'],
        ['namespaces, cluster scope', '/api/v1/namespaces', 'limited'],
      ]),
    ));

  test('SelfSubjectAccessReview verdicts of the namespace-limited user', () =>
    same(async (side) => {
      const review = async (attrs: Record<string, string>) => {
        const a = await httpRequest(side, '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', {
          as: 'limited',
          method: 'POST',
          body: { apiVersion: 'authorization.k8s.io/v1', kind: 'SelfSubjectAccessReview', spec: { resourceAttributes: attrs } },
        });
        return { status: a.status, allowed: (JSON.parse(a.body) as { status?: { allowed?: boolean } }).status?.allowed };
      };
      return {
        listServicesEverywhere: await review({ verb: 'list', resource: 'services' }),
        watchSlicesInShop: await review({ verb: 'watch', group: 'discovery.k8s.io', resource: 'endpointslices', namespace: 'shop' }),
        portForwardInShop: await review({ verb: 'create', resource: 'pods', subresource: 'portforward', namespace: 'shop' }),
        portForwardInOther: await review({ verb: 'create', resource: 'pods', subresource: 'portforward', namespace: 'other' }),
      };
    }));

  test('EndpointSlice conditions: ready, not ready, terminating; headless, multi-port with a named targetPort, no pods, a targetPort no pod has', () =>
    same(async (side) => {
      const out: Record<string, unknown> = {};
      for (const svc of ['web', 'notready', 'term', 'db', 'multi', 'empty', 'typo']) {
        const list = JSON.parse(
          (await httpRequest(side, `/apis/discovery.k8s.io/v1/namespaces/shop/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3D${svc}`)).body,
        ) as { items: unknown[] };
        out[svc] = sorted(list.items.map(sliceShape));
      }
      return out;
    }));

  const initialEventsDone = (events: Array<{ type: string; object: any }>) =>
    events.some((e) => e.type === 'BOOKMARK' && e.object?.metadata?.annotations?.['k8s.io/initial-events-end'] === 'true');

  test('watch-list: the initial events, then the bookmark that ends them (pods, Services, EndpointSlices, namespaces)', () =>
    same(async (side) => {
      const out: Record<string, unknown> = {};
      for (const [resource, rv] of [
        ['/api/v1/namespaces/shop/pods', ''],
        ['/api/v1/namespaces/shop/pods', '&resourceVersion=0'],
        ['/api/v1/namespaces/shop/services', ''],
        ['/apis/discovery.k8s.io/v1/namespaces/shop/endpointslices', ''],
        ['/api/v1/namespaces', ''],
      ] as const) {
        const w = await watch(side, `${resource}?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan${rv}`, {
          until: initialEventsDone,
          maxMs: 5000,
        });
        const events = w.events.map(eventShape) as Array<{ type: string; name?: string }>;
        // Namespaces of the real cluster's own making (kube-node-lease, …) are not the point here.
        out[resource + rv] = { status: w.status, events: resource.endsWith('/namespaces') ? events.filter((e) => e.type !== 'ADDED') : events };
      }
      return out;
    }));

  /** A watch's first answer: its status, a refusal's Status, the types of its first events. */
  const watchStart = (side: Side, p: string) =>
    watch(side, p, { maxMs: 1500 }).then((w) => ({
      status: w.status,
      refusal: w.body === undefined ? undefined : answerShape({ status: w.status, headers: { 'content-type': 'application/json' }, body: w.body }),
      types: [...new Set(w.events.map((e) => e.type))],
    }));

  test('watch-list: parameters that do not go together', () =>
    same(async (side) => ({
      'no bookmarks': await watchStart(side, '/api/v1/namespaces/shop/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan'),
      'no resourceVersionMatch': await watchStart(side, '/api/v1/namespaces/shop/pods?watch=1&sendInitialEvents=true&allowWatchBookmarks=true'),
      'resourceVersionMatch alone': await watchStart(side, '/api/v1/namespaces/shop/pods?watch=1&resourceVersionMatch=NotOlderThan'),
      'sendInitialEvents=false': await watchStart(
        side,
        '/api/v1/namespaces/shop/pods?watch=1&sendInitialEvents=false&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan',
      ),
      'on a list': answerShape(
        await httpRequest(side, '/api/v1/namespaces/shop/pods?sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan'),
      ),
    })));

  /** The pages of a paged list: per page its items' names and which metadata it carries. */
  async function pages(side: Side, p: string): Promise<unknown[]> {
    const out: unknown[] = [];
    let token: string | undefined;
    do {
      const a = await httpRequest(side, `${p}${token ? `&continue=${encodeURIComponent(token)}` : ''}`);
      if (a.status !== 200) return [...out, answerShape(a)];
      const list = JSON.parse(a.body) as { metadata: Record<string, unknown>; items: Array<{ metadata: { name: string } }> };
      token = list.metadata.continue as string | undefined;
      out.push({ names: list.items.map((i) => i.metadata.name), metadata: Object.keys(list.metadata).sort(), remaining: list.metadata.remainingItemCount });
    } while (token && out.length < 10);
    return out;
  }

  test('paged lists: limit and continue, remainingItemCount, bad tokens and limits', () =>
    same(async (side) => ({
      pods: await pages(side, '/api/v1/namespaces/shop/pods?limit=2'),
      selected: await pages(side, '/api/v1/namespaces/shop/pods?limit=1&labelSelector=app%20in%20(web,db,multi)'),
      refusals: await answers([
        ['malformed continue', '/api/v1/namespaces/shop/pods?limit=2&continue=bm90LWEtdG9rZW4', 'admin'],
        ['limit not a number', '/api/v1/namespaces/shop/pods?limit=x', 'admin'],
      ])(side),
    })));

  const pf = (pod: string, query = '') => `/api/v1/namespaces/shop/pods/${pod}/portforward${query}`;

  test('port-forward over WebSocket: the subprotocol each offer gets', () =>
    same(async (side) => {
      const out: Record<string, unknown> = {};
      for (const offer of [
        ['v4.channel.k8s.io'],
        ['v4.base64.channel.k8s.io'],
        ['v4.base64.channel.k8s.io', 'v4.channel.k8s.io'],
        ['v5.channel.k8s.io'],
        ['v5.channel.k8s.io', 'v4.channel.k8s.io'],
        ['channel.k8s.io'],
        ['SPDY/3.1+portforward.k8s.io'],
        ['SPDY/3.1+portforward.k8s.io', 'v4.channel.k8s.io'],
        [],
      ]) {
        const ws = await webSocket(side, pf('web-0', '?ports=8080'), offer);
        out[offer.join(', ') || '(none)'] = handshakeShape(ws);
        ws.destroy();
      }
      return out;
    }));

  test('port-forward over WebSocket: frames of a refused dial; refusals of a missing pod and of bad ports', () =>
    same(async (side) => {
      const refused = await webSocket(side, pf('refuse-0', '?ports=8080'), ['v4.channel.k8s.io']);
      await refused.closed(5000);
      const working = await webSocket(side, pf('web-0', '?ports=8080'), ['v4.channel.k8s.io']);
      await new Promise((r) => setTimeout(r, 500));
      working.destroy();
      const out: Record<string, unknown> = {
        refused: { handshake: handshakeShape(refused), frames: v4Frames(refused) },
        working: { handshake: handshakeShape(working), frames: v4Frames(working) },
      };
      for (const [label, p] of [
        ['missing pod', pf('missing', '?ports=8080')],
        ['port not a number', pf('web-0', '?ports=http')],
        ['no port', pf('web-0')],
        ['port 0', pf('web-0', '?ports=0')],
        ['port too big', pf('web-0', '?ports=70000')],
        ['pod not scheduled', pf('pending-0', '?ports=8080')],
      ] as const) {
        out[label] = handshakeShape(await webSocket(side, p, ['v4.channel.k8s.io']));
      }
      out['another namespace, limited user'] = handshakeShape(
        await webSocket(side, '/api/v1/namespaces/other/pods/web-0/portforward?ports=8080', ['v4.channel.k8s.io'], { as: 'limited' }),
      );
      return out;
    }));

  const finished = (label: string) => (events: string[]) => events.some((e) => e === `${label}:fin` || e.startsWith(`${label}:rst`));

  test('port-forward over the SPDY tunnel: handshakes, a refused dial, a port that is not a number', () =>
    same(async (side) => {
      const out: Record<string, unknown> = {};
      for (const [label, p, as] of [
        ['missing pod', pf('missing'), 'admin'],
        ['ports query not a number', pf('web-0', '?ports=http'), 'admin'],
        ['pod not scheduled', pf('pending-0'), 'admin'],
        ['another namespace, limited user', '/api/v1/namespaces/other/pods/web-0/portforward', 'limited'],
      ] as const) {
        const t = await spdyTunnel(side, p, { as });
        out[label] = handshakeShape(t.ws);
        t.ws.destroy();
      }
      /** One stream pair on a fresh tunnel: what happens on its streams until both are done. */
      const pair = async (pod: string, port: string) => {
        const t = await spdyTunnel(side, pf(pod));
        if (!t.spdy) return handshakeShape(t.ws);
        t.spdy.pair(port, '0');
        const events = await t.spdy.settle((e) => finished('error')(e) && finished('data')(e), 3000);
        t.ws.destroy();
        return events.map(normText);
      };
      const tunnel = await spdyTunnel(side, pf('web-0'));
      out.tunnel = handshakeShape(tunnel.ws);
      tunnel.ws.destroy();
      out.refused = await pair('refuse-0', '8080');
      out['port not a number'] = await pair('web-0', 'http');
      out['port 0'] = await pair('web-0', '0');
      return out;
    }));

  test('429 from API priority and fairness: a flow over its share gets plain text and Retry-After', async () => {
    // Upstream: a priority level with no seats of its own that borrows none, and a FlowSchema
    // sending the limited user's ConfigMap requests there. Such a level still runs one request
    // when it runs none (queueset.go canAccommodateSeatsLocked): of requests sent at once, the
    // others are refused.
    await cluster.kubectl(['apply', '-f', '-'], { input: APF_NO_SEATS });
    const p = '/api/v1/namespaces/shop/configmaps';
    const real = await eventually(async () => {
      const answers = await Promise.all(Array.from({ length: 20 }, () => httpRequest(sides.real!, p, { as: 'limited' })));
      return answers.find((a) => a.status === 429);
    }, 15_000);
    sim.tooManyRequests(1, /\/configmaps/);
    const simulated = await httpRequest(sides.sim!, p, { as: 'limited' });
    const shape = (a: typeof real) => ({
      status: a.status,
      retryAfter: a.headers['retry-after'],
      type: a.headers['content-type'],
      nosniff: a.headers['x-content-type-options'],
      body: a.body,
    });
    assert.deepEqual(shape(simulated), shape(real));
  });

  /** What a paged list, an exact LIST and a WATCH from a resourceVersion of before get now. */
  async function fromBefore(side: Side, meta: { resourceVersion: string; continue: string }) {
    const watchFrom = (rv: string) =>
      watch(side, `/api/v1/namespaces/shop/pods?watch=1&resourceVersion=${rv}`, { maxMs: 1500 }).then((w) => ({
        status: w.status,
        ended: w.ended,
        events: w.status === 200 ? [...new Set(w.events.map((e) => JSON.stringify(eventShape(e))))].map((e) => JSON.parse(e) as unknown) : w.body,
      }));
    return {
      continue: answerShape(await httpRequest(side, `/api/v1/namespaces/shop/pods?limit=2&continue=${encodeURIComponent(meta.continue)}`)),
      exactList: answerShape(await httpRequest(side, `/api/v1/namespaces/shop/pods?resourceVersion=${meta.resourceVersion}&resourceVersionMatch=Exact`)),
      notOlderThanList: answerShape(
        await httpRequest(side, `/api/v1/namespaces/shop/pods?resourceVersion=${meta.resourceVersion}&resourceVersionMatch=NotOlderThan`),
      ),
      watch: await watchFrom(meta.resourceVersion),
    };
  }

  /** A paged list's first page (its resourceVersion and continue token), then writes and a compaction. */
  async function compacted(side: Side, tag: string) {
    const list = JSON.parse((await httpRequest(side, '/api/v1/namespaces/shop/pods?limit=2')).body) as {
      metadata: { resourceVersion: string; continue: string };
    };
    await side.touch(`${tag}-a`);
    await side.touch(`${tag}-b`);
    await side.compact();
    return list.metadata;
  }

  test('etcd compacted, API server up: the watch cache still serves the old resourceVersion (the simulator deliberately answers 410)', async () => {
    const [simMeta, realMeta] = await Promise.all([compacted(sides.sim!, 'up'), compacted(sides.real!, 'up')]);
    const [s, r] = await Promise.all([fromBefore(sides.sim!, simMeta), fromBefore(sides.real!, realMeta)]);
    if (process.env.SIMDIFF_DUMP) console.log(JSON.stringify({ sim: s, real: r }, null, 1));
    // Upstream (v1.37): continue pages and exact lists from the watch cache's snapshots, watches from its history.
    assert.deepEqual(
      [r.continue, r.exactList, r.watch],
      [
        { status: 200, type: 'application/json', body: '(PodList)' },
        { status: 200, type: 'application/json', body: '(PodList)' },
        { status: 200, ended: false, events: [] },
      ],
    );
    // The simulator's compact() is the window of that cache moving past the version: 410 on demand.
    assert.equal((s.continue as { status: number }).status, 410);
    assert.deepEqual(
      (s.watch.events as Array<{ type: string }>).map((e) => e.type),
      ['ERROR'],
    );
  });

  test('410 Expired after a compaction and an API server restart: a continue token, an exact LIST, a WATCH from before', async () => {
    const [simMeta, realMeta] = await Promise.all([compacted(sides.sim!, 'restart'), compacted(sides.real!, 'restart')]);
    await Promise.all([sim.restartApiServer(200), cluster.restartApiServer()]);
    // A restarted API server answers 429 while its watch cache initialises.
    await eventually(
      async () => (await httpRequest(sides.real!, '/api/v1/namespaces/shop/pods?watch=1&resourceVersion=0&timeoutSeconds=1')).status === 200,
      30_000,
    );
    await same(async (side) => fromBefore(side, side === sides.sim ? simMeta : realMeta));
  });
});
