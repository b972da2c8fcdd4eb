// The host names one cluster serves through its ingress controller: Ingress hosts
// (networking.k8s.io/v1: spec.rules[].host, spec.tls[].hosts, exact or "*.x" wildcards) and,
// where the API serves them, OpenShift Route hosts (route.openshift.io/v1: spec.host). Only the
// host names are kept (slim-watch.ts), never the objects. A resource the cluster does not serve
// (404) or the user may not list cluster-wide (403) turns that source off, logged once at info:
// the cluster route works without ingress hosts, it is never an error for it. Each host's
// Ingress classes and the cluster's IngressClasses are kept too (ingress-classes.ts): they say
// which of several ingress controllers serves it.
import { errorMessage } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { ApiStatusError, type ApiConnection } from './api.js';
import { SlimWatch, type SlimWatchDeadlines, type SlimWatchState } from './slim-watch.js';
import { ApiReachability } from './api-reachability.js';
import { RENEW_MIN_INTERVAL_MS } from './cache.js';
import { monotonicMs } from '../core/clock.js';
import {
  INGRESS_CLASS_PATH,
  ROUTE_CLASS,
  ingressClassInfoOf,
  ingressClassOf,
  type HostClasses,
  type IngressClassInfo,
  type NamedHosts,
} from './ingress-classes.js';

export const INGRESS_PATH = '/apis/networking.k8s.io/v1/ingresses';
export const ROUTE_GROUP_VERSION_PATH = '/apis/route.openshift.io/v1';
export const ROUTE_PATH = `${ROUTE_GROUP_VERSION_PATH}/routes`;

export type IngressSourceName = 'ingresses' | 'routes' | 'ingressclasses';
/** 'off': the cluster does not serve the resource, or we may not list it cluster-wide. */
export type IngressSourceState = SlimWatchState | 'off';

export interface IngressHostsStatus {
  /** Distinct host names known now. */
  hosts: number;
  sources: Record<IngressSourceName, { state: IngressSourceState; objects: number; reason?: string }>;
}

export interface IngressHostWatcherOptions {
  /** Also watch OpenShift Routes when the API serves them. Default true. */
  openshiftRoutes?: boolean;
  deadlines?: SlimWatchDeadlines;
}

/**
 * Lowercase, without a trailing dot; undefined for what cannot be a host name at all, an IP
 * literal (the Ingress API refuses those), "localhost" names (RFC 6761 §6.3: always this
 * machine — an Ingress in someone's cluster must not take them over) and a wildcard over a
 * whole top-level domain.
 */
function cleanHost(host: unknown): string | undefined {
  if (typeof host !== 'string') return undefined;
  const h = host.trim().toLowerCase().replace(/\.$/, '');
  if (h.length === 0 || h.length > 253 || /[\s/:]/.test(h) || /^[\d.]+$/.test(h)) return undefined;
  if (h === 'localhost' || h.endsWith('.localhost')) return undefined;
  if (h.startsWith('*.') && !wildcardAllowed(h.slice(2))) return undefined;
  return h;
}

/**
 * Whether a learnt "*.DOMAIN" is taken. The Ingress API accepts `*.com`, and whoever may create
 * an Ingress in the cluster would then have every .com name of the proxy's clients (and of the
 * browsers its PAC file steers) sent to the cluster's ingress controller: never a top-level domain.
 */
function wildcardAllowed(domain: string): boolean {
  return domain.includes('.');
}

function uniqueHosts(list: unknown[]): string[] {
  const out = new Set<string>();
  for (const h of list) {
    const c = cleanHost(h);
    if (c) out.add(c);
  }
  return [...out];
}

/** The hosts an Ingress (networking.k8s.io/v1) names: its rules' hosts and its TLS hosts. */
export function ingressHostsOf(obj: unknown): string[] {
  const spec = (obj as { spec?: { rules?: Array<{ host?: unknown }>; tls?: Array<{ hosts?: unknown[] }> } } | undefined)?.spec;
  const rules = Array.isArray(spec?.rules) ? spec.rules.map((r) => r?.host) : [];
  const tls = Array.isArray(spec?.tls) ? spec.tls.flatMap((t) => (Array.isArray(t?.hosts) ? t.hosts : [])) : [];
  return uniqueHosts([...rules, ...tls]);
}

