// Server-side printing (meta.k8s.io Table) for `kubectl get`, with the columns of
// pkg/printers/internalversion/printers.go and ages formatted like
// staging/src/k8s.io/apimachinery/pkg/util/duration/duration.go HumanDuration.
import type { KObject, Resource } from './store.js';

export interface TableColumn {
  name: string;
  type: string;
  format: string;
  description: string;
  priority: number;
}

const col = (name: string, description: string, priority = 0, type = 'string', format = ''): TableColumn => ({ name, type, format, description, priority });
const NAME = col(
  'Name',
  'Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names',
  0,
  'string',
  'name',
);
const AGE = col(
  'Age',
  'CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata',
);

export const COLUMNS: Record<Resource, TableColumn[]> = {
  namespaces: [NAME, col('Status', 'The status of the namespace'), AGE],
  services: [
    NAME,
    col('Type', 'The type of the service'),
    col('Cluster-IP', 'The cluster IP of the service'),
    col('External-IP', 'The external IP of the service'),
    col('Port(s)', 'The ports of the service'),
    AGE,
    col('Selector', 'The selector of the service', 1),
  ],
  pods: [
    NAME,
    col('Ready', 'The aggregate readiness state of this pod for accepting traffic.'),
    col('Status', 'The aggregate status of the containers in this pod.'),
    col('Restarts', 'The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.'),
    AGE,
    col('IP', 'The IP address assigned to the pod', 1),
    col('Node', 'The name of the node to which the pod is assigned', 1),
    col('Nominated Node', 'The name of the node on which the pod is nominated to run', 1),
    col('Readiness Gates', 'The readiness gates associated with this pod', 1),
  ],
  endpoints: [NAME, col('Endpoints', 'The endpoints of the service'), AGE],
  endpointslices: [
    NAME,
    col('AddressType', 'The type of address'),
    col('Ports', 'The ports of the endpoint slice'),
    col('Endpoints', 'The endpoints of the endpoint slice'),
    AGE,
  ],
  ingresses: [
    NAME,
    col('Class', 'The name of the IngressClass resource that should be used for additional configuration'),
    col('Hosts', 'Hosts that incoming requests are matched against before the ingress rule'),
    col('Address', 'Address is a list containing ingress points for the load-balancer'),
    col('Ports', 'Ports of TLS configurations that open'),
    AGE,
  ],
  ingressclasses: [
    NAME,
    col('Controller', 'Controller that is in charge of the ingress class'),
    col('Parameters', 'A reference to a resource with additional parameters'),
    AGE,
  ],
  // openshift-apiserver pkg/route/printers/internalversion/printers.go
  routes: [
    NAME,
    col('Host/Port', 'Host is an alias/DNS that points to the service. Can be host or host:port. host and port are combined to follow the net/url URL struct'),
    col('Path', 'Path that the router watches for, to route traffic for to the service.'),
    col('Services', 'The name of the service that this route points to'),
    col('Port', 'The target port on pods selected by the service this route points to'),
    col('Termination', 'Indicates termination type.'),
    col('Wildcard', 'Wildcard policy allows a user to specify a wildcard policy for a route.'),
  ],
};

export function humanDuration(ms: number): string {
  const seconds = Math.floor(ms / 1000);
  if (seconds < -1) return '<invalid>';
  if (seconds < 0) return '0s';
  if (seconds < 60 * 2) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 10) {
    const s = seconds % 60;
    return s === 0 ? `${minutes}m` : `${minutes}m${s}s`;
  }
  if (minutes < 60 * 3) return `${minutes}m`;
  const hours = Math.floor(minutes / 60);
  if (hours < 8) {
    const m = minutes % 60;
    return m === 0 ? `${hours}h` : `${hours}h${m}m`;
  }
  if (hours < 48) return `${hours}h`;
  if (hours < 24 * 8) {
    const h = hours % 24;
    return h === 0 ? `${Math.floor(hours / 24)}d` : `${Math.floor(hours / 24)}d${h}h`;
  }
  if (hours < 24 * 365 * 2) return `${Math.floor(hours / 24)}d`;
  return `${Math.floor(hours / 24 / 365)}y`;
}

function age(o: KObject): string {
  const t = o.metadata.creationTimestamp;
  return t ? humanDuration(Date.now() - Date.parse(t)) : '<unknown>';
}

function listWithMore(items: string[], max = 3): string {
  if (items.length === 0) return '<none>';
  const shown = items.slice(0, max).join(',');
  return items.length > max ? `${shown} + ${items.length - max} more...` : shown;
}

