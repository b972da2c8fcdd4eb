import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { V1EndpointSlice, V1Pod, V1Service } from '@kubernetes/client-node';
import { ClusterIndex } from '../../src/cluster/index.js';
import { indexCache, objectSource } from '../helpers/index-cache.js';
import { Resolver, type ResolverCache } from '../../src/routes/cluster/resolver.js';
import type { Destination } from '../../src/core/types.js';
import { HostUnreachableError, OverloadedError, replyFor } from '../../src/core/errors.js';

function pod(ns: string, name: string, ip: string, ports: Array<[string, number]>, extra: Partial<V1Pod['spec']> = {}): V1Pod {
  return {
    metadata: { namespace: ns, name },
    spec: { containers: [{ name: 'c', ports: ports.map(([n, p]) => ({ name: n, containerPort: p })) }], ...extra },
    status: { phase: 'Running', podIP: ip, podIPs: [{ ip }] },
  };
}
function svc(ns: string, name: string, spec: V1Service['spec']): V1Service {
  return { metadata: { namespace: ns, name }, spec };
}
function slice(
  ns: string,
  service: string,
  port: { name?: string; port: number } | null,
  eps: Array<{ pod?: string; ip: string; ready?: boolean; serving?: boolean; terminating?: boolean; hostname?: string }>,
): V1EndpointSlice {
  return {
    addressType: 'IPv4',
    metadata: { namespace: ns, name: `${service}-x`, labels: { 'kubernetes.io/service-name': service } },
    ports: port ? [{ name: port.name ?? '', port: port.port, protocol: 'TCP' }] : undefined,
    endpoints: eps.map((e) => ({
      addresses: [e.ip],
      hostname: e.hostname,
      conditions: { ready: e.ready ?? true, ...(e.serving !== undefined ? { serving: e.serving } : {}), terminating: e.terminating ?? false },
      targetRef: e.pod ? { kind: 'Pod', namespace: ns, name: e.pod } : undefined,
    })),
  };
}

const pods = [
  pod('shop', 'web-1', '10.0.0.1', [['http', 8080]]),
  pod('shop', 'web-2', '10.0.0.2', [['http', 8080]]),
  pod('shop', 'web-3', '10.0.0.3', [['http', 8080]]),
  pod('shop', 'db-0', '10.0.0.10', [['pg', 5432]], { hostname: 'db-0', subdomain: 'db' }),
  pod('shop', 'api-1', '10.0.0.20', [['web', 9000]]),
];
const services = [
  svc('shop', 'web', {
    clusterIP: '10.96.0.1',
    clusterIPs: ['10.96.0.1', 'fd00:10:96::1'],
    ports: [{ name: 'http', port: 80, targetPort: 'http' as never }],
    selector: { app: 'web' },
  }),
  svc('shop', 'db', { clusterIP: 'None', ports: [{ port: 5432 }], selector: { app: 'db' } }),
  svc('shop', 'api', { clusterIP: '10.96.0.3', ports: [{ name: 'web', port: 80, targetPort: 'web' as never }], selector: { app: 'api' } }),
  svc('shop', 'empty', { clusterIP: '10.96.0.4', ports: [{ port: 80 }], selector: { app: 'none' } }),
  // Selector-less, its endpoints not written yet (an operator's, or the user's to write).
  svc('shop', 'unwritten', { clusterIP: '10.96.0.14', ports: [{ port: 80 }] }),
  svc('shop', 'ext', { type: 'ExternalName', externalName: 'example.org' }),
  svc('shop', 'manual', { clusterIP: '10.96.0.6', ports: [{ port: 80 }] }),
];
const slices = [
  slice('shop', 'web', { name: 'http', port: 8080 }, [
    { pod: 'web-1', ip: '10.0.0.1' },
    { pod: 'web-2', ip: '10.0.0.2', ready: false },
    { pod: 'web-3', ip: '10.0.0.3', ready: false, terminating: true },
  ]),
  slice('shop', 'db', { port: 5432 }, [{ pod: 'db-0', ip: '10.0.0.10', hostname: 'db-0' }]),
  slice('shop', 'api', null, [{ pod: 'api-1', ip: '10.0.0.20' }]),
  { ...slice('shop', 'empty', { port: 80 }, []), endpoints: null as never },
  slice('shop', 'manual', { port: 80 }, [{ ip: '192.0.2.1' }]),
];

const index = new ClusterIndex(() => [objectSource(services, slices, pods)]);
// The index holds slim records, made from the objects as the informers make them.
const cache: ResolverCache = indexCache(index, {
  defaultNamespace: 'shop',
  namespaceExists: (ns: string) => ['shop', 'default'].includes(ns),
  ensureNamespace: async () => undefined,
  noteServed: () => undefined,
});
const resolver = new Resolver(cache as never, 'cluster.local');
const dom = (host: string, port: number): Destination => ({ host, port, type: 'domain' });

async function replyOf(dest: Destination): Promise<number> {
  try {
    await resolver.resolve(dest);
  } catch (err) {
    return replyFor(err).socks;
  }
  return 0;
}

test('a Service name maps port → named targetPort on ready, non-terminating endpoints only', async () => {
  for (const host of ['web', 'web.shop', 'web.shop.svc', 'web.shop.svc.cluster.local.']) {
    const plan = await resolver.resolve(dom(host, 80));
    assert.deepEqual(
      plan.candidates.map((c) => [c.pod, c.port]),
      [['web-1', 8080]],
      host,
    );
  }
});