/**
 * The host an OpenShift Route (route.openshift.io/v1) serves: spec.host, or "*.<domain>" for a
 * route with spec.wildcardPolicy "Subdomain" (openshift/router: a wildcard route serves every
 * name under the parent domain of its host).
 */
export function routeHostsOf(obj: unknown): string[] {
  const spec = (obj as { spec?: { host?: unknown; wildcardPolicy?: unknown } } | undefined)?.spec;
  const host = cleanHost(spec?.host);
  if (!host) return [];
  const parent = host.slice(host.indexOf('.') + 1);
  if (spec?.wildcardPolicy === 'Subdomain' && host.includes('.') && wildcardAllowed(parent)) return [host, `*.${parent}`];
  return [host];
}

/**
 * Watches one cluster's Ingress (and Route) hosts and reports the whole set, sorted, to `onHosts`:
 * once when start() is done (possibly empty) and after every change of the set. Meant to be
 * given RouteMatcher.setIngressHosts for the cluster's route.
 */
export class IngressHostWatcher {
  /** Per host, how many objects of each class name it (two Ingresses may share one). */
  private readonly counts = new Map<string, Map<string, number>>();
  /** The cluster's IngressClasses by name. */
  private readonly ingressClasses = new Map<string, IngressClassInfo>();
  private dirty = false;
  private started = false;
  private stopped = false;
  private readonly sources = new Map<IngressSourceName, { state: 'off'; reason: string } | SlimWatch<unknown>>();
  private stopListening?: () => void;
  private renewedAt = -Infinity;

  constructor(
    private readonly api: ApiConnection,
    private readonly log: Logger,
    private readonly onHosts: (hosts: string[]) => void,
    private readonly options: IngressHostWatcherOptions = {},
  ) {}

  /**
   * Lists Ingresses (and Routes) once; resolves when each source has its first list, is off, or
   * failed its first list (then it keeps trying in the background). Never rejects.
   */
  async start(): Promise<void> {
    // The API server back after an absence: the cluster cache renews its watches and drops the
    // pooled connections (cache.ts), these watches' included: they watch again too, as expected.
    this.stopListening ??= ApiReachability.of(this.api).onReturn(() => {
      // As often as the cache renews, however many returns come meanwhile.
      if (monotonicMs() - this.renewedAt < RENEW_MIN_INTERVAL_MS) return;
      this.renewedAt = monotonicMs();
      this.afterPause();
    });
    const starts: Array<Promise<void>> = [
      this.startSource('ingresses', INGRESS_PATH, (obj) => ({ hosts: ingressHostsOf(obj), cls: ingressClassOf(obj) })),
      this.startClasses(),
    ];
    if (this.options.openshiftRoutes !== false) starts.push(this.startRoutes());
    await Promise.all(starts);
    if (this.stopped) return;
    this.started = true;
    this.dirty = false;
    this.onHosts(this.hosts());
  }

  stop(): void {
    this.stopped = true;
    this.stopListening?.();
    for (const source of this.sources.values()) if (source instanceof SlimWatch) source.stop();
  }

  /** After a pause: each source watches again now. */
  afterPause(): void {
    for (const source of this.sources.values()) if (source instanceof SlimWatch) void source.rewatch();
  }

  /** The classes of the Ingresses (and Routes) naming a learnt host, and the IngressClasses when readable. */
  classesOf(host: string): HostClasses {
    const classes = [...(this.counts.get(host)?.keys() ?? [])].sort();
    const source = this.sources.get('ingressclasses');
    const readable = source instanceof SlimWatch && (source.status === 'synced' || source.status === 'retrying');
    return { host, classes, ...(readable ? { ingressClasses: this.ingressClasses } : {}) };
  }

  /** The host names known now, sorted. */
  hosts(): string[] {
    return [...this.counts.keys()].sort();
  }

  status(): IngressHostsStatus {
    const one = (name: IngressSourceName): IngressHostsStatus['sources'][IngressSourceName] => {
      const s = this.sources.get(name);
      if (!s) return { state: 'off', objects: 0, reason: 'not watched' };
      if (!(s instanceof SlimWatch)) return { state: 'off', objects: 0, reason: s.reason };
      return { state: s.status, objects: s.size, ...(s.lastError && s.status === 'retrying' ? { reason: s.lastError.message } : {}) };
    };
    return { hosts: this.counts.size, sources: { ingresses: one('ingresses'), routes: one('routes'), ingressclasses: one('ingressclasses') } };
  }

