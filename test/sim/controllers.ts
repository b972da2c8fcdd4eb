// EndpointSlice and Endpoints controllers, run synchronously after every pod/service change.
// Follows pkg/controller/endpointslice (reconciler.go, utils.go: one slice per distinct resolved
// port set and at most 100 endpoints (--max-endpoints-per-slice), named targetPorts resolved per
// pod with podutil.FindPort, placeholder slice with
// `endpoints: null` and `ports: null` when no pod matches, conditions ready/serving/terminating,
// hostname only when pod.spec.subdomain == service name, headless label) and
// pkg/controller/endpoint/endpoints_controller.go (v1 Endpoints: ready → addresses, not ready →
// notReadyAddresses, terminating pods left out).
import { randomInt } from 'node:crypto';
import type { KObject, Store } from './store.js';
import { NODE_NAME, nowRfc3339 } from './objects.js';

export const SLICE_CONTROLLER = 'endpointslice-controller.k8s.io';
export const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';
export const MANAGED_BY_LABEL = 'endpointslice.kubernetes.io/managed-by';
const HEADLESS_LABEL = 'service.kubernetes.io/headless';
const TRIGGER_TIME = 'endpoints.kubernetes.io/last-change-trigger-time';
// utilrand.String alphabet (staging/src/k8s.io/apimachinery/pkg/util/rand/rand.go)
const ALPHANUMS = 'bcdfghjklmnpqrstvwxz2456789';

export function randomSuffix(n = 5): string {
  let s = '';
  for (let i = 0; i < n; i++) s += ALPHANUMS[randomInt(ALPHANUMS.length)];
  return s;
}

interface SlicePort {
  name: string;
  port: number;
  protocol: string;
}

type AnyObj = Record<string, any>;

function selectorMatches(selector: Record<string, string>, labels: Record<string, string> | undefined): boolean {
  return Object.entries(selector).every(([k, v]) => labels?.[k] === v);
}

/** The EndpointSlice controller's --max-endpoints-per-slice default: a Service with more pods gets several slices. */
export const MAX_ENDPOINTS_PER_SLICE = 100;

/**
 * endpointslice FindPort: numeric targetPort as is; named one → the pod's containerPort of that
 * name, in its containers, then in its native sidecars (init containers with restartPolicy Always).
 */
function resolvePort(svcPort: AnyObj, pod: AnyObj): SlicePort | undefined {
  const target = svcPort.targetPort ?? svcPort.port;
  let port: number | undefined;
  if (typeof target === 'number') {
    port = target;
  } else {
    const sidecars = (pod.spec?.initContainers ?? []).filter((c: AnyObj) => c.restartPolicy === 'Always');
    for (const c of [...(pod.spec?.containers ?? []), ...sidecars]) {
      for (const cp of c.ports ?? []) if (cp.name === target && (cp.protocol ?? 'TCP') === (svcPort.protocol ?? 'TCP')) port ??= cp.containerPort;
    }
  }
  return port === undefined ? undefined : { name: svcPort.name ?? '', port, protocol: svcPort.protocol ?? 'TCP' };
}

/** The pod's address of this family (status.podIPs), as getEndpointAddresses picks it. */
function familyAddress(pod: AnyObj, addressType: string): string | undefined {
  // A status with podIP alone means podIPs [podIP] (core/v1 conversion Convert_v1_PodStatus_To_core_PodStatus).
  const listed: AnyObj[] = pod.status?.podIPs?.length ? pod.status.podIPs : pod.status?.podIP ? [{ ip: pod.status.podIP }] : [];
  const ips: string[] = listed.map((p: AnyObj) => p.ip);
  return ips.find((ip) => ip.includes(':') === (addressType === 'IPv6'));
}

function podReady(pod: AnyObj): boolean {
  return (pod.status?.conditions ?? []).some((c: AnyObj) => c.type === 'Ready' && c.status === 'True');
}

interface Group {
  ports: SlicePort[];
  pods: AnyObj[];
}

export class EndpointsController {
  constructor(private readonly store: Store) {}

  /** Re-derives slices and Endpoints of every selector service in a namespace. */
  syncNamespace(namespace: string): void {
    for (const svc of this.store.list('services', namespace)) this.syncService(namespace, svc.metadata.name);
  }

