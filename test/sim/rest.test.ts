// REST and watch semantics of the simulated API server, exercised with plain https requests.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { SimCluster } from './cluster.js';
import { seedSampleCluster, SAMPLE } from './sample.js';
import { request, WatchStream, sleep } from './testkit.js';

let sim: SimCluster;

before(async () => {
  sim = await SimCluster.start({ quiet: true, closeGraceMs: 50 });
  await seedSampleCluster(sim);
});

after(async () => {
  await sim.stop();
});

test('lists carry kind, a numeric resourceVersion and items without kind', async () => {
  const r = await request(sim, '/api/v1/services');
  assert.equal(r.status, 200);
  assert.match(String(r.headers['content-type']), /^application\/json/);
  const list = r.json();
  assert.equal(list.kind, 'ServiceList');
  assert.equal(list.apiVersion, 'v1');
  assert.match(list.metadata.resourceVersion, /^\d+$/);
  const names = list.items.map((i: any) => `${i.metadata.namespace}/${i.metadata.name}`);
  for (const n of ['shop/web', 'shop/api', 'shop/db', 'shop/external', 'data/echo', 'default/hello', 'default/kubernetes']) assert.ok(names.includes(n), n);
  assert.equal(list.items[0].kind, undefined);
  const web = list.items.find((i: any) => i.metadata.name === 'web');
  assert.match(web.spec.clusterIP, /^127\.96\./);
  assert.deepEqual(web.spec.clusterIPs, [web.spec.clusterIP]);
  assert.deepEqual(web.spec.ipFamilies, ['IPv4']);
  assert.deepEqual(web.spec.ports, [{ name: 'http', protocol: 'TCP', port: 8080, targetPort: 'http' }]);
  const db = list.items.find((i: any) => i.metadata.name === 'db');
  assert.equal(db.spec.clusterIP, 'None');
  const ext = list.items.find((i: any) => i.metadata.name === 'external');
  assert.equal(ext.spec.type, 'ExternalName');
  assert.equal(ext.spec.clusterIP, undefined);
  assert.equal(ext.spec.externalName, 'external.example.com');
});

