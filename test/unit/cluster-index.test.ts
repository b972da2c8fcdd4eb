// ClusterIndex kept up to date event by event must answer exactly like one built from scratch over
// the same objects: random event sequences (seeded) over a small world of Services, EndpointSlices
// and Pods whose IPs, phases, hostnames and slice owners change, compared lookup by lookup.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { V1EndpointSlice, V1Pod, V1Service } from '@kubernetes/client-node';
import { ClusterIndex, preferredPod, type IndexedKind, type WatchEvent } from '../../src/cluster/index.js';
import { slimPod, slimService, slimSlice, type SlimPod, type SlimService, type SlimSlice } from '../../src/cluster/slim.js';

function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const NAMESPACES = ['a', 'b'];
const NAMES = ['x', 'y', 'z'];
const IPS = ['10.0.0.1', '10.0.0.2', '10.0.0.3', 'fd00::1', '::ffff:10.0.0.2'];
const UIDS = ['u1', 'u2', 'u3', 'u4'];

type Obj = V1Service | V1EndpointSlice | V1Pod;
type SlimObj = SlimService | SlimSlice | SlimPod;

/** What the informers hand the index: the slim record of each object. */
function slim(kind: IndexedKind, o: Obj): SlimObj {
  const s = kind === 'services' ? slimService(o) : kind === 'slices' ? slimSlice(o) : slimPod(o);
  assert.ok(s);
  return s;
}

function randomObject(kind: IndexedKind, r: () => number): Obj {
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(r() * xs.length)]!;
  const metadata = { namespace: pick(NAMESPACES), name: pick(NAMES), labels: { 'kubernetes.io/service-name': pick(NAMES) } };
  if (kind === 'services') {
    const headless = r() < 0.2;
    return { metadata, spec: { clusterIP: headless ? 'None' : pick(IPS), clusterIPs: r() < 0.5 ? [pick(IPS)] : undefined } } as V1Service;
  }
  if (kind === 'slices') {
    if (r() < 0.2) delete (metadata.labels as Record<string, string>)['kubernetes.io/service-name'];
    const endpoint = () => ({
      addresses: [pick(IPS)],
      conditions: { ready: r() < 0.7, terminating: r() < 0.2 },
      ...(r() < 0.4 ? { hostname: pick(NAMES) } : {}),
      ...(r() < 0.7 ? { targetRef: { kind: 'Pod', namespace: metadata.namespace, name: pick(NAMES), uid: pick(UIDS) } } : {}),
    });
    return { metadata, addressType: 'IPv4', endpoints: Array.from({ length: 1 + Math.floor(r() * 3) }, endpoint) } as V1EndpointSlice;
  }
  return {
    metadata: { ...metadata, ...(r() < 0.15 ? { deletionTimestamp: new Date() } : {}) },
    spec: { containers: [], hostNetwork: r() < 0.3, ...(r() < 0.4 ? { hostname: pick(NAMES), subdomain: pick(NAMES) } : {}) },
    status: { phase: r() < 0.8 ? 'Running' : 'Pending', podIP: pick(IPS), podIPs: r() < 0.5 ? [{ ip: pick(IPS) }] : undefined },
  } as V1Pod;
}

const id = (o: Obj) => `${o.metadata?.namespace}/${o.metadata?.name}`;
const name = (o: SlimObj | undefined) => (o ? `${o.key}#${JSON.stringify(o).length}` : undefined);

function lookups(ix: ClusterIndex): string[] {
  const out: string[] = [];
  for (const ns of NAMESPACES) {
    for (const n of NAMES) {
      out.push(`svc ${ns}/${n} ${name(ix.service(ns, n))}`);
      out.push(`pod ${ns}/${n} ${name(ix.pod(ns, n))}`);
      out.push(`slices ${ns}/${n} ${ix.slicesFor(ns, n).map(name).sort().join(',')}`);
      for (const h of NAMES) {
        const p = ix.podByHostname(ns, n, h);
        out.push(`host ${ns}/${n}/${h} ${p ? `${p.namespace}/${p.name}/${p.uid}` : '-'}`);
      }
    }
  }
  for (const ip of IPS)
    out.push(`ip ${ip} svc=${!!ix.serviceByIp(ip)} pod=${!!ix.podByIp(ip)} hostNet=${ix.podByIp(ip)?.hostNetwork ?? '-'} known=${ix.knowsIp(ip)}`);
  return out;
}

test('incremental updates answer like a rebuild, over 40 seeded random event sequences', () => {
  for (let seed = 1; seed <= 40; seed++) {
    const r = prng(seed);
    const world: Record<IndexedKind, Map<string, Obj>> = { services: new Map(), slices: new Map(), pods: new Map() };
    const sources = () => [
      {
        services: { list: () => [...world.services.values()].map((o) => slim('services', o) as SlimService) },
        slices: { list: () => [...world.slices.values()].map((o) => slim('slices', o) as SlimSlice) },
        pods: { list: () => [...world.pods.values()].map((o) => slim('pods', o) as SlimPod) },
      },
    ];
    const live = new ClusterIndex(sources);
    lookups(live); // built now: from here on only events change it
    for (let step = 0; step < 200; step++) {
      const kind = (['services', 'slices', 'pods'] as const)[Math.floor(r() * 3)]!;
      const obj = randomObject(kind, r);
      const existing = world[kind].get(id(obj));
      let event: WatchEvent;
      if (existing && r() < 0.3) {
        event = 'delete';
        world[kind].delete(id(obj));
        live.apply(kind, event, slim(kind, existing));
      } else {
        event = existing ? 'update' : 'add';
        world[kind].set(id(obj), obj);
        live.apply(kind, event, slim(kind, obj));
      }
      if (step % 10 === 9) {
        const fresh = new ClusterIndex(sources);
        assert.deepEqual(lookups(live), lookups(fresh), `seed ${seed}, step ${step}`);
      }
    }
  }
});

