// Builders for the API objects the simulator serves, with the fields and defaults a real cluster
// fills in (defaulting in pkg/apis/core/v1/defaults.go, pod status as the kubelet writes it in
// pkg/kubelet/status/, service IP families as pkg/registry/core/service/storage sets them).
import { randomBytes } from 'node:crypto';
import type { KObject } from './store.js';

export const NODE_NAME = 'sim-node';
export const NODE_IP = '127.0.0.1';
export const CONTAINER_NAME = 'app';
export const IMAGE = 'registry.k8s.io/e2e-test-images/agnhost:2.52';

export function nowRfc3339(): string {
  return new Date().toISOString().replace(/\.\d+Z$/, 'Z');
}

export function randomHex(bytes: number): string {
  return randomBytes(bytes).toString('hex');
}

export function namespaceObject(name: string): KObject {
  return {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name, labels: { 'kubernetes.io/metadata.name': name } },
    spec: { finalizers: ['kubernetes'] },
    status: { phase: 'Active' },
  };
}

export interface PodPortInput {
  name?: string;
  containerPort: number;
  protocol?: 'TCP';
}

export interface PodInput {
  namespace: string;
  name: string;
  labels?: Record<string, string>;
  hostname?: string;
  subdomain?: string;
  /** In the node's network namespace: its pod IP is the node's (NODE_IP). */
  hostNetwork?: boolean;
  ports: PodPortInput[];
}

export function podObject(p: PodInput): KObject {
  const spec: Record<string, unknown> = {
    containers: [
      {
        name: CONTAINER_NAME,
        image: IMAGE,
        ports: p.ports.map((x) =>
          x.name
            ? { name: x.name, containerPort: x.containerPort, protocol: x.protocol ?? 'TCP' }
            : { containerPort: x.containerPort, protocol: x.protocol ?? 'TCP' },
        ),
        resources: {},
        terminationMessagePath: '/dev/termination-log',
        terminationMessagePolicy: 'File',
        imagePullPolicy: 'IfNotPresent',
      },
    ],
    restartPolicy: 'Always',
    terminationGracePeriodSeconds: 30,
    dnsPolicy: 'ClusterFirst',
    serviceAccountName: 'default',
    serviceAccount: 'default',
    nodeName: NODE_NAME,
    securityContext: {},
    schedulerName: 'default-scheduler',
    priority: 0,
    enableServiceLinks: true,
    preemptionPolicy: 'PreemptLowerPriority',
  };
  if (p.hostname) spec.hostname = p.hostname;
  if (p.subdomain) spec.subdomain = p.subdomain;
  if (p.hostNetwork) spec.hostNetwork = true;
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: p.name, namespace: p.namespace, labels: { ...(p.labels ?? {}) } },
    spec,
    status: {},
  };
}

function condition(type: string, ok: boolean, at: string, reason?: string, message?: string): Record<string, unknown> {
  const c: Record<string, unknown> = { type, status: ok ? 'True' : 'False', lastProbeTime: null, lastTransitionTime: at };
  if (!ok && reason) c.reason = reason;
  if (!ok && message) c.message = message;
  return c;
}

/** A pod no node takes: the scheduler's verdict only (pkg/scheduler/schedule_one.go handleSchedulingFailure). */
export function unscheduledStatus(at: string): Record<string, unknown> {
  return {
    phase: 'Pending',
    conditions: [
      {
        type: 'PodScheduled',
        status: 'False',
        lastProbeTime: null,
        lastTransitionTime: at,
        reason: 'Unschedulable',
        message: "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.",
      },
    ],
    qosClass: 'BestEffort',
  };
}