test('get returns the object with kind; a missing one is a NotFound Status', async () => {
  const r = await request(sim, '/api/v1/namespaces/shop/services/web');
  assert.equal(r.status, 200);
  const svc = r.json();
  assert.equal(svc.kind, 'Service');
  assert.equal(svc.metadata.namespace, 'shop');
  assert.match(svc.metadata.uid, /^[0-9a-f-]{36}$/);
  assert.match(svc.metadata.creationTimestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  const missing = await request(sim, '/api/v1/namespaces/shop/services/nope');
  assert.equal(missing.status, 404);
  assert.deepEqual(missing.json(), {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message: 'services "nope" not found',
    reason: 'NotFound',
    details: { name: 'nope', kind: 'services' },
    code: 404,
  });
  const slice = await request(sim, '/apis/discovery.k8s.io/v1/namespaces/shop/endpointslices/nope');
  assert.equal(slice.json().message, 'endpointslices.discovery.k8s.io "nope" not found');
});

test('pods look like kubelet-reported pods', async () => {
  const pod = (await request(sim, `/api/v1/namespaces/shop/pods/${SAMPLE.db.pods[0]}`)).json();
  assert.equal(pod.spec.hostname, 'db-0');
  assert.equal(pod.spec.subdomain, 'db');
  assert.equal(pod.spec.nodeName, 'sim-node');
  assert.deepEqual(pod.spec.containers[0].ports, [{ name: 'postgres', containerPort: 5432, protocol: 'TCP' }]);
  assert.equal(pod.status.phase, 'Running');
  assert.equal(pod.status.podIP, sim.podIP('shop', 'db-0'));
  assert.deepEqual(pod.status.podIPs, [{ ip: pod.status.podIP }]);
  assert.equal(pod.status.conditions.find((c: any) => c.type === 'Ready').status, 'True');
});

test('label and field selectors filter lists; unknown field labels are rejected', async () => {
  const web = (await request(sim, '/api/v1/namespaces/shop/pods?labelSelector=' + encodeURIComponent('app=web,pod-template-hash=7c9d6b5f8'))).json();
  assert.deepEqual(
    web.items.map((p: any) => p.metadata.name),
    [...SAMPLE.web.pods],
  );
  const notWeb = (await request(sim, '/api/v1/namespaces/shop/pods?labelSelector=' + encodeURIComponent('app!=web'))).json();
  assert.equal(notWeb.items.length, 4);
  const set = (await request(sim, '/api/v1/pods?labelSelector=' + encodeURIComponent('app in (db,echo)'))).json();
  assert.equal(set.items.length, 3);
  const one = (await request(sim, '/api/v1/pods?fieldSelector=' + encodeURIComponent('metadata.name=db-1,metadata.namespace=shop'))).json();
  assert.deepEqual(
    one.items.map((p: any) => p.metadata.name),
    ['db-1'],
  );
  const bad = await request(sim, '/api/v1/services?fieldSelector=spec.foo%3Dbar');
  assert.equal(bad.status, 400);
  assert.equal(bad.json().message, 'field label not supported: spec.foo');
});

test('EndpointSlices resolve named target ports per pod and carry upstream fields', async () => {
  const list = (await request(sim, '/apis/discovery.k8s.io/v1/namespaces/shop/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3Dweb')).json();
  assert.equal(list.kind, 'EndpointSliceList');
  assert.equal(list.items.length, 1);
  const s = list.items[0];
  assert.equal(s.addressType, 'IPv4');
  assert.deepEqual(s.ports, [{ name: 'http', port: 8081, protocol: 'TCP' }]);
  assert.equal(s.metadata.labels['endpointslice.kubernetes.io/managed-by'], 'endpointslice-controller.k8s.io');
  assert.equal(s.metadata.ownerReferences[0].kind, 'Service');
  assert.equal(s.endpoints.length, 3);
  const e = s.endpoints[0];
  assert.deepEqual(e.conditions, { ready: true, serving: true, terminating: false });
  assert.equal(e.targetRef.kind, 'Pod');
  assert.equal(e.addresses[0], sim.podIP('shop', e.targetRef.name));
  assert.equal(e.nodeName, 'sim-node');

  const db = (await request(sim, '/apis/discovery.k8s.io/v1/namespaces/shop/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3Ddb')).json().items[0];
  assert.deepEqual(db.endpoints.map((x: any) => x.hostname).sort(), ['db-0', 'db-1']);
  assert.equal(db.metadata.labels['service.kubernetes.io/headless'], '');

  const ep = (await request(sim, '/api/v1/namespaces/shop/endpoints/web')).json();
  assert.equal(ep.kind, 'Endpoints');
  assert.equal(ep.subsets[0].addresses.length, 3);
  assert.deepEqual(ep.subsets[0].ports, [{ name: 'http', port: 8081, protocol: 'TCP' }]);
});

test('pods disagreeing on a named port get separate slices; no pods → endpoints: null', async () => {
  await sim.createNamespace('split');
  await sim.createService({ namespace: 'split', name: 'svc', selector: { app: 'x' }, ports: [{ name: 'http', port: 80, targetPort: 'http' }] });
  let slices = (await request(sim, '/apis/discovery.k8s.io/v1/namespaces/split/endpointslices')).json().items;
  assert.equal(slices.length, 1);
  assert.equal(slices[0].endpoints, null);
  assert.equal(slices[0].ports, null);
  await sim.createPod({ namespace: 'split', name: 'a', labels: { app: 'x' }, ports: [{ name: 'http', containerPort: 8080 }] });
  await sim.createPod({ namespace: 'split', name: 'b', labels: { app: 'x' }, ports: [{ name: 'http', containerPort: 9090 }] });
  slices = (await request(sim, '/apis/discovery.k8s.io/v1/namespaces/split/endpointslices')).json().items;
  assert.deepEqual(slices.map((s: any) => s.ports[0].port).sort(), [8080, 9090]);
  await sim.deleteNamespace('split');
  const after = (await request(sim, '/apis/discovery.k8s.io/v1/namespaces/split/endpointslices')).json().items;
  assert.equal(after.length, 0);
  assert.equal((await request(sim, '/api/v1/namespaces/split')).status, 404);
});

test('manual EndpointSlice for a selector-less service has no targetRef', async () => {
  await sim.createService({ namespace: 'default', name: 'legacy-db', ports: [{ name: 'pg', port: 5432 }] });
  await sim.createEndpointSlice('default', 'legacy-db', ['127.0.0.1'], 15432);
  const items = (
    await request(sim, '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3Dlegacy-db')
  ).json().items;
  assert.equal(items.length, 1);
  assert.equal(items[0].endpoints[0].targetRef, undefined);
  assert.deepEqual(items[0].ports, [{ name: 'pg', port: 15432, protocol: 'TCP' }]);
});

test('watch: ADDED/MODIFIED/DELETED after the list resourceVersion, in order', async () => {
  const rv = (await request(sim, '/api/v1/namespaces/shop/pods')).json().metadata.resourceVersion;
  const w = await WatchStream.open(sim, `/api/v1/namespaces/shop/pods?watch=true&resourceVersion=${rv}`);
  assert.equal(w.status, 200);
  await sim.createPod({ namespace: 'shop', name: 'watched', labels: { app: 'tmp' }, ports: [{ containerPort: 8080 }] });
  await sim.setPodReady('shop', 'watched', false);
  await sim.deletePod('shop', 'watched');
  const a = await w.next();
  const m = await w.next();
  const d = await w.next();
  w.close();
  assert.deepEqual([a!.type, m!.type, d!.type], ['ADDED', 'MODIFIED', 'DELETED']);
  assert.equal(a!.object.kind, 'Pod');
  assert.equal(m!.object.status.conditions.find((c: any) => c.type === 'Ready').status, 'False');
  const rvs = [a, m, d].map((e) => Number(e!.object.metadata.resourceVersion));
  assert.ok(rvs[0]! > Number(rv) && rvs[0]! < rvs[1]! && rvs[1]! < rvs[2]!);
});

test('watch without resourceVersion starts with ADDED for existing objects; selectors apply', async () => {
  const w = await WatchStream.open(sim, '/apis/discovery.k8s.io/v1/endpointslices?watch=1&labelSelector=kubernetes.io%2Fservice-name%3Dapi');
  const first = await w.next();
  assert.equal(first!.type, 'ADDED');
  assert.equal(first!.object.metadata.labels['kubernetes.io/service-name'], 'api');
  await sim.setPodReady('shop', SAMPLE.api.pods[0], false);
  const mod = await w.next();
  assert.equal(mod!.type, 'MODIFIED');
  const states = mod!.object.endpoints.map((e: any) => e.conditions.ready);
  assert.deepEqual(states.sort(), [false, true]);
  await sim.setPodReady('shop', SAMPLE.api.pods[0], true);
  assert.equal((await w.next())!.type, 'MODIFIED');
  w.close();
});

test('watch from a compacted resourceVersion: 200 with one ERROR 410 Expired event, then EOF', async () => {
  const rv = (await request(sim, '/api/v1/services')).json().metadata.resourceVersion;
  await sim.createService({ namespace: 'default', name: 'bump', selector: { app: 'bump' }, ports: [{ port: 1 }] });
  sim.compact();
  const w = await WatchStream.open(sim, `/api/v1/services?watch=true&resourceVersion=${rv}`);
  assert.equal(w.status, 200);
  const e = await w.next();
  assert.equal(e!.type, 'ERROR');
  assert.equal(e!.object.kind, 'Status');
  assert.equal(e!.object.code, 410);
  assert.equal(e!.object.reason, 'Expired');
  assert.match(e!.object.message, /^too old resource version: /);
  await w.closed();
  // the current version is still resumable
  const now = (await request(sim, '/api/v1/services')).json().metadata.resourceVersion;
  const ok = await WatchStream.open(sim, `/api/v1/services?watch=true&resourceVersion=${now}`);
  await sim.deleteService('default', 'bump');
  assert.equal((await ok.next())!.type, 'DELETED');
  ok.close();
});

test('dropWatches and timeoutSeconds end watch responses cleanly', async () => {
  const w1 = await WatchStream.open(sim, '/api/v1/namespaces?watch=true');
  const w2 = await WatchStream.open(sim, '/api/v1/pods?watch=true&timeoutSeconds=1');
  await sleep(100);
  sim.dropWatches();
  await w1.closed();
  await w2.closed(); // dropped too
  const w3 = await WatchStream.open(sim, '/api/v1/pods?watch=true&timeoutSeconds=1&resourceVersion=' + sim.resourceVersion);
  const t0 = Date.now();
  await w3.closed(3000);
  assert.ok(Date.now() - t0 >= 900);
});

test('403 as system:anonymous without credentials (anonymous auth on, as upstream), but /version; 401 for an unknown token', async () => {
  const anonymous = await request(sim, '/api/v1/pods', { token: null });
  assert.equal(anonymous.status, 403);
  assert.equal(anonymous.json().message, 'pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group "" at the cluster scope');
  assert.equal((await request(sim, '/api', { token: null })).json().message, 'forbidden: User "system:anonymous" cannot get path "/api"');
  assert.equal((await request(sim, '/version', { token: null })).status, 200);
  for (const token of ['bogus']) {
    const r = await request(sim, '/api/v1/pods', { token });
    assert.equal(r.status, 401);
    assert.deepEqual(r.json(), {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: 'Unauthorized',
      reason: 'Unauthorized',
      code: 401,
    });
  }
});

test('namespace-scoped token: its namespace works, cluster-wide and other namespaces are 403', async () => {
  const token = sim.issueToken({ namespaces: ['shop'] });
  assert.equal((await request(sim, '/api/v1/namespaces/shop/services', { token })).status, 200);
  assert.equal((await request(sim, '/api/v1/namespaces/shop', { token })).status, 200);
  const all = await request(sim, '/api/v1/services', { token });
  assert.equal(all.status, 403);
  const s = all.json();
  assert.equal(s.reason, 'Forbidden');
  assert.match(
    s.message,
    /^services is forbidden: User "system:serviceaccount:shop:[^"]+" cannot list resource "services" in API group "" at the cluster scope$/,
  );
  const watch = await request(sim, '/apis/discovery.k8s.io/v1/endpointslices?watch=true', { token });
  assert.equal(watch.status, 403);
  assert.match(watch.json().message, /cannot watch resource "endpointslices" in API group "discovery.k8s.io" at the cluster scope/);
  const other = await request(sim, '/api/v1/namespaces/data/pods', { token });
  assert.equal(other.status, 403);
  assert.match(other.json().message, /in the namespace "data"$/);
  assert.equal((await request(sim, '/api/v1/namespaces', { token })).status, 403);
});

