import { normalizeIp } from '../core/ip.js';
import type { SlimEndpoint, SlimPod, SlimService, SlimSlice } from './slim.js';
import { PodDepartures } from './pod-departures.js';

interface Listable<T> {
  list(): Iterable<T>;
}
export interface ObjectSource {
  services: Listable<SlimService>;
  slices: Listable<SlimSlice>;
  pods: Listable<SlimPod>;
}

export type WatchEvent = 'add' | 'update' | 'delete';

/** A pod to dial: what a plan needs (a SlimPod is one; so is an endpoint's targetRef). */
export interface PodTarget {
  readonly namespace: string;
  readonly name: string;
  readonly uid: string | undefined;
}
export type IndexedKind = 'services' | 'slices' | 'pods';

const key = (namespace: string, name: string) => `${namespace}/${name}`;

/**
 * A many-valued map of records by IP or hostname: a lookup may match several at once. Nearly every
 * key has one record, kept as is (no wrapper: ~40 bytes per endpoint at 10,000 pods); a Map by the
 * records' own keys only where there are several.
 */
class MultiMap<V extends { readonly key: string }> {
  private readonly map = new Map<string, V | Map<string, V>>();

  add(k: string, v: V): void {
    const cur = this.map.get(k);
    if (cur === undefined || (!(cur instanceof Map) && cur.key === v.key)) this.map.set(k, v);
    else if (cur instanceof Map) cur.set(v.key, v);
    else
      this.map.set(
        k,
        new Map([
          [cur.key, cur],
          [v.key, v],
        ]),
      );
  }

  /** Takes out the record with key `id` from under k. */
  remove(k: string, id: string): void {
    const cur = this.map.get(k);
    if (cur === undefined) return;
    if (!(cur instanceof Map)) {
      if (cur.key === id) this.map.delete(k);
      return;
    }
    cur.delete(id);
    if (cur.size === 1) this.map.set(k, cur.values().next().value!);
  }

  values(k: string): Iterable<V> {
    const cur = this.map.get(k);
    if (cur === undefined) return [];
    return cur instanceof Map ? cur.values() : [cur];
  }

  clear(): void {
    this.map.clear();
  }
}

/**
 * Headless DNS names only ready endpoints with a pod (CoreDNS's kubernetes plugin, endpointsliceReady:
 * ready alone, so a terminating pod of a Service with publishNotReadyAddresses keeps its name).
 */
const namesHeadlessPod = (ep: SlimEndpoint) => !!ep.refName && ep.ready !== false;

const dialable = (pod: SlimPod) => pod.phase === 'Running' && !pod.deleting;

/**
 * IPs a pod answers on while it runs, being deleted too: its containers serve its IP until they
 * stop (a preStop sleep, a graceful shutdown), as the cluster network carries it.
 */
const podIps = (pod: SlimPod): readonly string[] => (pod.phase === 'Running' ? pod.ips : []);

/** Of the running pods sharing an IP, one not on the host network and not being deleted first. */
export function preferredPod(pods: Iterable<SlimPod>): SlimPod | undefined {
  let best: SlimPod | undefined;
  const rank = (p: SlimPod) => (p.hostNetwork ? 2 : 0) + (p.deleting ? 1 : 0);
  for (const pod of pods) if (!best || rank(pod) < rank(best)) best = pod;
  return best;
}

function podHostname(pod: SlimPod): string | undefined {
  if (!dialable(pod)) return undefined;
  return pod.hostname && pod.subdomain ? `${pod.namespace}/${pod.subdomain}/${pod.hostname}` : undefined;
}

/**
 * Lookup tables over the informers' slim records (cluster/slim.ts), kept up to date event by event:
 * a busy cluster sends pod and EndpointSlice events all the time, and rebuilding every table after
 * each would cost a pass over every object per connection. A change of which informers exist (a
 * namespace watched or dropped) calls invalidate(): the tables are rebuilt at the next lookup.
 */
export class ClusterIndex {
  private built = false;
  private readonly services = new Map<string, SlimService>();
  private readonly servicesByIp = new MultiMap<SlimService>();
  private readonly slices = new Map<string, SlimSlice>();
  private readonly slicesByService = new MultiMap<SlimSlice>();
  private readonly pods = new Map<string, SlimPod>();
  private readonly podsByIp = new MultiMap<SlimPod>();
  private readonly podsByHostname = new MultiMap<SlimPod>();
  /** From EndpointSlices (so without a pod watch): endpoint IP → slices listing it. */
  private readonly endpointIps = new MultiMap<SlimSlice>();
  /** From EndpointSlices: "namespace/service/hostname" → slices with a ready endpoint of that hostname (headless Service DNS). */
  private readonly endpointHostnames = new MultiMap<SlimSlice>();
  private readonly departures = new PodDepartures((namespace, name, uid) => this.podGone(namespace, name, uid));

  /** Told when a pod instance leaves the cache (deleted, stopped running, or replaced under its name). */
  onPodGone?: (namespace: string, name: string, uid: string | undefined) => void;