/** Pod status as the kubelet reports it. Pending = no sandbox yet (ContainerCreating), no IP. */
export function podStatus(
  phase: 'Running' | 'Pending',
  ready: boolean,
  ip: string,
  startedAt: string,
  containerId: string,
  ipv6?: string,
): Record<string, unknown> {
  const now = nowRfc3339();
  if (phase === 'Pending') {
    return {
      phase: 'Pending',
      conditions: [
        condition('PodReadyToStartContainers', false, startedAt),
        condition('Initialized', true, startedAt),
        condition('Ready', false, startedAt, 'ContainersNotReady', `containers with unready status: [${CONTAINER_NAME}]`),
        condition('ContainersReady', false, startedAt, 'ContainersNotReady', `containers with unready status: [${CONTAINER_NAME}]`),
        condition('PodScheduled', true, startedAt),
      ],
      hostIP: NODE_IP,
      hostIPs: [{ ip: NODE_IP }],
      startTime: startedAt,
      containerStatuses: [
        {
          name: CONTAINER_NAME,
          state: { waiting: { reason: 'ContainerCreating' } },
          lastState: {},
          ready: false,
          restartCount: 0,
          image: IMAGE,
          imageID: '',
          started: false,
        },
      ],
      qosClass: 'BestEffort',
    };
  }
  return {
    phase: 'Running',
    conditions: [
      condition('PodReadyToStartContainers', true, startedAt),
      condition('Initialized', true, startedAt),
      condition('Ready', ready, now, 'ContainersNotReady', `containers with unready status: [${CONTAINER_NAME}]`),
      condition('ContainersReady', ready, now, 'ContainersNotReady', `containers with unready status: [${CONTAINER_NAME}]`),
      condition('PodScheduled', true, startedAt),
    ],
    hostIP: NODE_IP,
    hostIPs: [{ ip: NODE_IP }],
    podIP: ip,
    podIPs: ipv6 ? [{ ip }, { ip: ipv6 }] : [{ ip }],
    startTime: startedAt,
    containerStatuses: [
      {
        name: CONTAINER_NAME,
        state: { running: { startedAt } },
        lastState: {},
        ready,
        restartCount: 0,
        image: IMAGE,
        imageID: `${IMAGE.split(':')[0]}@sha256:${'5f'.repeat(32)}`,
        containerID: `containerd://${containerId}`,
        started: true,
      },
    ],
    qosClass: 'BestEffort',
  };
}

export interface ServicePortInput {
  name?: string;
  port: number;
  targetPort?: number | string;
  protocol?: 'TCP';
  nodePort?: number;
}

export interface ServiceInput {
  namespace: string;
  name: string;
  selector?: Record<string, string>;
  ports: ServicePortInput[];
  type: 'ClusterIP' | 'ExternalName' | 'NodePort';
  clusterIP?: string; // 'None' for headless; undefined for ExternalName
  ipv6ClusterIP?: string;
  externalName?: string;
  labels?: Record<string, string>;
  publishNotReadyAddresses?: boolean;
}

export function serviceObject(s: ServiceInput): KObject {
  const ports = s.ports.map((p) => {
    const o: Record<string, unknown> = {};
    if (p.name) o.name = p.name;
    o.protocol = p.protocol ?? 'TCP';
    o.port = p.port;
    o.targetPort = p.targetPort ?? p.port;
    if (p.nodePort) o.nodePort = p.nodePort;
    return o;
  });
  const spec: Record<string, unknown> = {};
  if (ports.length) spec.ports = ports;
  if (s.selector && Object.keys(s.selector).length) spec.selector = { ...s.selector };
  if (s.type === 'ExternalName') {
    spec.type = 'ExternalName';
    spec.sessionAffinity = 'None';
    spec.externalName = s.externalName ?? '';
  } else {
    spec.clusterIP = s.clusterIP;
    spec.clusterIPs = s.clusterIP === 'None' ? ['None'] : s.ipv6ClusterIP ? [s.clusterIP, s.ipv6ClusterIP] : [s.clusterIP];
    spec.type = s.type;
    spec.sessionAffinity = 'None';
    spec.ipFamilies = s.ipv6ClusterIP ? ['IPv4', 'IPv6'] : ['IPv4'];
    spec.ipFamilyPolicy = s.ipv6ClusterIP ? 'RequireDualStack' : 'SingleStack';
    spec.internalTrafficPolicy = 'Cluster';
    if (s.type === 'NodePort') spec.externalTrafficPolicy = 'Cluster';
    if (s.publishNotReadyAddresses) spec.publishNotReadyAddresses = true;
  }
  const metadata: Record<string, unknown> = { name: s.name, namespace: s.namespace };
  if (s.labels) metadata.labels = { ...s.labels };
  return { apiVersion: 'v1', kind: 'Service', metadata: metadata as KObject['metadata'], spec, status: { loadBalancer: {} } };
}