test('client certificates signed by the sim CA authenticate', async () => {
  const cert = sim.issueClientCert('alice');
  const r = await request(sim, '/api/v1/namespaces', { token: null, cert });
  assert.equal(r.status, 200);
  assert.ok(r.json().items.some((n: any) => n.metadata.name === 'shop'));
});

test('server-side Table for kubectl-style Accept headers', async () => {
  const accept = 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json';
  const r = await request(sim, '/api/v1/namespaces/shop/services', { headers: { Accept: accept } });
  assert.equal(r.status, 200);
  assert.equal(r.headers['content-type'], 'application/json;as=Table;v=v1;g=meta.k8s.io');
  const t = r.json();
  assert.equal(t.kind, 'Table');
  assert.deepEqual(
    t.columnDefinitions.map((c: any) => c.name),
    ['Name', 'Type', 'Cluster-IP', 'External-IP', 'Port(s)', 'Age', 'Selector'],
  );
  const web = t.rows.find((row: any) => row.cells[0] === 'web');
  assert.equal(web.cells[4], '8080/TCP');
  assert.equal(web.object.kind, 'PartialObjectMetadata');
  assert.equal(web.object.metadata.namespace, 'shop');
  const proto = await request(sim, '/api/v1/pods', { headers: { Accept: 'application/vnd.kubernetes.protobuf' } });
  assert.equal(proto.status, 406);
});