test('events before the first lookup are picked up from the informers; invalidate() rebuilds', () => {
  const pods: SlimPod[] = [];
  const ix = new ClusterIndex(() => [{ services: { list: () => [] }, slices: { list: () => [] }, pods: { list: () => pods } }]);
  const pod = slim('pods', {
    metadata: { namespace: 'a', name: 'p' },
    spec: { containers: [] },
    status: { phase: 'Running', podIP: '10.1.1.1' },
  } as V1Pod) as SlimPod;
  pods.push(pod);
  ix.apply('pods', 'add', pod); // not built yet: ignored, the build lists it
  assert.equal(ix.podByIp('10.1.1.1'), pod);
  pods.length = 0;
  ix.invalidate();
  assert.equal(ix.podByIp('10.1.1.1'), undefined);
});

test('without a pod watch, a terminating pod the endpoint controller takes out of every slice is gone; an unselected one or a deleted slice says nothing', () => {
  const slices = new Map<string, SlimSlice>();
  const ix = new ClusterIndex(() => [{ services: { list: () => [] }, slices: { list: () => [...slices.values()] }, pods: { list: () => [] } }]);
  const gone: string[] = [];
  ix.onPodGone = (ns, name, uid) => gone.push(`${ns}/${name}/${uid}`);
  const podIps = new Map<string, number>();
  // [pod, uid] or [pod, uid, 'terminating'] (the pod is being deleted).
  const slice = (name: string, service: string, pods: Array<[string, string, 'terminating'?]>) =>
    slim('slices', {
      metadata: { namespace: 'a', name, labels: { 'kubernetes.io/service-name': service } },
      addressType: 'IPv4',
      // A pod instance keeps its IP wherever it is listed.
      endpoints: pods.map(([pod, uid, terminating]) => ({
        addresses: [`10.0.0.${podIps.get(uid) ?? podIps.set(uid, podIps.size + 1).get(uid)}`],
        conditions: terminating ? { ready: false, serving: true, terminating: true } : { ready: true },
        targetRef: { kind: 'Pod', namespace: 'a', name: pod, uid },
      })),
    } as V1EndpointSlice) as SlimSlice;
  const put = (s: SlimSlice, event: WatchEvent) => {
    if (event === 'delete') slices.delete(s.key);
    else slices.set(s.key, s);
    ix.apply('slices', event, s);
  };
  put(
    slice('web-1', 'web', [
      ['p1', 'u1'],
      ['p2', 'u2'],
      ['p4', 'u4'],
    ]),
    'add',
  );
  put(slice('web-2', 'web', [['p3', 'u3']]), 'add');
  put(
    slice('all', 'all', [
      ['p1', 'u1'],
      ['p3', 'u3'],
    ]),
    'add',
  );
  assert.ok(ix.knowsIp('10.0.0.2'), 'endpoint IPs are known');
  put(
    slice('web-1', 'web', [
      ['p1', 'u1'],
      ['p2', 'u2', 'terminating'],
    ]),
    'update',
  );
  assert.deepEqual(gone, [], 'p4 left while ready: relabelled or no longer selected, it runs on');
  put(slice('web-1', 'web', [['p1', 'u1']]), 'update');
  assert.deepEqual(gone, ['a/p2/u2'], 'p2 left its only slice once terminating: deleted');
  put(slice('web-1', 'web', [['p1', 'u1b']]), 'update');
  assert.deepEqual(gone, ['a/p2/u2'], 'p1 (u1) is still in slice "all"');
  put(
    slice('all', 'all', [
      ['p1', 'u1b'],
      ['p3', 'u3'],
    ]),
    'update',
  );
  assert.deepEqual(gone, ['a/p2/u2', 'a/p1/u1'], 'replaced under its name (a pod force-deleted, never terminating): the old instance went');
  put(slice('web-2', 'web', [['p3', 'u3']]), 'delete');
  put(slice('all', 'all', [['p3', 'u3']]), 'delete');
  assert.deepEqual(gone, ['a/p2/u2', 'a/p1/u1'], 'slices deleted with their Service: their pods may well run on');
  put(slice('web-3', 'web', [['p4', 'u4b']]), 'add');
  assert.deepEqual(gone, ['a/p2/u2', 'a/p1/u1', 'a/p4/u4'], 'p4 (u4), which left quietly, was force-deleted: another instance has its name');
  put(slice('web-3', 'web', []), 'update');
  put(slice('web-3', 'web', [['p4', 'u4b']]), 'update');
  assert.equal(gone.length, 3, 'unselected and selected again: the same instance');
});

test('of the running pods on one IP, one not on the host network and not being deleted is preferred', () => {
  const p = (name: string, hostNetwork: boolean, deleting: boolean) => ({ name, hostNetwork, deleting }) as SlimPod;
  const names = (...pods: SlimPod[]) => preferredPod(pods)?.name;
  assert.equal(names(p('host', true, false), p('going', false, true), p('new', false, false)), 'new');
  assert.equal(names(p('host', true, false), p('going', false, true)), 'going', 'a pod being deleted still serves its IP');
  assert.equal(names(p('host-going', true, true), p('host', true, false)), 'host');
  assert.equal(names(), undefined);
});
