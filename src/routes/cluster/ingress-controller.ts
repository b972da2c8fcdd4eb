// Where a cluster route sends an ingress host name: to the cluster's ingress controller Service,
// at the port the client asked for (80 and 443 kept), bytes untouched, so TLS and SNI reach the
// controller as the client sent them and the controller picks the Ingress by Host/SNI as it does
// for traffic from its load balancer. The Service is the one configured (`ingress.controller`),
// else the first of KNOWN_INGRESS_CONTROLLERS the cluster has that serves the host's ingress class
// (its IngressClass's spec.controller): a cluster may run several controllers.
import type { SlimService } from '../../cluster/slim.js';
import type { Destination } from '../../core/types.js';
import { ConnectionRefusedError, NoReadyEndpointError } from '../../core/errors.js';
import type { RouteClaim } from '../route.js';
import type { IngressSpec } from '../../routes/spec.js';
import { placeClasses, type HostClasses } from '../../cluster/ingress-classes.js';

/**
 * The Services the usual ingress controllers install, in the order they are looked for:
 * - openshift-ingress/router-default: OpenShift 4's default IngressController (HAProxy router)
 * - openshift-ingress/router-internal-default: the same router's ClusterIP Service, the only one
 *   where the IngressController publishes by HostNetwork or NodePort (bare metal, vSphere)
 * - ingress-nginx/ingress-nginx-controller: the ingress-nginx Helm chart and static manifests
 * - kube-system/ingress-nginx-controller: the same in kube-system (minikube's addon, some distros)
 * - traefik/traefik: the Traefik Helm chart in its own namespace
 * - kube-system/traefik: k3s's bundled Traefik
 * - haproxy-controller/haproxy-kubernetes-ingress: HAProxy Kubernetes Ingress Controller chart
 * - projectcontour/envoy: Contour's Envoy fleet
 * Each with the IngressClass spec.controller value its installation uses by default.
 */
export const KNOWN_INGRESS_CONTROLLERS: ReadonlyArray<{ namespace: string; service: string; controller: string }> = [
  { namespace: 'openshift-ingress', service: 'router-default', controller: 'openshift.io/ingress-to-route' },
  { namespace: 'openshift-ingress', service: 'router-internal-default', controller: 'openshift.io/ingress-to-route' },
  { namespace: 'ingress-nginx', service: 'ingress-nginx-controller', controller: 'k8s.io/ingress-nginx' },
  { namespace: 'kube-system', service: 'ingress-nginx-controller', controller: 'k8s.io/ingress-nginx' },
  { namespace: 'traefik', service: 'traefik', controller: 'traefik.io/ingress-controller' },
  { namespace: 'kube-system', service: 'traefik', controller: 'traefik.io/ingress-controller' },
  { namespace: 'haproxy-controller', service: 'haproxy-kubernetes-ingress', controller: 'haproxy.org/ingress-controller/haproxy' },
  { namespace: 'projectcontour', service: 'envoy', controller: 'projectcontour.io/ingress-controller' },
];

/** The config keys naming the controller, and one per class, for messages. */
export const INGRESS_CONTROLLER_KEY = 'ingress.controller';
export const INGRESS_CLASSES_KEY = 'ingress.classes';

/** What detection needs to know of a Service. */
export interface ServiceSummary {
  /** Its TCP ports (Service ports, not target ports). */
  ports: number[];
  type?: string;
}

/** A Service by namespace and name, from the cluster's watch cache; undefined when unknown. */
export type ServiceLookup = (namespace: string, name: string) => ServiceSummary | undefined;

export type DetectedController =
  { found: true; namespace: string; service: string; how: 'configured' | 'detected'; ports?: number[] } | { found: false; message: string };

/** A ServiceLookup over anything that finds Services (ClusterIndex.service does). */
export function serviceLookup(find: (namespace: string, name: string) => SlimService | undefined): ServiceLookup {
  return (namespace, name) => {
    const svc = find(namespace, name);
    if (!svc) return undefined;
    const ports = svc.ports.filter((p) => p.protocol === 'TCP').map((p) => p.port);
    return { ports, type: svc.type };
  };
}

/**
 * The ingress controller Service for a host: by the host's classes (`host`, see placeClasses), the
 * Service `ingress.classes` gives a class, else the configured `ingress.controller` (taken as
 * given: the resolver reports a Service that is missing), else the first known controller Service
 * the cluster has that runs the class's controller; classes that say nothing (unknown, no class
 * without a default) leave the configured, else the first known, Service. Detection needs the
 * cache to know those namespaces: with only per-namespace watch permission it finds nothing, and
 * the message says to configure it.
 */