test('discovery documents', async () => {
  assert.equal((await request(sim, '/version')).json().major, '1');
  assert.deepEqual((await request(sim, '/api')).json().versions, ['v1']);
  const groups = (await request(sim, '/apis')).json();
  assert.equal(groups.kind, 'APIGroupList');
  assert.equal(groups.groups[0].name, 'discovery.k8s.io');
  const v1 = (await request(sim, '/api/v1')).json();
  assert.ok(v1.resources.some((r: any) => r.name === 'pods/portforward'));
  const agg = await request(sim, '/apis', { headers: { Accept: 'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json' } });
  assert.equal(agg.headers['content-type'], 'application/json');
  assert.equal((await request(sim, '/api/v1/widgets')).status, 404);
});

test('counters record every request by kind and path', async () => {
  sim.resetCounters();
  await request(sim, '/api/v1/services');
  await request(sim, '/api/v1/namespaces/shop/services/web');
  const w = await WatchStream.open(sim, '/api/v1/services?watch=true');
  await w.next();
  w.close();
  await request(sim, '/version');
  const c = sim.counters;
  assert.equal(c.total, 4);
  assert.deepEqual([c.list, c.get, c.watch, c.other, c.portForward], [1, 1, 1, 1, 0]);
  assert.equal(c.byPath['/api/v1/services'], 2);
  assert.equal(c.byPath['/api/v1/namespaces/shop/services/web'], 1);
});

