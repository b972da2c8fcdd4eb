// Slim records: what routing reads of a Service, EndpointSlice, Pod or Namespace, built from the
// parsed JSON the moment an object arrives (list page or watch event). The full object is never
// kept: a pod of a real cluster is 5–10 KB of JSON (managedFields, probes, conditions) and ~40 KB
// as a client-node object; its slim record is a few hundred bytes.
//
// Every field here is read by src/cluster/index.ts or src/routes/cluster/ (resolver.ts,
// service-endpoints.ts); nothing else is kept (test/unit/slim.test.ts checks both directions).
import { normalizeIp } from '../core/ip.js';

/** Every record has the key its informer and the index file it under ("namespace/name"). */
export interface Slim {
  readonly key: string;
  readonly namespace: string;
  readonly name: string;
  readonly resourceVersion: string;
}

export interface SlimServicePort {
  readonly name: string;
  readonly port: number;
  readonly protocol: string;
  /** A number or a container port name (IntOrString); absent in the object means `port`. */
  readonly targetPort: number | string;
}

export interface SlimService extends Slim {
  readonly uid: string | undefined;
  /** ClusterIP, NodePort, LoadBalancer or ExternalName. */
  readonly type: string;
  /** clusterIP and clusterIPs, normalized, without "None". */
  readonly clusterIPs: readonly string[];
  /** clusterIP "None". */
  readonly headless: boolean;
  readonly externalName: string | undefined;
  /** No selector: its EndpointSlices (or Endpoints, mirrored) are written by hand or by an operator. */
  readonly selectorless: boolean;
  readonly ports: readonly SlimServicePort[];
  /** sessionAffinity ClientIP: how long a client sticks to its endpoint (s); undefined without. */
  readonly affinitySeconds: number | undefined;
}

/**
 * One endpoint: its first address (slices are per address family; it is the Pod IP), hostname
 * (set when the pod's subdomain is this Service: headless DNS), conditions and the object it
 * points at (targetRef, flattened). nodeName, zone and hints are not kept.
 */
export interface SlimEndpoint {
  readonly address: string | undefined;
  readonly hostname: string | undefined;
  /** Conditions as the slice has them: undefined means unknown (treated as ready). */
  readonly ready: boolean | undefined;
  /** Ready regardless of terminating (a pod shutting down that still answers): kube-proxy's fallback. */
  readonly serving: boolean | undefined;
  readonly terminating: boolean | undefined;
  /** targetRef: kind ("Pod"), namespace, name and uid; refName undefined without a targetRef. */
  readonly refKind: string | undefined;
  readonly refNamespace: string | undefined;
  readonly refName: string | undefined;
  readonly refUid: string | undefined;
}

export interface SlimSlicePort {
  readonly name: string;
  readonly port: number | undefined;
  readonly protocol: string;
}

export interface SlimSlice extends Slim {
  /** "namespace/service" from the kubernetes.io/service-name label. */
  readonly serviceKey: string | undefined;
  /** null when the slice has none (a placeholder, pods lacking every port, or a hand-made slice without ports). */
  readonly ports: readonly SlimSlicePort[] | null;
  /**
   * Written by the EndpointSlice controller (its managed-by label): its ports are each pod's
   * resolved targetPorts, so a port missing there is missing in the pods.
   */
  readonly byController: boolean;
  readonly endpoints: readonly SlimEndpoint[];
}

export interface SlimContainerPort {
  readonly name: string;
  readonly containerPort: number;
  readonly protocol: string;
}

export interface SlimPod extends Slim {
  readonly uid: string | undefined;
  readonly phase: string | undefined;
  /** metadata.deletionTimestamp is set: the pod is going. */
  readonly deleting: boolean;
  /** status.podIP and status.podIPs, normalized, deduplicated. */
  readonly ips: readonly string[];
  readonly hostNetwork: boolean;
  readonly hostname: string | undefined;
  readonly subdomain: string | undefined;
  /** Named container ports only (native sidecars' too): a Service targetPort can only name a named one. */
  readonly namedPorts: readonly SlimContainerPort[];
}

export type SlimNamespace = Slim;

export const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';
const MANAGED_BY_LABEL = 'endpointslice.kubernetes.io/managed-by';
const ENDPOINTSLICE_CONTROLLER = 'endpointslice-controller.k8s.io';

const EMPTY: readonly never[] = Object.freeze([]);

/**
 * Namespaces, protocols, port names and kinds repeat across thousands of objects; JSON.parse makes
 * a new string for each. Sharing one copy saves ~30 bytes per reference. Bounded: past the cap
 * (a pathological cluster) strings are simply not shared.
 */
const INTERN_MAX = 20_000;
const interned = new Map<string, string>();
function intern(s: string): string {
  const hit = interned.get(s);
  if (hit !== undefined) return hit;
  if (interned.size < INTERN_MAX) interned.set(s, s);
  return s;
}

/**
 * The pods of one Deployment, and the Services and slices of one chart, have identical port lists:
 * one frozen copy is shared (keyed by its JSON), bounded like the strings.
 */
const sharedLists = new Map<string, readonly object[]>();
function shared<T extends object>(list: T[]): readonly T[] {
  if (list.length === 0) return EMPTY;
  const k = JSON.stringify(list);
  const hit = sharedLists.get(k);
  if (hit) return hit as readonly T[];
  const frozen = Object.freeze(list.map((o) => Object.freeze(o)));
  if (sharedLists.size < INTERN_MAX) sharedLists.set(k, frozen);
  return frozen;
}

type Json = Record<string, any>;

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
const bool = (v: unknown): boolean | undefined => (typeof v === 'boolean' ? v : undefined);
const arr = (v: unknown): Json[] => (Array.isArray(v) ? (v as Json[]) : []);

