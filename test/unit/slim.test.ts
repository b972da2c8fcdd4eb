// The slim records (src/cluster/slim.ts): every field routing reads survives the slimming, and
// nothing else is kept — checked field by field on realistic objects, and by looking for the big
// parts (managedFields, probes, env, conditions…) in what is kept.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { slimNamespace, slimPod, slimService, slimSlice } from '../../src/cluster/slim.js';
import { realisticPod } from '../sim/realistic.js';

test('a realistic pod (~9 KB of JSON) keeps exactly what routing reads', () => {
  const raw = realisticPod(7, '10.244.3.9') as Record<string, any>;
  raw.spec.hostname = 'db-0';
  raw.spec.subdomain = 'db';
  raw.status.podIPs.push({ ip: 'fd00:10:244:0:0::9' });
  raw.spec.containers[0].ports.push({ containerPort: 7000, protocol: 'TCP' }); // unnamed: no Service can name it
  const json = JSON.stringify(raw);
  assert.ok(json.length > 5000, `realistic size: ${json.length}`);
  const pod = slimPod(JSON.parse(json))!;
  assert.deepEqual(pod, {
    key: 'team-7/' + raw.metadata.name,
    namespace: 'team-7',
    name: raw.metadata.name,
    resourceVersion: '4711',
    uid: raw.metadata.uid,
    phase: 'Running',
    deleting: false,
    ips: ['10.244.3.9', 'fd00:10:244::9'],
    hostNetwork: false,
    hostname: 'db-0',
    subdomain: 'db',
    namedPorts: [
      { name: 'http', containerPort: 8080, protocol: 'TCP' },
      { name: 'metrics', containerPort: 9090, protocol: 'TCP' },
      { name: 'http-envoy-prom', containerPort: 15090, protocol: 'TCP' },
    ],
  });
  const kept = JSON.stringify(pod);
  assert.ok(kept.length < json.length / 15, `${kept.length} of ${json.length} bytes kept`);
  for (const gone of [
    'managedFields',
    'kube-controller-manager',
    'livenessProbe',
    '/healthz',
    'POD_NAMESPACE',
    'ReplicaSet',
    'istio',
    'PodScheduled',
    'containerd://',
    'node-7',
    '10.0.0.7',
    'Burstable',
    'tolerations',
  ]) {
    assert.ok(!kept.includes(gone), `"${gone}" is not kept`);
  }
});

test('pod states routing tells apart: deleting, not running, host network', () => {
  const raw = realisticPod(1, '10.244.0.2') as Record<string, any>;
  raw.metadata.deletionTimestamp = '2026-11-20T09:00:00Z';
  raw.spec.hostNetwork = true;
  raw.status.phase = 'Succeeded';
  const pod = slimPod(raw)!;
  assert.equal(pod.deleting, true);
  assert.equal(pod.hostNetwork, true);
  assert.equal(pod.phase, 'Succeeded');
  assert.equal(slimPod({ metadata: {} }), undefined, 'no name: not an object we can key');
});

test('Services: ClusterIPs (dual-stack, spelled any way), headless, ExternalName, ports with their targetPorts', () => {
  const svc = slimService({
    metadata: {
      namespace: 'shop',
      name: 'web',
      uid: 'u-1',
      resourceVersion: '9',
      labels: { app: 'web' },
      annotations: { big: 'x'.repeat(1000) },
      managedFields: [{ manager: 'helm' }],
    },
    spec: {
      type: 'NodePort',
      clusterIP: '10.96.0.1',
      clusterIPs: ['10.96.0.1', 'fd00:10:96:0::1'],
      ports: [{ name: 'http', port: 80, targetPort: 'http', protocol: 'TCP', nodePort: 30080 }, { port: 81 }, { name: 'n', port: 82, targetPort: 8082 }],
      selector: { app: 'web' },
      sessionAffinity: 'None',
    },
    status: { loadBalancer: {} },
  })!;
  assert.deepEqual(svc, {
    key: 'shop/web',
    namespace: 'shop',
    name: 'web',
    resourceVersion: '9',
    uid: 'u-1',
    type: 'NodePort',
    clusterIPs: ['10.96.0.1', 'fd00:10:96::1'],
    headless: false,
    externalName: undefined,
    selectorless: false,
    affinitySeconds: undefined,
    ports: [
      { name: 'http', port: 80, protocol: 'TCP', targetPort: 'http' },
      { name: '', port: 81, protocol: 'TCP', targetPort: 81 },
      { name: 'n', port: 82, protocol: 'TCP', targetPort: 8082 },
    ],
  });
  const headless = slimService({ metadata: { namespace: 'shop', name: 'db' }, spec: { clusterIP: 'None', clusterIPs: ['None'], ports: [{ port: 5432 }] } })!;
  assert.deepEqual([headless.headless, headless.clusterIPs], [true, []]);
  const ext = slimService({ metadata: { namespace: 'shop', name: 'ext' }, spec: { type: 'ExternalName', externalName: 'example.org' } })!;
  assert.deepEqual([ext.type, ext.externalName, ext.ports], ['ExternalName', 'example.org', []]);
  // sessionAffinity ClientIP: its timeout, or the API server's default when an object lacks it.
  const affinity = (spec: object) => slimService({ metadata: { namespace: 'shop', name: 's' }, spec: { clusterIP: '10.96.0.9', ...spec } })!.affinitySeconds;
  assert.equal(affinity({ sessionAffinity: 'ClientIP', sessionAffinityConfig: { clientIP: { timeoutSeconds: 30 } } }), 30);
  assert.equal(affinity({ sessionAffinity: 'ClientIP' }), 10_800);
  assert.equal(affinity({ sessionAffinity: 'None', sessionAffinityConfig: { clientIP: { timeoutSeconds: 30 } } }), undefined);
});

