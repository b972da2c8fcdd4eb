// konnectivityResolve: a konnectivity route's claims → addresses in the guest's network, from the
// watch cache (ClusterIP for a Service, Pod IPs for headless names and pods), with the same
// refusals as a cluster route's Resolver.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { V1EndpointSlice, V1Pod, V1Service } from '@kubernetes/client-node';
import { ClusterIndex } from '../../src/cluster/index.js';
import { indexCache, objectSource } from '../helpers/index-cache.js';
import type { ResolverCache } from '../../src/routes/cluster/resolver.js';
import { konnectivityResolve } from '../../src/routes/konnectivity/resolve.js';
import { RouteMatcher } from '../../src/routing/table.js';
import type { RoutingTable } from '../../src/routing/table-spec.js';
import { replyFor, SocksReply } from '../../src/core/errors.js';

const pod = (name: string, ip: string, extra: Partial<V1Pod['spec']> = {}): V1Pod => ({
  metadata: { namespace: 'shop', name },
  spec: { containers: [{ name: 'c' }], ...extra },
  status: { phase: 'Running', podIP: ip, podIPs: [{ ip }] },
});
const svc = (name: string, spec: V1Service['spec']): V1Service => ({ metadata: { namespace: 'shop', name }, spec });
// The endpoint controller puts a pod's hostname on its endpoint when the pod's subdomain is the Service.
const slice = (service: string, eps: Array<{ ip: string; pod: string; ready?: boolean; terminating?: boolean; hostname?: string }>): V1EndpointSlice => ({
  addressType: 'IPv4',
  metadata: { namespace: 'shop', name: `${service}-x`, labels: { 'kubernetes.io/service-name': service } },
  ports: [{ name: '', port: 5432, protocol: 'TCP' }],
  endpoints: eps.map((e) => ({
    addresses: [e.ip],
    hostname: e.hostname,
    conditions: { ready: e.ready ?? true, ...(e.terminating !== undefined ? { terminating: e.terminating } : {}) },
    targetRef: { kind: 'Pod', namespace: 'shop', name: e.pod },
  })),
});

const pods = [
  pod('web-1', '10.244.0.1'),
  pod('db-0', '10.244.0.10', { hostname: 'db-0', subdomain: 'db' }),
  pod('db-1', '10.244.0.11', { hostname: 'db-1', subdomain: 'db' }),
  pod('node-agent', '192.168.1.5', { hostNetwork: true }),
];
const services = [
  svc('web', { clusterIP: '10.96.0.1', ports: [{ name: 'http', port: 80 }] }),
  svc('db', { clusterIP: 'None', ports: [{ port: 5432 }] }),
  svc('peers', { clusterIP: 'None', publishNotReadyAddresses: true, ports: [{ port: 2380 }] }),
  svc('ext', { type: 'ExternalName', externalName: 'example.org' }),
  svc('alias', { type: 'ExternalName', externalName: 'web.shop.svc.cluster.local' }),
  svc('db-alias', { type: 'ExternalName', externalName: 'db-0.db.shop.svc.cluster.local.' }),
];
const slices = [
  slice('db', [
    { ip: '10.244.0.10', pod: 'db-0', hostname: 'db-0' },
    { ip: '10.244.0.11', pod: 'db-1', ready: false, hostname: 'db-1' },
    // A pod of the Service's without a hostname (a Deployment's): CoreDNS names it by its address.
    { ip: '10.244.0.12', pod: 'db-extra' },
  ]),
  slice('web', [{ ip: '10.244.0.1', pod: 'web-1' }]),
  // publishNotReadyAddresses: the controller writes every endpoint ready, one being deleted too.
  slice('peers', [
    { ip: '10.244.0.20', pod: 'etcd-0', hostname: 'etcd-0' },
    { ip: '10.244.0.21', pod: 'etcd-1', hostname: 'etcd-1', terminating: true },
    // A Deployment whose template sets the hostname: its pods share it.
    { ip: '10.244.0.30', pod: 'twin-a', hostname: 'twin' },
    { ip: '10.244.0.31', pod: 'twin-b', hostname: 'twin' },
  ]),
];
const served: string[] = [];
const cache: ResolverCache = indexCache(new ClusterIndex(() => [objectSource(services, slices, pods)]), {
  defaultNamespace: 'shop',
  namespaceExists: (ns: string) => ns === 'shop',
  ensureNamespace: async () => undefined,
  noteServed: (ns: string) => void served.push(ns),
});
const table: RoutingTable = {
  routes: [
    {
      kind: 'konnectivity',
      name: 'guest',
      context: 'guest',
      konnectivity: { server: 'unix:///s', mode: 'grpc' },
      include: [],
      exclude: [],
      cidrs: ['172.16.0.0/16'],
      origin: 'test',
    },
  ],
  defaultRoute: 'guest',
  clusterDomain: 'cluster.local',
};
const matcher = new RouteMatcher(
  table,
  new Map([['guest', { knowsIp: (ip: string) => cache.knowsIp(ip), namespaceExists: cache.namespaceExists, defaultNamespace: 'shop' }]]),
);
const resolve = konnectivityResolve(cache);
const targets = (host: string, port: number) => {
  const d = matcher.matchHost(host);
  assert.ok(d.claimed, `${host} is claimed`);
  return resolve(d, port, new AbortController().signal);
};
const refusal = async (host: string, port: number) =>
  replyFor(
    await targets(host, port).then(
      () => undefined,
      (e: unknown) => e,
    ),
  ).socks;