test('restartApiServer: connections cut, same port, state kept', async () => {
  const w = await WatchStream.open(sim, '/api/v1/pods?watch=true&resourceVersion=' + sim.resourceVersion);
  const server = sim.server;
  const restarting = sim.restartApiServer(1500);
  await w.closed();
  await sleep(100);
  await assert.rejects(request(sim, '/version'), /ECONNREFUSED/);
  await restarting;
  assert.equal(sim.server, server);
  assert.equal((await request(sim, '/api/v1/namespaces/shop/services/web')).status, 200);
});

test('restartApiServer with initialisingMs: 429 for watches and cache-served lists, as upstream while its watch cache fills', async () => {
  await sim.restartApiServer(50, { initialisingMs: 1500 });
  const watchRefused = await request(
    sim,
    '/api/v1/namespaces/shop/pods?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan',
  );
  assert.equal(watchRefused.status, 429);
  assert.equal(watchRefused.headers['retry-after'], '1');
  assert.deepEqual(watchRefused.json(), {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message: 'storage is (re)initializing',
    reason: 'TooManyRequests',
    details: { retryAfterSeconds: 1 },
    code: 429,
  });
  // The delegator's choice (cacher/delegator.go): a paged list without selectors goes to etcd, and so does a GET.
  const statuses = await Promise.all(
    [
      '/api/v1/namespaces/shop/pods',
      '/api/v1/namespaces/shop/pods?limit=5',
      '/api/v1/namespaces/shop/pods?limit=5&labelSelector=app%3Dweb',
      '/api/v1/namespaces/shop/pods?resourceVersion=0',
      '/api/v1/namespaces/shop/services/web',
    ].map(async (p) => [p, (await request(sim, p)).status] as const),
  );
  assert.deepEqual(Object.fromEntries(statuses), {
    '/api/v1/namespaces/shop/pods': 429,
    '/api/v1/namespaces/shop/pods?limit=5': 200,
    '/api/v1/namespaces/shop/pods?limit=5&labelSelector=app%3Dweb': 429,
    '/api/v1/namespaces/shop/pods?resourceVersion=0': 429,
    '/api/v1/namespaces/shop/services/web': 200,
  });
  await sleep(1600);
  const w = await WatchStream.open(sim, '/api/v1/namespaces/shop/services?watch=true');
  assert.equal((await w.next())?.type, 'ADDED', 'the caches are ready: watches are served again');
  w.close();
});

