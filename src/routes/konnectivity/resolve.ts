// The addresses a konnectivity route dials, from the guest cluster's watch cache (the same cache a
// cluster route's Resolver reads). The agent dials inside the guest's network, so a Service is its
// ClusterIP (the guest's kube-proxy balances over ready endpoints, selector-less Services work
// too) and a pod is its Pod IP; a headless Service is its ready endpoints' Pod IPs; an ExternalName
// Service for a name in the cluster domain is what that name is. The port is the client's:
// kube-proxy maps a Service port to its targetPort. Names never go to the server.
import type { SlimPod, SlimService } from '../../cluster/slim.js';
import { HostUnreachableError, NoReadyEndpointError, NotAllowedError, UpstreamApiError, ProxyError, errorMessage } from '../../core/errors.js';
import { ApiStatusError } from '../../cluster/api.js';
import { normalizeIp } from '../../core/ip.js';
import { dashedIp, noSuchNamespace, type ClusterName } from '../guest-cluster/names.js';
import { followExternalName } from '../guest-cluster/external-name.js';
import { HOST_NETWORK_FLAG, noTcpPort, notKnownNamespace, type ResolverCache } from '../cluster/resolver.js';
import type { KonnectivityResolve, KonnectivityTarget } from './streams.js';
import { withCanI } from '../../cluster/can-i.js';

export interface KonnectivityResolveOptions {
  /** As for cluster routes: an IP only hostNetwork pods have is a node's, refused unless allowed. */
  allowHostNetworkPods?: boolean;
  /** The guest's DNS domain (default cluster.local): an ExternalName Service in it is followed. */
  clusterDomain?: string;
}

/**
 * A `resolve` for KonnectivityRoute over a cluster's watch cache. IPs the table gave the route by
 * one of its `cidrs` are dialled as they are (the user said the block is the guest's); others
 * must be a ClusterIP or Pod IP the cache knows.
 */