test('ClusterIPs (IPv4 and IPv6, any spelling) map to their Service; Pod IPs keep the port', async () => {
  assert.equal((await resolver.resolve({ host: '10.96.0.1', port: 80, type: 'ipv4' })).candidates[0].pod, 'web-1');
  assert.equal((await resolver.resolve({ host: 'fd00:10:96:0::1', port: 80, type: 'ipv6' })).candidates[0].pod, 'web-1');
  const viaPodIp = await resolver.resolve({ host: '10.0.0.2', port: 1234, type: 'ipv4' });
  assert.deepEqual(
    viaPodIp.candidates.map((c) => [c.pod, c.port]),
    [['web-2', 1234]],
  );
});

test('a slice without ports gives a Service port no endpoint: kube-proxy takes the port from the slice only', async () => {
  const reply = await resolver.resolve(dom('api.shop.svc', 80)).then(() => undefined, replyFor);
  assert.equal(reply?.socks, 0x04);
  assert.match(
    reply!.message,
    /service shop\/api:80: none of its endpoints \(1\) has a port for it: their EndpointSlices, not written by the EndpointSlice controller, have no TCP port named "web", so kube-proxy sends nothing to them/,
  );
});

test('headless Service names and pod hostnames keep the requested port', async () => {
  assert.deepEqual(
    (await resolver.resolve(dom('db.shop.svc', 5432))).candidates.map((c) => [c.pod, c.port]),
    [['db-0', 5432]],
  );
  assert.deepEqual(
    (await resolver.resolve(dom('db-0.db.shop.svc.cluster.local', 5432))).candidates.map((c) => [c.pod, c.port]),
    [['db-0', 5432]],
  );
  assert.deepEqual(
    (await resolver.resolve(dom('10-0-0-10.shop.pod.cluster.local', 5432))).candidates.map((c) => c.pod),
    ['db-0'],
  );
});

test('connections spread round-robin over ready endpoints', async () => {
  const more = [...slices];
  more[0] = slice('shop', 'web', { name: 'http', port: 8080 }, [
    { pod: 'web-1', ip: '10.0.0.1' },
    { pod: 'web-2', ip: '10.0.0.2' },
    { pod: 'web-3', ip: '10.0.0.3' },
  ]);
  const ix = new ClusterIndex(() => [objectSource(services, more, pods)]);
  const r = new Resolver({ ...cache, lookup: ix } as never, 'cluster.local', 2);
  const firsts = new Set<string>();
  for (let i = 0; i < 6; i++) {
    const plan = await r.resolve(dom('web.shop', 80));
    assert.equal(plan.candidates.length, 2, 'at most maxCandidates tried');
    firsts.add(plan.candidates[0].pod);
  }
  assert.deepEqual([...firsts].sort(), ['web-1', 'web-2', 'web-3']);
});

test('every failure maps to the reply the issue asks for', async () => {
  assert.equal(await replyOf(dom('nope.shop.svc.cluster.local', 80)), 0x04, 'unknown service → host unreachable');
  assert.equal(await replyOf(dom('nope', 80)), 0x04);
  assert.equal(await replyOf(dom('empty.shop', 80)), 0x04, 'no ready endpoint → host unreachable');
  assert.equal(await replyOf(dom('web.shop', 81)), 0x05, 'service has no such port → refused');
  assert.equal(await replyOf(dom('www.example.com', 443)), 0x02, 'outside the cluster → not allowed');
  assert.equal(await replyOf(dom('example.com', 443)), 0x02, 'two labels but no such namespace → not allowed');
  assert.equal(await replyOf({ host: '192.0.2.55', port: 80, type: 'ipv4' }), 0x02, 'unknown IP → not allowed');
  assert.equal(await replyOf(dom('ext.shop', 80)), 0x04, 'ExternalName → clear error');
  assert.equal(await replyOf(dom('manual.shop', 80)), 0x04, 'non-pod endpoints → clear error');
  await assert.rejects(resolver.resolve(dom('ext.shop', 80)), /ExternalName/);
  await assert.rejects(resolver.resolve(dom('manual.shop', 80)), /not pods/);
  await assert.rejects(resolver.resolve(dom('empty.shop', 80)), /no ready endpoint/);
});

test('no ready endpoint says why: no endpoint at all, or which pods are there and not ready', async () => {
  await assert.rejects(
    resolver.resolve(dom('empty.shop', 80)),
    /^NoReadyEndpointError: service shop\/empty:80 has no ready endpoint: it has no endpoints \(no running pod matches its selector\)$/,
  );
  await assert.rejects(
    resolver.resolve(dom('unwritten.shop', 80)),
    /^NoReadyEndpointError: service shop\/unwritten:80 has no ready endpoint: it has no selector and no endpoints \(no EndpointSlice or Endpoints written for it\)$/,
  );
  const starting = [
    svc('shop', 'one', { clusterIP: '10.96.1.1', ports: [{ port: 80 }] }),
    svc('shop', 'five', { clusterIP: '10.96.1.5', ports: [{ port: 80 }] }),
  ];
  const notReady = (n: number) => Array.from({ length: n }, (_, i) => ({ pod: `p-${i}`, ip: `10.0.1.${i + 1}`, ready: false }));
  const r = new Resolver(
    {
      ...cache,
      lookup: new ClusterIndex(() => [
        objectSource(starting, [slice('shop', 'one', { port: 80 }, notReady(1)), slice('shop', 'five', { port: 80 }, notReady(5))], []),
      ]),
    } as never,
    'cluster.local',
  );
  await assert.rejects(r.resolve(dom('one.shop', 80)), /service shop\/one:80 has no ready endpoint: its one endpoint, pod shop\/p-0, is not ready$/);
  await assert.rejects(r.resolve(dom('five.shop', 80)), /none of its 5 endpoints is ready \(pod shop\/p-0, pod shop\/p-1, pod shop\/p-2, …\)$/);
});