export function detectIngressController(spec: IngressSpec | undefined, service: ServiceLookup, host?: HostClasses): DetectedController {
  const configuredAs = (text: string): DetectedController => {
    const [namespace, name] = text.split('/', 2);
    if (namespace && name) return { found: true, namespace, service: name, how: 'configured', ports: service(namespace, name)?.ports };
    return { found: false, message: `${INGRESS_CONTROLLER_KEY} "${text}" is not namespace/service` };
  };
  const configured = spec?.controller ? configuredAs(spec.controller) : undefined;
  const present: Array<DetectedController & { found: true; controller: string }> = [];
  for (const c of KNOWN_INGRESS_CONTROLLERS) {
    const svc = service(c.namespace, c.service);
    if (svc && svc.type !== 'ExternalName')
      present.push({ found: true, namespace: c.namespace, service: c.service, how: 'detected', ports: svc.ports, controller: c.controller });
  }
  const picked = new Map<string, { d: DetectedController; why: string[] }>();
  const unserved: string[] = [];
  for (const cls of host ? placeClasses(host) : []) {
    const mapped = cls.name !== undefined ? spec?.classes?.[cls.name] : undefined;
    const d = mapped ? configuredAs(mapped) : configured ? undefined : present.find((p) => cls.controller && p.controller === cls.controller);
    if (d?.found) {
      const key = `${d.namespace}/${d.service}`;
      picked.set(key, { d, why: [...(picked.get(key)?.why ?? []), cls.why] });
    } else if (!mapped && !configured && cls.controller) unserved.push(`${cls.why} (controller ${cls.controller})`);
  }
  if (picked.size === 1) return [...picked.values()][0]!.d;
  const fix = `set ${INGRESS_CLASSES_KEY}.<class> to the namespace/service to send it to`;
  if (picked.size > 1) {
    const each = [...picked].map(([key, p]) => `${p.why.join(', ')}: ${key}`).join('; ');
    return { found: false, message: `the Ingresses naming ${host!.host} are served by different ingress controllers (${each}); ${fix}` };
  }
  if (configured) return configured;
  if (present.length === 0) {
    const tried = KNOWN_INGRESS_CONTROLLERS.map((c) => `${c.namespace}/${c.service}`).join(', ');
    return {
      found: false,
      message: `no ingress controller Service found (looked for ${tried}); set ${INGRESS_CONTROLLER_KEY} to its namespace/service in the route's config`,
    };
  }
  if (unserved.length === 0) {
    const { controller: _, ...first } = present[0]!;
    return first;
  }
  const seen = present.map((p) => `${p.namespace}/${p.service} (${p.controller})`).join(', ');
  return { found: false, message: `${unserved.join(', ')}: no ingress controller Service found for it (found ${seen}); ${fix}` };
}

export interface IngressTarget {
  namespace: string;
  service: string;
  port: number;
  /** "ingress web.apps.example.com:443 via service openshift-ingress/router-default:443", for logs. */
  label: string;
}

/**
 * The Service and port an ingress claim (reason 'ingress' or 'ingress-host') connects to. Throws
 * NoReadyEndpointError when the cluster has no controller to send it to, ConnectionRefusedError
 * when the controller Service has no such port; an Error for a claim that is not an ingress one
 * (a programming error: the caller checks the reason first).
 */
export function ingressTarget(claim: RouteClaim, port: number, detected: DetectedController): IngressTarget {
  if (claim.reason !== 'ingress' && claim.reason !== 'ingress-host') {
    throw new Error(`ingressTarget called for a claim by ${claim.reason}, not by an ingress rule`);
  }
  const what = `ingress host ${claim.host}:${port} (route ${claim.route.name})`;
  if (!detected.found) throw new NoReadyEndpointError(`${what}: ${detected.message}`);
  const via = `${detected.namespace}/${detected.service}`;
  if (detected.ports && !detected.ports.includes(port)) {
    throw new ConnectionRefusedError(`${what}: the ingress controller Service ${via} has no TCP port ${port} (ports: ${detected.ports.join(', ') || 'none'})`);
  }
  return { namespace: detected.namespace, service: detected.service, port, label: `${what} via service ${via}:${port}` };
}

/** True for the claims ingressTarget serves. */
export function isIngressClaim(claim: RouteClaim): boolean {
  return claim.reason === 'ingress' || claim.reason === 'ingress-host';
}

/**
 * The destination the existing Resolver takes for a target: the Service's cluster DNS name
 * (<svc>.<ns>.svc.<cluster domain>) at the same port, so the ingress connection is resolved,
 * spread and retried like any Service connection.
 */
export function ingressDestination(target: IngressTarget, clusterDomain: string): Destination {
  return { type: 'domain', host: `${target.service}.${target.namespace}.svc.${clusterDomain}`, port: target.port };
}
