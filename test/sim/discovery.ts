// Legacy (non-aggregated) discovery documents: /version, /api, /apis, /api/v1,
// /apis/discovery.k8s.io/v1, /apis/networking.k8s.io/v1 (Ingresses only) and, when switched on,
// OpenShift's /apis/route.openshift.io/v1, shaped like staging/src/k8s.io/apiserver/pkg/endpoints/discovery/
// {legacy.go,root.go,group.go,version.go}. The simulator does not implement aggregated discovery
// (apidiscovery.k8s.io/v2): it answers the aggregated Accept with plain application/json, which
// client-go's discovery client takes as "server without aggregated discovery" and falls back
// (staging/src/k8s.io/client-go/discovery/discovery_client.go).
import { RESOURCES, type ResourceInfo } from './store.js';
import { authorizationGroup } from './access-review.js';

/** As the real-cluster test bed's kube-apiserver answers (built with gitVersion set, docs/real-cluster.md). */
export const SIM_VERSION = {
  major: '1',
  minor: '37',
  emulationMajor: '1',
  emulationMinor: '37',
  minCompatibilityMajor: '1',
  minCompatibilityMinor: '36',
  gitVersion: 'v1.37.2',
  gitCommit: '',
  gitTreeState: 'clean',
  buildDate: '1970-01-01T00:00:00Z',
  goVersion: 'go1.26.8',
  compiler: 'gc',
  platform: 'linux/amd64',
};

const READ_WRITE_VERBS = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'];

function apiResource(info: ResourceInfo): Record<string, unknown> {
  const r: Record<string, unknown> = {
    name: info.resource,
    singularName: info.singular,
    namespaced: info.namespaced,
    kind: info.kind,
    verbs: info.resource === 'namespaces' ? ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'] : READ_WRITE_VERBS,
  };
  if (info.shortNames.length) r.shortNames = info.shortNames;
  if (info.categories.length) r.categories = info.categories;
  r.storageVersionHash = Buffer.from(info.kind).toString('base64').slice(0, 11);
  return r;
}

export function apiVersions(serverAddress: string): object {
  return {
    kind: 'APIVersions',
    versions: ['v1'],
    serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress }],
  };
}

export function coreV1Resources(): object {
  const resources: object[] = [];
  for (const info of [RESOURCES.endpoints, RESOURCES.namespaces, RESOURCES.pods, RESOURCES.services]) {
    resources.push(apiResource(info));
    if (info.resource === 'namespaces') {
      resources.push({ name: 'namespaces/status', singularName: '', namespaced: false, kind: 'Namespace', verbs: ['get', 'patch', 'update'] });
    }
    if (info.resource === 'pods') {
      resources.push({ name: 'pods/portforward', singularName: '', namespaced: true, kind: 'PodPortForwardOptions', verbs: ['create', 'get'] });
      resources.push({ name: 'pods/status', singularName: '', namespaced: true, kind: 'Pod', verbs: ['get', 'patch', 'update'] });
    }
    if (info.resource === 'services') {
      resources.push({ name: 'services/status', singularName: '', namespaced: true, kind: 'Service', verbs: ['get', 'patch', 'update'] });
    }
  }
  return { kind: 'APIResourceList', groupVersion: 'v1', resources };
}

/** An API group with one version, v1, and the resources it serves. */
export interface SimApiGroup {
  name: string;
  resources: ResourceInfo[];
}

export const DISCOVERY_GROUP: SimApiGroup = { name: 'discovery.k8s.io', resources: [RESOURCES.endpointslices] };
export const NETWORKING_GROUP: SimApiGroup = { name: 'networking.k8s.io', resources: [RESOURCES.ingresses, RESOURCES.ingressclasses] };
export const ROUTE_GROUP: SimApiGroup = { name: 'route.openshift.io', resources: [RESOURCES.routes] };

function groupEntry(g: SimApiGroup): object {
  const v = { groupVersion: `${g.name}/v1`, version: 'v1' };
  return { name: g.name, versions: [v], preferredVersion: v };
}

export function apiGroupList(groups: SimApiGroup[]): object {
  // authorization.k8s.io serves SelfSubjectAccessReview only (access-review.ts).
  return { kind: 'APIGroupList', apiVersion: 'v1', groups: [...groups.map(groupEntry), authorizationGroup()] };
}

export function groupDocument(g: SimApiGroup): object {
  return { kind: 'APIGroup', apiVersion: 'v1', ...groupEntry(g) };
}

export function groupV1Resources(g: SimApiGroup): object {
  const resources: object[] = [];
  for (const info of g.resources) {
    resources.push(apiResource(info));
    // Ingresses and Routes have a status subresource (the controller writes the load balancer address).
    if (info.resource === 'ingresses' || info.resource === 'routes') {
      resources.push({ name: `${info.resource}/status`, singularName: '', namespaced: true, kind: info.kind, verbs: ['get', 'patch', 'update'] });
    }
  }
  return { kind: 'APIResourceList', apiVersion: 'v1', groupVersion: `${g.name}/v1`, resources };
}
