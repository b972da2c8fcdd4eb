// HTTPS front of the simulated API server: TLS with the sim CA, authentication (client
// certificate via the CA, then bearer token — a union like
// staging/src/k8s.io/apiserver/pkg/authentication/request/union/union.go; anonymous auth off, so
// no credentials → 401), an RBAC-like namespace restriction for scoped tokens (403 worded like
// staging/src/k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/errors.go), URL routing like
// staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go, discovery, per-request
// counters, and the port-forward upgrade hand-off to the simulated kubelet. Requests without
// credentials are system:anonymous (kube-apiserver's default --anonymous-auth=true), whom RBAC's
// default bindings (plugin/pkg/auth/authorizer/rbac/bootstrappolicy: system:public-info-viewer)
// allow only the version and health paths.
import https from 'node:https';
import tls, { type TLSSocket } from 'node:tls';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { RESOURCES, type Resource, type ResourceInfo, type Store } from './store.js';
import { ApiError, forbidden, methodNotAllowed, pathNotFound, unauthorized, badRequest, notFound, storageInitializing } from './status.js';
import { handleGet, handleList, handleWatch, isTrue, sendError, sendJson, type ActiveWatch } from './rest.js';
import { ListSnapshots } from './paging.js';
import {
  apiGroupList,
  apiVersions,
  coreV1Resources,
  DISCOVERY_GROUP,
  groupDocument,
  groupV1Resources,
  NETWORKING_GROUP,
  ROUTE_GROUP,
  SIM_VERSION,
  type SimApiGroup,
} from './discovery.js';
import { writeRawResponse, writeRawStatus } from './kubelet-portforward.js';
import { ACCESS_REVIEW_PATH, authorizationGroup, authorizationV1Resources, handleAccessReview } from './access-review.js';

const GO_CIPHERS = [
  'TLS_AES_128_GCM_SHA256',
  'TLS_AES_256_GCM_SHA384',
  'TLS_CHACHA20_POLY1305_SHA256',
  ...tls.DEFAULT_CIPHERS.split(':').filter((c) => !c.startsWith('TLS_')),
].join(':');

export interface SimCounters {
  total: number;
  list: number;
  watch: number;
  get: number;
  portForward: number;
  other: number;
  byPath: Record<string, number>;
  /** Extension: watches that asked for initial events (watch-list, sendInitialEvents=true). */
  watchList: number;
  /** Extension: list pages that carried a continue token (a paged list's every page but the last). */
  continued: number;
  /** Extension: response body bytes of get/list/watch requests, in all and per path. */
  bytes: number;
  bytesByPath: Record<string, number>;
}

export function emptyCounters(): SimCounters {
  return { total: 0, list: 0, watch: 0, get: 0, portForward: 0, other: 0, byPath: {}, watchList: 0, continued: 0, bytes: 0, bytesByPath: {} };
}

export interface Identity {
  user: string;
  groups: string[];
  /** undefined = cluster-wide access; else only these namespaces. */
  namespaces?: string[];
  /** Extension: requests refused wherever they are, as "verb resource[/subresource]" (e.g. "watch pods"). */
  denied?: string[];
  /** system:anonymous: only the public paths; everything else 403. */
  anonymous?: boolean;
}

const ANONYMOUS: Identity = { user: 'system:anonymous', groups: ['system:unauthenticated'], namespaces: [], anonymous: true };
/** What system:public-info-viewer grants everyone. */
const PUBLIC_PATHS = new Set(['/version', '/healthz', '/livez', '/readyz']);

/** RBAC's refusal of a non-resource path. */
function pathForbidden(user: string, path: string): ApiError {
  return new ApiError(403, 'Forbidden', `forbidden: User "${user}" cannot get path "${path}"`, {});
}

export type Route =
  | { t: 'doc'; body: () => object }
  | { t: 'text'; body: string }
  | { t: 'resource'; info: ResourceInfo; namespace?: string; name?: string; sub?: string; watchPrefix: boolean }
  | { t: 'review' }
  | { t: 'apiNotFound' }
  | { t: 'notFound' };

