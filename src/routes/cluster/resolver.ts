import { isIP } from 'node:net';
import type { Destination } from '../../core/types.js';
import {
  ConnectionRefusedError,
  HostUnreachableError,
  NoReadyEndpointError,
  NotAllowedError,
  UnsupportedTargetError,
  ProxyError,
  UpstreamApiError,
  errorMessage,
} from '../../core/errors.js';
import type { ClusterCache } from '../../cluster/cache.js';
import type { SlimPod, SlimService } from '../../cluster/slim.js';
import type { PodTarget } from '../../cluster/index.js';
import { ApiStatusError } from '../../cluster/api.js';
import type { PodPort } from '../../tunnel/transport.js';
import { dashedIp, isUnderClusterDomain, noSuchNamespace, parseClusterName, type ClusterName } from '../guest-cluster/names.js';
import { followExternalName } from '../guest-cluster/external-name.js';
import { SessionAffinity } from './session-affinity.js';
import { hostnamePods, noReadyDetail, serviceEndpoints, stillPicked, unpublishedPod } from './service-endpoints.js';
import { normalizeIp } from '../../core/ip.js';
import { clientHost } from '../../core/address.js';
import { withCanI } from '../../cluster/can-i.js';

/** The part of the ClusterCache the resolver reads (an interface so tests can feed objects). */
export type ResolverCache = Pick<
  ClusterCache,
  'lookup' | 'defaultNamespace' | 'namespaceExists' | 'ensureNamespace' | 'noteServed' | 'knowsIp' | 'findPodByIp'
>;

export interface ResolverOptions {
  /**
   * Dial Pod IPs of hostNetwork pods. Their IP is the node's, so such a target is a port in the
   * node's own network namespace (kubelet, etcd, sshd), not a pod's: refused unless asked for.
   * Services backed by hostNetwork pods work either way.
   */
  allowHostNetworkPods?: boolean;
  /** The clock session affinity expires by (tests). */
  now?: () => number;
}

export const HOST_NETWORK_FLAG = '--allow-host-network-pods';

/** Where a destination goes: the pod ports to try, in order. */
export interface Plan {
  /** "service shop/web:8080", "pod shop/db-0:5432": for logs and errors. */
  label: string;
  candidates: PodPort[];
  /** Told which candidate a stream opened on (a Service with ClientIP session affinity). */
  opened?: (c: PodPort) => void;
  /** Whether a new connection could still go to this candidate (a Service's: its endpoints now). */
  stillPicked?: (c: PodPort) => boolean;
}

/** Services (and ports) whose rotation is remembered. */
const ROUND_ROBIN_MAX = 10_000;

/**
 * Turns a destination (name or IP, port) into pod ports using only the watch cache. Follows what
 * kube-proxy and cluster DNS would do: Service port → the port its EndpointSlices give each
 * endpoint (targetPort as the controller resolved it), endpoints that
 * are ready (else, as kube-proxy, those terminating but still serving; an
 * endpoint without a pod targetRef is the pod with its address: service-endpoints.ts), spread
 * round-robin, or the client's own while it has ClientIP session affinity (session-affinity.ts);
 * headless names and Pod IPs keep the port.
 */
export class Resolver {
  private readonly roundRobin = new Map<string, number>();
  private readonly affinity: SessionAffinity;

  constructor(
    private readonly cache: ResolverCache,
    private readonly clusterDomain: string,
    private readonly maxCandidates = 3,
    private readonly options: ResolverOptions = {},
  ) {
    this.affinity = new SessionAffinity(options.now);
  }

  /** `client`: the client as logs name it ("ip:port"); session affinity keys by its address. */
  async resolve(dest: Destination, client?: string): Promise<Plan> {
    return this.served(await this.plan(dest, client));
  }

  /**
   * Like resolve, for a destination the routing table has already parsed: an IP literal, or a
   * cluster name (ClusterName) — no name is parsed twice.
   */
  async resolveParsed(
    host: string,
    port: number,
    parsed: { isIp: boolean; name?: ClusterName; reason?: string; pattern?: string },
    client?: string,
  ): Promise<Plan> {
    if (parsed.isIp) return this.served(await this.resolveIp(host, port, client));
    // Claimed for this cluster (under its domain or its route name) but no Service or Pod form:
    // the forms under that suffix say what was likely meant (foo.bar.baz.prod, svc.cluster.local).
    if (!parsed.name) throw new HostUnreachableError(`${host} does not name a Service or Pod${formsUnder(parsed.reason, parsed.pattern)}`);
    return this.served(await this.planForName(parsed.name, host, port, client));
  }

