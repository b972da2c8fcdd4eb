// Pods looked up when a request needs one, instead of watching every pod of the cluster: a Pod IP
// destination or a Service endpoint known by its address only (GET pods?fieldSelector=status.podIP=…),
// or a dual-stack pod by name (ClusterCache.findPodByIp). Answers, found or not, are kept a short while;
// new look-ups draw on a token bucket so clients cannot turn connections into API load.
// Why not a pod watch: docs/architecture.md "Pods are looked up, not watched".
import type { Logger } from '../core/log.js';
import { NotAllowedError, OverloadedError } from '../core/errors.js';
import { TokenBucket } from '../core/token-bucket.js';
import { ApiStatusError, type ApiConnection } from './api.js';
import { getObject, listPage } from './list-watch.js';
import { slimPod, type SlimPod } from './slim.js';
import { preferredPod } from './index.js';

export interface PodLookupLimits {
  /** A pod found is trusted this long (its IP could be reused by another pod after it goes). */
  foundTtlMs: number;
  /** "No such pod" is trusted this long. */
  missingTtlMs: number;
  /** New look-ups per second on average, and at once. */
  lookupsPerSecond: number;
  lookupBurst: number;
  /** Answers kept at most (oldest dropped first). */
  maxEntries: number;
  timeoutMs: number;
}

export const POD_LOOKUP_LIMITS: PodLookupLimits = {
  foundTtlMs: 10_000,
  missingTtlMs: 5_000,
  lookupsPerSecond: 10,
  lookupBurst: 20,
  maxEntries: 10_000,
  timeoutMs: 10_000,
};

interface Entry {
  until: number;
  pod: SlimPod | undefined;
  pending?: Promise<SlimPod | undefined>;
}

const dialable = (p: SlimPod) => p.phase === 'Running' && !p.deleting;

export class PodLookup {
  private readonly entries = new Map<string, Entry>();
  /** IPs a look-up found a pod for, and until when that holds. */
  private readonly found = new Map<string, number>();
  private readonly bucket: TokenBucket;
  private refused = 0;
  private nextRefusalLog = 0;
  /**
   * RBAC refusals by what was asked (`list` in a namespace, `get` of a pod), kept as "no such pod"
   * is: a client retrying must not turn each of its connections into a 403 from the API server.
   */
  private readonly forbidden = new Map<string, { until: number; err: NotAllowedError }>();

  constructor(
    private readonly api: ApiConnection,
    private readonly log: Logger,
    /** A pod instance found before under this IP or name is gone (another one or none answers now). */
    private readonly onGone: (pod: SlimPod) => void,
    private readonly limits: PodLookupLimits = POD_LOOKUP_LIMITS,
  ) {
    this.bucket = new TokenBucket({ ratePerSecond: limits.lookupsPerSecond, burst: limits.lookupBurst });
  }

  /** A pod found lately under this IP (sync: routing decisions ask it). */
  knows(ip: string): boolean {
    return (this.found.get(ip) ?? 0) > Date.now();
  }

  /**
   * The running pod with this IP (in `namespace`, else cluster-wide); host-network pods share
   * node IPs, and pods being deleted, so they lose ties, as in the watched index.
   */
  byIp(ip: string, namespace: string | undefined): Promise<SlimPod | undefined> {
    const base = namespace ? `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods` : '/api/v1/pods';
    const path = `${base}?fieldSelector=${encodeURIComponent(`status.podIP=${ip},status.phase=Running`)}`;
    const rights: Rights = { verb: 'list', namespace, scope: `list ${namespace ?? ''}` };
    return this.cached(`ip ${namespace ?? ''}/${ip}`, rights, async (signal) => {
      const page = await listPage(this.api, path, 50, undefined, signal, this.limits.timeoutMs);
      // A pod being deleted still serves its IP until its containers stop (cluster/index.ts podIps).
      return this.noteFound(ip, preferredPod(page.items.map((o) => slimPod(o)).filter((p): p is SlimPod => p?.phase === 'Running')));
    });
  }

  /**
   * The running pod with this IP among any of its addresses (status.podIPs[1] too, which the field
   * selector never matches), by one paged list of `namespace`: one look-up of the budget; never
   * cluster-wide.
   */
  anyIpIn(ip: string, namespace: string): Promise<SlimPod | undefined> {
    const path = `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods?fieldSelector=${encodeURIComponent('status.phase=Running')}`;
    return this.cached(`any ${namespace}/${ip}`, { verb: 'list', namespace, scope: `list ${namespace}` }, async (signal) => {
      const pods: SlimPod[] = [];
      let token: string | undefined;
      do {
        const page = await listPage(this.api, path, 500, token, signal, this.limits.timeoutMs);
        for (const pod of page.items.map((o) => slimPod(o))) if (pod?.phase === 'Running' && pod.ips.includes(ip)) pods.push(pod);
        token = page.continueToken;
      } while (token);
      return this.noteFound(ip, preferredPod(pods));
    });
  }

