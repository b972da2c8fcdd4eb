// The pod ports behind one port of a Service, picked as kube-proxy picks endpoints for a ClusterIP
// (pkg/proxy/topology.go CategorizeEndpoints): the ready ones; only when there are none, those
// still serving while they terminate. Unknown conditions count as ready / serving, as there. Ready
// alone decides, as there: the controller writes a terminating pod ready only for a Service with
// publishNotReadyAddresses, whose pods take traffic whatever their state. A headless Service's
// name is what cluster DNS answers: its ready endpoints only.
// kube-proxy sends to an endpoint's address whatever made the slice, so an endpoint without a pod
// targetRef (a selector-less Service with a hand-made slice or Endpoints) is the running pod that
// has that address, if one does. Its port is the slice's port of the Service port's name and
// protocol, or none (pkg/proxy/endpointslicecache.go): never the Service's targetPort.
import { isIP } from 'node:net';
import type { SlimEndpoint, SlimPod, SlimService, SlimServicePort, SlimSlice } from '../../cluster/slim.js';
import type { PodPort } from '../../tunnel/transport.js';

/** Addresses of endpoints without a pod targetRef looked up per plan, at most (a hand-made slice rarely lists more). */
export const MAX_ADDRESS_LOOKUPS = 8;

export interface EndpointPods {
  /** The running pod with this IP (an endpoint without a pod targetRef). */
  findPodByIp(ip: string): Promise<SlimPod | undefined>;
}

export interface ServiceEndpoints {
  candidates: PodPort[];
  /** Endpoints that would take traffic but are no pod: no targetRef, and no running pod has their address. */
  notPods: string[];
  /** Why looking up such an address failed (over the look-up budget, the API server away), if it did. */
  lookupError?: unknown;
  /** Endpoints that would take traffic but whose pod has no port for this Service port (a targetPort name it lacks). */
  portless: number;
  /** Endpoints of slices not written by the EndpointSlice controller that have no port of this Service port's name. */
  unported: number;
}

interface Chosen {
  slice: SlimSlice;
  ep: SlimEndpoint;
}

/** `servicePort` undefined: a headless Service, whose endpoints keep the port asked for (`port`). */
export async function serviceEndpoints(
  svc: SlimService,
  servicePort: SlimServicePort | undefined,
  port: number,
  slices: readonly SlimSlice[],
  pods: EndpointPods,
): Promise<ServiceEndpoints> {
  // Without a port of its own for this Service port, an endpoint takes none of its traffic.
  const chosen = pickEndpoints(slices, servicePort, !servicePort);
  let portless = 0;
  let unported = 0;
  if (chosen.length === 0 && servicePort) {
    // Endpoints that would take traffic had their slices this port: for the refusal's words.
    for (const { slice } of pickEndpoints(slices)) {
      if (slice.byController) portless++;
      else unported++;
    }
  }
  const byAddress = await podsByAddress(chosen, pods);
  const candidates: PodPort[] = [];
  const notPods: string[] = [];
  // A pod in an IPv4 and an IPv6 slice of a dual-stack Service is one candidate, not two.
  const seen = slices.length > 1 ? new Set<string>() : undefined;
  for (const { slice, ep } of chosen) {
    const isPodRef = ep.refKind === 'Pod' && !!ep.refName;
    const found = isPodRef ? undefined : byAddress.pods.get(ep.address ?? '');
    if (!isPodRef && !found) {
      notPods.push(ep.address ?? '(no address)');
      continue;
    }
    const namespace = found?.namespace ?? ep.refNamespace ?? svc.namespace;
    const name = found?.name ?? ep.refName!;
    const podPort = servicePort ? slicePortOf(slice, servicePort)! : port;
    // The endpoint controller's targetRef names the pod instance it vouched ready.
    const uid = (isPodRef ? ep.refUid : undefined) ?? found?.uid;
    if (seen) {
      const key = `${namespace}/${name}/${uid ?? ''}:${podPort}`;
      if (seen.has(key)) continue;
      seen.add(key);
    }
    candidates.push({ namespace, pod: name, port: podPort, ...(uid ? { uid } : {}) });
  }
  return { candidates, notPods, portless, unported, ...(byAddress.error !== undefined ? { lookupError: byAddress.error } : {}) };
}

/**
 * Whether a pod port a stream opened on is still one the Service's endpoints would send a new
 * connection to (a pooled stream is reused only while it is: a selector edited for a blue/green
 * switch, a rollout, a targetPort changed). Synchronous, from the slices alone: an endpoint known
 * by its address only counts as still picked.
 */
export function stillPicked(servicePort: SlimServicePort | undefined, slices: readonly SlimSlice[], c: PodPort, namespace: string): boolean {
  for (const { slice, ep } of pickEndpoints(slices, servicePort, !servicePort)) {
    if (!(ep.refKind === 'Pod' && ep.refName)) return true;
    if (ep.refName !== c.pod || (ep.refNamespace ?? namespace) !== c.namespace) continue;
    if (ep.refUid !== undefined && c.uid !== undefined && ep.refUid !== c.uid) continue;
    if (!servicePort) return true;
    if (slicePortOf(slice, servicePort) === c.port) return true;
  }
  return false;
}

