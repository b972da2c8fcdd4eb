// The Kubernetes objects the tests and benches apply to the real test bed (test/real-cluster: the
// node stand-in runs the images proxyout/http, proxyout/echo, proxyout/bulk, proxyout/none and those of apps.go), as
// small functions returning plain objects; `manifests` renders them as one YAML stream for
// `kubectl apply -f -`. Namespace shop unless told otherwise.
import yaml from 'js-yaml';

export interface ContainerPort {
  name?: string;
  containerPort: number;
}

export interface Container {
  name: string;
  image: string;
  ports: ContainerPort[];
  env?: Array<{ name: string; value: string }>;
}

export interface ServicePort {
  name?: string;
  port: number;
  targetPort?: number | string;
}

/** What a Pod, or the template of a Deployment or StatefulSet, runs. Labels default to {app: name}. */
export interface PodShape {
  name: string;
  namespace?: string;
  labels?: Record<string, string>;
  /** Read by the node stand-in: proxyout.test/ready, proxyout.test/stop-delay. */
  annotations?: Record<string, string>;
  containers: Container[];
  /** Other pod spec fields as they are (hostname, nodeSelector, terminationGracePeriodSeconds…). */
  spec?: Record<string, unknown>;
}

/** A proxyout/http container answering `pod=… namespace=… port=…` on its port (unnamed with portName null). */
export function httpContainer(name: string, containerPort = 8080, portName: string | null = 'http'): Container {
  return { name, image: 'proxyout/http', ports: [portName === null ? { containerPort } : { name: portName, containerPort }] };
}

/** A proxyout/bulk container sending `bytes` on each connection. */
export function bulkContainer(name: string, bytes: number, containerPort: number, portName?: string): Container {
  const port = portName === undefined ? { containerPort } : { name: portName, containerPort };
  return { name, image: 'proxyout/bulk', env: [{ name: 'BULK_BYTES', value: String(bytes) }], ports: [port] };
}

export function namespace(name: string): object {
  return { apiVersion: 'v1', kind: 'Namespace', metadata: { name } };
}

function metadata(name: string, ns = 'shop', extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { name, namespace: ns, ...extra };
}

function podSpec(p: PodShape): Record<string, unknown> {
  return { ...p.spec, containers: p.containers };
}

function template(p: PodShape, labels: Record<string, string>): object {
  return { metadata: { labels, ...(p.annotations && { annotations: p.annotations }) }, spec: podSpec(p) };
}

export function pod(p: PodShape): object {
  const labels = p.labels ?? { app: p.name };
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: metadata(p.name, p.namespace, { labels, ...(p.annotations && { annotations: p.annotations }) }),
    spec: podSpec(p),
  };
}

export function deployment(p: PodShape & { replicas: number; strategy?: object }): object {
  const labels = p.labels ?? { app: p.name };
  const spec = { replicas: p.replicas, ...(p.strategy && { strategy: p.strategy }), selector: { matchLabels: labels }, template: template(p, labels) };
  return { apiVersion: 'apps/v1', kind: 'Deployment', metadata: metadata(p.name, p.namespace), spec };
}

/** Pods started in parallel, named <name>-0, <name>-1… under the headless Service serviceName. */
export function statefulSet(p: PodShape & { replicas: number; serviceName: string }): object {
  const labels = p.labels ?? { app: p.name };
  const spec = {
    replicas: p.replicas,
    podManagementPolicy: 'Parallel',
    serviceName: p.serviceName,
    selector: { matchLabels: labels },
    template: template(p, labels),
  };
  return { apiVersion: 'apps/v1', kind: 'StatefulSet', metadata: metadata(p.name, p.namespace), spec };
}

/** A Service; selector defaults to {app: name}; headless with clusterIP 'None'. */
export function service(
  name: string,
  s: {
    namespace?: string;
    selector?: Record<string, string>;
    clusterIP?: string;
    ports: ServicePort[];
    sessionAffinity?: 'ClientIP';
    /** A dual-stack bed's (startRealCluster({dualStack})) families: SingleStack, PreferDualStack, RequireDualStack. */
    ipFamilyPolicy?: string;
    ipFamilies?: Array<'IPv4' | 'IPv6'>;
  },
): object {
  const spec = {
    ...(s.clusterIP && { clusterIP: s.clusterIP }),
    ...(s.ipFamilyPolicy && { ipFamilyPolicy: s.ipFamilyPolicy }),
    ...(s.ipFamilies && { ipFamilies: s.ipFamilies }),
    ...(s.sessionAffinity && { sessionAffinity: s.sessionAffinity }),
    selector: s.selector ?? { app: name },
    ports: s.ports,
  };
  return { apiVersion: 'v1', kind: 'Service', metadata: metadata(name, s.namespace), spec };
}

/** The web Deployment most tests reach: proxyout/http on the named port http = 8080. */
export function webDeployment(replicas: number): object {
  return deployment({ name: 'web', replicas, containers: [httpContainer('web')] });
}

/** A Service `name` in front of the web pods: port 80 → named targetPort http. */
export function webService(name = 'web'): object {
  return service(name, { selector: { app: 'web' }, ports: [{ name: 'http', port: 80, targetPort: 'http' }] });
}

/** The multi workload's containers: proxyout/http on ports web 8080 and alt 9090, proxyout/echo on echo 9000. */
export function multiContainers(httpName: string): Container[] {
  return [
    {
      name: httpName,
      image: 'proxyout/http',
      ports: [
        { name: 'web', containerPort: 8080 },
        { name: 'alt', containerPort: 9090 },
      ],
    },
    { name: 'echo', image: 'proxyout/echo', ports: [{ name: 'echo', containerPort: 9000 }] },
  ];
}

/** The multi Service: 80 → web, 8090 → 9090, 7000 → echo. */
export function multiService(): object {
  return service('multi', {
    ports: [
      { name: 'web', port: 80, targetPort: 'web' },
      { name: 'alt', port: 8090, targetPort: 9090 },
      { name: 'echo', port: 7000, targetPort: 'echo' },
    ],
  });
}

/** One YAML stream of the objects, for `kubectl apply -f -`. */
export function manifests(...objects: object[]): string {
  return objects.map((o) => yaml.dump(o, { lineWidth: -1 })).join('---\n');
}