test('terminatingMs keeps deleted pods as terminating endpoints before removal', async () => {
  const t = await SimCluster.start({ quiet: true, terminatingMs: 300, bootstrap: false });
  try {
    await t.createPod({ namespace: 'ns', name: 'p', labels: { app: 'p' }, ports: [{ containerPort: 8080 }] });
    await t.createService({ namespace: 'ns', name: 's', selector: { app: 'p' }, ports: [{ port: 80, targetPort: 8080 }] });
    await t.deletePod('ns', 'p');
    const slice = (await request(t, '/apis/discovery.k8s.io/v1/namespaces/ns/endpointslices')).json().items[0];
    assert.deepEqual(slice.endpoints[0].conditions, { ready: false, serving: false, terminating: true });
    await sleep(500);
    const later = (await request(t, '/apis/discovery.k8s.io/v1/namespaces/ns/endpointslices')).json().items[0];
    assert.equal(later.endpoints, null);
  } finally {
    await t.stop();
  }
});

test('publishNotReadyAddresses: every endpoint is ready, a pod not ready or terminating too', async () => {
  const t = await SimCluster.start({ quiet: true, terminatingMs: 300, bootstrap: false });
  try {
    await t.createPod({ namespace: 'ns', name: 'p', labels: { app: 'p' }, ports: [{ containerPort: 8080 }] });
    await t.createService({ namespace: 'ns', name: 's', headless: true, selector: { app: 'p' }, ports: [{ port: 8080 }], publishNotReadyAddresses: true });
    const conditions = async () => (await request(t, '/apis/discovery.k8s.io/v1/namespaces/ns/endpointslices')).json().items[0].endpoints[0].conditions;
    await t.setPodReady('ns', 'p', false);
    assert.deepEqual(await conditions(), { ready: true, serving: false, terminating: false });
    await t.setPodReady('ns', 'p', true);
    await t.deletePod('ns', 'p', { stopDelayMs: 200 });
    assert.deepEqual(await conditions(), { ready: true, serving: true, terminating: true });
  } finally {
    await t.stop();
  }
});

