// A ResolverCache over a ClusterIndex built from plain Kubernetes objects, slimmed as the
// informers slim them: for unit tests of the resolvers (no API server, pods "watched").
import type { V1EndpointSlice, V1Pod, V1Service } from '@kubernetes/client-node';
import { ClusterIndex, type ObjectSource } from '../../src/cluster/index.js';
import { slimPod, slimService, slimSlice, type SlimPod, type SlimService, type SlimSlice } from '../../src/cluster/slim.js';
import type { ResolverCache } from '../../src/routes/cluster/resolver.js';

export function objectSource(svcs: V1Service[], slcs: V1EndpointSlice[], pds: V1Pod[]): ObjectSource {
  return {
    services: { list: () => svcs.map((o) => slimService(o) as SlimService) },
    slices: { list: () => slcs.map((o) => slimSlice(o) as SlimSlice) },
    pods: { list: () => pds.map((o) => slimPod(o) as SlimPod) },
  };
}

/** The cache parts a resolver reads, answering from `index`; the rest as given. */
export function indexCache(
  index: ClusterIndex,
  rest: Pick<ResolverCache, 'defaultNamespace' | 'namespaceExists' | 'ensureNamespace' | 'noteServed'>,
): ResolverCache {
  return {
    lookup: index,
    ...rest,
    // As a cache that watches pods answers (methods: `{ ...cache, lookup }` copies use their own index).
    knowsIp(ip: string) {
      return this.lookup.knowsIp(ip);
    },
    async findPodByIp(ip: string) {
      return this.lookup.podByIp(ip);
    },
  };
}