  syncService(namespace: string, name: string): void {
    const svc = this.store.get('services', namespace, name) as AnyObj | undefined;
    const managed = this.store
      .list('endpointslices', namespace)
      .filter((s) => s.metadata.labels?.[SERVICE_NAME_LABEL] === name && s.metadata.labels?.[MANAGED_BY_LABEL] === SLICE_CONTROLLER);
    if (!svc || !svc.spec.selector || svc.spec.type === 'ExternalName') {
      for (const s of managed) this.store.remove('endpointslices', namespace, s.metadata.name);
      const ep = this.store.get('endpoints', namespace, name);
      if (ep && (!svc || ep.metadata.annotations?.[TRIGGER_TIME] !== undefined)) this.store.remove('endpoints', namespace, name);
      return;
    }
    const pods = this.store
      .list('pods', namespace)
      .filter((p) => selectorMatches(svc.spec.selector, p.metadata.labels))
      .filter((p: AnyObj) => p.status?.podIP && p.status?.phase !== 'Succeeded' && p.status?.phase !== 'Failed')
      .sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
    // reconciler.go Reconcile: one set of slices per address type of spec.ipFamilies; a pod
    // without an address of that family is left out of it (getEndpointAddresses), and a family no
    // pod has gets its own placeholder; slices of a family the Service dropped are deleted.
    const types: string[] = (svc.spec.ipFamilies ?? ['IPv4']).filter((f: string) => f === 'IPv4' || f === 'IPv6');
    for (const type of types) {
      const groups = new Map<string, Group>();
      for (const pod of pods as AnyObj[]) {
        if (familyAddress(pod, type) === undefined) continue;
        const ports = (svc.spec.ports ?? []).map((sp: AnyObj) => resolvePort(sp, pod)).filter((p: SlicePort | undefined): p is SlicePort => p !== undefined);
        const key = JSON.stringify(ports);
        if (!groups.has(key)) groups.set(key, { ports, pods: [] });
        groups.get(key)!.pods.push(pod);
      }
      this.reconcileSlices(
        svc,
        managed.filter((m) => ((m as AnyObj).addressType ?? 'IPv4') === type),
        [...groups.values()],
        type,
      );
      // endpoints_controller.go: v1 Endpoints carry the Service's primary family only.
      if (type === types[0]) this.reconcileEndpoints(svc, [...groups.values()], type);
    }
    for (const m of managed) if (!types.includes((m as AnyObj).addressType ?? 'IPv4')) this.store.remove('endpointslices', namespace, m.metadata.name);
  }

  private labelsFor(svc: AnyObj): Record<string, string> {
    const labels: Record<string, string> = { ...(svc.metadata.labels ?? {}) };
    if (svc.spec.clusterIP === 'None') labels[HEADLESS_LABEL] = '';
    return labels;
  }

  private endpoint(svc: AnyObj, pod: AnyObj, type: string): AnyObj {
    const terminating = !!pod.metadata.deletionTimestamp;
    // pkg/controller/endpointslice/reconciler.go (via endpointsliceutil podToEndpoint): serving is
    // the pod's readiness, whether it terminates or not; ready is serving and not terminating, or
    // true whatever the pod's state for a Service with publishNotReadyAddresses.
    const serving = podReady(pod);
    const ready = svc.spec.publishNotReadyAddresses === true || (serving && !terminating);
    const e: AnyObj = { addresses: [familyAddress(pod, type)], conditions: { ready, serving, terminating } };
    if (pod.spec.hostname && pod.spec.subdomain === svc.metadata.name) e.hostname = pod.spec.hostname;
    e.targetRef = { kind: 'Pod', namespace: pod.metadata.namespace, name: pod.metadata.name, uid: pod.metadata.uid };
    e.nodeName = pod.spec.nodeName ?? NODE_NAME;
    return e;
  }

  private reconcileSlices(svc: AnyObj, existing: KObject[], groups: Group[], addressType: string): void {
    const ns = svc.metadata.namespace;
    const name = svc.metadata.name;
    const labels = { ...this.labelsFor(svc), [SERVICE_NAME_LABEL]: name, [MANAGED_BY_LABEL]: SLICE_CONTROLLER };
    const unused = [...existing];
    const desired = groups.length
      ? groups.flatMap((g) => this.placed(svc, g, unused, addressType))
      : [{ endpoints: null as AnyObj[] | null, ports: null as SlicePort[] | null, current: this.take(unused, 'null') }];
    for (const d of desired) {
      const current = d.current;
      if (current) {
        const same =
          JSON.stringify(current.endpoints ?? null) === JSON.stringify(d.endpoints) && JSON.stringify(current.metadata.labels) === JSON.stringify(labels);
        if (same) continue;
        this.store.update('endpointslices', ns, current.metadata.name, (o: AnyObj) => {
          o.metadata.labels = labels;
          o.metadata.annotations = { ...(o.metadata.annotations ?? {}), [TRIGGER_TIME]: nowRfc3339() };
          o.endpoints = d.endpoints;
          o.ports = d.ports;
        });
      } else {
        let sliceName = `${name}-${randomSuffix()}`;
        while (this.store.has('endpointslices', ns, sliceName)) sliceName = `${name}-${randomSuffix()}`;
        this.store.create('endpointslices', {
          apiVersion: 'discovery.k8s.io/v1',
          kind: 'EndpointSlice',
          metadata: {
            name: sliceName,
            generateName: `${name}-`,
            namespace: ns,
            labels,
            annotations: { [TRIGGER_TIME]: nowRfc3339() },
            ownerReferences: [{ apiVersion: 'v1', kind: 'Service', name, uid: svc.metadata.uid, controller: true, blockOwnerDeletion: true }],
          },
          addressType,
          endpoints: d.endpoints,
          ports: d.ports,
        });
      }
    }
    for (const s of unused) this.store.remove('endpointslices', ns, s.metadata.name);
  }

