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

const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';

const key = (namespace: string | undefined, name: string | undefined) => `${namespace ?? ''}/${name ?? ''}`;

interface Indexes {
  services: Map<string, V1Service>;
  serviceByIp: Map<string, V1Service>;
  slicesByService: Map<string, V1EndpointSlice[]>;
  pods: Map<string, V1Pod>;
  podByIp: Map<string, V1Pod>;
  podByHostname: Map<string, V1Pod>;
}

/**
 * Lookup tables over the informers' objects. They are rebuilt lazily: a watch event only marks
 * them stale, and the next lookup rebuilds once, so bursts of events cost one pass.
 */
export class ClusterIndex {
  private built?: Indexes;

  constructor(private readonly sources: () => ObjectSource[]) {}

  invalidate(): void {
    this.built = undefined;
  }

  service(namespace: string, name: string): V1Service | undefined {
    return this.get().services.get(key(namespace, name));
  }

  serviceByIp(ip: string): V1Service | undefined {
    return this.get().serviceByIp.get(normalizeIp(ip));
  }

  slicesFor(namespace: string, service: string): V1EndpointSlice[] {
    return this.get().slicesByService.get(key(namespace, service)) ?? [];
  }

  pod(namespace: string, name: string): V1Pod | undefined {
    return this.get().pods.get(key(namespace, name));
  }

  /** The running pod with this IP (host-network pods share node IPs, so they lose ties). */
  podByIp(ip: string): V1Pod | undefined {
    return this.get().podByIp.get(normalizeIp(ip));
  }

  /** A pod addressed as <hostname>.<subdomain>.<namespace>.svc (headless Service DNS). */
  podByHostname(namespace: string, subdomain: string, hostname: string): V1Pod | undefined {
    return this.get().podByHostname.get(`${namespace}/${subdomain}/${hostname}`);
  }

  private get(): Indexes {
    if (!this.built) this.built = this.build();
    return this.built;
  }

  private build(): Indexes {
    const ix: Indexes = {
      services: new Map(),
      serviceByIp: new Map(),
      slicesByService: new Map(),
      pods: new Map(),
      podByIp: new Map(),
      podByHostname: new Map(),
    };
    for (const source of this.sources()) {
      for (const svc of source.services.list()) {
        ix.services.set(key(svc.metadata?.namespace, svc.metadata?.name), svc);
        const ips = new Set([svc.spec?.clusterIP, ...(svc.spec?.clusterIPs ?? [])]);
        for (const ip of ips) if (ip && ip !== 'None') ix.serviceByIp.set(normalizeIp(ip), svc);
      }
      for (const slice of source.slices.list()) {
        const svcName = slice.metadata?.labels?.[SERVICE_NAME_LABEL];
        if (!svcName) continue;
        const k = key(slice.metadata?.namespace, svcName);
        const list = ix.slicesByService.get(k);
        if (list) list.push(slice);
        else ix.slicesByService.set(k, [slice]);
      }
      for (const pod of source.pods.list()) {
        ix.pods.set(key(pod.metadata?.namespace, pod.metadata?.name), pod);
        if (pod.status?.phase !== 'Running' || pod.metadata?.deletionTimestamp) continue;
        const ips = new Set([pod.status?.podIP, ...(pod.status?.podIPs ?? []).map((p) => p.ip)]);
        for (const ip of ips) {
          if (!ip) continue;
          const norm = normalizeIp(ip);
          const existing = ix.podByIp.get(norm);
          if (!existing || (existing.spec?.hostNetwork && !pod.spec?.hostNetwork)) ix.podByIp.set(norm, pod);
        }
        const { hostname, subdomain } = pod.spec ?? {};
        if (hostname && subdomain) ix.podByHostname.set(`${pod.metadata?.namespace}/${subdomain}/${hostname}`, pod);
      }
    }
    return ix;
  }
}
