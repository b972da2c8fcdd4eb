// Big clusters of realistic objects, fast: what a Deployment-made pod looks like in a real cluster
// (managedFields of the controller manager and the kubelet, an owner ReplicaSet, 2–3 containers with
// probes, env, resources and mounts, the projected service-account volume, tolerations, five
// conditions, container statuses): 5–10 KB of JSON per pod, as `kubectl get pod -o json` shows.
// Services and their EndpointSlices as the controllers write them. Loaded with Store.bulkLoad:
// objects of one Service share their unchanging parts (spec, managedFields…), so 50,000 pods cost
// the simulator little memory while every one serializes in full.
import { randomUUID } from 'node:crypto';
import { itemJson, type KObject } from './store.js';
import type { SimCluster } from './cluster.js';
import { namespaceObject } from './objects.js';
import { MANAGED_BY_LABEL, SERVICE_NAME_LABEL, SLICE_CONTROLLER } from './controllers.js';

export interface BigClusterOptions {
  pods: number;
  services: number;
  namespaces?: number;
  nodes?: number;
}

export interface BigCluster {
  /** Mean JSON size of a pod, a Service, an EndpointSlice (bytes). */
  jsonBytes: { pod: number; service: number; slice: number };
  /** "svc-N.team-M" for each Service, with its ClusterIP and pods' IPs (for look-ups in benches). */
  services: Array<{ namespace: string; name: string; clusterIP: string; podIPs: string[] }>;
  podIPs: string[];
}

const AT = '2026-11-20T08:15:30Z';
const ipOf = (base: number, i: number) => `${base >>> 24}.${(base >>> 16) & 255}.${((i + 2) >>> 8) & 255}.${(i + 2) & 255}`;
const POD_BASE = (10 << 24) | (244 << 16);
const SVC_BASE = (10 << 24) | (96 << 16);
const hex = (n: number, len: number) => n.toString(16).padStart(len, '0').slice(-len);

function fieldsV1(keys: string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of keys) out[k] = {};
  return out;
}

function containers(app: string, count: number): Array<Record<string, unknown>> {
  const out: Array<Record<string, unknown>> = [];
  for (let c = 0; c < count; c++) {
    const main = c === 0;
    out.push({
      name: main ? app : c === 1 ? 'istio-proxy' : 'log-shipper',
      image: main ? `registry.example.com/teams/${app}:1.${c}.7` : c === 1 ? 'docker.io/istio/proxyv2:1.24.1' : 'fluent/fluent-bit:3.1.9',
      args: main ? ['--port=8080', '--metrics-port=9090', '--log-format=json'] : ['proxy', 'sidecar', '--domain', '$(POD_NAMESPACE).svc.cluster.local'],
      ports: main
        ? [
            { name: 'http', containerPort: 8080, protocol: 'TCP' },
            { name: 'metrics', containerPort: 9090, protocol: 'TCP' },
          ]
        : c === 1
          ? [{ name: 'http-envoy-prom', containerPort: 15090, protocol: 'TCP' }]
          : [],
      env: [
        { name: 'POD_NAME', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.name' } } },
        { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } } },
        { name: 'GOMAXPROCS', valueFrom: { resourceFieldRef: { containerName: main ? app : 'istio-proxy', divisor: '0', resource: 'limits.cpu' } } },
        { name: 'LOG_LEVEL', value: 'info' },
      ],
      resources: { limits: { cpu: '1', memory: '512Mi' }, requests: { cpu: '100m', memory: '128Mi' } },
      livenessProbe: {
        httpGet: { path: '/healthz', port: main ? 8080 : 15021, scheme: 'HTTP' },
        initialDelaySeconds: 10,
        timeoutSeconds: 1,
        periodSeconds: 10,
        successThreshold: 1,
        failureThreshold: 3,
      },
      readinessProbe: {
        httpGet: { path: '/ready', port: main ? 8080 : 15021, scheme: 'HTTP' },
        timeoutSeconds: 1,
        periodSeconds: 5,
        successThreshold: 1,
        failureThreshold: 3,
      },
      volumeMounts: [
        { name: 'kube-api-access', readOnly: true, mountPath: '/var/run/secrets/kubernetes.io/serviceaccount' },
        { name: 'config', mountPath: '/etc/app' },
      ],
      terminationMessagePath: '/dev/termination-log',
      terminationMessagePolicy: 'File',
      imagePullPolicy: 'IfNotPresent',
      securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] }, runAsNonRoot: true, runAsUser: 1000 },
    });
  }
  return out;
}

