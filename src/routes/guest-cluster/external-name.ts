// An ExternalName Service is a CNAME to its externalName. One in the cluster domain (an alias of a
// Service in another namespace) is followed, as CoreDNS answers it for in-cluster clients, at most
// as many in a row as CoreDNS follows CNAMEs (plugin/backend_lookup.go); any other name is outside
// the cluster, reached from the cluster's network, which neither route kind dials: refused, naming it.
import type { SlimService } from '../../cluster/slim.js';
import { HostUnreachableError, ProxyError, UnsupportedTargetError, withMessagePrefix } from '../../core/errors.js';
import { parseClusterName, parseZoneName, type ClusterName } from './names.js';

const MAX_EXTERNAL_NAME_HOPS = 8;

/** `follow` resolves the target name as the route resolves any name; `hops`: ExternalNames followed to get here. */
export async function followExternalName<T>(
  svc: SlimService,
  label: string,
  clusterDomain: string,
  hops: number,
  follow: (name: ClusterName, host: string, hops: number) => Promise<T>,
): Promise<T> {
  const target = svc.externalName ?? '';
  const name = parseZoneName(target, clusterDomain);
  if (!name) {
    // web.shop.svc, web: short forms the proxy takes as cluster names, though no client follows
    // them as a CNAME target. (A two-label name may as well be example.com.)
    const short = parseClusterName(target, clusterDomain, '');
    const why =
      short && !(short.kind === 'service' && short.namespaceNeedsCheck)
        ? `not a full name under ${clusterDomain}, so no client follows it; the proxy resolves ${target} as a cluster name: connect to it`
        : 'outside the cluster; connect to that name instead';
    throw new UnsupportedTargetError(`${label} is an ExternalName Service for ${target}, ${why}`);
  }
  if (hops >= MAX_EXTERNAL_NAME_HOPS) throw new HostUnreachableError(`${label}: more than ${MAX_EXTERNAL_NAME_HOPS} ExternalName Services in a row (a loop?)`);
  try {
    return await follow(name, target, hops + 1);
  } catch (err) {
    // The first alias names the chain; deeper ones would repeat it.
    throw err instanceof ProxyError && hops === 0 ? withMessagePrefix(err, `${label} is an ExternalName Service for ${target}: `) : err;
  }
}