  private served(plan: Plan): Plan {
    // The namespace served a stream: an on-demand watch there is worth keeping.
    for (const ns of new Set(plan.candidates.map((c) => c.namespace))) this.cache.noteServed(ns);
    return plan;
  }

  private async plan(dest: Destination, client: string | undefined): Promise<Plan> {
    // Some clients send IP literals as ATYP "domain" (curl with socks5h does for IPv6).
    if (dest.type !== 'domain' || isIP(dest.host)) return this.resolveIp(dest.host, dest.port, client);
    const name = parseClusterName(dest.host, this.clusterDomain, this.cache.defaultNamespace);
    if (!name) {
      if (isUnderClusterDomain(dest.host, this.clusterDomain)) throw new HostUnreachableError(`${dest.host} does not name a Service or Pod`);
      throw new NotAllowedError(`${dest.host} is not a cluster name (not under .svc or .${this.clusterDomain}, and no proxy route for it)`);
    }
    return this.planForName(name, dest.host, dest.port, client);
  }

  /** `hops`: ExternalName Services followed to get here. */
  private async planForName(name: ClusterName, host: string, port: number, client: string | undefined, hops = 0): Promise<Plan> {
    const dest = { host, port };
    const lookup = this.cache.lookup;
    if (name.kind === 'service' && name.namespaceNeedsCheck && this.cache.namespaceExists(name.namespace) === false) {
      throw new NotAllowedError(noSuchNamespace(dest.host, name.service, name.namespace));
    }
    // A namespace the cluster does not have is not worth a look-up (it costs LISTs and budget).
    if (this.cache.namespaceExists(name.namespace) === false) throw new HostUnreachableError(`${dest.host}: there is no namespace "${name.namespace}"`);
    await this.watchNamespace(name.namespace);
    if (name.kind === 'service') {
      const svc = lookup.service(name.namespace, name.service);
      if (!svc) {
        if (name.namespaceNeedsCheck && this.cache.namespaceExists(name.namespace) !== true) {
          throw new NotAllowedError(notKnownNamespace(dest.host, name.service, name.namespace));
        }
        throw new HostUnreachableError(`no Service "${name.service}" in namespace "${name.namespace}"`);
      }
      return this.servicePlan(svc, dest.port, client, hops);
    }
    if (name.kind === 'pod-hostname') {
      // An endpoint without a hostname is named by its address, dashed, as CoreDNS does.
      const ip = dashedIp(name.hostname);
      const pod =
        lookup.podByHostname(name.namespace, name.service, name.hostname) ?? (ip ? lookup.endpointByAddress(name.namespace, name.service, ip) : undefined);
      if (!pod) {
        const notReady = unpublishedPod(lookup.slicesFor(name.namespace, name.service), name.hostname, ip && normalizeIp(ip));
        const under = `hostname "${name.hostname}" under Service ${name.namespace}/${name.service}`;
        if (notReady) throw new HostUnreachableError(`pod ${notReady}, ${under}, is not ready: cluster DNS names ready endpoints only`);
        throw new HostUnreachableError(`no running pod with ${under}`);
      }
      // Several pods with that hostname (set in a Deployment's template): DNS answers each; spread.
      const all = hostnamePods(lookup.slicesFor(name.namespace, name.service), name.hostname);
      if (all.length > 1) {
        const candidates = this.rotate(`${name.namespace}/${name.service}/${name.hostname}`, all).map((c) => ({ ...c, port: dest.port }));
        return { label: `pods of hostname ${name.hostname}.${name.service} in ${name.namespace}:${dest.port}`, candidates };
      }
      return podPlan(pod, dest.port);
    }
    const pod = await this.findPodByIp(name.ip, name.namespace);
    if (!pod || pod.namespace !== name.namespace) throw new HostUnreachableError(`no running pod with IP ${name.ip} in namespace "${name.namespace}"`);
    return this.podIpPlan(pod, name.ip, dest.port);
  }

  private async watchNamespace(namespace: string): Promise<void> {
    try {
      await this.cache.ensureNamespace(namespace);
    } catch (err) {
      if (err instanceof ApiStatusError && err.statusCode === 403) {
        throw new NotAllowedError(`not allowed to watch namespace "${namespace}": ${withCanI(err.message, namespace)}`, { cause: err });
      }
      throw new UpstreamApiError(`cannot watch namespace "${namespace}": ${errorMessage(err)}`, { cause: err });
    }
  }