/** The parts every pod of one Service shares (never changed: Store.bulkLoad objects are read-only). */
function podTemplate(app: string, namespace: string, node: string, containerCount: number) {
  const names = containers(app, containerCount).map((c) => c.name as string);
  const spec = {
    volumes: [
      {
        name: 'kube-api-access',
        projected: {
          sources: [
            { serviceAccountToken: { expirationSeconds: 3607, path: 'token' } },
            { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
            { downwardAPI: { items: [{ path: 'namespace', fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } }] } },
          ],
          defaultMode: 420,
        },
      },
      { name: 'config', configMap: { name: `${app}-config`, defaultMode: 420 } },
    ],
    containers: containers(app, containerCount),
    restartPolicy: 'Always',
    terminationGracePeriodSeconds: 30,
    dnsPolicy: 'ClusterFirst',
    serviceAccountName: app,
    serviceAccount: app,
    nodeName: node,
    securityContext: { fsGroup: 1000, seccompProfile: { type: 'RuntimeDefault' } },
    schedulerName: 'default-scheduler',
    tolerations: [
      { key: 'node.kubernetes.io/not-ready', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 },
      { key: 'node.kubernetes.io/unreachable', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 },
    ],
    priority: 0,
    enableServiceLinks: true,
    preemptionPolicy: 'PreemptLowerPriority',
  };
  const managedFields = [
    {
      manager: 'kube-controller-manager',
      operation: 'Update',
      apiVersion: 'v1',
      time: AT,
      fieldsType: 'FieldsV1',
      fieldsV1: {
        'f:metadata': {
          'f:generateName': {},
          'f:labels': fieldsV1(['.', 'f:app', 'f:pod-template-hash', 'f:app.kubernetes.io/name', 'f:app.kubernetes.io/version']),
          'f:ownerReferences': { '.': {}, 'k:{"uid":"0"}': {} },
        },
        'f:spec': Object.fromEntries(
          names.map((n) => [
            `k:{"name":"${n}"}`,
            fieldsV1([
              '.',
              'f:args',
              'f:env',
              'f:image',
              'f:imagePullPolicy',
              'f:livenessProbe',
              'f:name',
              'f:ports',
              'f:readinessProbe',
              'f:resources',
              'f:securityContext',
              'f:terminationMessagePath',
              'f:volumeMounts',
            ]),
          ]),
        ),
      },
    },
    {
      manager: 'kubelet',
      operation: 'Update',
      apiVersion: 'v1',
      time: AT,
      fieldsType: 'FieldsV1',
      subresource: 'status',
      fieldsV1: { 'f:status': fieldsV1(['f:conditions', 'f:containerStatuses', 'f:hostIP', 'f:hostIPs', 'f:phase', 'f:podIP', 'f:podIPs', 'f:startTime']) },
    },
  ];
  const conditions = ['PodReadyToStartContainers', 'Initialized', 'Ready', 'ContainersReady', 'PodScheduled'].map((type) => ({
    type,
    status: 'True',
    lastProbeTime: null,
    lastTransitionTime: AT,
  }));
  const containerStatuses = names.map((name, c) => ({
    name,
    state: { running: { startedAt: AT } },
    lastState: {},
    ready: true,
    restartCount: c,
    image: `registry.example.com/${name}:1.${c}.7`,
    imageID: `registry.example.com/${name}@sha256:${'9c'.repeat(32)}`,
    containerID: `containerd://${hex(c * 7919 + name.length, 8).repeat(8)}`,
    started: true,
    volumeMounts: [{ name: 'kube-api-access', mountPath: '/var/run/secrets/kubernetes.io/serviceaccount', readOnly: true, recursiveReadOnly: 'Disabled' }],
  }));
  const labels = {
    app,
    'pod-template-hash': hex(app.length * 2654435761, 10),
    'app.kubernetes.io/name': app,
    'app.kubernetes.io/version': '1.0.7',
    'security.istio.io/tlsMode': 'istio',
    'service.istio.io/canonical-name': app,
  };
  const annotations = {
    'kubectl.kubernetes.io/restartedAt': AT,
    'prometheus.io/scrape': 'true',
    'prometheus.io/port': '9090',
    'sidecar.istio.io/status': `{"initContainers":["istio-init"],"containers":["istio-proxy"],"volumes":["istio-envoy","istio-data","istio-podinfo","istio-token","istiod-ca-cert"],"imagePullSecrets":null,"revision":"default"}`,
    'checksum/config': 'b1946ac92492d2347c6235b4d2611184'.repeat(2),
  };
  const ownerReferences = [
    { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: `${app}-${labels['pod-template-hash']}`, uid: randomUUID(), controller: true, blockOwnerDeletion: true },
  ];
  return { spec, managedFields, conditions, containerStatuses, labels, annotations, ownerReferences, namespace };
}