/** The API groups served besides the core group: OpenShift's route.openshift.io only when switched on. */
export function servedGroups(openshiftRoutes: boolean): SimApiGroup[] {
  return openshiftRoutes ? [DISCOVERY_GROUP, NETWORKING_GROUP, ROUTE_GROUP] : [DISCOVERY_GROUP, NETWORKING_GROUP];
}

export function parseRoute(pathname: string, serverAddress: string, groups: SimApiGroup[] = servedGroups(false)): Route {
  const path = pathname.length > 1 ? pathname.replace(/\/+$/, '') : pathname;
  switch (path) {
    case '/':
      return {
        t: 'doc',
        body: () => ({
          paths: [
            '/api',
            '/api/v1',
            '/apis',
            '/apis/authorization.k8s.io',
            '/apis/authorization.k8s.io/v1',
            ...groups.flatMap((g) => [`/apis/${g.name}`, `/apis/${g.name}/v1`]),
            '/healthz',
            '/livez',
            '/readyz',
            '/version',
          ],
        }),
      };
    case '/version':
      return { t: 'doc', body: () => SIM_VERSION };
    case '/healthz':
    case '/livez':
    case '/readyz':
      return { t: 'text', body: 'ok' };
    case '/api':
      return { t: 'doc', body: () => apiVersions(serverAddress) };
    case '/apis':
      return { t: 'doc', body: () => apiGroupList(groups) };
    case '/api/v1':
      return { t: 'doc', body: coreV1Resources };
    case '/apis/authorization.k8s.io':
      return { t: 'doc', body: () => ({ kind: 'APIGroup', apiVersion: 'v1', ...authorizationGroup() }) };
    case '/apis/authorization.k8s.io/v1':
      return { t: 'doc', body: authorizationV1Resources };
    case ACCESS_REVIEW_PATH:
      return { t: 'review' };
  }
  for (const g of groups) {
    if (path === `/apis/${g.name}`) return { t: 'doc', body: () => groupDocument(g) };
    if (path === `/apis/${g.name}/v1`) return { t: 'doc', body: () => groupV1Resources(g) };
  }
  const groupResources: Record<string, Resource[]> = { '/api/v1': ['namespaces', 'services', 'pods', 'endpoints'] };
  for (const g of groups) groupResources[`/apis/${g.name}/v1`] = g.resources.map((r) => r.resource);
  const prefix = Object.keys(groupResources).find((p) => path.startsWith(p + '/'));
  if (!prefix) return path.startsWith('/api/') || path.startsWith('/apis/') ? { t: 'apiNotFound' } : { t: 'notFound' };
  const allowed = groupResources[prefix]!;
  let segs = path
    .slice(prefix.length + 1)
    .split('/')
    .map(decodeURIComponent);
  let watchPrefix = false;
  if (segs[0] === 'watch') {
    watchPrefix = true;
    segs = segs.slice(1);
  }
  const known = (r: string | undefined): r is Resource => r !== undefined && (allowed as string[]).includes(r);
  // /namespaces/{ns}/{resource}[/{name}[/{sub}]]
  if (segs[0] === 'namespaces' && segs.length >= 3 && segs[2] !== 'status' && segs[2] !== 'finalize') {
    const r = segs[2];
    if (!known(r) || !RESOURCES[r].namespaced || segs.length > 5) return { t: 'apiNotFound' };
    return { t: 'resource', info: RESOURCES[r], namespace: segs[1], name: segs[3], sub: segs[4], watchPrefix };
  }
  const r = segs[0];
  if (!known(r) || segs.length > 3) return { t: 'apiNotFound' };
  const info = RESOURCES[r];
  if (info.namespaced && segs.length > 1) return { t: 'apiNotFound' };
  return { t: 'resource', info, name: segs[1], sub: segs[2], watchPrefix };
}

type Verb = 'get' | 'list' | 'watch' | 'portforward' | 'other';

function verbOf(route: Route, q: URLSearchParams): Verb {
  if (route.t !== 'resource') return 'other';
  if (route.sub === 'portforward' && route.info.resource === 'pods') return 'portforward';
  if (route.sub !== undefined) return 'get';
  if (route.watchPrefix || isTrue(q.get('watch'))) return 'watch';
  return route.name === undefined ? 'list' : 'get';
}