test('a Pod IP only hostNetwork pods have (a node IP) is refused unless allowed; their Service and headless names still work', async () => {
  const nodePods = [
    pod('kube-system', 'etcd-node-1', '10.0.9.1', [['client', 2379]], { hostNetwork: true }),
    pod('shop', 'agent-1', '10.0.9.1', [['m', 9100]], { hostNetwork: true, hostname: 'agent-1', subdomain: 'agents' }),
  ];
  const agents = [
    svc('shop', 'agent', { clusterIP: '10.96.0.9', ports: [{ port: 9100 }] }),
    svc('shop', 'agents', { clusterIP: 'None', ports: [{ port: 9100 }] }),
  ];
  const agentSlices = [
    slice('shop', 'agent', { port: 9100 }, [{ pod: 'agent-1', ip: '10.0.9.1' }]),
    {
      ...slice('shop', 'agents', { port: 9100 }, [{ pod: 'agent-1', ip: '10.0.9.1' }]),
      metadata: { namespace: 'shop', name: 'agents-x', labels: { 'kubernetes.io/service-name': 'agents' } },
    },
  ];
  const ix = new ClusterIndex(() => [objectSource(agents, agentSlices, nodePods)]);
  const strict = new Resolver({ ...cache, lookup: ix, namespaceExists: () => true } as never, 'cluster.local');
  for (const dest of [{ host: '10.0.9.1', port: 2379, type: 'ipv4' } as const, dom('10-0-9-1.kube-system.pod.cluster.local', 2379)]) {
    const reply = await strict.resolve(dest).then(() => undefined, replyFor);
    assert.equal(reply?.socks, 0x02, dest.host);
    assert.equal(reply?.http, 403);
    assert.match(reply!.message, /node IP.*hostNetwork.*--allow-host-network-pods/);
  }
  assert.deepEqual(
    (await strict.resolve(dom('agent.shop.svc', 9100))).candidates.map((c) => c.pod),
    ['agent-1'],
  );
  assert.deepEqual(
    (await strict.resolve({ host: '10.96.0.9', port: 9100, type: 'ipv4' })).candidates.map((c) => c.pod),
    ['agent-1'],
  );
  assert.deepEqual(
    (await strict.resolve(dom('agent-1.agents.shop.svc', 9100))).candidates.map((c) => c.pod),
    ['agent-1'],
  );
  const open = new Resolver({ ...cache, lookup: ix } as never, 'cluster.local', 3, { allowHostNetworkPods: true });
  assert.ok(['etcd-node-1', 'agent-1'].includes((await open.resolve({ host: '10.0.9.1', port: 2379, type: 'ipv4' })).candidates[0]!.pod));
});

test('a name in a namespace the namespace list lacks is refused without a namespace look-up', async () => {
  let lookups = 0;
  const r = new Resolver({ ...cache, ensureNamespace: async () => void lookups++ } as never, 'cluster.local');
  const reply = await r.resolve(dom('web.nope.svc.cluster.local', 80)).then(() => undefined, replyFor);
  assert.equal(reply?.socks, 0x04);
  assert.match(reply!.message, /no namespace "nope"/);
  assert.equal(lookups, 0);
});

test("a hand-made slice's port counts for the Service port of its name and protocol only, never the targetPort", async () => {
  const svcs = [
    svc('shop', 'multi', {
      clusterIP: '10.96.0.7',
      ports: [
        { name: 'http', port: 80, targetPort: 8080 as never },
        { name: 'admin', port: 81, targetPort: 9000 as never },
        { name: 'metrics', port: 82, targetPort: 9100 as never },
      ],
    }),
  ];
  const sl = [
    {
      ...slice('shop', 'multi', { name: 'http', port: 8080 }, [{ ip: '10.0.0.1' }]),
      // "admin" for UDP only, "metrics" without a number ("all ports", which kube-proxy ignores).
      ports: [
        { name: 'http', port: 8080, protocol: 'TCP' },
        { name: 'admin', port: 9000, protocol: 'UDP' },
        { name: 'metrics', protocol: 'TCP' },
      ],
    },
    // Ready, but in a slice without "http": not an endpoint of port 80 (a second slice of its own).
    {
      ...slice('shop', 'multi', { name: 'other', port: 7000 }, [{ ip: '10.0.0.2' }]),
      metadata: { namespace: 'shop', name: 'multi-y', labels: { 'kubernetes.io/service-name': 'multi' } },
    },
  ];
  const ix = new ClusterIndex(() => [objectSource(svcs, sl, pods)]);
  const r = new Resolver({ ...cache, lookup: ix } as never, 'cluster.local');
  assert.deepEqual(
    (await r.resolve(dom('multi.shop', 80))).candidates.map((c) => [c.pod, c.port]),
    [['web-1', 8080]],
  );
  for (const [port, name] of [
    [81, 'admin'],
    [82, 'metrics'],
  ] as const) {
    const reply = await r.resolve(dom('multi.shop', port)).then(() => undefined, replyFor);
    assert.equal(reply?.socks, 0x04, name);
    assert.match(reply!.message, new RegExp(`have no TCP port named "${name}"`), name);
  }
});