function meta(o: Json): { namespace: string; name: string; key: string; resourceVersion: string } | undefined {
  const m = o?.metadata;
  const name = str(m?.name);
  if (!name) return undefined;
  const namespace = intern(str(m.namespace) ?? '');
  return { namespace, name, key: `${namespace}/${name}`, resourceVersion: str(m.resourceVersion) ?? '' };
}

function uniqueIps(ips: Array<string | undefined>): readonly string[] {
  const out: string[] = [];
  for (const ip of ips) {
    if (!ip || ip === 'None') continue;
    const n = normalizeIp(ip);
    if (!out.includes(n)) out.push(n);
  }
  return out.length ? out : EMPTY;
}

export function slimService(o: Json): SlimService | undefined {
  const m = meta(o);
  if (!m) return undefined;
  const spec = o.spec ?? {};
  const ports = arr(spec.ports).map((p): SlimServicePort => ({
    name: intern(str(p.name) ?? ''),
    port: Number(p.port),
    protocol: intern(str(p.protocol) ?? 'TCP'),
    targetPort: typeof p.targetPort === 'number' ? p.targetPort : typeof p.targetPort === 'string' ? intern(p.targetPort) : Number(p.port),
  }));
  // Literal objects with every field (no spread): V8 keeps the fields in the object itself, one
  // shape for all records of a kind; a spread plus extra fields costs a separate property array.
  return {
    key: m.key,
    namespace: m.namespace,
    name: m.name,
    resourceVersion: m.resourceVersion,
    uid: str(o.metadata.uid),
    type: intern(str(spec.type) ?? 'ClusterIP'),
    clusterIPs: uniqueIps([str(spec.clusterIP), ...arr(spec.clusterIPs).map(str)]),
    headless: spec.clusterIP === 'None',
    externalName: str(spec.externalName),
    selectorless: !spec.selector || Object.keys(spec.selector).length === 0,
    ports: shared(ports),
    affinitySeconds: spec.sessionAffinity === 'ClientIP' ? affinitySeconds(spec.sessionAffinityConfig?.clientIP?.timeoutSeconds) : undefined,
  };
}

/** The API server defaults the timeout to 10800 s (3 h) and allows 1 to 86400. */
function affinitySeconds(timeout: unknown): number {
  return typeof timeout === 'number' && timeout > 0 ? timeout : 10_800;
}

function slimEndpoint(e: Json): SlimEndpoint {
  const c = e.conditions ?? {};
  const ref = e.targetRef;
  const refName = str(ref?.name);
  const address = arr(e.addresses).map(str)[0];
  return {
    address: address ? normalizeIp(address) : undefined,
    hostname: str(e.hostname),
    ready: bool(c.ready),
    serving: bool(c.serving),
    terminating: bool(c.terminating),
    refKind: refName ? intern(str(ref.kind) ?? '') : undefined,
    refNamespace: refName && ref.namespace !== undefined ? intern(String(ref.namespace)) : undefined,
    refName,
    refUid: refName ? str(ref.uid) : undefined,
  };
}

export function slimSlice(o: Json): SlimSlice | undefined {
  const m = meta(o);
  if (!m) return undefined;
  const service = str(o.metadata.labels?.[SERVICE_NAME_LABEL]);
  const ports = Array.isArray(o.ports)
    ? shared(
        arr(o.ports).map((p): SlimSlicePort => ({
          name: intern(str(p.name) ?? ''),
          port: typeof p.port === 'number' ? p.port : undefined,
          protocol: intern(str(p.protocol) ?? 'TCP'),
        })),
      )
    : null;
  const endpoints = arr(o.endpoints).map(slimEndpoint);
  return {
    key: m.key,
    namespace: m.namespace,
    name: m.name,
    resourceVersion: m.resourceVersion,
    serviceKey: service ? `${m.namespace}/${service}` : undefined,
    ports,
    byController: o.metadata.labels?.[MANAGED_BY_LABEL] === ENDPOINTSLICE_CONTROLLER,
    endpoints: endpoints.length ? endpoints : EMPTY,
  };
}

export function slimPod(o: Json): SlimPod | undefined {
  const m = meta(o);
  if (!m) return undefined;
  const spec = o.spec ?? {};
  const status = o.status ?? {};
  const namedPorts: SlimContainerPort[] = [];
  // As podutil.FindPort: the containers, then native sidecars (init containers that keep running).
  const sidecars = arr(spec.initContainers).filter((c) => c?.restartPolicy === 'Always');
  for (const c of [...arr(spec.containers), ...sidecars]) {
    for (const p of arr(c.ports)) {
      if (typeof p.name === 'string' && p.name)
        namedPorts.push({ name: intern(p.name), containerPort: Number(p.containerPort), protocol: intern(str(p.protocol) ?? 'TCP') });
    }
  }
  return {
    key: m.key,
    namespace: m.namespace,
    name: m.name,
    resourceVersion: m.resourceVersion,
    uid: str(o.metadata.uid),
    phase: status.phase === undefined ? undefined : intern(String(status.phase)),
    deleting: !!o.metadata.deletionTimestamp,
    ips: uniqueIps([str(status.podIP), ...arr(status.podIPs).map((p) => str(p?.ip))]),
    hostNetwork: spec.hostNetwork === true,
    hostname: str(spec.hostname),
    subdomain: spec.subdomain === undefined ? undefined : intern(String(spec.subdomain)),
    namedPorts: shared(namedPorts),
  };
}

export function slimNamespace(o: Json): SlimNamespace | undefined {
  const m = meta(o);
  return m && { key: m.name, namespace: m.namespace, name: m.name, resourceVersion: m.resourceVersion };
}