/**
 * The pods of a Service's ready endpoints with this hostname (by name): several when a Deployment's
 * template sets hostname and subdomain, each an A record CoreDNS answers for the name.
 */
export function hostnamePods(slices: readonly SlimSlice[], hostname: string): PodPort[] {
  const out: PodPort[] = [];
  for (const slice of slices) {
    for (const ep of slice.endpoints) {
      if (ep.hostname !== hostname || !ep.refName || ep.ready === false) continue;
      const namespace = ep.refNamespace ?? slice.namespace;
      if (out.some((p) => p.namespace === namespace && p.pod === ep.refName)) continue;
      out.push({ namespace, pod: ep.refName, port: 0, ...(ep.refUid ? { uid: ep.refUid } : {}) });
    }
  }
  return out.sort((a, b) => (a.pod < b.pod ? -1 : a.pod > b.pod ? 1 : 0));
}

/**
 * The pod of a Service's endpoint that a headless name would denote but that is not ready (cluster
 * DNS publishes ready endpoints only), for a refusal that says so rather than "no such pod".
 */
export function unpublishedPod(slices: readonly SlimSlice[], hostname: string, ip: string | undefined): string | undefined {
  for (const slice of slices) {
    for (const ep of slice.endpoints) {
      const named = ep.hostname === hostname || (ip !== undefined && ep.hostname === undefined && ep.address === ip);
      if (named && ep.ready === false && ep.refName) return `${ep.refNamespace ?? slice.namespace}/${ep.refName}`;
    }
  }
  return undefined;
}

/**
 * Ready endpoints; only when there are none, those terminating but still serving. With a Service
 * port, only those of slices that have it: kube-proxy picks per Service port. Without one (a
 * headless name) ready ones only: cluster DNS answers no others, it has no fallback.
 */
function pickEndpoints(slices: readonly SlimSlice[], servicePort?: SlimServicePort, headless = false): Chosen[] {
  const ready: Chosen[] = [];
  const terminating: Chosen[] = [];
  for (const slice of slices) {
    if (servicePort && slicePortOf(slice, servicePort) === undefined) continue;
    for (const ep of slice.endpoints) {
      if (ep.ready !== false) ready.push({ slice, ep });
      else if (ep.terminating === true && ep.serving !== false) terminating.push({ slice, ep });
    }
  }
  return ready.length > 0 || headless ? ready : terminating;
}

/** The running pods at the addresses of endpoints without a pod targetRef, looked up together. */
async function podsByAddress(chosen: Chosen[], pods: EndpointPods): Promise<{ pods: Map<string, SlimPod>; error?: unknown }> {
  const addresses = new Set<string>();
  for (const { ep } of chosen) {
    if (addresses.size >= MAX_ADDRESS_LOOKUPS) break;
    // A name (a slice of addressType FQDN, which kube-proxy ignores) is no pod's address: not asked.
    if (!(ep.refKind === 'Pod' && ep.refName) && ep.address && isIP(ep.address)) addresses.add(ep.address);
  }
  const found = new Map<string, SlimPod>();
  let error: unknown;
  await Promise.all(
    [...addresses].map((ip) =>
      pods.findPodByIp(ip).then(
        (pod) => pod && found.set(ip, pod),
        (err: unknown) => (error ??= err),
      ),
    ),
  );
  return { pods: found, error };
}

/** The slice's port for a Service port, as kube-proxy takes it: same name and protocol, a number set. */
function slicePortOf(slice: SlimSlice, servicePort: SlimServicePort): number | undefined {
  const p = slice.ports?.find((x) => x.name === servicePort.name && x.protocol === servicePort.protocol);
  return p?.port ? p.port : undefined;
}

/** Names shown of the pods that are not ready, at most. */
const NOT_READY_SHOWN = 3;

/**
 * What "no ready endpoint" is, for the refusal: no endpoint at all (no pod runs that the selector
 * matches: scaled to zero, a selector typo), or the pods that are there and not ready, to look at.
 * Empty when endpoints are ready yet gave nothing (said elsewhere).
 */
export function noReadyDetail(namespace: string, slices: readonly SlimSlice[], selectorless = false): string {
  const all = new Set<string>();
  const notReady = new Set<string>();
  for (const slice of slices) {
    for (const ep of slice.endpoints) {
      const key = ep.refName ? `pod ${ep.refNamespace ?? namespace}/${ep.refName}` : (ep.address ?? '(no address)');
      all.add(key);
      if (ep.ready === false) notReady.add(key);
    }
  }
  if (all.size === 0) {
    // Nothing selects pods for a Service without a selector: someone must write its endpoints.
    if (selectorless) return ': it has no selector and no endpoints (no EndpointSlice or Endpoints written for it)';
    return ': it has no endpoints (no running pod matches its selector)';
  }
  if (notReady.size < all.size) return '';
  const shown = [...notReady].slice(0, NOT_READY_SHOWN).join(', ') + (notReady.size > NOT_READY_SHOWN ? ', …' : '');
  return notReady.size === 1 ? `: its one endpoint, ${shown}, is not ready` : `: none of its ${notReady.size} endpoints is ready (${shown})`;
}