test('a headless name is its ready endpoints only, as cluster DNS answers: no fallback to pods still serving while they terminate', async () => {
  const svcs = [svc('shop', 'hl-roll', { clusterIP: 'None', ports: [{ port: 8080 }] })];
  const terminatingServing = { pod: 'web-1', ip: '10.0.0.1', ready: false, serving: true, terminating: true };
  const only = (eps: Parameters<typeof slice>[3]) =>
    new Resolver({ ...cache, lookup: new ClusterIndex(() => [objectSource(svcs, [slice('shop', 'hl-roll', null, eps)], pods)]) } as never, 'cluster.local');
  const reply = await only([terminatingServing])
    .resolve(dom('hl-roll.shop', 8080))
    .then(() => undefined, replyFor);
  assert.equal(reply?.socks, 0x04);
  assert.match(
    reply!.message,
    /service shop\/hl-roll:8080 has no ready endpoint: its one endpoint, pod shop\/web-1, is not ready \(a headless name: cluster DNS answers ready endpoints only\)/,
  );
  const plan = await only([terminatingServing, { pod: 'web-2', ip: '10.0.0.2' }]).resolve(dom('hl-roll.shop', 8080));
  assert.deepEqual(
    plan.candidates.map((c) => c.pod),
    ['web-2'],
  );
  assert.equal(plan.stillPicked!({ namespace: 'shop', pod: 'web-1', port: 8080 }), false, 'a pooled stream to the terminating pod is not reused');
});

test('a plan says whether its Service would still pick the pod it opened on: selector switched, targetPort changed, Service made again', async () => {
  const web = (uid: string, targetPort: number) =>
    ({
      ...svc('shop', 'switch', { clusterIP: '10.96.0.17', ports: [{ name: 'http', port: 80, targetPort: targetPort as never }] }),
      metadata: { namespace: 'shop', name: 'switch', uid },
    }) as V1Service;
  const svcs = [web('u1', 8080)];
  const sl = [slice('shop', 'switch', { name: 'http', port: 8080 }, [{ pod: 'web-1', ip: '10.0.0.1' }])];
  const ix = new ClusterIndex(() => [objectSource(svcs, sl, pods)]);
  const r = new Resolver({ ...cache, lookup: ix } as never, 'cluster.local');
  const plan = await r.resolve(dom('switch', 80));
  const [c] = plan.candidates;
  const picked = () => {
    ix.invalidate();
    return plan.stillPicked!(c);
  };
  assert.equal(picked(), true);
  // The selector now picks other pods (blue/green): the controller lists web-2 instead.
  sl[0] = slice('shop', 'switch', { name: 'http', port: 8080 }, [{ pod: 'web-2', ip: '10.0.0.2' }]);
  assert.equal(picked(), false, 'selector switched');
  sl[0] = slice('shop', 'switch', { name: 'http', port: 9090 }, [{ pod: 'web-1', ip: '10.0.0.1' }]);
  assert.equal(picked(), false, 'targetPort changed');
  sl[0] = slice('shop', 'switch', { name: 'http', port: 8080 }, [
    { pod: 'web-1', ip: '10.0.0.1', ready: false, terminating: true },
    { pod: 'web-2', ip: '10.0.0.2' },
  ]);
  assert.equal(picked(), false, 'terminating beside a ready one (a rollout)');
  sl[0] = slice('shop', 'switch', { name: 'http', port: 8080 }, [{ pod: 'web-1', ip: '10.0.0.1', ready: false, terminating: true, serving: true }]);
  assert.equal(picked(), true, 'the only one, terminating but serving: still where kube-proxy sends');
  svcs[0] = web('u2', 8080);
  assert.equal(picked(), false, 'the Service deleted and made again');

  // An alias (ExternalName) switched to another Service: what it named before is no longer picked.
  sl[0] = slice('shop', 'switch', { name: 'http', port: 8080 }, [{ pod: 'web-1', ip: '10.0.0.1' }]);
  const alias = (target: string) => ({
    ...svc('shop', 'alias', { type: 'ExternalName', externalName: target }),
    metadata: { namespace: 'shop', name: 'alias', uid: 'a1' },
  });
  svcs.push(alias('switch.shop.svc.cluster.local'));
  ix.invalidate();
  const viaAlias = await r.resolve(dom('alias', 80));
  const check = () => {
    ix.invalidate();
    return viaAlias.stillPicked!(viaAlias.candidates[0]);
  };
  assert.equal(check(), true);
  svcs[1] = alias('web.shop.svc.cluster.local');
  assert.equal(check(), false, 'the alias retargeted');
});

test('a hostname several ready pods share (a Deployment template sets it) is each of them, spread, as CoreDNS answers every one', async () => {
  const svcs = [svc('shop', 'hl', { clusterIP: 'None', ports: [{ port: 8080 }] })];
  const eps = [
    { pod: 'web-b', ip: '10.0.3.2', hostname: 'web' },
    { pod: 'web-a', ip: '10.0.3.1', hostname: 'web' },
    { pod: 'web-c', ip: '10.0.3.3', hostname: 'web', ready: false },
  ];
  const ix = new ClusterIndex(() => [objectSource(svcs, [slice('shop', 'hl', { port: 8080 }, eps)], [])]);
  const r = new Resolver({ ...cache, lookup: ix } as never, 'cluster.local');
  const firsts = new Set<string>();
  for (let i = 0; i < 4; i++) {
    const plan = await r.resolve(dom('web.hl.shop.svc.cluster.local', 8080));
    assert.deepEqual(plan.candidates.map((c) => [c.pod, c.port]).sort(), [
      ['web-a', 8080],
      ['web-b', 8080],
    ]);
    firsts.add(plan.candidates[0].pod);
  }
  assert.deepEqual([...firsts].sort(), ['web-a', 'web-b'], 'spread over both');
});