test('EndpointSlices: the Service, ports, and per endpoint its address, hostname, conditions and targetRef', () => {
  const slice = slimSlice({
    metadata: {
      namespace: 'shop',
      name: 'web-abc',
      resourceVersion: '12',
      labels: { 'kubernetes.io/service-name': 'web', 'endpointslice.kubernetes.io/managed-by': 'endpointslice-controller.k8s.io' },
      annotations: { 'endpoints.kubernetes.io/last-change-trigger-time': 'x' },
      ownerReferences: [{ kind: 'Service', name: 'web' }],
    },
    addressType: 'IPv4',
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
    endpoints: [
      {
        addresses: ['10.0.0.1'],
        hostname: 'web-0',
        conditions: { ready: true, serving: true, terminating: false },
        nodeName: 'node-1',
        zone: 'z1',
        targetRef: { kind: 'Pod', namespace: 'shop', name: 'web-0', uid: 'u-web-0', resourceVersion: '3' },
      },
      { addresses: ['10.0.0.2'], conditions: {}, targetRef: { kind: 'Pod', name: 'web-1' } },
      { addresses: ['192.0.2.1'], conditions: { ready: true } },
    ],
  })!;
  assert.deepEqual(slice, {
    key: 'shop/web-abc',
    namespace: 'shop',
    name: 'web-abc',
    resourceVersion: '12',
    serviceKey: 'shop/web',
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
    byController: true,
    endpoints: [
      {
        address: '10.0.0.1',
        hostname: 'web-0',
        ready: true,
        serving: true,
        terminating: false,
        refKind: 'Pod',
        refNamespace: 'shop',
        refName: 'web-0',
        refUid: 'u-web-0',
      },
      {
        address: '10.0.0.2',
        hostname: undefined,
        ready: undefined,
        serving: undefined,
        terminating: undefined,
        refKind: 'Pod',
        refNamespace: undefined,
        refName: 'web-1',
        refUid: undefined,
      },
      {
        address: '192.0.2.1',
        hostname: undefined,
        ready: true,
        serving: undefined,
        terminating: undefined,
        refKind: undefined,
        refNamespace: undefined,
        refName: undefined,
        refUid: undefined,
      },
    ],
  });
  const placeholder = slimSlice({
    metadata: { namespace: 'shop', name: 'idle-x', labels: { 'kubernetes.io/service-name': 'idle' } },
    addressType: 'IPv4',
    endpoints: null,
    ports: null,
  })!;
  assert.deepEqual([placeholder.ports, placeholder.endpoints, placeholder.byController], [null, [], false]);
  assert.equal(slimSlice({ metadata: { namespace: 'shop', name: 'orphan' }, endpoints: [] })!.serviceKey, undefined);
});

test('identical port lists are shared between records; namespaces keep only their name', () => {
  const a = slimPod(realisticPod(3, '10.244.0.5'))!;
  const b = slimPod(realisticPod(3, '10.244.0.6'))!;
  assert.equal(a.namedPorts, b.namedPorts, 'one frozen list for the pods of one template');
  assert.ok(Object.isFrozen(a.namedPorts));
  assert.deepEqual(
    slimNamespace({
      metadata: { name: 'shop', uid: 'x', resourceVersion: '5', labels: { a: 'b' } },
      spec: { finalizers: ['kubernetes'] },
      status: { phase: 'Active' },
    }),
    { key: 'shop', namespace: '', name: 'shop', resourceVersion: '5' },
  );
});