  private async findPodByIp(ip: string, namespace?: string): Promise<SlimPod | undefined> {
    try {
      return await this.cache.findPodByIp(ip, namespace);
    } catch (err) {
      if (err instanceof ProxyError) throw err;
      throw new UpstreamApiError(`cannot look up the pod with IP ${ip}: ${errorMessage(err)}`, { cause: err });
    }
  }

  private async resolveIp(ip: string, port: number, client: string | undefined): Promise<Plan> {
    const svc = this.cache.lookup.serviceByIp(ip);
    if (svc) return this.servicePlan(svc, port, client);
    const pod = await this.findPodByIp(ip);
    if (pod) return this.podIpPlan(pod, ip, port);
    throw new NotAllowedError(`${ip} is neither a Service ClusterIP nor a running Pod IP in the cluster`);
  }

  /** A Pod IP target; the lookup prefers a pod of its own, so a hostNetwork pod means the IP is a node's. */
  private podIpPlan(pod: SlimPod, ip: string, port: number): Plan {
    if (pod.hostNetwork && !this.options.allowHostNetworkPods) {
      throw new NotAllowedError(
        `${ip} is a node IP (only hostNetwork pods such as ${pod.namespace}/${pod.name} have it): port ${port} there is the node's own, not a pod's; refused unless the proxy runs with ${HOST_NETWORK_FLAG}`,
      );
    }
    return podPlan(pod, port);
  }

  private async servicePlan(svc: SlimService, port: number, client: string | undefined, hops = 0): Promise<Plan> {
    const { namespace, name } = svc;
    const label = `service ${namespace}/${name}:${port}`;
    if (svc.type === 'ExternalName') return this.externalNamePlan(svc, label, port, client, hops);
    const headless = svc.headless;
    const servicePort = headless ? undefined : svc.ports.find((p) => p.port === port && p.protocol === 'TCP');
    if (!headless && !servicePort) throw noTcpPort(svc, port);
    const { candidates, notPods, lookupError, portless, unported } = await serviceEndpoints(
      svc,
      servicePort,
      port,
      this.cache.lookup.slicesFor(namespace, name),
      { findPodByIp: (ip) => this.findPodByIp(ip) },
    );
    if (candidates.length === 0) {
      if (lookupError !== undefined) throw lookupError;
      if (notPods.length > 0) {
        throw new UnsupportedTargetError(
          `${label}: its endpoints (${notPods.join(', ')}) are not pods nor any running pod's address, so no pod port-forward can reach them`,
        );
      }
      if (portless > 0 && servicePort) {
        // As `kubectl port-forward svc/…` says "does not have a named port": a misnamed targetPort.
        throw new NoReadyEndpointError(
          `${label}: none of its endpoints (${portless}) has a port for it: their pods have no TCP container port named "${servicePort.targetPort}"`,
        );
      }
      if (unported > 0 && servicePort) {
        // kube-proxy takes an endpoint's port from its slice only: the targetPort is no fallback.
        const portName = servicePort.name ? `named "${servicePort.name}"` : 'without a name';
        throw new NoReadyEndpointError(
          `${label}: none of its endpoints (${unported}) has a port for it: their EndpointSlices, not written by the EndpointSlice controller, have no ${servicePort.protocol} port ${portName}, so kube-proxy sends nothing to them`,
        );
      }
      const detail = noReadyDetail(namespace, this.cache.lookup.slicesFor(namespace, name), svc.selectorless);
      // Unlike kube-proxy, cluster DNS does not fall back to pods that terminate but still serve.
      const dns = headless && / ready/.test(detail) ? ' (a headless name: cluster DNS answers ready endpoints only)' : '';
      throw new NoReadyEndpointError(`${label} has no ready endpoint${detail}${dns}`);
    }
    const key = `${namespace}/${name}:${port}`;
    const seconds = svc.affinitySeconds;
    const picked = this.pickedCheck(svc, port);
    // kube-proxy keeps affinity for ClusterIP Services only: a headless name is the client's own pick.
    if (seconds === undefined || headless || client === undefined) return { label, candidates: this.rotate(key, candidates), stillPicked: picked };
    const affinityKey = `${clientHost(client)} ${key}`;
    const stuck = this.affinity.find(affinityKey, candidates);
    const ordered = stuck
      ? [
          stuck,
          ...this.rotate(
            key,
            candidates.filter((c) => c !== stuck),
          ).slice(0, this.maxCandidates - 1),
        ]
      : this.rotate(key, candidates);
    return { label, candidates: ordered, opened: (c) => this.affinity.remember(affinityKey, c, seconds), stillPicked: picked };
  }