  /** The first unused slice with these ports (JSON, or 'null'), taken out of `unused`. */
  private take(unused: KObject[], key: string): AnyObj | undefined {
    const idx = unused.findIndex((s) => JSON.stringify((s as AnyObj).ports ?? null) === key);
    return idx >= 0 ? (unused.splice(idx, 1)[0] as AnyObj) : undefined;
  }

  /**
   * One port set's slices, as reconciler.go reconcileByPortMapping places endpoints: each existing
   * slice keeps the endpoints still wanted (updated in place), new ones fill those slices (the fullest
   * first) up to MAX_ENDPOINTS_PER_SLICE, then new slices; an endpoint never moves to another slice. A slice
   * left empty is not returned (it stays in `unused`, deleted).
   */
  private placed(
    svc: AnyObj,
    g: Group,
    unused: KObject[],
    addressType: string,
  ): Array<{ current?: AnyObj; endpoints: AnyObj[] | null; ports: SlicePort[] | null }> {
    // Pods without any of the ports: upstream stores the empty list, and reads it back as null.
    const key = g.ports.length ? JSON.stringify(g.ports) : 'null';
    const ports = g.ports.length ? g.ports : null;
    const refKey = (e: AnyObj) => `${e.targetRef?.name}/${e.targetRef?.uid}`;
    const want = new Map<string, AnyObj>();
    for (const pod of g.pods) {
      const e = this.endpoint(svc, pod, addressType);
      want.set(refKey(e), e);
    }
    const out: Array<{ current?: AnyObj; endpoints: AnyObj[]; ports: SlicePort[] | null }> = [];
    for (let current = this.take(unused, key); current; current = this.take(unused, key)) {
      const kept: AnyObj[] = [];
      for (const e of (current.endpoints ?? []) as AnyObj[]) {
        const next = want.get(refKey(e));
        if (!next) continue;
        kept.push(next);
        want.delete(refKey(e));
      }
      out.push({ current, endpoints: kept, ports });
    }
    const rest = [...want.values()];
    // The fullest slice with room first (getSliceToFill: the one closest to full once filled).
    for (const slice of [...out].sort((a, b) => b.endpoints.length - a.endpoints.length)) {
      while (slice.endpoints.length < MAX_ENDPOINTS_PER_SLICE && rest.length) slice.endpoints.push(rest.shift()!);
    }
    while (rest.length) out.push({ endpoints: rest.splice(0, MAX_ENDPOINTS_PER_SLICE), ports });
    for (const slice of out) if (slice.current && slice.endpoints.length === 0) unused.push(slice.current as KObject);
    return out.filter((slice) => slice.endpoints.length > 0);
  }

  private reconcileEndpoints(svc: AnyObj, groups: Group[], addressType: string): void {
    const ns = svc.metadata.namespace;
    const name = svc.metadata.name;
    const subsets: AnyObj[] = [];
    for (const g of groups) {
      const addr = (p: AnyObj): AnyObj => {
        const a: AnyObj = { ip: familyAddress(p, addressType) };
        if (p.spec.hostname && p.spec.subdomain === name) a.hostname = p.spec.hostname;
        a.nodeName = p.spec.nodeName ?? NODE_NAME;
        a.targetRef = { kind: 'Pod', namespace: ns, name: p.metadata.name, uid: p.metadata.uid };
        return a;
      };
      const live = g.pods.filter((p) => !p.metadata.deletionTimestamp);
      const ready = live.filter(podReady).map(addr);
      const notReady = live.filter((p) => !podReady(p)).map(addr);
      if (!ready.length && !notReady.length) continue;
      const subset: AnyObj = {};
      if (ready.length) subset.addresses = ready;
      if (notReady.length) subset.notReadyAddresses = notReady;
      subset.ports = g.ports.map((p) => (p.name ? { name: p.name, port: p.port, protocol: p.protocol } : { port: p.port, protocol: p.protocol }));
      subsets.push(subset);
    }
    const labels = this.labelsFor(svc);
    const existing = this.store.get('endpoints', ns, name) as AnyObj | undefined;
    if (!existing) {
      const obj: AnyObj = { apiVersion: 'v1', kind: 'Endpoints', metadata: { name, namespace: ns, labels, annotations: { [TRIGGER_TIME]: nowRfc3339() } } };
      if (subsets.length) obj.subsets = subsets;
      this.store.create('endpoints', obj as KObject);
      return;
    }
    if (JSON.stringify(existing.subsets ?? []) === JSON.stringify(subsets) && JSON.stringify(existing.metadata.labels ?? {}) === JSON.stringify(labels)) return;
    this.store.update('endpoints', ns, name, (o: AnyObj) => {
      o.metadata.labels = labels;
      o.metadata.annotations = { ...(o.metadata.annotations ?? {}), [TRIGGER_TIME]: nowRfc3339() };
      if (subsets.length) o.subsets = subsets;
      else delete o.subsets;
    });
  }
}
