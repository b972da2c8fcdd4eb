// REST handlers of the simulated API server: get, list and watch with label/field selectors and
// content negotiation (JSON or meta.k8s.io Table). Follows
// staging/src/k8s.io/apiserver/pkg/endpoints/handlers/{get.go,watch.go} and the watch-cache
// filtering of staging/src/k8s.io/apiserver/pkg/storage/cacher/cache_watcher.go (an object that
// stops matching a selector is sent as DELETED, one that starts matching as ADDED).
import type { ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import { RESOURCES, itemJson, objectJson, type KObject, type ResourceInfo, type Store, type StoreEvent } from './store.js';
import { continueExpired, decodeContinue, encodeContinue, listTooOld, parseLimit, writeParts, type ListSnapshots } from './paging.js';
import {
  matchesFields,
  matchesLabels,
  parseFieldSelector,
  parseLabelSelector,
  SelectorError,
  type FieldRequirement,
  type LabelRequirement,
} from './selectors.js';
import { ApiError, badRequest, expired, notAcceptable, notFound } from './status.js';
import { toTable, type IncludeObject } from './tables.js';

export type Negotiated = { type: 'json' } | { type: 'table'; version: string };

/** Picks the first media type (in the client's order) the simulator can produce. */
export function negotiate(accept: string | undefined): Negotiated {
  if (!accept || !accept.trim()) return { type: 'json' };
  for (const raw of accept.split(',')) {
    const [mediaRaw, ...paramsRaw] = raw.split(';').map((s) => s.trim());
    const media = (mediaRaw ?? '').toLowerCase();
    const params = new Map(
      paramsRaw.map((p) => {
        const i = p.indexOf('=');
        return [p.slice(0, i).trim().toLowerCase(), p.slice(i + 1).trim()] as [string, string];
      }),
    );
    const q = params.has('q') ? Number(params.get('q')) : 1;
    if (q === 0) continue;
    if (media !== 'application/json' && media !== '*/*' && media !== 'application/*') continue;
    const as = params.get('as');
    if (!as) return { type: 'json' };
    if (as === 'Table' && params.get('g') === 'meta.k8s.io' && (params.get('v') === 'v1' || params.get('v') === 'v1beta1')) {
      return { type: 'table', version: params.get('v')! };
    }
  }
  throw notAcceptable();
}

export function commonHeaders(res: ServerResponse): void {
  res.setHeader('Audit-Id', randomUUID());
  res.setHeader('Cache-Control', 'no-cache, private');
}

export function sendJson(res: ServerResponse, code: number, body: unknown, contentType = 'application/json'): void {
  const text = JSON.stringify(body);
  commonHeaders(res);
  res.writeHead(code, { 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

export function sendError(res: ServerResponse, err: ApiError): void {
  // apiserver responsewriters/status.go: a Status's retryAfterSeconds is also the header.
  const retryAfter = err.details?.retryAfterSeconds;
  if (typeof retryAfter === 'number' && retryAfter > 0) res.setHeader('Retry-After', String(retryAfter));
  sendJson(res, err.code, err.body());
}

function tableContentType(version: string): string {
  return `application/json;as=Table;v=${version};g=meta.k8s.io`;
}

function includeObject(q: URLSearchParams): IncludeObject {
  const v = q.get('includeObject');
  return v === 'None' || v === 'Object' ? v : 'Metadata';
}

interface Filter {
  namespace?: string;
  labels: LabelRequirement[];
  fields: FieldRequirement[];
}

function parseFilter(info: ResourceInfo, namespace: string | undefined, q: URLSearchParams): Filter {
  try {
    return {
      namespace,
      labels: parseLabelSelector(q.get('labelSelector') ?? undefined),
      fields: parseFieldSelector(q.get('fieldSelector') ?? undefined, info.resource),
    };
  } catch (e) {
    if (e instanceof SelectorError) throw badRequest(e.message);
    throw e;
  }
}

/** The store's key (an etcd range read's order): namespace/name. */
const keyOf = (o: KObject): string => `${o.metadata.namespace ?? ''}/${o.metadata.name}`;

function matches(info: ResourceInfo, f: Filter, o: KObject): boolean {
  if (f.namespace !== undefined && o.metadata.namespace !== f.namespace) return false;
  return matchesLabels(f.labels, o.metadata.labels) && matchesFields(info.resource, f.fields, o);
}

export function handleGet(
  store: Store,
  info: ResourceInfo,
  namespace: string | undefined,
  name: string,
  q: URLSearchParams,
  accept: string | undefined,
  res: ServerResponse,
): void {
  const neg = negotiate(accept);
  const obj = store.get(info.resource, namespace, name);
  if (!obj) throw notFound(info, name);
  if (neg.type === 'table') {
    sendJson(res, 200, toTable(info.resource, [obj], obj.metadata.resourceVersion ?? '', neg.version, includeObject(q)), tableContentType(neg.version));
  } else {
    sendJson(res, 200, obj);
  }
}

export interface ListContext {
  snapshots: ListSnapshots;
  /** Extension: called after a page that has a continue token was sent. */
  afterPage?: (resource: string) => void;
  /** The watch cache's 429 while it initialises after a restart; undefined once it is ready. */
  cacheUnready?: () => ApiError | undefined;
}

/**
 * LIST, paged when `limit` is given (see paging.ts). JSON bodies are written in batches as the
 * socket drains: a 50,000-pod list is ~500 MB, more than one JavaScript string may hold.
 */
export function handleList(
  store: Store,
  info: ResourceInfo,
  namespace: string | undefined,
  q: URLSearchParams,
  accept: string | undefined,
  res: ServerResponse,
  ctx: ListContext,
): void {
  const neg = negotiate(accept);
  validateListOptions(q);
  const filter = parseFilter(info, namespace, q);
  const limit = parseLimit(q.get('limit'));
  const token = q.get('continue');
  const unready = ctx.cacheUnready?.();
  if (unready && !token && q.get('resourceVersionMatch') !== 'Exact') {
    // What the cache would serve is refused; upstream's delegator sends a paged list without
    // selectors, and a legacy exact one, to etcd instead (cacher/delegator.go, delegator/interface.go).
    const rvParam = q.get('resourceVersion') ?? '';
    const legacyExact = limit > 0 && rvParam !== '' && rvParam !== '0' && !q.get('resourceVersionMatch');
    const toEtcd = limit > 0 && filter.labels.length === 0 && filter.fields.length === 0;
    if (!legacyExact && !toEtcd) throw unready;
  }
  let all: readonly KObject[];
  let rv: number;
  let start = 0;
  let snapshotId: string | undefined;
  const current = () => store.listShared(info.resource, namespace).filter((o) => matches(info, filter, o));
  const exactRv = q.get('resourceVersionMatch') === 'Exact' ? Number(q.get('resourceVersion')) : undefined;
  // Only the current state is kept: an exact list of a compacted version is 410, any other is served as of now.
  if (exactRv !== undefined && exactRv < store.oldestResumable) throw listTooOld();
  const t = token ? decodeContinue(token) : undefined;
  if (t && t.rv !== -1) {
    const items = ctx.snapshots.get(t.id);
    if (!items || t.rv < store.oldestResumable) throw continueExpired(t);
    [all, rv, start, snapshotId] = [items, t.rv, t.start, t.id];
  } else {
    all = current();
    rv = store.revision;
    // An inconsistent continuation: the current objects from the token's key on.
    if (t) {
      const next = all.findIndex((o) => keyOf(o) >= t.key);
      start = next < 0 ? all.length : next;
    }
  }
  const end = limit > 0 ? Math.min(start + limit, all.length) : all.length;
  const page = all.slice(start, end);
  const metadata: Record<string, unknown> = { resourceVersion: String(rv) };
  if (end < all.length) {
    snapshotId ??= ctx.snapshots.open(rv, all);
    metadata.continue = encodeContinue({ rv, start: end, id: snapshotId, key: keyOf(all[end]!) });
    // Upstream counts the rest only when no selector filters it.
    if (!q.get('labelSelector') && !q.get('fieldSelector')) metadata.remainingItemCount = all.length - end;
  }
  if (neg.type === 'table') {
    const table = toTable(info.resource, [...page], String(rv), neg.version, includeObject(q)) as { metadata: Record<string, unknown> };
    table.metadata = metadata;
    sendJson(res, 200, table, tableContentType(neg.version));
  } else {
    commonHeaders(res);
    res.writeHead(200, { 'Content-Type': 'application/json' });
    const head = `{"kind":${JSON.stringify(info.listKind)},"apiVersion":${JSON.stringify(info.apiVersion)},"metadata":${JSON.stringify(metadata)},"items":[`;
    function* parts(): Generator<string> {
      yield head;
      for (let i = 0; i < page.length; i++) yield i ? `,${itemJson(page[i]!)}` : itemJson(page[i]!);
      yield ']}';
    }
    void writeParts(res, parts()).then((ok) => ok && res.end());
  }
  if (metadata.continue) ctx.afterPage?.(info.resource);
}

export interface ActiveWatch {
  end(): void;
  /** A silently dead path: no more events, no server-side timeout, the connection left open. */
  freeze(): void;
}

export function isTrue(v: string | null): boolean {
  return v !== null && ['1', 't', 'T', 'true', 'TRUE', 'True'].includes(v);
}

/**
 * 422 Invalid for ListOptions, worded as staging/src/k8s.io/apimachinery/pkg/apis/meta/internalversion/validation/validation.go
 * (several causes: "[a, b]", as field.ErrorList.ToAggregate writes them).
 */
function invalidListOptions(...forbidden: Array<[field: string, detail: string]>): ApiError {
  const texts = forbidden.map(([field, detail]) => `${field}: Forbidden: ${detail}`);
  return new ApiError(422, 'Invalid', `ListOptions.meta.k8s.io "" is invalid: ${texts.length > 1 ? `[${texts.join(', ')}]` : texts[0]}`, {
    group: 'meta.k8s.io',
    kind: 'ListOptions',
    causes: forbidden.map(([field, detail]) => ({ reason: 'FieldValueForbidden', message: `Forbidden: ${detail}`, field })),
  });
}

/** A LIST's ListOptions as validation.go checks them: resourceVersionMatch needs a resourceVersion; sendInitialEvents is for watches. */
export function validateListOptions(q: URLSearchParams): void {
  const problems: Array<[string, string]> = [];
  if (q.get('resourceVersionMatch') && !q.get('resourceVersion'))
    problems.push(['resourceVersionMatch', 'resourceVersionMatch is forbidden unless resourceVersion is provided']);
  if (q.get('sendInitialEvents') !== null) problems.push(['sendInitialEvents', 'sendInitialEvents is forbidden for list']);
  if (problems.length) throw invalidListOptions(...problems);
}

/**
 * The watch-list parameters (KEP-3157) as the API server validates them: sendInitialEvents needs
 * the WatchList feature (else 422, which clients take as "list instead") and
 * resourceVersionMatch=NotOlderThan; resourceVersionMatch alone is forbidden on a watch. Bookmarks
 * are not required (v1.37): without allowWatchBookmarks the initial events end without a bookmark.
 */
function initialEventsMode(q: URLSearchParams, watchList: boolean): boolean | undefined {
  const send = q.get('sendInitialEvents');
  const match = q.get('resourceVersionMatch') ?? '';
  if (send === null) {
    if (match) throw invalidListOptions(['resourceVersionMatch', 'resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided']);
    return undefined;
  }
  if (!watchList) throw invalidListOptions(['sendInitialEvents', 'sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled']);
  if (match !== 'NotOlderThan') throw invalidListOptions(['resourceVersionMatch', 'sendInitialEvents requires setting resourceVersionMatch to NotOlderThan']);
  return isTrue(send);
}

/**
 * A BOOKMARK's object: an empty object of the kind carrying only the resourceVersion (and
 * annotations), serialised as Go serialises an empty one — the zero-valued fields without omitempty
 * (staging/src/k8s.io/apiserver/pkg/storage/cacher/cache_watcher.go newBookmarkEvent).
 */
function bookmarkObject(info: ResourceInfo, metadata: Record<string, unknown>): Record<string, unknown> {
  const zero: Partial<Record<string, Record<string, unknown>>> = {
    pods: { spec: { containers: null }, status: {} },
    services: { spec: {}, status: { loadBalancer: {} } },
    namespaces: { spec: {}, status: {} },
    endpointslices: { addressType: '', endpoints: null, ports: null },
    ingresses: { spec: {}, status: { loadBalancer: {} } },
  };
  return { kind: info.kind, apiVersion: info.apiVersion, metadata, ...structuredClone(zero[info.resource] ?? {}) };
}

/**
 * Streams watch events as newline-delimited JSON. resourceVersion absent or "0" (no
 * sendInitialEvents): ADDED for the current objects first. sendInitialEvents=true: the current
 * objects as ADDED, then a BOOKMARK annotated "k8s.io/initial-events-end" at the snapshot's
 * resourceVersion (staging/src/k8s.io/apiserver/pkg/storage/cacher/cacher.go, cache_watcher.go);
 * events of the meantime follow it. Older than the kept history: 200 + one ERROR event (410
 * Expired), then the response ends, which is what client-go reflectors and client-node informers expect.
 */
export function handleWatch(
  store: Store,
  info: ResourceInfo,
  namespace: string | undefined,
  name: string | undefined,
  q: URLSearchParams,
  accept: string | undefined,
  res: ServerResponse,
  registry: Set<ActiveWatch>,
  watchList = true,
  bookmarkIntervalMs = 0,
  cacheUnready?: () => ApiError | undefined,
): void {
  const neg = negotiate(accept);
  const filter = parseFilter(info, namespace, q);
  if (name !== undefined) filter.fields.push({ key: 'metadata.name', op: 'eq', value: name });
  const initialEvents = initialEventsMode(q, watchList);
  const rvParam = q.get('resourceVersion') ?? '';
  let fromRv: number | undefined;
  if (rvParam !== '' && rvParam !== '0') {
    if (!/^\d+$/.test(rvParam)) throw badRequest(`invalid resource version: strconv.ParseUint: parsing "${rvParam}": invalid syntax`);
    fromRv = Number(rvParam);
  }
  const timeoutSeconds = q.has('timeoutSeconds') ? Number(q.get('timeoutSeconds')) : undefined;
  // Every watch is served by the watch cache: refused while it initialises (cacher.go Watch).
  const unready = cacheUnready?.();
  if (unready) throw unready;

  commonHeaders(res);
  res.writeHead(200, { 'Content-Type': neg.type === 'table' ? tableContentType(neg.version) : 'application/json', 'Transfer-Encoding': 'chunked' });
  res.socket?.setNoDelay(true);
  // The apiserver flushes the headers at once (apiserver pkg/endpoints/handlers/watch.go), so a
  // client's fetch resolves before the first event; client-node's ListWatch waits on exactly that.
  res.flushHeaders();
  let first = true;
  const line = (type: string, obj: unknown): string => {
    if (neg.type === 'table' && (type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED')) {
      const o = obj as KObject;
      const table = toTable(info.resource, [o], o.metadata.resourceVersion ?? '', neg.version, includeObject(q), first);
      first = false;
      return JSON.stringify({ type, object: table }) + '\n';
    }
    const json = type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED' ? objectJson(obj as KObject) : JSON.stringify(obj);
    return `{"type":${JSON.stringify(type)},"object":${json}}\n`;
  };
  const write = (type: string, obj: unknown): void => {
    if (res.writableEnded || res.destroyed) return;
    res.write(line(type, obj));
  };

  let unsubscribe = (): void => {};
  let timer: NodeJS.Timeout | undefined;
  // Periodic bookmarks at the store's revision, once the watch is live (not inside a watch-list's initial events).
  let live = false;
  const bookmarks =
    bookmarkIntervalMs > 0 && isTrue(q.get('allowWatchBookmarks')) && neg.type !== 'table'
      ? setInterval(() => {
          if (live) write('BOOKMARK', bookmarkObject(info, { resourceVersion: String(store.revision) }));
        }, bookmarkIntervalMs)
      : undefined;
  bookmarks?.unref();
  const active: ActiveWatch = {
    end: () => {
      if (!res.writableEnded) res.end();
    },
    freeze: () => {
      unsubscribe();
      if (timer) clearTimeout(timer);
      timer = undefined;
      clearInterval(bookmarks);
    },
  };
  const cleanup = (): void => {
    unsubscribe();
    clearInterval(bookmarks);
    if (timer) clearTimeout(timer);
    registry.delete(active);
  };
  registry.add(active);
  res.on('close', cleanup);

  const deliver = (e: StoreEvent): void => {
    if (e.resource !== info.resource) return;
    const now = matches(info, filter, e.object);
    if (e.type === 'MODIFIED') {
      const before = e.previous ? matches(info, filter, e.previous) : false;
      if (now && before) write('MODIFIED', e.object);
      else if (now) write('ADDED', e.object);
      else if (before) {
        const gone = structuredClone(e.previous!);
        gone.metadata.resourceVersion = String(e.rv);
        write('DELETED', gone);
      }
    } else if (now) {
      write(e.type, e.object);
    }
  };
  const startTimer = (): void => {
    if (timeoutSeconds !== undefined && Number.isFinite(timeoutSeconds) && timeoutSeconds > 0) {
      timer = setTimeout(() => active.end(), timeoutSeconds * 1000);
    }
  };

  if (initialEvents === true || (fromRv === undefined && initialEvents === undefined)) {
    // The snapshot is taken now; changes while it is being written wait behind it.
    const snapshotRv = store.revision;
    const snapshot = store.listShared(info.resource, namespace).filter((o) => matches(info, filter, o));
    const queued: StoreEvent[] = [];
    unsubscribe = store.subscribe((e) => (live ? deliver(e) : queued.push(e)));
    startTimer();
    const parts = function* (): Generator<string> {
      for (const o of snapshot) yield line('ADDED', o);
      if (initialEvents && isTrue(q.get('allowWatchBookmarks'))) {
        yield line('BOOKMARK', bookmarkObject(info, { resourceVersion: String(snapshotRv), annotations: { 'k8s.io/initial-events-end': 'true' } }));
      }
    };
    void writeParts(res, parts()).then(() => {
      live = true;
      for (const e of queued) if (e.rv > snapshotRv) deliver(e);
    });
    return;
  }
  if (fromRv !== undefined) {
    const events = store.since(fromRv);
    if (!events) {
      const err = expired(`too old resource version: ${fromRv} (${store.oldestResumable})`);
      res.write(JSON.stringify({ type: 'ERROR', object: err.body() }) + '\n');
      res.end();
      return;
    }
    for (const e of events) deliver(e);
  }
  unsubscribe = store.subscribe(deliver);
  live = true;
  startTimer();
}

export { RESOURCES };