  /** The Service as it is now (the same object: not deleted and made again) would still pick `c`. */
  private pickedCheck(svc: SlimService, port: number): (c: PodPort) => boolean {
    const { namespace, name, uid } = svc;
    return (c) => {
      const now = this.cache.lookup.service(namespace, name);
      if (!now || now.uid !== uid || now.type === 'ExternalName') return false;
      const servicePort = now.headless ? undefined : now.ports.find((p) => p.port === port && p.protocol === 'TCP');
      if (!now.headless && !servicePort) return false;
      return stillPicked(servicePort, this.cache.lookup.slicesFor(namespace, name), c, namespace);
    };
  }

  /** An ExternalName Service: its target in the cluster domain, or refused (external-name.ts). */
  private async externalNamePlan(svc: SlimService, label: string, port: number, client: string | undefined, hops: number): Promise<Plan> {
    return followExternalName(svc, label, this.clusterDomain, hops, async (name, target, next) => {
      const plan = await this.planForName(name, target, port, client, next);
      return { ...plan, label: `${label} → ${plan.label}`, stillPicked: this.aliasCheck(svc, plan.stillPicked) };
    });
  }

  /** The alias still names the same target (an ExternalName retargeted: a switch by DNS), and that target picks `c`. */
  private aliasCheck(svc: SlimService, inner: Plan['stillPicked']): (c: PodPort) => boolean {
    const { namespace, name, uid, externalName } = svc;
    return (c) => {
      const now = this.cache.lookup.service(namespace, name);
      return !!now && now.uid === uid && now.type === 'ExternalName' && now.externalName === externalName && (inner?.(c) ?? true);
    };
  }

  /** Spreads connections: each call starts one further along, and tries at most a few. */
  private rotate<T>(key: string, list: T[]): T[] {
    const start = this.roundRobin.get(key) ?? 0;
    // One entry per Service and port asked for (any port, for a headless Service): bounded, as
    // forgetting where a rotation stood costs nothing but an even spread for a moment.
    if (this.roundRobin.size >= ROUND_ROBIN_MAX && !this.roundRobin.has(key)) this.roundRobin.clear();
    this.roundRobin.set(key, (start + 1) % 1_000_000);
    const n = list.length;
    const out: T[] = [];
    for (let i = 0; i < Math.min(n, this.maxCandidates); i++) out.push(list[(start + i) % n]);
    return out;
  }
}

/**
 * "svc.ns" whose namespace this user may not list nor watches: maybe no namespace at all (`github.com`),
 * maybe one the user's RBAC hides. The `.svc` form asks for the Service whatever the list says.
 */
export function notKnownNamespace(host: string, service: string, namespace: string): string {
  return `${host} is not a cluster name (namespace "${namespace}" is not known; ${service}.${namespace}.svc asks for Service ${service} there even so)`;
}

/** " (names under S: …)" for a name claimed by a route's name or the cluster domain S; else "". */
function formsUnder(reason: string | undefined, suffix: string | undefined): string {
  if (suffix === undefined || (reason !== 'route-name' && reason !== 'cluster-domain')) return '';
  const short = reason === 'route-name' ? `SERVICE.NAMESPACE.${suffix}, ` : '';
  return ` (names under ${suffix}: ${short}SERVICE.NAMESPACE.svc.${suffix}, POD.SERVICE.NAMESPACE.svc.${suffix}, A-B-C-D.NAMESPACE.pod.${suffix})`;
}

/** A Service port asked for that the Service lacks, or has for UDP or SCTP only (the proxy carries TCP). */
export function noTcpPort(svc: SlimService, port: number): ConnectionRefusedError {
  const what = `Service ${svc.namespace}/${svc.name}`;
  const other = [...new Set(svc.ports.filter((p) => p.port === port).map((p) => p.protocol))];
  if (other.length > 0) return new ConnectionRefusedError(`${what} has port ${port} for ${other.join(' and ')} only; the proxy carries TCP streams`);
  const ports = svc.ports.map((p) => (p.name ? `${p.port}/${p.name}` : String(p.port)) + (p.protocol === 'TCP' ? '' : ` ${p.protocol}`)).join(', ');
  return new ConnectionRefusedError(`${what} has no TCP port ${port} (ports: ${ports || 'none'})`);
}

function podPlan(pod: PodTarget, port: number): Plan {
  const { namespace, name, uid } = pod;
  return { label: `pod ${namespace}/${name}:${port}`, candidates: [{ namespace, pod: name, port, ...(uid ? { uid } : {}) }] };
}