test("a Service is its ClusterIP on the client's port (kube-proxy maps it); the namespace counts as served", async () => {
  assert.deepEqual(await targets('web.shop.guest', 80), [{ ip: '10.96.0.1', port: 80 }]);
  assert.deepEqual(await targets('web', 80), [{ ip: '10.96.0.1', port: 80 }]);
  assert.deepEqual(await targets('10.96.0.1', 80), [{ ip: '10.96.0.1', port: 80 }]);
  assert.ok(served.includes('shop'));
});

test('headless names and Pod IPs are Pod IPs, port unchanged; only ready endpoints', async () => {
  assert.deepEqual(await targets('db.shop.svc.cluster.local', 5432), [
    { ip: '10.244.0.10', port: 5432 },
    { ip: '10.244.0.12', port: 5432 },
  ]);
  assert.deepEqual(await targets('db-0.db.shop.svc.cluster.local', 5432), [{ ip: '10.244.0.10', port: 5432 }]);
  // db-1's endpoint is not ready: cluster DNS does not publish it, nor does a cluster route take it.
  assert.equal(await refusal('db-1.db.shop.svc.cluster.local', 5432), SocksReply.hostUnreachable);
  assert.deepEqual(await targets('10-244-0-12.db.shop.svc.cluster.local', 5432), [{ ip: '10.244.0.12', port: 5432 }]);
  assert.equal(await refusal('10-244-0-10.db.shop.svc.cluster.local', 5432), SocksReply.hostUnreachable, 'one with a hostname goes by it');
  // CoreDNS answers endpoint names under a Service with a ClusterIP too: the Pod IP, not the ClusterIP.
  assert.deepEqual(await targets('10-244-0-1.web.shop.svc.cluster.local', 8080), [{ ip: '10.244.0.1', port: 8080 }]);
  assert.deepEqual(await targets('10.244.0.1', 8080), [{ ip: '10.244.0.1', port: 8080 }]);
  assert.deepEqual(await targets('10-244-0-1.shop.pod.cluster.local', 8080), [{ ip: '10.244.0.1', port: 8080 }]);
  assert.deepEqual(await targets('172.16.3.4', 22), [{ ip: '172.16.3.4', port: 22 }], "an IP in the route's cidrs is dialled as it is");
});

test('ready alone decides what headless DNS publishes (CoreDNS): a terminating pod of a Service with publishNotReadyAddresses too', async () => {
  assert.deepEqual(await targets('etcd-1.peers.shop.svc.cluster.local', 2380), [{ ip: '10.244.0.21', port: 2380 }]);
  assert.deepEqual(await targets('peers.shop.svc', 2380), [
    { ip: '10.244.0.20', port: 2380 },
    { ip: '10.244.0.21', port: 2380 },
    { ip: '10.244.0.30', port: 2380 },
    { ip: '10.244.0.31', port: 2380 },
  ]);
});

test('a hostname several pods share is each of their Pod IPs, as CoreDNS answers an A record for each', async () => {
  assert.deepEqual(await targets('twin.peers.shop.svc.cluster.local', 2380), [
    { ip: '10.244.0.30', port: 2380 },
    { ip: '10.244.0.31', port: 2380 },
  ]);
});

test('refusals: a port the Service lacks 0x05, no such Service 0x04, ExternalName 0x04, node IP 0x02', async () => {
  assert.equal(await refusal('web.shop.guest', 443), SocksReply.connectionRefused);
  assert.equal(await refusal('10.96.0.1', 443), SocksReply.connectionRefused);
  assert.equal(await refusal('nope.shop.guest', 80), SocksReply.hostUnreachable);
  assert.equal(await refusal('ext.shop.guest', 80), SocksReply.hostUnreachable);
  assert.equal(await refusal('a.b.c.guest', 80), SocksReply.hostUnreachable, 'a name under the route that is no Service or pod');
  assert.equal(await refusal('192.168.1.5', 10250), SocksReply.notAllowed);
  const allowed = konnectivityResolve(cache, { allowHostNetworkPods: true });
  const d = matcher.matchHost('192.168.1.5');
  assert.ok(d.claimed);
  assert.deepEqual(await allowed(d, 10250, new AbortController().signal), [{ ip: '192.168.1.5', port: 10250 }]);
});

test('an ExternalName Service for a name in the cluster domain is what that name is (CoreDNS follows the CNAME in its zone)', async () => {
  assert.deepEqual(await targets('alias.shop.guest', 80), [{ ip: '10.96.0.1', port: 80 }]);
  assert.deepEqual(await targets('db-alias', 5432), [{ ip: '10.244.0.10', port: 5432 }]);
  await assert.rejects(targets('alias.shop.guest', 443), /ExternalName Service for web\.shop\.svc\.cluster\.local: Service shop\/web has no TCP port 443/);
  await assert.rejects(targets('ext.shop.guest', 80), /ExternalName Service for example\.org, outside the cluster/);
});