export interface ApiServerOptions {
  host: string;
  port: number;
  tls: { key: string; cert: string; ca: string };
  store: Store;
  tokens: Map<string, Identity>;
  onPortForward(req: IncomingMessage, socket: Duplex, head: Buffer, namespace: string, pod: string, query: URLSearchParams): void;
  /** Extension: SPDY port-forward (plain, or tunnelled in a WebSocket); false leaves the request to onPortForward. */
  onSpdyPortForward?(req: IncomingMessage, socket: Duplex, head: Buffer, namespace: string, pod: string, query: URLSearchParams): boolean;
  log(msg: string): void;
}

export class ApiServer {
  private readonly server: https.Server;
  private readonly sockets = new Set<Socket>();
  private readonly watches = new Set<ActiveWatch>();
  counters: SimCounters = emptyCounters();
  port: number;
  /** Extension: false = --anonymous-auth=false: requests without credentials get 401. */
  anonymousAuth = true;
  /** Extension: false = a server without the WatchList feature (sendInitialEvents → 422), as before 1.27 or with the gate off. */
  watchList = true;
  /** Extension: called after each list page that has a continue token (tests compact the store there). */
  afterListPage?: (resource: string) => void;
  readonly listSnapshots = new ListSnapshots();
  /** Extension: the next `count` requests whose path and query match get API priority and fairness's 429. */
  tooManyRequests?: { count: number; match: RegExp; retryAfterSeconds: number };
  /** Extension: the watch caches initialise from `since` until `until` (epoch ms): 429 for what they serve. */
  cacheInitialising?: { since: number; until: number };
  /** The 429 of a watch cache still initialising, or undefined. */
  private readonly cacheUnready = (): ApiError | undefined => {
    const c = this.cacheInitialising;
    if (!c || Date.now() >= c.until) return undefined;
    return storageInitializing(Date.now() - c.since);
  };