  /** Routes only where discovery lists them (route.openshift.io/v1 is served on OpenShift alone). */
  private async startRoutes(): Promise<void> {
    try {
      const doc = await this.api.getJson<{ resources?: Array<{ name?: string; verbs?: string[] }> }>(ROUTE_GROUP_VERSION_PATH);
      const routes = doc.resources?.find((r) => r.name === 'routes');
      if (!routes || !['list', 'watch'].every((v) => routes.verbs?.includes(v))) {
        return this.off('routes', 'route.openshift.io/v1 serves no listable routes');
      }
    } catch (err) {
      if (err instanceof ApiStatusError && (err.statusCode === 404 || err.statusCode === 403)) {
        return this.off('routes', `route.openshift.io/v1 not served (HTTP ${err.statusCode}): not an OpenShift cluster`);
      }
      // Discovery failing for another reason: try the list itself, which says more.
    }
    await this.startSource('routes', ROUTE_PATH, (obj) => ({ hosts: routeHostsOf(obj), cls: ROUTE_CLASS }));
  }

  private startSource(name: 'ingresses' | 'routes', path: string, extract: (obj: unknown) => NamedHosts): Promise<void> {
    return this.startWatch(name, path, extract, (previous, next) => this.changed(previous, next));
  }

  /** IngressClasses: read when a host is opened, so a change needs no report. */
  private startClasses(): Promise<void> {
    return this.startWatch('ingressclasses', INGRESS_CLASS_PATH, ingressClassInfoOf, (previous, next) => {
      if (previous) this.ingressClasses.delete(previous.name);
      if (next) this.ingressClasses.set(next.name, next);
    });
  }

  private async startWatch<V>(
    name: IngressSourceName,
    path: string,
    extract: (obj: unknown) => V,
    changed: (previous: V | undefined, next: V | undefined) => void,
  ): Promise<void> {
    if (this.stopped) return; // stopped while Routes discovery ran
    const watch = new SlimWatch<V>({
      api: this.api,
      path,
      log: this.log,
      extract,
      changed,
      settled: () => this.settled(),
      deadlines: this.options.deadlines,
    });
    this.sources.set(name, watch as unknown as SlimWatch<unknown>); // kept for status and stop only
    try {
      await watch.start();
      this.log.info({ source: name, objects: watch.size }, 'watching ingress host names');
    } catch (err) {
      if (err instanceof ApiStatusError && (err.statusCode === 403 || err.statusCode === 404)) {
        watch.stop();
        const why = err.statusCode === 403 ? `not allowed to list ${name} cluster-wide` : `${name} not served by this cluster`;
        return this.off(name, `${why}: ${err.message}`);
      }
      // The watch goes on trying by itself (its own warning says so once).
      this.log.debug({ source: name, error: errorMessage(err) }, 'cannot list ingress host names yet; retrying in the background');
    }
  }

  private off(name: IngressSourceName, reason: string): void {
    this.sources.set(name, { state: 'off', reason });
    this.log.info({ source: name, reason }, 'ingress host names from this source are off');
  }

  private changed(previous: NamedHosts | undefined, next: NamedHosts | undefined): void {
    // Adds first: a host both old and new never drops to zero (no spurious report).
    for (const h of next?.hosts ?? []) {
      let byClass = this.counts.get(h);
      if (!byClass) {
        this.counts.set(h, (byClass = new Map()));
        this.dirty = true;
      }
      byClass.set(next!.cls, (byClass.get(next!.cls) ?? 0) + 1);
    }
    for (const h of previous?.hosts ?? []) {
      const byClass = this.counts.get(h);
      if (!byClass) continue;
      const n = (byClass.get(previous!.cls) ?? 0) - 1;
      if (n > 0) byClass.set(previous!.cls, n);
      else byClass.delete(previous!.cls);
      if (byClass.size === 0) {
        this.counts.delete(h);
        this.dirty = true;
      }
    }
  }

  private settled(): void {
    if (!this.started || this.stopped || !this.dirty) return;
    this.dirty = false;
    this.onHosts(this.hosts());
  }
}
