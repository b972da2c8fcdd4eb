import type { V1EndpointSlice, V1Pod, V1Service } from '@kubernetes/client-node';
import { normalizeIp } from '../core/ip.js';

interface Listable<T> {
  list(namespace?: string): readonly T[];
}
export interface ObjectSource {
  services: Listable<V1Service>;
  slices: Listable<V1EndpointSlice>;
  pods: Listable<V1Pod>;
}

export type WatchEvent = 'add' | 'update' | 'delete';
export type IndexedKind = 'services' | 'slices' | 'pods';

const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';

const key = (namespace: string | undefined, name: string | undefined) => `${namespace ?? ''}/${name ?? ''}`;
const keyOf = (o: { metadata?: { namespace?: string; name?: string } }) => key(o.metadata?.namespace, o.metadata?.name);

/** A many-valued map: lookups by IP or hostname may match several objects at once. */
class MultiMap<V> {
  private readonly map = new Map<string, Map<string, V>>();

  add(k: string, id: string, v: V): void {
    let inner = this.map.get(k);
    if (!inner) this.map.set(k, (inner = new Map()));
    inner.set(id, v);
  }

  remove(k: string, id: string): void {
    const inner = this.map.get(k);
    if (!inner) return;
    inner.delete(id);
    if (inner.size === 0) this.map.delete(k);
  }

  values(k: string): Iterable<V> {
    return this.map.get(k)?.values() ?? [];
  }

  clear(): void {
    this.map.clear();
  }
}

function serviceIps(svc: V1Service): string[] {
  const ips = new Set([svc.spec?.clusterIP, ...(svc.spec?.clusterIPs ?? [])]);
  return [...ips].filter((ip): ip is string => !!ip && ip !== 'None').map(normalizeIp);
}

const dialable = (pod: V1Pod) => pod.status?.phase === 'Running' && !pod.metadata?.deletionTimestamp;

/** IPs a pod answers on, only while it runs and is not being deleted. */
function podIps(pod: V1Pod): string[] {
  if (!dialable(pod)) return [];
  const ips = new Set([pod.status?.podIP, ...(pod.status?.podIPs ?? []).map((p) => p.ip)]);
  return [...ips].filter((ip): ip is string => !!ip).map(normalizeIp);
}

function podHostname(pod: V1Pod): string | undefined {
  if (!dialable(pod)) return undefined;
  const { hostname, subdomain } = pod.spec ?? {};
  return hostname && subdomain ? `${pod.metadata?.namespace}/${subdomain}/${hostname}` : undefined;
}

function sliceService(slice: V1EndpointSlice): string | undefined {
  const svc = slice.metadata?.labels?.[SERVICE_NAME_LABEL];
  return svc ? key(slice.metadata?.namespace, svc) : undefined;
}

/**
 * Lookup tables over the informers' objects, kept up to date event by event: a busy cluster sends
 * pod and EndpointSlice events all the time, and rebuilding every table after each would cost a
 * pass over every object per connection. A change of which informers exist (a namespace watched
 * or dropped) calls invalidate(): the tables are rebuilt from the informers at the next lookup.
 */
export class ClusterIndex {
  private built = false;
  private readonly services = new Map<string, V1Service>();
  private readonly servicesByIp = new MultiMap<V1Service>();
  private readonly slices = new Map<string, V1EndpointSlice>();
  private readonly slicesByService = new MultiMap<V1EndpointSlice>();
  private readonly pods = new Map<string, V1Pod>();
  private readonly podsByIp = new MultiMap<V1Pod>();
  private readonly podsByHostname = new MultiMap<V1Pod>();

  /** Told when a pod instance leaves the cache (deleted, stopped running, or replaced under its name). */
  onPodGone?: (namespace: string, name: string, uid: string | undefined) => void;

  constructor(private readonly sources: () => ObjectSource[]) {}

  invalidate(): void {
    this.built = false;
  }

  /** One watch event; tables not built yet pick it up from the informers when they are. */
  apply(kind: IndexedKind, event: WatchEvent, obj: V1Service | V1EndpointSlice | V1Pod): void {
    if (kind === 'pods') this.notePodGone(event, obj as V1Pod);
    if (!this.built) return;
    const remove = event === 'delete';
    if (kind === 'services') this.putService(obj as V1Service, remove);
    else if (kind === 'slices') this.putSlice(obj as V1EndpointSlice, remove);
    else this.putPod(obj as V1Pod, remove);
  }