test('a port the Service has for UDP or SCTP only is refused saying so; the port list names non-TCP protocols', async () => {
  const svcs = [
    svc('shop', 'dns', { clusterIP: '10.96.0.13', ports: [{ name: 'dns', port: 53, protocol: 'UDP' }] }),
    svc('shop', 'sctp', { clusterIP: '10.96.0.14', ports: [{ port: 80, protocol: 'SCTP' }] }),
    svc('shop', 'mixed', {
      clusterIP: '10.96.0.15',
      ports: [
        { name: 'http', port: 80 },
        { name: 'stats', port: 8125, protocol: 'UDP' },
      ],
    }),
  ];
  const r = new Resolver({ ...cache, lookup: new ClusterIndex(() => [objectSource(svcs, [], pods)]) } as never, 'cluster.local');
  const refusal = async (host: string, port: number) => {
    const reply = await r.resolve(dom(host, port)).then(() => undefined, replyFor);
    assert.equal(reply?.socks, 0x05, host);
    return reply!.message;
  };
  assert.match(await refusal('dns', 53), /Service shop\/dns has port 53 for UDP only; the proxy carries TCP streams/);
  assert.match(await refusal('sctp', 80), /Service shop\/sctp has port 80 for SCTP only/);
  assert.match(await refusal('10.96.0.14', 80), /has port 80 for SCTP only/, 'its ClusterIP alike');
  assert.match(await refusal('mixed', 81), /Service shop\/mixed has no TCP port 81 \(ports: 80\/http, 8125\/stats UDP\)/);
});

test("a controller's slice without ports (a targetPort name no pod has): the refusal names the port", async () => {
  // What kube-controller-manager writes when no selected pod has the named port: `ports: null`.
  const svcs = [svc('shop', 'typo', { clusterIP: '10.96.0.12', ports: [{ name: 'web', port: 80, targetPort: 'wbe' as never }] })];
  const eps = Array.from({ length: 30 }, (_, i) => ({ pod: `web-${i}`, ip: `10.0.1.${i + 1}` }));
  const byController = slice('shop', 'typo', null, eps);
  byController.metadata!.labels!['endpointslice.kubernetes.io/managed-by'] = 'endpointslice-controller.k8s.io';
  const ix = new ClusterIndex(() => [objectSource(svcs, [byController], pods)]);
  const r = new Resolver({ ...cache, lookup: ix } as never, 'cluster.local');
  await assert.rejects(r.resolve(dom('typo', 80)), (err: unknown) => {
    assert.equal(replyFor(err).socks, 0x04);
    assert.match((err as Error).message, /none of its endpoints \(30\) has a port for it: their pods have no TCP container port named "wbe"/);
    return true;
  });
});

test('no ready endpoint: those still serving while they terminate are used, as kube-proxy does; not-serving ones never', async () => {
  const svcs = [svc('shop', 'roll', { clusterIP: '10.96.0.8', ports: [{ port: 80 }] })];
  const only = (eps: Parameters<typeof slice>[3]) => {
    const ix = new ClusterIndex(() => [objectSource(svcs, [slice('shop', 'roll', { port: 8080 }, eps)], pods)]);
    return new Resolver({ ...cache, lookup: ix } as never, 'cluster.local');
  };
  const terminatingServing = { pod: 'web-1', ip: '10.0.0.1', ready: false, serving: true, terminating: true };
  assert.deepEqual(
    (await only([terminatingServing]).resolve(dom('roll.shop', 80))).candidates.map((c) => c.pod),
    ['web-1'],
  );
  // A ready endpoint beside it: only that one.
  assert.deepEqual(
    (await only([terminatingServing, { pod: 'web-2', ip: '10.0.0.2' }]).resolve(dom('roll.shop', 80))).candidates.map((c) => c.pod),
    ['web-2'],
  );
  await assert.rejects(only([{ ...terminatingServing, serving: false }]).resolve(dom('roll.shop', 80)), /no ready endpoint/);
  // publishNotReadyAddresses: the controller writes a terminating pod ready; kube-proxy takes it among the ready ones.
  const published = { pod: 'web-1', ip: '10.0.0.1', ready: true, serving: true, terminating: true };
  const both = only([published, { pod: 'web-2', ip: '10.0.0.2' }]);
  const firsts = new Set<string>();
  for (let i = 0; i < 4; i++) firsts.add((await both.resolve(dom('roll.shop', 80))).candidates[0]!.pod);
  assert.deepEqual([...firsts].sort(), ['web-1', 'web-2']);
});

test('dual-stack: a pod in the IPv4 and the IPv6 slice of its Service is one candidate', async () => {
  const svcs = [svc('shop', 'dual', { clusterIP: '10.96.0.11', ports: [{ port: 80 }] })];
  const v4 = {
    ...slice('shop', 'dual', { port: 8080 }, [
      { pod: 'web-1', ip: '10.0.0.1' },
      { pod: 'web-2', ip: '10.0.0.2' },
    ]),
    metadata: { namespace: 'shop', name: 'dual-v4', labels: { 'kubernetes.io/service-name': 'dual' } },
  };
  const v6 = {
    ...slice('shop', 'dual', { port: 8080 }, [
      { pod: 'web-1', ip: 'fd00::1' },
      { pod: 'web-2', ip: 'fd00::2' },
    ]),
    addressType: 'IPv6',
    metadata: { namespace: 'shop', name: 'dual-v6', labels: { 'kubernetes.io/service-name': 'dual' } },
  };
  const ix = new ClusterIndex(() => [objectSource(svcs, [v4, v6], pods)]);
  const plan = await new Resolver({ ...cache, lookup: ix } as never, 'cluster.local').resolve(dom('dual.shop', 80));
  assert.deepEqual(plan.candidates.map((c) => c.pod).sort(), ['web-1', 'web-2']);
});