test('more than 100 pods: slices of at most 100; an endpoint stays in its slice, a new one fills the room left', async () => {
  const t = await SimCluster.start({ quiet: true, bootstrap: false });
  try {
    await t.createService({ namespace: 'ns', name: 's', selector: { app: 'p' }, ports: [{ port: 80, targetPort: 8080 }] });
    for (let i = 0; i < 201; i++) await t.createPod({ namespace: 'ns', name: `p-${i}`, labels: { app: 'p' }, ports: [{ containerPort: 8080 }] });
    type Slice = { metadata: { name: string }; endpoints: Array<{ targetRef: { name: string } }> };
    const slices = async () =>
      new Map(
        ((await request(t, '/apis/discovery.k8s.io/v1/namespaces/ns/endpointslices')).json().items as Slice[]).map((s) => [
          s.metadata.name,
          s.endpoints.map((e) => e.targetRef.name),
        ]),
      );
    const before = await slices();
    assert.deepEqual([...before.values()].map((pods) => pods.length).sort(), [1, 100, 100]);
    const [full] = [...before].find(([, pods]) => pods.includes('p-5'))!;
    await t.deletePod('ns', 'p-5');
    await t.createPod({ namespace: 'ns', name: 'p-new', labels: { app: 'p' }, ports: [{ containerPort: 8080 }] });
    const after = await slices();
    assert.deepEqual([...after.keys()].sort(), [...before.keys()].sort(), 'the same slices');
    for (const [name, pods] of before) {
      const kept = pods.filter((p) => p !== 'p-5');
      assert.deepEqual(after.get(name)!.slice(0, kept.length), kept, `${name}: no endpoint moved`);
    }
    assert.ok(after.get(full)!.includes('p-new'), 'the new pod takes the room in the slice that lost one, the fullest with room');
  } finally {
    await t.stop();
  }
});

test('a dual-stack Service gets one set of EndpointSlices per family; a family no pod has, a placeholder', async () => {
  // As the real EndpointSlice controller writes them (test/integration/real-cluster-ipv6.test.ts, the bed).
  await sim.createNamespace('dual');
  await sim.createPod({ namespace: 'dual', name: 'two-0', labels: { app: 'two' }, ipv6: 'fd00:10:244::7', ports: [{ containerPort: 8080, backend: 'http' }] });
  await sim.createPod({ namespace: 'dual', name: 'two-1', labels: { app: 'two' }, ports: [{ containerPort: 8080, backend: 'http' }] });
  await sim.createService({
    namespace: 'dual',
    name: 'two',
    selector: { app: 'two' },
    ports: [{ port: 80, targetPort: 8080 }],
    ipv6ClusterIP: 'fd00:10:96::20',
  });
  await sim.createService({ namespace: 'dual', name: 'one6', selector: { app: 'none' }, ports: [{ port: 80 }], ipv6ClusterIP: 'fd00:10:96::21' });
  const pod = (await request(sim, '/api/v1/namespaces/dual/pods/two-0')).json();
  assert.deepEqual(pod.status.podIPs, [{ ip: pod.status.podIP }, { ip: 'fd00:10:244::7' }]);
  const slices = async (svc: string) =>
    (await request(sim, `/apis/discovery.k8s.io/v1/namespaces/dual/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3D${svc}`))
      .json()
      .items.sort((a: any, b: any) => a.addressType.localeCompare(b.addressType));
  const [v4, v6] = await slices('two');
  assert.equal(v4.addressType, 'IPv4');
  assert.deepEqual(
    v4.endpoints.map((e: any) => e.addresses),
    [[pod.status.podIP], [sim.podIP('dual', 'two-1')]],
  );
  assert.equal(v6.addressType, 'IPv6');
  assert.deepEqual(
    v6.endpoints.map((e: any) => [e.addresses, e.targetRef.name]),
    [[['fd00:10:244::7'], 'two-0']],
  );
  assert.deepEqual(v6.ports, [{ name: '', port: 8080, protocol: 'TCP' }]);
  const placeholders = await slices('one6');
  assert.deepEqual(
    placeholders.map((s: any) => [s.addressType, s.endpoints, s.ports]),
    [
      ['IPv4', null, null],
      ['IPv6', null, null],
    ],
  );
  // v1 Endpoints carry the primary family only; the field selector status.podIP matches the first address only.
  const ep = (await request(sim, '/api/v1/namespaces/dual/endpoints/two')).json();
  assert.deepEqual(
    ep.subsets[0].addresses.map((a: any) => a.ip),
    [pod.status.podIP, sim.podIP('dual', 'two-1')],
  );
  const byV6 = (await request(sim, '/api/v1/pods?fieldSelector=status.podIP%3Dfd00:10:244::7')).json();
  assert.deepEqual(byV6.items, []);
});
