// Object store of the simulated API server.
// - One global, strictly increasing resourceVersion shared by every kind, like etcd's revision
//   (staging/src/k8s.io/apiserver/pkg/storage/etcd3/store.go).
// - A bounded event history so a watch can resume from an older resourceVersion; a watch from a
//   version older than the kept history is "too old" (410 Expired), as the watch cache does in
//   staging/src/k8s.io/apiserver/pkg/storage/cacher/watch_cache.go.
// - Synchronous fan-out of every change to subscribers (the watch handlers in rest.ts).
import { randomUUID } from 'node:crypto';

export type Resource = 'namespaces' | 'services' | 'pods' | 'endpoints' | 'endpointslices' | 'ingresses' | 'routes';

export interface ResourceInfo {
  resource: Resource;
  kind: string;
  listKind: string;
  singular: string;
  group: string; // '' = core
  version: string;
  apiVersion: string;
  namespaced: boolean;
  shortNames: string[];
  categories: string[];
}

function core(resource: Resource, kind: string, namespaced: boolean, shortNames: string[], categories: string[] = []): ResourceInfo {
  return {
    resource, kind, listKind: `${kind}List`, singular: kind.toLowerCase(), group: '', version: 'v1',
    apiVersion: 'v1', namespaced, shortNames, categories,
  };
}

export const RESOURCES: Record<Resource, ResourceInfo> = {
  namespaces: core('namespaces', 'Namespace', false, ['ns']),
  services: core('services', 'Service', true, ['svc'], ['all']),
  pods: core('pods', 'Pod', true, ['po'], ['all']),
  endpoints: core('endpoints', 'Endpoints', true, ['ep']),
  endpointslices: {
    resource: 'endpointslices', kind: 'EndpointSlice', listKind: 'EndpointSliceList', singular: 'endpointslice',
    group: 'discovery.k8s.io', version: 'v1', apiVersion: 'discovery.k8s.io/v1', namespaced: true,
    shortNames: [], categories: [],
  },
  ingresses: {
    resource: 'ingresses', kind: 'Ingress', listKind: 'IngressList', singular: 'ingress',
    group: 'networking.k8s.io', version: 'v1', apiVersion: 'networking.k8s.io/v1', namespaced: true,
    shortNames: ['ing'], categories: [],
  },
  // OpenShift's Route (github.com/openshift/api route/v1), served only when the sim is told to.
  routes: {
    resource: 'routes', kind: 'Route', listKind: 'RouteList', singular: 'route',
    group: 'route.openshift.io', version: 'v1', apiVersion: 'route.openshift.io/v1', namespaced: true,
    shortNames: [], categories: ['all'],
  },
};

export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  generateName?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  [key: string]: unknown;
}

export interface KObject {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  [key: string]: unknown;
}

export type EventType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface StoreEvent {
  type: EventType;
  resource: Resource;
  rv: number;
  object: KObject;
  /** For MODIFIED: the object before the change (lets a filtered watch turn it into ADDED/DELETED). */
  previous?: KObject;
}

export class ConflictError extends Error {}

const clone = <T>(v: T): T => structuredClone(v);

function key(namespace: string | undefined, name: string): string {
  return `${namespace ?? ''}/${name}`;
}

export class Store {
  private rev: number;
  private readonly data = new Map<Resource, Map<string, KObject>>();
  private history: StoreEvent[] = [];
  /** Every event with rv <= compactedThrough is forgotten. */
  private compactedThrough: number;
  private readonly listeners = new Set<(e: StoreEvent) => void>();

  constructor(private readonly maxHistory = 10_000, startRevision = 100) {
    this.rev = startRevision;
    this.compactedThrough = 0;
    for (const r of Object.keys(RESOURCES) as Resource[]) this.data.set(r, new Map());
  }

  get revision(): number {
    return this.rev;
  }

  get oldestResumable(): number {
    return this.compactedThrough;
  }

  private bucket(resource: Resource): Map<string, KObject> {
    return this.data.get(resource)!;
  }

  get(resource: Resource, namespace: string | undefined, name: string): KObject | undefined {
    const o = this.bucket(resource).get(key(namespace, name));
    return o && clone(o);
  }

  has(resource: Resource, namespace: string | undefined, name: string): boolean {
    return this.bucket(resource).has(key(namespace, name));
  }

  /** Current objects, sorted by namespace/name like an etcd range read. */
  list(resource: Resource, namespace?: string): KObject[] {
    const out: KObject[] = [];
    const keys = [...this.bucket(resource).keys()].sort();
    for (const k of keys) {
      const o = this.bucket(resource).get(k)!;
      if (namespace !== undefined && o.metadata.namespace !== namespace) continue;
      out.push(clone(o));
    }
    return out;
  }

  create(resource: Resource, obj: KObject): KObject {
    const k = key(obj.metadata.namespace, obj.metadata.name);
    if (this.bucket(resource).has(k)) {
      throw new ConflictError(`${resource} "${obj.metadata.name}" already exists`);
    }
    const stored = clone(obj);
    stored.metadata.uid ??= randomUUID();
    stored.metadata.creationTimestamp ??= new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    stored.metadata.resourceVersion = String(++this.rev);
    this.bucket(resource).set(k, stored);
    this.emit({ type: 'ADDED', resource, rv: this.rev, object: clone(stored) });
    return clone(stored);
  }

  /**
   * Applies `mutate` to a copy of the object; stores it with a new resourceVersion only if it
   * changed (no spurious MODIFIED events). Returns the current object, or undefined if absent.
   */
  update(resource: Resource, namespace: string | undefined, name: string, mutate: (o: KObject) => void): KObject | undefined {
    const k = key(namespace, name);
    const current = this.bucket(resource).get(k);
    if (!current) return undefined;
    const next = clone(current);
    mutate(next);
    next.metadata.resourceVersion = current.metadata.resourceVersion;
    if (JSON.stringify(next) === JSON.stringify(current)) return clone(current);
    next.metadata.resourceVersion = String(++this.rev);
    this.bucket(resource).set(k, next);
    this.emit({ type: 'MODIFIED', resource, rv: this.rev, object: clone(next), previous: clone(current) });
    return clone(next);
  }

  /** Deletes; the DELETED event carries the deletion's resourceVersion, as etcd3 watch does. */
  remove(resource: Resource, namespace: string | undefined, name: string): KObject | undefined {
    const k = key(namespace, name);
    const current = this.bucket(resource).get(k);
    if (!current) return undefined;
    this.bucket(resource).delete(k);
    const gone = clone(current);
    gone.metadata.resourceVersion = String(++this.rev);
    this.emit({ type: 'DELETED', resource, rv: this.rev, object: clone(gone) });
    return gone;
  }

  private emit(e: StoreEvent): void {
    this.history.push(e);
    if (this.history.length > this.maxHistory) {
      const dropped = this.history.splice(0, this.history.length - this.maxHistory);
      this.compactedThrough = dropped[dropped.length - 1]!.rv;
    }
    for (const l of [...this.listeners]) {
      try {
        l(e);
      } catch {
        // a broken watcher must not break the store
      }
    }
  }

  /** Events after `rv`, or undefined when `rv` is older than the kept history (410 Expired). */
  since(rv: number): StoreEvent[] | undefined {
    if (rv < this.compactedThrough) return undefined;
    return this.history.filter((e) => e.rv > rv).map((e) => clone(e));
  }

  /** Forgets all history: resuming from any version older than the current one is "too old". */
  compact(): void {
    this.history = [];
    this.compactedThrough = this.rev;
  }

  subscribe(fn: (e: StoreEvent) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }
}