test('a headless pod hostname names only a ready endpoint (as CoreDNS answers)', async () => {
  const svcs = [svc('shop', 'pg', { clusterIP: 'None', ports: [{ port: 5432 }] })];
  const sl = [
    {
      ...slice('shop', 'pg', { port: 5432 }, [{ pod: 'db-0', ip: '10.0.0.10', hostname: 'pg-0', ready: false }]),
      metadata: { namespace: 'shop', name: 'pg-x', labels: { 'kubernetes.io/service-name': 'pg' } },
    },
  ];
  const ix = new ClusterIndex(() => [objectSource(svcs, sl, pods)]);
  const r = new Resolver({ ...cache, lookup: ix } as never, 'cluster.local');
  await assert.rejects(r.resolve(dom('pg-0.pg.shop.svc.cluster.local', 5432)));
});

test('where each rotation stands is remembered for a bounded number of Services and ports', async () => {
  // A headless Service answers on any port: one rotation per port asked for.
  for (let port = 1; port <= 10_050; port++) await resolver.resolve(dom('db.shop.svc', port));
  const kept = (resolver as unknown as { roundRobin: Map<string, number> }).roundRobin.size;
  assert.ok(kept <= 10_000, `${kept} rotations kept`);
});

test('sessionAffinity ClientIP: a client sticks to the endpoint it reached, per Service port, until the timeout passes without a connection', async () => {
  const svcs = [
    svc('shop', 'sticky', {
      clusterIP: '10.96.0.21',
      ports: [{ port: 80 }],
      sessionAffinity: 'ClientIP',
      sessionAffinityConfig: { clientIP: { timeoutSeconds: 60 } },
    }),
    svc('shop', 'sticky-headless', { clusterIP: 'None', ports: [{ port: 80 }], sessionAffinity: 'ClientIP' }),
  ];
  const three = () =>
    ['sticky', 'sticky-headless'].map((name) =>
      slice('shop', name, { port: 8080 }, [
        { pod: 'web-1', ip: '10.0.0.1' },
        { pod: 'web-2', ip: '10.0.0.2' },
        { pod: 'web-3', ip: '10.0.0.3' },
      ]),
    );
  let now = 1_000_000;
  const indexOf = () => new ClusterIndex(() => [objectSource(svcs, three(), pods)]);
  let ix = indexOf();
  const r = new Resolver(
    {
      ...cache,
      get lookup() {
        return ix;
      },
    } as never,
    'cluster.local',
    3,
    { now: () => now },
  );
  /** A connection from `client`: the plan's first candidate opens, as PodStreams tells the plan. */
  const connect = async (client: string, host = 'sticky.shop') => {
    const plan = await r.resolve(dom(host, 80), client);
    plan.opened?.(plan.candidates[0]);
    return plan.candidates[0].pod;
  };

  const first = await connect('127.0.0.1');
  for (let i = 0; i < 5; i++) assert.equal(await connect('127.0.0.1'), first, 'the same endpoint every time');
  assert.equal((await r.resolve({ host: '10.96.0.21', port: 80, type: 'ipv4' }, '127.0.0.1')).candidates[0].pod, first, 'by ClusterIP too');
  const plan = await r.resolve(dom('sticky.shop', 80), '127.0.0.1');
  assert.equal(new Set(plan.candidates.map((c) => c.pod)).size, 3, 'the others stay behind it, should it refuse');
  // Another client address has its own.
  const others = new Set<string>();
  for (const client of ['192.0.2.1', '192.0.2.2', '192.0.2.3', '192.0.2.4']) others.add(await connect(client));
  assert.ok(others.size > 1, 'clients are spread, each stuck to its own');

  // Each connection refreshes it: 50 s, then 50 s more, is within 60 s of the last.
  now += 50_000;
  assert.equal(await connect('127.0.0.1'), first);
  now += 50_000;
  assert.equal(await connect('127.0.0.1'), first);
  // 61 s without one: forgotten, the rotation decides again.
  now += 61_000;
  const after = [await r.resolve(dom('sticky.shop', 80), '127.0.0.1'), await r.resolve(dom('sticky.shop', 80), '127.0.0.1')];
  assert.notEqual(after[0].candidates[0].pod, after[1].candidates[0].pod, 'not stuck any more');

  // Its endpoint gone from the slices (no longer ready): another, which it then sticks to.
  const stuckTo = await connect('10.1.1.1');
  ix = new ClusterIndex(() => [
    objectSource(
      svcs,
      three().map((sl) => ({ ...sl, endpoints: sl.endpoints.filter((e) => e.targetRef?.name !== stuckTo) })),
      pods,
    ),
  ]);
  const moved = await connect('10.1.1.1');
  assert.notEqual(moved, stuckTo);
  for (let i = 0; i < 3; i++) assert.equal(await connect('10.1.1.1'), moved);
  ix = indexOf();

  // A headless name is the client's own pick (no kube-proxy): spread, nothing remembered.
  const headless = await r.resolve(dom('sticky-headless.shop', 80), '127.0.0.1');
  assert.equal(headless.opened, undefined);
  // Without a client address (nothing to key by), the rotation.
  assert.equal((await r.resolve(dom('sticky.shop', 80))).opened, undefined);
});