/** One realistic running pod of Service `svc-<s>` (for tests that want a real-looking object). */
export function realisticPod(s: number, ip: string): KObject {
  const t = podTemplate(`svc-${s}`, `team-${s}`, `node-${s}`, 3);
  return structuredClone({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: `svc-${s}-${t.labels['pod-template-hash']}-x7k2p`,
      generateName: `svc-${s}-${t.labels['pod-template-hash']}-`,
      namespace: t.namespace,
      uid: randomUUID(),
      resourceVersion: '4711',
      creationTimestamp: AT,
      labels: t.labels,
      annotations: t.annotations,
      ownerReferences: t.ownerReferences,
      managedFields: t.managedFields,
    },
    spec: t.spec,
    status: {
      phase: 'Running',
      conditions: t.conditions,
      hostIP: '10.0.0.7',
      hostIPs: [{ ip: '10.0.0.7' }],
      podIP: ip,
      podIPs: [{ ip }],
      startTime: AT,
      containerStatuses: t.containerStatuses,
      qosClass: 'Burstable',
    },
  });
}

/**
 * Fills a simulated cluster with `services` Services (ports http 80 → "http", metrics 9090 →
 * "metrics"), `pods` running pods spread round-robin over them, and one EndpointSlice per Service.
 */
export function loadBigCluster(sim: SimCluster, o: BigClusterOptions): BigCluster {
  const nsCount = o.namespaces ?? 100;
  const nodes = o.nodes ?? 500;
  const namespaces: KObject[] = [];
  for (let n = 0; n < nsCount; n++) namespaces.push(namespaceObject(`team-${n}`));
  sim.bulkLoad('namespaces', namespaces);
  const services: BigCluster['services'] = [];
  const templates: Array<ReturnType<typeof podTemplate>> = [];
  const svcObjects: KObject[] = [];
  for (let s = 0; s < o.services; s++) {
    const namespace = `team-${s % nsCount}`;
    const name = `svc-${s}`;
    const clusterIP = ipOf(SVC_BASE, s);
    services.push({ namespace, name, clusterIP, podIPs: [] });
    templates.push(podTemplate(name, namespace, `node-${s % nodes}`, 2 + (s % 2)));
    svcObjects.push({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: {
        name,
        namespace,
        labels: { app: name, 'app.kubernetes.io/name': name },
        annotations: { 'meta.helm.sh/release-name': name, 'meta.helm.sh/release-namespace': namespace },
        managedFields: [
          {
            manager: 'helm',
            operation: 'Update',
            apiVersion: 'v1',
            time: AT,
            fieldsType: 'FieldsV1',
            fieldsV1: {
              'f:metadata': { 'f:annotations': {}, 'f:labels': {} },
              'f:spec': fieldsV1(['f:internalTrafficPolicy', 'f:ports', 'f:selector', 'f:sessionAffinity', 'f:type']),
            },
          },
        ],
      },
      spec: {
        ports: [
          { name: 'http', protocol: 'TCP', port: 80, targetPort: 'http' },
          { name: 'metrics', protocol: 'TCP', port: 9090, targetPort: 'metrics' },
        ],
        selector: { app: name },
        clusterIP,
        clusterIPs: [clusterIP],
        type: 'ClusterIP',
        sessionAffinity: 'None',
        ipFamilies: ['IPv4'],
        ipFamilyPolicy: 'SingleStack',
        internalTrafficPolicy: 'Cluster',
      },
      status: { loadBalancer: {} },
    });
  }
  sim.bulkLoad('services', svcObjects);
  const endpointsOf: Array<Array<Record<string, unknown>>> = services.map(() => []);
  const pods: KObject[] = [];
  const podIPs: string[] = [];
  for (let p = 0; p < o.pods; p++) {
    const s = p % o.services;
    const t = templates[s]!;
    const svc = services[s]!;
    const name = `${svc.name}-${t.labels['pod-template-hash']}-${hex(p * 48271, 5)}`;
    const ip = ipOf(POD_BASE, p);
    const uid = randomUUID();
    podIPs.push(ip);
    svc.podIPs.push(ip);
    pods.push({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name,
        generateName: `${svc.name}-${t.labels['pod-template-hash']}-`,
        namespace: t.namespace,
        uid,
        labels: t.labels,
        annotations: t.annotations,
        ownerReferences: t.ownerReferences,
        managedFields: t.managedFields,
      },
      spec: t.spec,
      status: {
        phase: 'Running',
        conditions: t.conditions,
        hostIP: `10.0.${(s % nodes) >> 8}.${(s % nodes) & 255}`,
        hostIPs: [{ ip: `10.0.${(s % nodes) >> 8}.${(s % nodes) & 255}` }],
        podIP: ip,
        podIPs: [{ ip }],
        startTime: AT,
        containerStatuses: t.containerStatuses,
        qosClass: 'Burstable',
      },
    });
    endpointsOf[s]!.push({
      addresses: [ip],
      conditions: { ready: true, serving: true, terminating: false },
      nodeName: t.spec.nodeName,
      targetRef: { kind: 'Pod', namespace: t.namespace, name, uid },
      zone: `zone-${s % 3}`,
    });
  }
  sim.bulkLoad('pods', pods);
  const slices: KObject[] = services.map((svc, s) => {
    const eps = endpointsOf[s]!;
    return {
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: {
        name: `${svc.name}-${hex(s * 69621, 5)}`,
        generateName: `${svc.name}-`,
        namespace: svc.namespace,
        labels: { app: svc.name, [SERVICE_NAME_LABEL]: svc.name, [MANAGED_BY_LABEL]: SLICE_CONTROLLER },
        annotations: { 'endpoints.kubernetes.io/last-change-trigger-time': AT },
        ownerReferences: [{ apiVersion: 'v1', kind: 'Service', name: svc.name, uid: randomUUID(), controller: true, blockOwnerDeletion: true }],
      },
      addressType: 'IPv4',
      endpoints: eps.length ? eps : null,
      ports: eps.length
        ? [
            { name: 'http', port: 8080, protocol: 'TCP' },
            { name: 'metrics', port: 9090, protocol: 'TCP' },
          ]
        : null,
    };
  });
  sim.bulkLoad('endpointslices', slices);
  // Serialized now, once (the simulator keeps each object's JSON), so start-up figures measure the
  // client, not the simulator's first JSON.stringify of every object.
  const mean = (objs: KObject[]) => (objs.length ? Math.round(objs.reduce((n, o) => n + itemJson(o).length, 0) / objs.length) : 0);
  return { services, podIPs, jsonBytes: { pod: mean(pods), service: mean(svcObjects), slice: mean(slices) } };
}