  byName(namespace: string, name: string): Promise<SlimPod | undefined> {
    const path = `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(name)}`;
    return this.cached(`name ${namespace}/${name}`, { verb: 'get', namespace, name, scope: `get ${namespace}/${name}` }, async (signal) => {
      const obj = await getObject(this.api, path, signal, this.limits.timeoutMs);
      const pod = obj && slimPod(obj);
      return pod && dialable(pod) ? pod : undefined;
    });
  }

  /**
   * A pod instance is gone (the watch cache saw it go): what was found of it is not trusted its
   * full TTL, or its old IP would reach its name's next instance, or a pod that takes the IP over
   * would be missed.
   */
  forget(namespace: string, name: string, uid: string | undefined): void {
    for (const [key, entry] of this.entries) {
      const pod = entry.pod;
      if (entry.pending || !pod || pod.namespace !== namespace || pod.name !== name || (uid !== undefined && pod.uid !== uid)) continue;
      this.entries.delete(key);
      for (const ip of pod.ips) this.found.delete(ip);
    }
  }

  /** Forget everything (the cache stops). */
  clear(): void {
    this.entries.clear();
    this.found.clear();
    this.forbidden.clear();
  }

  private noteFound(ip: string, pod: SlimPod | undefined): SlimPod | undefined {
    if (!pod) return pod;
    this.found.delete(ip);
    this.found.set(ip, Date.now() + this.limits.foundTtlMs);
    while (this.found.size > this.limits.maxEntries) this.found.delete(this.found.keys().next().value!);
    return pod;
  }

  private cached(key: string, rights: Rights, fetch: (signal: AbortSignal) => Promise<SlimPod | undefined>): Promise<SlimPod | undefined> {
    const now = Date.now();
    const hit = this.entries.get(key);
    if (hit?.pending) return hit.pending;
    if (hit && hit.until > now) return Promise.resolve(hit.pod);
    const refusal = this.forbidden.get(rights.scope);
    if (refusal && refusal.until > now) return Promise.reject(refusal.err);
    this.forbidden.delete(rights.scope);
    if (!this.bucket.take()) return Promise.reject(this.overBudget(now));
    const entry: Entry = { until: 0, pod: hit?.pod };
    const signal = AbortSignal.timeout(this.limits.timeoutMs);
    // A 401 made the API connection drop the credential (a token rotated or revoked): once more
    // with a fresh one, as a new tunnel does, rather than failing the client's request.
    const lookup = fetch(signal).catch((err: unknown) => {
      if (err instanceof ApiStatusError && err.statusCode === 401) return fetch(signal);
      throw err;
    });
    entry.pending = lookup.then(
      (pod) => {
        entry.pending = undefined;
        const before = entry.pod;
        if (before && before.uid !== pod?.uid) this.onGone(before);
        entry.pod = pod;
        entry.until = Date.now() + (pod ? this.limits.foundTtlMs : this.limits.missingTtlMs);
        return pod;
      },
      (err: unknown) => {
        if (this.entries.get(key) === entry) this.entries.delete(key);
        if (!(err instanceof ApiStatusError && err.statusCode === 403)) throw err;
        const refused = forbiddenError(err, rights);
        this.forbidden.set(rights.scope, { until: Date.now() + this.limits.missingTtlMs, err: refused });
        while (this.forbidden.size > this.limits.maxEntries) this.forbidden.delete(this.forbidden.keys().next().value!);
        throw refused;
      },
    );
    this.entries.delete(key); // re-inserted last: the Map's order is the eviction order
    this.entries.set(key, entry);
    while (this.entries.size > this.limits.maxEntries) this.entries.delete(this.entries.keys().next().value!);
    return entry.pending;
  }

  private overBudget(now: number): OverloadedError {
    this.refused++;
    if (now >= this.nextRefusalLog) {
      this.log.warn(
        { refused: this.refused, perSecond: this.limits.lookupsPerSecond },
        'clients name unknown Pod IPs faster than the look-up budget allows; refusing those requests',
      );
      this.refused = 0;
      this.nextRefusalLog = now + 10_000;
    }
    return new OverloadedError(
      `not looking up more pods now: too many unknown Pod IPs or pods named at once (over ${this.limits.lookupsPerSecond}/s); try again in a moment`,
    );
  }
}

interface Rights {
  verb: 'list' | 'get';
  namespace: string | undefined;
  name?: string;
  /** What RBAC decided on: the same scope gets the same answer. */
  scope: string;
}

/** The API server's 403, with the right the proxy needs and the kubectl line that checks it. */
function forbiddenError(err: ApiStatusError, r: Rights): NotAllowedError {
  const what = r.verb === 'list' ? 'list on pods to find a Pod IP' : `get on pods to look up pod ${r.namespace}/${r.name}`;
  const where = r.namespace ? `in namespace ${r.namespace}` : 'cluster-wide';
  const check = `kubectl auth can-i ${r.verb} pods${r.name ? `/${r.name}` : ''} ${r.namespace ? `-n ${r.namespace}` : '-A'}`;
  return new NotAllowedError(`${err.message.replace(/[:\s]+$/, '')}; the proxy needs ${what} ${where} (check: ${check})`, { cause: err });
}