test("a Service's endpoint without a hostname is named by its address, dashed, as CoreDNS names it", async () => {
  const svcs = [svc('shop', 'peers', { clusterIP: 'None', ports: [{ port: 7000 }] }), svc('shop', 'web', { clusterIP: '10.96.0.1', ports: [{ port: 80 }] })];
  const eps = [
    { pod: 'web-1', ip: '10.0.0.1' },
    { pod: 'web-2', ip: '10.0.0.2' },
    { pod: 'web-3', ip: '10.0.0.3', ready: false },
    { pod: 'db-0', ip: '10.0.0.10', hostname: 'db-0' },
  ];
  const ix = new ClusterIndex(() => [objectSource(svcs, [slice('shop', 'peers', { port: 7000 }, eps), slice('shop', 'web', { port: 8080 }, eps)], pods)]);
  const r = new Resolver({ ...cache, lookup: ix } as never, 'cluster.local');
  assert.deepEqual(
    (await r.resolve(dom('10-0-0-2.peers.shop.svc.cluster.local', 7000))).candidates.map((c) => [c.pod, c.port]),
    [['web-2', 7000]],
  );
  await assert.rejects(
    r.resolve(dom('10-0-0-3.peers.shop.svc', 7000)),
    /pod shop\/web-3, hostname "10-0-0-3" under Service shop\/peers, is not ready: cluster DNS names ready endpoints only/,
    'not ready: not published, and the refusal says so',
  );
  await assert.rejects(r.resolve(dom('10-0-0-99.peers.shop.svc', 7000)), /no running pod with hostname "10-0-0-99"/);
  await assert.rejects(r.resolve(dom('10-0-0-10.peers.shop.svc', 7000)), /no running pod/, 'an endpoint with a hostname goes by it');
  // CoreDNS answers endpoint names of a Service with a ClusterIP too (plugin/kubernetes findServices:
  // headless or an endpoint asked for): the Pod IP, so the port as asked.
  assert.deepEqual(
    (await r.resolve(dom('10-0-0-1.web.shop.svc', 8080))).candidates.map((c) => [c.pod, c.port]),
    [['web-1', 8080]],
  );
  await assert.rejects(r.resolve(dom('10-0-0-3.web.shop.svc', 8080)), /pod shop\/web-3, .* is not ready/, 'not ready: not published');
});

test("a selector-less Service's endpoint without a targetRef is the running pod with its address, as kube-proxy sends it there", async () => {
  const svcs = [
    svc('shop', 'leader', { clusterIP: '10.96.0.9', ports: [{ name: 'pg', port: 5432, targetPort: 'pg' as never }] }),
    svc('shop', 'by-number', { clusterIP: '10.96.0.10', ports: [{ port: 80, targetPort: 8080 as never }] }),
    svc('shop', 'peers', { clusterIP: 'None', ports: [{ port: 7000 }] }),
  ];
  const sl = [
    // Hand-made (or mirrored from hand-written Endpoints): an address, a port, no targetRef.
    slice('shop', 'leader', { name: 'pg', port: 5432 }, [{ ip: '10.0.0.10' }]),
    slice('shop', 'by-number', { port: 8080 }, [{ ip: '10.0.0.2' }, { ip: '192.0.2.1' }]),
    slice('shop', 'peers', { port: 7000 }, [{ ip: '10.0.0.3' }]),
  ];
  const ix = new ClusterIndex(() => [objectSource([...services, ...svcs], [...slices, ...sl], pods)]);
  const asked: string[] = [];
  const r = new Resolver({ ...cache, lookup: ix, findPodByIp: async (ip: string) => (asked.push(ip), ix.podByIp(ip)) } as never, 'cluster.local');
  const plan = async (host: string, port: number) => (await r.resolve(dom(host, port))).candidates.map((c) => [c.pod, c.port, c.uid]);
  assert.deepEqual(await plan('leader.shop', 5432), [['db-0', 5432, undefined]]);
  // An address no pod has is left out.
  assert.deepEqual(await plan('by-number.shop', 80), [['web-2', 8080, undefined]]);
  assert.deepEqual(await plan('peers.shop.svc.cluster.local', 7000), [['web-3', 7000, undefined]], 'headless: the port as asked');
  assert.deepEqual(asked.sort(), ['10.0.0.10', '10.0.0.2', '10.0.0.3', '192.0.2.1']);
  // Endpoints with a pod targetRef are not looked up.
  asked.length = 0;
  await r.resolve(dom('web.shop', 80));
  assert.deepEqual(asked, []);
});