  private notePodGone(event: WatchEvent, pod: V1Pod): void {
    if (!this.onPodGone) return;
    const namespace = pod.metadata?.namespace ?? '';
    const name = pod.metadata?.name ?? '';
    if (event === 'delete') return this.onPodGone(namespace, name, pod.metadata?.uid);
    // A relist can show the new instance without the old one's DELETED.
    const before = this.built ? this.pods.get(key(namespace, name)) : undefined;
    if (before && before.metadata?.uid !== pod.metadata?.uid) this.onPodGone(namespace, name, before.metadata?.uid);
  }

  service(namespace: string, name: string): V1Service | undefined {
    return this.ready().services.get(key(namespace, name));
  }

  serviceByIp(ip: string): V1Service | undefined {
    for (const svc of this.ready().servicesByIp.values(normalizeIp(ip))) return svc;
    return undefined;
  }

  slicesFor(namespace: string, service: string): V1EndpointSlice[] {
    return [...this.ready().slicesByService.values(key(namespace, service))];
  }

  pod(namespace: string, name: string): V1Pod | undefined {
    return this.ready().pods.get(key(namespace, name));
  }

  /** The running pod with this IP (host-network pods share node IPs, so they lose ties). */
  podByIp(ip: string): V1Pod | undefined {
    let fallback: V1Pod | undefined;
    for (const pod of this.ready().podsByIp.values(normalizeIp(ip))) {
      if (!pod.spec?.hostNetwork) return pod;
      fallback ??= pod;
    }
    return fallback;
  }

  /** A pod addressed as <hostname>.<subdomain>.<namespace>.svc (headless Service DNS). */
  podByHostname(namespace: string, subdomain: string, hostname: string): V1Pod | undefined {
    for (const pod of this.ready().podsByHostname.values(`${namespace}/${subdomain}/${hostname}`)) return pod;
    return undefined;
  }

  private ready(): this {
    if (!this.built) this.rebuild();
    return this;
  }

  private rebuild(): void {
    for (const table of [this.services, this.servicesByIp, this.slices, this.slicesByService, this.pods, this.podsByIp, this.podsByHostname]) table.clear();
    for (const source of this.sources()) {
      for (const svc of source.services.list()) this.putService(svc, false);
      for (const slice of source.slices.list()) this.putSlice(slice, false);
      for (const pod of source.pods.list()) this.putPod(pod, false);
    }
    this.built = true;
  }

  /** Replaces (or removes) what the object's previous version put in the tables. */
  private putService(svc: V1Service, remove: boolean): void {
    const k = keyOf(svc);
    const old = this.services.get(k);
    if (old) for (const ip of serviceIps(old)) this.servicesByIp.remove(ip, k);
    if (remove) {
      this.services.delete(k);
      return;
    }
    this.services.set(k, svc);
    for (const ip of serviceIps(svc)) this.servicesByIp.add(ip, k, svc);
  }

  private putSlice(slice: V1EndpointSlice, remove: boolean): void {
    const k = keyOf(slice);
    const old = this.slices.get(k);
    const oldSvc = old && sliceService(old);
    if (oldSvc) this.slicesByService.remove(oldSvc, k);
    if (remove) {
      this.slices.delete(k);
      return;
    }
    this.slices.set(k, slice);
    const svc = sliceService(slice);
    if (svc) this.slicesByService.add(svc, k, slice);
  }

  private putPod(pod: V1Pod, remove: boolean): void {
    const k = keyOf(pod);
    const old = this.pods.get(k);
    if (old) {
      for (const ip of podIps(old)) this.podsByIp.remove(ip, k);
      const host = podHostname(old);
      if (host) this.podsByHostname.remove(host, k);
    }
    if (remove) {
      this.pods.delete(k);
      return;
    }
    this.pods.set(k, pod);
    for (const ip of podIps(pod)) this.podsByIp.add(ip, k, pod);
    const host = podHostname(pod);
    if (host) this.podsByHostname.add(host, k, pod);
  }
}