function cells(resource: Resource, obj: KObject): unknown[] {
  const o = obj as Record<string, any>;
  switch (resource) {
    case 'namespaces':
      return [o.metadata.name, o.status?.phase ?? 'Active', age(obj)];
    case 'services': {
      const spec = o.spec ?? {};
      const type = spec.type ?? 'ClusterIP';
      const clusterIP = spec.clusterIP || '<none>';
      const external = type === 'ExternalName' ? spec.externalName : '<none>';
      const ports = (spec.ports ?? []).map((p: any) => (p.nodePort ? `${p.port}:${p.nodePort}/${p.protocol}` : `${p.port}/${p.protocol}`));
      const sel = spec.selector
        ? Object.keys(spec.selector)
            .sort()
            .map((k) => `${k}=${spec.selector[k]}`)
            .join(',')
        : '<none>';
      return [o.metadata.name, type, clusterIP, external, ports.length ? ports.join(',') : '<none>', age(obj), sel];
    }
    case 'pods': {
      const statuses: any[] = o.status?.containerStatuses ?? [];
      const total = (o.spec?.containers ?? []).length;
      const ready = statuses.filter((s) => s.ready).length;
      let reason: string = o.status?.phase ?? 'Unknown';
      if (o.status?.reason) reason = o.status.reason;
      const waiting = statuses.find((s) => s.state?.waiting?.reason);
      if (waiting) reason = waiting.state.waiting.reason;
      if (o.metadata.deletionTimestamp) reason = 'Terminating';
      const restarts = statuses.reduce((n, s) => n + (s.restartCount ?? 0), 0);
      return [
        o.metadata.name,
        `${ready}/${total}`,
        reason,
        String(restarts),
        age(obj),
        o.status?.podIP || '<none>',
        o.spec?.nodeName || '<none>',
        '<none>',
        '<none>',
      ];
    }
    case 'endpoints': {
      const addrs: string[] = [];
      for (const s of o.subsets ?? []) {
        for (const a of s.addresses ?? []) for (const p of s.ports ?? [{ port: undefined }]) addrs.push(p.port ? `${a.ip}:${p.port}` : a.ip);
      }
      return [o.metadata.name, listWithMore(addrs), age(obj)];
    }
    case 'endpointslices': {
      const ports = o.ports ? (o.ports as any[]).map((p) => String(p.port)).join(',') : '<unset>';
      const addrs: string[] = [];
      for (const e of o.endpoints ?? []) addrs.push(...(e.addresses ?? []));
      return [o.metadata.name, o.addressType, ports || '<unset>', addrs.length ? listWithMore(addrs) : '<unset>', age(obj)];
    }
    case 'ingresses': {
      // pkg/printers/internalversion/printers.go printIngress / formatHosts (at most 4 shown).
      const hosts = ((o.spec?.rules ?? []) as any[]).map((r) => r.host || '*');
      const lb = ((o.status?.loadBalancer?.ingress ?? []) as any[]).map((i) => i.ip || i.hostname).filter(Boolean);
      return [
        o.metadata.name,
        o.spec?.ingressClassName ?? '<none>',
        listWithMore(hosts.length ? hosts : ['*'], 4),
        lb.join(','),
        o.spec?.tls?.length ? '80, 443' : '80',
        age(obj),
      ];
    }
    case 'ingressclasses':
      return [o.metadata.name, o.spec?.controller ?? '', '<none>', age(obj)];
    case 'routes': {
      const spec = o.spec ?? {};
      const port = spec.port?.targetPort;
      return [
        o.metadata.name,
        spec.host ?? '',
        spec.path ?? '',
        spec.to?.name ?? '',
        port === undefined ? '<all>' : String(port),
        spec.tls?.termination ?? '',
        spec.wildcardPolicy ?? 'None',
      ];
    }
  }
}

export type IncludeObject = 'None' | 'Metadata' | 'Object';

export function toTable(
  resource: Resource,
  objs: KObject[],
  resourceVersion: string,
  tableVersion: string,
  include: IncludeObject,
  withColumns = true,
): object {
  return {
    kind: 'Table',
    apiVersion: `meta.k8s.io/${tableVersion}`,
    metadata: { resourceVersion },
    columnDefinitions: withColumns ? COLUMNS[resource] : [],
    rows: objs.map((obj) => {
      const row: Record<string, unknown> = { cells: cells(resource, obj) };
      if (include === 'Metadata') {
        row.object = { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: obj.metadata };
      } else if (include === 'Object') {
        row.object = obj;
      }
      return row;
    }),
  };
}