  constructor(
    private readonly sources: () => ObjectSource[],
    /** Told first of a pod instance gone, for what the cache keeps beside the index (Pod look-ups). */
    private readonly forgetPod?: (namespace: string, name: string, uid: string | undefined) => void,
  ) {}

  private podGone(namespace: string, name: string, uid: string | undefined): void {
    this.forgetPod?.(namespace, name, uid);
    this.onPodGone?.(namespace, name, uid);
  }

  invalidate(): void {
    this.built = false;
  }

  /** One watch event; tables not built yet pick it up from the informers when they are. */
  apply(kind: IndexedKind, event: WatchEvent, obj: SlimService | SlimSlice | SlimPod): void {
    if (kind === 'pods') this.notePodGone(event, obj as SlimPod);
    if (!this.built) return;
    const remove = event === 'delete';
    if (kind === 'services') this.putService(obj as SlimService, remove);
    else if (kind === 'slices') this.putSlice(obj as SlimSlice, remove);
    else this.putPod(obj as SlimPod, remove);
  }

  private notePodGone(event: WatchEvent, pod: SlimPod): void {
    if (event === 'delete') return this.podGone(pod.namespace, pod.name, pod.uid);
    // A relist can show the new instance without the old one's DELETED.
    const before = this.built ? this.pods.get(pod.key) : undefined;
    if (before && before.uid !== pod.uid) this.podGone(pod.namespace, pod.name, before.uid);
  }

  service(namespace: string, name: string): SlimService | undefined {
    return this.ready().services.get(key(namespace, name));
  }

  serviceByIp(ip: string): SlimService | undefined {
    for (const svc of this.ready().servicesByIp.values(normalizeIp(ip))) return svc;
    return undefined;
  }

  slicesFor(namespace: string, service: string): SlimSlice[] {
    return [...this.ready().slicesByService.values(key(namespace, service))];
  }

  pod(namespace: string, name: string): SlimPod | undefined {
    return this.ready().pods.get(key(namespace, name));
  }

  /** The running pod with this IP (host-network pods share node IPs, and pods being deleted, so they lose ties). */
  podByIp(ip: string): SlimPod | undefined {
    return preferredPod(this.ready().podsByIp.values(normalizeIp(ip)));
  }

  /**
   * A pod addressed as <hostname>.<subdomain>.<namespace>.svc (headless Service DNS): a watched
   * running pod, else the ready endpoint of Service <subdomain> with that hostname.
   */
  podByHostname(namespace: string, subdomain: string, hostname: string): PodTarget | undefined {
    const k = `${namespace}/${subdomain}/${hostname}`;
    // Several pods or slices may have it: take the same one however the events came (lowest name).
    let best: PodTarget | undefined;
    for (const pod of this.ready().podsByHostname.values(k)) if (!best || pod.name < best.name) best = pod;
    if (best) return best;
    for (const slice of this.endpointHostnames.values(k)) {
      for (const ep of slice.endpoints) {
        if (ep.hostname !== hostname || !namesHeadlessPod(ep)) continue;
        if (!best || ep.refName! < best.name || (ep.refName === best.name && (ep.refUid ?? '') < (best.uid ?? '')))
          best = { namespace: ep.refNamespace ?? slice.namespace, name: ep.refName!, uid: ep.refUid };
      }
    }
    return best;
  }

  /**
   * The ready pod behind Service namespace/service whose endpoint has this address and no
   * hostname: the endpoint CoreDNS names `<address, dashed>.<service>.<namespace>.svc`
   * (plugin/kubernetes/kubernetes.go endpointHostname) — for a Service with a ClusterIP too, as
   * CoreDNS answers such endpoint names for any Service that is not an ExternalName.
   */
  endpointByAddress(namespace: string, service: string, ip: string): PodTarget | undefined {
    const n = normalizeIp(ip);
    const key = `${namespace}/${service}`;
    for (const slice of this.ready().endpointIps.values(n)) {
      if (slice.serviceKey !== key) continue;
      const ep = slice.endpoints.find((e) => e.address === n && e.hostname === undefined && namesHeadlessPod(e));
      if (ep) return { namespace: ep.refNamespace ?? slice.namespace, name: ep.refName!, uid: ep.refUid };
    }
    return undefined;
  }

  /** The namespace of an endpoint with this IP (a Pod IP behind a Service), if any. */
  endpointNamespace(ip: string): string | undefined {
    for (const slice of this.ready().endpointIps.values(normalizeIp(ip))) {
      const ep = slice.endpoints.find((e) => e.address === normalizeIp(ip));
      return ep?.refNamespace ?? slice.namespace;
    }
    return undefined;
  }

  /** The pod an endpoint with this IP points at (its targetRef), if any. */
  endpointPod(ip: string): { namespace: string; name: string } | undefined {
    const n = normalizeIp(ip);
    for (const slice of this.ready().endpointIps.values(n)) {
      const ep = slice.endpoints.find((e) => e.address === n && e.refKind === 'Pod' && e.refName);
      if (ep) return { namespace: ep.refNamespace ?? slice.namespace, name: ep.refName! };
    }
    return undefined;
  }