test('an FQDN slice (a name, not an address) is no pod: refused without a Pod IP look-up', async () => {
  const svcs = [svc('shop', 'named', { clusterIP: '10.96.0.18', ports: [{ port: 80 }] })];
  const sl = [{ ...slice('shop', 'named', { port: 80 }, [{ ip: 'db.example.com' }]), addressType: 'FQDN' }];
  const ix = new ClusterIndex(() => [objectSource(svcs, sl, pods)]);
  const asked: string[] = [];
  const r = new Resolver({ ...cache, lookup: ix, findPodByIp: async (ip: string) => (asked.push(ip), ix.podByIp(ip)) } as never, 'cluster.local');
  await assert.rejects(r.resolve(dom('named.shop', 80)), /its endpoints \(db\.example\.com\) are not pods nor any running pod's address/);
  assert.deepEqual(asked, []);
});

test('a look-up failure for such an address is the answer when no endpoint is left', async () => {
  const ix = new ClusterIndex(() => [objectSource(services, slices, pods)]);
  const r = new Resolver(
    {
      ...cache,
      lookup: ix,
      findPodByIp: async () => {
        throw new OverloadedError('not looking up more pods now');
      },
    } as never,
    'cluster.local',
  );
  await assert.rejects(r.resolve(dom('manual.shop', 80)), OverloadedError);
});

test('an ExternalName Service for a name in the cluster domain is followed, as CoreDNS resolves the CNAME in its zone', async () => {
  const svcs = [
    svc('other', 'alias', { type: 'ExternalName', externalName: 'WEB.shop.svc.cluster.local.' }),
    svc('other', 'alias-of-alias', { type: 'ExternalName', externalName: 'alias.other.svc.cluster.local' }),
    svc('other', 'to-pod', { type: 'ExternalName', externalName: 'db-0.db.shop.svc.cluster.local' }),
    svc('other', 'short', { type: 'ExternalName', externalName: 'web.shop' }),
    svc('other', 'svc-form', { type: 'ExternalName', externalName: 'web.shop.svc' }),
    svc('other', 'one-label', { type: 'ExternalName', externalName: 'web' }),
    svc('other', 'loop-a', { type: 'ExternalName', externalName: 'loop-b.other.svc.cluster.local' }),
    svc('other', 'loop-b', { type: 'ExternalName', externalName: 'loop-a.other.svc.cluster.local' }),
    svc('other', 'to-empty', { type: 'ExternalName', externalName: 'empty.shop.svc.cluster.local' }),
  ];
  const ix = new ClusterIndex(() => [objectSource([...services, ...svcs], slices, pods)]);
  const r = new Resolver({ ...cache, lookup: ix, namespaceExists: () => true } as never, 'cluster.local');
  const plan = async (host: string, port: number) => {
    const p = await r.resolve(dom(host, port));
    return [p.label, ...p.candidates.map((c) => `${c.pod}:${c.port}`)];
  };
  // The Service port of the target maps to its targetPort, as a client that followed the CNAME gets.
  assert.deepEqual(await plan('alias.other', 80), ['service other/alias:80 → service shop/web:80', 'web-1:8080']);
  assert.deepEqual((await plan('alias-of-alias.other.svc.cluster.local', 80)).slice(1), ['web-1:8080']);
  assert.deepEqual((await plan('to-pod.other', 5432)).slice(1), ['db-0:5432'], 'a pod name: the port as asked');
  // A name outside the zone: CoreDNS hands it to the upstream resolver, and the search path never applies to a CNAME target.
  for (const outside of ['short', 'ext']) {
    const ns = outside === 'ext' ? 'shop' : 'other';
    await assert.rejects(r.resolve(dom(`${outside}.${ns}`, 80)), (err: Error) => replyFor(err).socks === 0x04 && /outside the cluster/.test(err.message));
  }
  // A short cluster name is no host outside the cluster: the proxy resolves it, so it says so.
  await assert.rejects(
    r.resolve(dom('svc-form.other', 80)),
    (err: Error) =>
      replyFor(err).socks === 0x04 &&
      /ExternalName Service for web\.shop\.svc, not a full name under cluster\.local, so no client follows it; the proxy resolves web\.shop\.svc as a cluster name: connect to it$/.test(
        err.message,
      ),
  );
  await assert.rejects(
    r.resolve(dom('one-label.other', 80)),
    /ExternalName Service for web, not a full name under cluster\.local[^]*resolves web as a cluster name/,
  );
  await assert.rejects(r.resolve(dom('loop-a.other', 80)), /more than 8 ExternalName Services in a row/);
  await assert.rejects(
    r.resolve(dom('to-empty.other', 80)),
    /service other\/to-empty:80 is an ExternalName Service for empty\.shop\.svc\.cluster\.local: service shop\/empty:80 has no ready endpoint/,
  );
});

test('"svc.ns" in a namespace this user can neither list nor watch: refused naming the .svc form that asks anyway', async () => {
  // A limited user: namespaces cannot be listed, so "other" is neither known to exist nor not to.
  const limited = new Resolver({ ...cache, namespaceExists: () => undefined } as never, 'cluster.local');
  const reply = await limited.resolve(dom('web.other', 80)).then(() => undefined, replyFor);
  assert.equal(reply?.socks, 0x02);
  assert.match(reply!.message, /web\.other is not a cluster name \(namespace "other" is not known; web\.other\.svc asks for Service web there even so\)/);
});

test('a name claimed by a route name or the cluster domain that is no Service or Pod form lists the forms under that suffix', async () => {
  // It said only "does not name a Service or Pod".
  await assert.rejects(
    resolver.resolveParsed('foo.bar.baz.prod', 80, { isIp: false, reason: 'route-name', pattern: 'prod' }),
    (err: Error) =>
      err instanceof HostUnreachableError &&
      err.message ===
        'foo.bar.baz.prod does not name a Service or Pod (names under prod: SERVICE.NAMESPACE.prod, SERVICE.NAMESPACE.svc.prod, POD.SERVICE.NAMESPACE.svc.prod, A-B-C-D.NAMESPACE.pod.prod)',
  );
  await assert.rejects(
    resolver.resolveParsed('x.cluster.local', 80, { isIp: false, reason: 'cluster-domain', pattern: 'cluster.local' }),
    /x\.cluster\.local does not name a Service or Pod \(names under cluster\.local: SERVICE\.NAMESPACE\.svc\.cluster\.local, /,
  );
});
