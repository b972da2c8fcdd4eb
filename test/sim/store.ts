// Object store of the simulated API server.
// - One global, strictly increasing resourceVersion shared by every kind, like etcd's revision
//   (staging/src/k8s.io/apiserver/pkg/storage/etcd3/store.go).
// - A bounded event history so a watch can resume from an older resourceVersion; a watch from a
//   version older than the kept history is "too old" (410 Expired), as the watch cache does in
//   staging/src/k8s.io/apiserver/pkg/storage/cacher/watch_cache.go.
// - Synchronous fan-out of every change to subscribers (the watch handlers in rest.ts).
import { randomUUID } from 'node:crypto';

export type Resource = 'namespaces' | 'services' | 'pods' | 'endpoints' | 'endpointslices' | 'ingresses' | 'ingressclasses' | 'routes';

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
    resource,
    kind,
    listKind: `${kind}List`,
    singular: kind.toLowerCase(),
    group: '',
    version: 'v1',
    apiVersion: 'v1',
    namespaced,
    shortNames,
    categories,
  };
}

export const RESOURCES: Record<Resource, ResourceInfo> = {
  namespaces: core('namespaces', 'Namespace', false, ['ns']),
  services: core('services', 'Service', true, ['svc'], ['all']),
  pods: core('pods', 'Pod', true, ['po'], ['all']),
  endpoints: core('endpoints', 'Endpoints', true, ['ep']),
  endpointslices: {
    resource: 'endpointslices',
    kind: 'EndpointSlice',
    listKind: 'EndpointSliceList',
    singular: 'endpointslice',
    group: 'discovery.k8s.io',
    version: 'v1',
    apiVersion: 'discovery.k8s.io/v1',
    namespaced: true,
    shortNames: [],
    categories: [],
  },
  ingresses: {
    resource: 'ingresses',
    kind: 'Ingress',
    listKind: 'IngressList',
    singular: 'ingress',
    group: 'networking.k8s.io',
    version: 'v1',
    apiVersion: 'networking.k8s.io/v1',
    namespaced: true,
    shortNames: ['ing'],
    categories: [],
  },
  ingressclasses: {
    resource: 'ingressclasses',
    kind: 'IngressClass',
    listKind: 'IngressClassList',
    singular: 'ingressclass',
    group: 'networking.k8s.io',
    version: 'v1',
    apiVersion: 'networking.k8s.io/v1',
    namespaced: false,
    shortNames: [],
    categories: [],
  },
  // OpenShift's Route (github.com/openshift/api route/v1), served only when the sim is told to.
  routes: {
    resource: 'routes',
    kind: 'Route',
    listKind: 'RouteList',
    singular: 'route',
    group: 'route.openshift.io',
    version: 'v1',
    apiVersion: 'route.openshift.io/v1',
    namespaced: true,
    shortNames: [],
    categories: ['all'],
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
  /** Sorted keys per resource, dropped when an object is created or removed (not on update). */
  private readonly sortedKeys = new Map<Resource, string[]>();

  constructor(
    private readonly maxHistory = 10_000,
    startRevision = 100,
  ) {
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
    return this.listShared(resource, namespace).map(clone);
  }

  /**
   * Like list(), without the copies: the stored objects themselves, which are never changed in
   * place (update and remove store new objects). For serving lists and watches: read, never write.
   */
  listShared(resource: Resource, namespace?: string): readonly KObject[] {
    const bucket = this.bucket(resource);
    let keys = this.sortedKeys.get(resource);
    if (!keys) this.sortedKeys.set(resource, (keys = [...bucket.keys()].sort()));
    const out: KObject[] = [];
    for (const k of keys) {
      const o = bucket.get(k)!;
      if (namespace === undefined || o.metadata.namespace === namespace) out.push(o);
    }
    return out;
  }

  /**
   * Extension: many objects at once, as if the API server had just started on an etcd that holds
   * them: no events, and every older resourceVersion is compacted (a watch from before gets 410).
   * The objects are taken as they are (not copied) and must not be changed afterwards; they may
   * share nested parts with each other. For building big clusters fast (bench/big-cluster.ts).
   */
  bulkLoad(resource: Resource, objects: KObject[]): void {
    const bucket = this.bucket(resource);
    for (const o of objects) {
      const k = key(o.metadata.namespace, o.metadata.name);
      if (bucket.has(k)) throw new ConflictError(`${resource} "${o.metadata.name}" already exists`);
      o.metadata.uid ??= randomUUID();
      o.metadata.creationTimestamp ??= new Date().toISOString().replace(/\.\d+Z$/, 'Z');
      o.metadata.resourceVersion = String(++this.rev);
      bucket.set(k, o);
    }
    this.sortedKeys.delete(resource);
    this.compact();
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
    this.sortedKeys.delete(resource);
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
    this.sortedKeys.delete(resource);
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

/**
 * JSON of a stored object as a list item (no kind/apiVersion), made once per stored object and
 * kept while the object is: the API server's watch cache likewise serializes an object once for
 * every watcher (staging/src/k8s.io/apiserver/pkg/storage/cacher/caching_object.go).
 */
const itemJsonCache = new WeakMap<KObject, string>();
export function itemJson(o: KObject): string {
  let json = itemJsonCache.get(o);
  if (json === undefined) {
    const { kind: _k, apiVersion: _a, ...rest } = o;
    json = JSON.stringify(rest);
    itemJsonCache.set(o, json);
  }
  return json;
}

/** JSON of the whole object (kind and apiVersion first), from the cached item form. */
export function objectJson(o: KObject): string {
  const item = itemJson(o);
  const head = `{"kind":${JSON.stringify(o.kind)},"apiVersion":${JSON.stringify(o.apiVersion)}`;
  return item === '{}' ? `${head}}` : `${head},${item.slice(1)}`;
}