  /** Is this a Service ClusterIP, a pod endpoint's IP or a known running pod's IP? (sync: routing decisions) */
  knowsIp(ip: string): boolean {
    const n = normalizeIp(ip);
    const ix = this.ready();
    for (const _ of ix.servicesByIp.values(n)) return true;
    // Only endpoints that are pods: a selector-less Service's endpoints (the API server itself,
    // an external database) are no Pod IPs and cannot be reached by port-forward.
    for (const slice of ix.endpointIps.values(n)) if (slice.endpoints.some((e) => e.address === n && e.refKind === 'Pod')) return true;
    for (const _ of ix.podsByIp.values(n)) return true;
    return false;
  }

  private ready(): this {
    if (!this.built) this.rebuild();
    return this;
  }

  private rebuild(): void {
    for (const table of [
      this.services,
      this.servicesByIp,
      this.slices,
      this.slicesByService,
      this.pods,
      this.podsByIp,
      this.podsByHostname,
      this.endpointIps,
      this.endpointHostnames,
    ])
      table.clear();
    for (const source of this.sources()) {
      for (const svc of source.services.list()) this.putService(svc, false);
      for (const slice of source.slices.list()) this.putSlice(slice, false);
      for (const pod of source.pods.list()) this.putPod(pod, false);
    }
    this.built = true;
  }

  /** Replaces (or removes) what the object's previous version put in the tables. */
  private putService(svc: SlimService, remove: boolean): void {
    const k = svc.key;
    const old = this.services.get(k);
    if (old) for (const ip of old.clusterIPs) this.servicesByIp.remove(ip, k);
    if (remove) {
      this.services.delete(k);
      return;
    }
    this.services.set(k, svc);
    for (const ip of svc.clusterIPs) this.servicesByIp.add(ip, svc);
  }

  private putSlice(slice: SlimSlice, remove: boolean): void {
    const k = slice.key;
    const old = this.slices.get(k);
    if (old) this.sliceEndpoints(old, false);
    if (old?.serviceKey) this.slicesByService.remove(old.serviceKey, k);
    if (remove) {
      this.slices.delete(k);
      return;
    }
    this.slices.set(k, slice);
    if (slice.serviceKey) this.slicesByService.add(slice.serviceKey, slice);
    this.sliceEndpoints(slice, true);
    // A slice changed and a pod it listed is in no slice any more: gone, or no longer selected
    // (pod-departures.ts). A slice deleted as a whole (its Service went) says nothing about its pods.
    if (old) {
      for (const ep of old.endpoints) {
        if (!(ep.refKind === 'Pod' && ep.refName && ep.refUid) || this.listed(ep, old)) continue;
        const namespace = ep.refNamespace ?? old.namespace;
        this.departures.left(namespace, ep.refName, ep.refUid, ep.terminating === true, this.replaced(namespace, ep.refName, ep.refUid, old));
      }
    }
    this.departures.listed(slice);
  }

  /** Does a slice of the same Service list another instance under this pod's name? */
  private replaced(namespace: string, name: string, uid: string, was: SlimSlice): boolean {
    const slices = was.serviceKey ? this.slicesByService.values(was.serviceKey) : [this.slices.get(was.key)].filter((s) => s !== undefined);
    for (const slice of slices) {
      if (slice.endpoints.some((e) => e.refName === name && e.refUid !== uid && (e.refNamespace ?? slice.namespace) === namespace)) return true;
    }
    return false;
  }

  /** Does any slice now list this endpoint's pod? Only slices with its IP can (its Service's, for an endpoint without one). */
  private listed(ep: SlimEndpoint, was: SlimSlice): boolean {
    const candidates = ep.address ? this.endpointIps.values(ep.address) : was.serviceKey ? this.slicesByService.values(was.serviceKey) : [];
    for (const slice of candidates) if (slice.endpoints.some((e) => e.refUid === ep.refUid)) return true;
    return false;
  }

  /** Adds (or removes) what a slice's endpoints put in the endpoint tables. */
  private sliceEndpoints(slice: SlimSlice, add: boolean): void {
    const service = slice.serviceKey;
    for (const ep of slice.endpoints) {
      if (ep.address) {
        if (add) this.endpointIps.add(ep.address, slice);
        else this.endpointIps.remove(ep.address, slice.key);
      }
      if (service && ep.hostname && namesHeadlessPod(ep)) {
        const host = `${service}/${ep.hostname}`;
        if (add) this.endpointHostnames.add(host, slice);
        else this.endpointHostnames.remove(host, slice.key);
      }
    }
  }

  private putPod(pod: SlimPod, remove: boolean): void {
    const k = pod.key;
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
    for (const ip of podIps(pod)) this.podsByIp.add(ip, pod);
    const host = podHostname(pod);
    if (host) this.podsByHostname.add(host, pod);
  }
}