  constructor(private readonly o: ApiServerOptions) {
    this.port = o.port;
    this.server = https.createServer(
      // TLS 1.3 suites in a Go server's order (crypto/tls cipher_suites.go defaultCipherSuitesTLS13;
      // handshake_server_tls13.go picks from it, not from the client's list): AES-128-GCM for any
      // client that offers it, as kube-apiserver does. OpenSSL's own default would be AES-256.
      { key: o.tls.key, cert: o.tls.cert, ca: [o.tls.ca], requestCert: true, rejectUnauthorized: false, ciphers: GO_CIPHERS, honorCipherOrder: true },
      (req, res) => this.onRequest(req, res),
    );
    this.server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => this.onUpgrade(req, socket, head));
    const track = (s: Socket): void => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    };
    this.server.on('connection', track);
    this.server.on('secureConnection', track);
    this.server.on('tlsClientError', () => {});
  }

  get address(): string {
    return this.o.host.includes(':') ? `[${this.o.host}]:${this.port}` : `${this.o.host}:${this.port}`;
  }

  listen(): Promise<void> {
    return new Promise((resolve, reject) => {
      const onError = (e: Error): void => reject(e);
      this.server.once('error', onError);
      this.server.listen(this.port, this.o.host, () => {
        this.server.removeListener('error', onError);
        this.port = (this.server.address() as { port: number }).port;
        resolve();
      });
    });
  }

  /** Stops listening and cuts every connection (watches, port-forward WebSockets included). */
  close(): Promise<void> {
    return new Promise((resolve) => {
      if (!this.server.listening) return resolve();
      this.server.close(() => resolve());
      for (const s of this.sockets) s.destroy();
      this.sockets.clear();
    });
  }

  dropWatches(): void {
    for (const w of [...this.watches]) w.end();
  }

  /**
   * BOOKMARK events to watches that allow them, this often (the watch cache sends them about once
   * a minute, staging/src/k8s.io/apiserver/pkg/storage/cacher/cacher.go bookmarkFrequency); 0: none.
   */
  bookmarkIntervalMs = 60_000;
  /** Extension: the list and watch requests served, in order (path, resourceVersion asked, watch-list or not). */
  readonly listWatchLog: Array<{ at: number; verb: 'list' | 'watch'; path: string; resourceVersion?: string; watchList: boolean }> = [];

  /** New watch requests get no answer at all (not even headers) while this is on. */
  stallWatches = false;
  /** New port-forward requests get no answer while this is on (a kubelet that hangs: the API server waits on it). */
  stallPortForwards = false;
  /** New watch requests are answered 200 and ended at once, without an event, while this is on. */
  endWatchesAtOnce = false;
  /** LIST requests that came while lists were held (stallLists): answered when the hold ends. */
  private readonly heldLists: Array<() => void> = [];
  private listsHeld = false;

  /** LIST requests get no answer while this is on; turned off, those held are answered then. */
  holdLists(on: boolean): void {
    this.listsHeld = on;
    if (!on) for (const answer of this.heldLists.splice(0)) answer();
  }

  /** Extension: serve OpenShift's route.openshift.io/v1 (discovery and Routes), as an OpenShift API server does. */
  openshiftRoutes = false;

  /** Open watches go silent and never end; returns how many. */
  freezeWatches(): number {
    for (const w of this.watches) w.freeze();
    return this.watches.size;
  }

  private trace(req: IncomingMessage): void {
    if (!process.env.SIM_DEBUG) return;
    const h = req.headers;
    process.stderr.write(
      `[sim] ${req.method} ${req.url} accept=${h.accept ?? '-'} upgrade=${h.upgrade ?? '-'} proto=${h['sec-websocket-protocol'] ?? '-'} ua=${h['user-agent'] ?? '-'}\n`,
    );
  }

  private count(verb: Verb, pathname: string): void {
    const c = this.counters;
    c.total++;
    if (verb === 'portforward') c.portForward++;
    else c[verb]++;
    c.byPath[pathname] = (c.byPath[pathname] ?? 0) + 1;
  }

  /** Counts what the response body carries (strings as UTF-8), wherever it is written from. */
  private countBytes(res: ServerResponse, pathname: string): void {
    const add = (chunk: unknown): void => {
      if (chunk === undefined || chunk === null || typeof chunk === 'function') return;
      const n = typeof chunk === 'string' ? Buffer.byteLength(chunk) : ((chunk as Uint8Array).byteLength ?? 0);
      const c = this.counters;
      c.bytes += n;
      c.bytesByPath[pathname] = (c.bytesByPath[pathname] ?? 0) + n;
    };
    const write = res.write.bind(res) as (...a: unknown[]) => boolean;
    const end = res.end.bind(res) as (...a: unknown[]) => ServerResponse;
    res.write = ((chunk: unknown, ...rest: unknown[]) => {
      add(chunk);
      return write(chunk, ...rest);
    }) as ServerResponse['write'];
    res.end = ((chunk?: unknown, ...rest: unknown[]) => {
      add(chunk);
      return end(chunk, ...rest);
    }) as ServerResponse['end'];
  }

  /** The identity, system:anonymous for a request without credentials, or undefined (401). */
  private authenticate(req: IncomingMessage): Identity | undefined {
    const id = this.credentialsOf(req);
    if (id || !this.anonymousAuth) return id;
    return req.headers.authorization === undefined ? ANONYMOUS : undefined;
  }

  private credentialsOf(req: IncomingMessage): Identity | undefined {
    const tls = req.socket as TLSSocket;
    if (tls.authorized) {
      const cert = tls.getPeerCertificate();
      const cn = cert?.subject?.CN;
      if (cn) {
        const o = cert.subject.O;
        return { user: Array.isArray(cn) ? cn[0]! : cn, groups: o ? (Array.isArray(o) ? o : [o]) : [] };
      }
    }
    const m = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
    return m ? this.o.tokens.get(m[1]!) : undefined;
  }

  /**
   * Impersonation (apiserver pkg/endpoints/filters/impersonation.go, simplified): only cluster-wide
   * identities may impersonate; the impersonated identity has the requested groups (each
   * Impersonate-Group header line is one group) plus system:authenticated. Stand-in RBAC: it has
   * cluster-wide access with group system:masters and none otherwise.
   */
  private impersonate(id: Identity, req: IncomingMessage): Identity {
    const user = req.headersDistinct['impersonate-user']?.[0];
    if (user === undefined) return id;
    if (id.namespaces || id.anonymous) {
      throw new ApiError(
        403,
        'Forbidden',
        `users "${user}" is forbidden: User "${id.user}" cannot impersonate resource "users" in API group "" at the cluster scope`,
        { name: user, kind: 'users' },
      );
    }
    const groups = [...(req.headersDistinct['impersonate-group'] ?? []), 'system:authenticated'];
    this.impersonations.push({ user, groups, uid: req.headersDistinct['impersonate-uid']?.[0] });
    return { user, groups, namespaces: groups.includes('system:masters') ? undefined : [] };
  }

  /** Extension: every impersonation seen (user, groups as sent, uid). */
  readonly impersonations: Array<{ user: string; groups: string[]; uid?: string }> = [];

  /** RBAC stand-in: scoped identities see only their namespaces; cluster-scope reads are forbidden. */
  private authorize(id: Identity, verb: string, route: Extract<Route, { t: 'resource' }>): ApiError | undefined {
    const { info, namespace, name, sub } = route;
    if (id.denied?.includes(`${verb} ${info.resource}${sub ? `/${sub}` : ''}`)) return forbidden(id.user, verb, info, namespace, name, sub);
    const allowed = id.namespaces;
    if (!allowed) return undefined;
    if (info.resource === 'namespaces') {
      if (name !== undefined && allowed.includes(name)) return undefined;
      return forbidden(id.user, verb, info, name, name);
    }
    if (namespace === undefined) return forbidden(id.user, verb, info, undefined);
    if (!allowed.includes(namespace)) return forbidden(id.user, verb, info, namespace, name, sub);
    return undefined;
  }

  private onRequest(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? '/', 'https://sim');
    const route = parseRoute(url.pathname, this.address, servedGroups(this.openshiftRoutes));
    const verb = verbOf(route, url.searchParams);
    this.count(verb, url.pathname);
    if (verb === 'watch' && isTrue(url.searchParams.get('sendInitialEvents'))) this.counters.watchList++;
    if (verb === 'list' && url.searchParams.get('continue')) this.counters.continued++;
    if ((verb === 'list' || verb === 'watch') && this.listWatchLog.length < 100_000) {
      const rv = url.searchParams.get('resourceVersion') ?? undefined;
      this.listWatchLog.push({
        at: Date.now(),
        verb,
        path: url.pathname,
        ...(rv !== undefined ? { resourceVersion: rv } : {}),
        watchList: verb === 'watch' && isTrue(url.searchParams.get('sendInitialEvents')),
      });
    }
    this.trace(req);
    this.countBytes(res, url.pathname);
    res.on('error', () => {});
    if (verb === 'list' && this.listsHeld) {
      this.heldLists.push(() => this.serve(req, res, url, route, verb));
      return;
    }
    this.serve(req, res, url, route, verb);
  }

  private serve(req: IncomingMessage, res: ServerResponse, url: URL, route: Route, verb: Verb): void {
    try {
      const id = this.authenticate(req);
      if (!id) throw unauthorized();
      const limit = this.tooManyRequests;
      if (limit && limit.count > 0 && limit.match.test(url.pathname + url.search)) {
        // apiserver server/filters/priority-and-fairness.go tooManyRequests: plain text, not a Status.
        limit.count--;
        res.writeHead(429, {
          'Retry-After': String(limit.retryAfterSeconds),
          'Content-Type': 'text/plain; charset=utf-8',
          'X-Content-Type-Options': 'nosniff',
        });
        return void res.end('Too many requests, please try again later.\n');
      }
      this.dispatch(req, res, url, route, verb, this.impersonate(id, req));
    } catch (e) {
      if (e instanceof ApiError) {
        if (!res.headersSent) sendError(res, e);
        else res.end();
      } else {
        this.o.log(`internal error on ${req.method} ${req.url}: ${(e as Error).stack}`);
        if (!res.headersSent) sendError(res, new ApiError(500, 'InternalError', `Internal error occurred: ${(e as Error).message}`));
        else res.destroy();
      }
    }
  }

  private dispatch(req: IncomingMessage, res: ServerResponse, url: URL, route: Route, verb: Verb, id: Identity): void {
    const q = url.searchParams;
    if (id.anonymous && route.t !== 'resource' && route.t !== 'apiNotFound') {
      if (route.t === 'review')
        throw forbidden(id.user, 'create', { resource: 'selfsubjectaccessreviews' as Resource, group: 'authorization.k8s.io' }, undefined);
      if (!PUBLIC_PATHS.has(url.pathname)) throw pathForbidden(id.user, url.pathname);
    }
    if (route.t === 'notFound') {
      res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8' });
      return void res.end('404 page not found\n');
    }
    if (route.t === 'apiNotFound') throw pathNotFound();
    if (route.t === 'review') {
      return void handleAccessReview(req, res, id).catch((e: unknown) => {
        if (e instanceof ApiError && !res.headersSent) sendError(res, e);
        else res.destroy();
      });
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') throw methodNotAllowed();
    if (route.t === 'text') {
      res.writeHead(200, { 'Content-Type': 'text/plain; charset=utf-8' });
      return void res.end(route.body);
    }
    if (route.t === 'doc') return sendJson(res, 200, route.body());
    const denied = this.authorize(id, verb === 'portforward' ? 'create' : verb, route);
    if (denied) throw denied;
    const { info, namespace, name, sub } = route;
    const store = this.o.store;
    if (verb === 'portforward') {
      if (!store.has('pods', namespace, name!)) throw notFound(info, name!);
      throw badRequest('Upgrade request required');
    }
    if (sub !== undefined && sub !== 'status') throw pathNotFound();
    // A stalled path (e.g. a buffering proxy): the watch request is taken and nothing is answered.
    if (verb === 'watch' && this.stallWatches) return;
    if (verb === 'watch' && this.endWatchesAtOnce) {
      res.writeHead(200, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' });
      return void res.end();
    }
    if (verb === 'watch')
      return handleWatch(store, info, namespace, name, q, req.headers.accept, res, this.watches, this.watchList, this.bookmarkIntervalMs, this.cacheUnready);
    if (verb === 'get') return handleGet(store, info, namespace, name!, q, req.headers.accept, res);
    return handleList(store, info, namespace, q, req.headers.accept, res, {
      snapshots: this.listSnapshots,
      afterPage: (r) => this.afterListPage?.(r),
      cacheUnready: this.cacheUnready,
    });
  }

  private onUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', () => {});
    const url = new URL(req.url ?? '/', 'https://sim');
    const route = parseRoute(url.pathname, this.address, servedGroups(this.openshiftRoutes));
    const verb = verbOf(route, url.searchParams);
    this.count(verb, url.pathname);
    this.trace(req);
    const authenticated = this.authenticate(req);
    if (!authenticated) return writeRawStatus(socket, unauthorized());
    let id: Identity;
    try {
      id = this.impersonate(authenticated, req);
    } catch (e) {
      if (e instanceof ApiError) return writeRawStatus(socket, e);
      throw e;
    }
    if (route.t !== 'resource' || verb !== 'portforward') {
      return writeRawResponse(socket, 400, 'the simulated API server accepts upgrades only on pods/{name}/portforward', 'text/plain; charset=utf-8');
    }
    // A WebSocket upgrade is a GET: RBAC asks for get first, then (AuthorizePodWebsocketUpgradeCreatePermission) create.
    const verbs = req.method === 'GET' ? ['get', 'create'] : ['create'];
    for (const v of verbs) {
      const denied = this.authorize(id, v, route);
      if (denied) return writeRawStatus(socket, denied);
    }
    if (this.stallPortForwards) return;
    if (this.o.onSpdyPortForward?.(req, socket, head, route.namespace!, route.name!, url.searchParams)) return;
    this.o.onPortForward(req, socket, head, route.namespace!, route.name!, url.searchParams);
  }
}