export function konnectivityResolve(cache: ResolverCache, options: KonnectivityResolveOptions = {}): KonnectivityResolve {
  const lookup = () => cache.lookup;
  const clusterDomain = options.clusterDomain ?? 'cluster.local';

  const servicePort = (svc: SlimService, port: number): void => {
    if (svc.ports.some((p) => p.port === port && p.protocol === 'TCP')) return;
    throw noTcpPort(svc, port);
  };

  const serviceTargets = (svc: SlimService, port: number): KonnectivityTarget[] => {
    const label = `Service ${svc.namespace}/${svc.name}`;
    if (!svc.headless && svc.clusterIPs[0]) {
      servicePort(svc, port);
      return [{ ip: svc.clusterIPs[0], port }];
    }
    // Headless: the ready endpoints themselves, port unchanged (as cluster DNS would answer). Ready
    // alone, as CoreDNS (endpointsliceReady): a pod being deleted is ready only under
    // publishNotReadyAddresses, whose DNS publishes it until it is gone.
    const targets: KonnectivityTarget[] = [];
    for (const slice of lookup().slicesFor(svc.namespace, svc.name)) {
      for (const ep of slice.endpoints) {
        if (ep.ready === false || !ep.address) continue;
        targets.push({ ip: ep.address, port });
      }
    }
    if (targets.length === 0) throw new NoReadyEndpointError(`${label} (headless) has no ready endpoint`);
    return targets;
  };

  const findPod = async (ip: string, namespace?: string): Promise<SlimPod | undefined> => {
    try {
      return await cache.findPodByIp(ip, namespace);
    } catch (err) {
      if (err instanceof ProxyError) throw err;
      throw new UpstreamApiError(`cannot look up the pod with IP ${ip}: ${errorMessage(err)}`, { cause: err });
    }
  };

  const ipTargets = async (ip: string, port: number, byCidr: boolean, known?: SlimPod): Promise<KonnectivityTarget[]> => {
    const svc = lookup().serviceByIp(ip);
    if (svc) {
      servicePort(svc, port);
      return [{ ip, port }];
    }
    const pod = known ?? (byCidr ? undefined : await findPod(ip));
    if (pod?.hostNetwork && !options.allowHostNetworkPods) {
      throw new NotAllowedError(
        `${ip} is a node IP (only hostNetwork pods such as ${pod.namespace}/${pod.name} have it); refused unless the proxy runs with ${HOST_NETWORK_FLAG}`,
      );
    }
    if (pod || byCidr) return [{ ip, port }];
    throw new NotAllowedError(`${ip} is neither a Service ClusterIP nor a running Pod IP in the cluster`);
  };

  /** An ExternalName Service: its target in the cluster domain, or refused (external-name.ts). */
  const externalNameTargets = (svc: SlimService, port: number, hops: number): Promise<KonnectivityTarget[]> =>
    followExternalName(svc, `Service ${svc.namespace}/${svc.name}`, clusterDomain, hops, (name, target, next) => nameTargets(name, target, port, next));

  const nameTargets = async (name: ClusterName, host: string, port: number, hops: number): Promise<KonnectivityTarget[]> => {
    if (cache.namespaceExists(name.namespace) === false) {
      if (name.kind === 'service' && name.namespaceNeedsCheck) throw new NotAllowedError(noSuchNamespace(host, name.service, name.namespace));
      throw new HostUnreachableError(`${host}: there is no namespace "${name.namespace}"`);
    }
    try {
      await cache.ensureNamespace(name.namespace);
    } catch (err) {
      if (err instanceof ApiStatusError && err.statusCode === 403)
        throw new NotAllowedError(`not allowed to watch namespace "${name.namespace}": ${withCanI(err.message, name.namespace)}`, { cause: err });
      throw new UpstreamApiError(`cannot watch namespace "${name.namespace}": ${errorMessage(err)}`, { cause: err });
    }
    let targets: KonnectivityTarget[];
    if (name.kind === 'service') {
      const svc = lookup().service(name.namespace, name.service);
      if (!svc) {
        if (name.namespaceNeedsCheck && cache.namespaceExists(name.namespace) !== true)
          throw new NotAllowedError(notKnownNamespace(host, name.service, name.namespace));
        throw new HostUnreachableError(`no Service "${name.service}" in namespace "${name.namespace}"`);
      }
      targets = svc.type === 'ExternalName' ? await externalNameTargets(svc, port, hops) : serviceTargets(svc, port);
    } else if (name.kind === 'pod-hostname') {
      // Headless DNS: the ready endpoint of that Service whose hostname it is (its address is the
      // Pod IP); not-ready addresses are not published (DNS specification §2.4.1), as in a cluster route.
      // One without a hostname is named by its address, dashed (CoreDNS), headless Service or not.
      const dashed = dashedIp(name.hostname);
      const byAddress = dashed !== undefined ? normalizeIp(dashed) : undefined;
      // Every such endpoint: pods of a Deployment whose template sets the hostname share it, and
      // CoreDNS answers each.
      const addresses = lookup()
        .slicesFor(name.namespace, name.service)
        .flatMap((slice) => slice.endpoints)
        .filter((e) => (e.hostname === name.hostname || (byAddress !== undefined && e.hostname === undefined && e.address === byAddress)) && e.ready !== false)
        .map((e) => e.address)
        .filter((a): a is string => !!a);
      if (addresses.length === 0)
        throw new HostUnreachableError(`no running pod with hostname "${name.hostname}" under Service ${name.namespace}/${name.service}`);
      targets = [...new Set(addresses)].map((ip) => ({ ip, port }));
    } else {
      const pod = await findPod(name.ip, name.namespace);
      if (!pod || pod.namespace !== name.namespace) throw new HostUnreachableError(`no running pod with IP ${name.ip} in namespace "${name.namespace}"`);
      targets = await ipTargets(name.ip, port, false, pod);
    }
    cache.noteServed(name.namespace);
    return targets;
  };

  return async (claim, port) => {
    if (claim.isIp) return ipTargets(claim.host, port, claim.reason === 'cidr');
    if (!claim.name)
      throw new HostUnreachableError(
        `${claim.host} does not name a Service or pod of the cluster (konnectivity routes dial addresses the cluster's cache knows)`,
      );
    return nameTargets(claim.name, claim.host, port, 0);
  };
}
