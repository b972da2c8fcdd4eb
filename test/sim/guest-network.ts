// The network of a simulated guest cluster as a konnectivity agent sees it: guest addresses
// ("10.96.0.10:80", a ClusterIP or Pod IP) mapped onto real loopback listeners, or onto a failure
// the agent's dial would meet. Nothing here is reachable at its guest address; only a
// konnectivity server (konnectivity-server.ts) that consults this map reaches it.
//
// fromSim() derives the map from a SimCluster the way kube-proxy and the pod network would:
// a Pod IP reaches that pod's backend on the same port; a ClusterIP's port goes to a ready
// endpoint of the Service (round-robin), on the EndpointSlice's port. Read through the API
// (admin token), cached briefly.
import https from 'node:https';
import type { SimCluster } from './cluster.js';

/** 'hang': the dial never completes (a black-holed address) until the agent's own 30 s timeout. */
export type GuestOutcome = { host: string; port: number } | 'refused' | 'unreachable' | 'timeout' | 'hang';

export interface GuestResolver {
  /** Where the agent's dial of "ip:port" ends up; undefined → no route to host. */
  resolve(ip: string, port: number): Promise<GuestOutcome | undefined>;
}

/** A hand-written map (tests add entries). */
export class GuestNetwork implements GuestResolver {
  private readonly entries = new Map<string, GuestOutcome>();

  set(ip: string, port: number, outcome: GuestOutcome): this {
    this.entries.set(`${ip}|${port}`, outcome);
    return this;
  }

  async resolve(ip: string, port: number): Promise<GuestOutcome | undefined> {
    return this.entries.get(`${ip}|${port}`) ?? this.entries.get(`${ip}|*`);
  }
}

interface Snapshot {
  at: number;
  podByIp: Map<string, { namespace: string; name: string }>;
  serviceByIp: Map<string, any>;
  slices: any[];
}

/** The guest cluster's network derived from a SimCluster (see the header). */
export class SimGuestNetwork implements GuestResolver {
  private snapshot?: Promise<Snapshot>;
  private lastGood?: Snapshot;
  private turn = 0;

  constructor(
    private readonly sim: SimCluster,
    private readonly cacheMs = 300,
  ) {}

  async resolve(ip: string, port: number): Promise<GuestOutcome | undefined> {
    const s = await this.current();
    const pod = s.podByIp.get(ip);
    if (pod) return this.sim.backendAddress(pod.namespace, pod.name, port) ?? 'refused';
    const svc = s.serviceByIp.get(ip);
    if (!svc) return undefined;
    const sp = (svc.spec.ports ?? []).find((p: any) => p.port === port);
    if (!sp) return 'refused'; // kube-proxy rejects ports the Service does not have
    const name = svc.metadata.name;
    const ns = svc.metadata.namespace;
    const ready: Array<{ ip: string; port: number }> = [];
    for (const slice of s.slices) {
      if (slice.metadata.namespace !== ns || slice.metadata.labels?.['kubernetes.io/service-name'] !== name) continue;
      const p = (slice.ports ?? []).find((x: any) => (x.name ?? '') === (sp.name ?? ''));
      if (!p) continue;
      for (const ep of slice.endpoints ?? []) {
        if (ep.conditions?.ready === false) continue;
        for (const a of ep.addresses ?? []) ready.push({ ip: a, port: p.port });
      }
    }
    if (ready.length === 0) return 'refused'; // no endpoints: kube-proxy's REJECT rule
    const pick = ready[this.turn++ % ready.length]!;
    const target = s.podByIp.get(pick.ip);
    return target ? (this.sim.backendAddress(target.namespace, target.name, pick.port) ?? 'refused') : 'unreachable';
  }

  private current(): Promise<Snapshot> {
    const cached = this.snapshot;
    if (cached) {
      return cached.then((s) => (Date.now() - s.at < this.cacheMs ? s : this.refresh()));
    }
    return this.refresh();
  }

  private refresh(): Promise<Snapshot> {
    const last = this.lastGood;
    this.snapshot = (async () => {
      const [pods, services, slices] = await Promise.all([
        this.get('/api/v1/pods'),
        this.get('/api/v1/services'),
        this.get('/apis/discovery.k8s.io/v1/endpointslices'),
      ]);
      const podByIp = new Map<string, { namespace: string; name: string }>();
      for (const p of pods.items) {
        if (p.status?.phase === 'Running' && p.status?.podIP && !p.spec?.hostNetwork)
          podByIp.set(p.status.podIP, { namespace: p.metadata.namespace, name: p.metadata.name });
      }
      const serviceByIp = new Map<string, any>();
      for (const s of services.items) if (s.spec?.clusterIP && s.spec.clusterIP !== 'None') serviceByIp.set(s.spec.clusterIP, s);
      this.lastGood = { at: Date.now(), podByIp, serviceByIp, slices: slices.items };
      return this.lastGood;
    })().catch((err: unknown) => {
      // The pods keep their network while the API server is away (kube-proxy keeps its rules):
      // the last view stands, asked again at the next dial.
      if (!last) throw err;
      this.snapshot = undefined;
      return last;
    });
    return this.snapshot;
  }

  private get(path: string): Promise<any> {
    return new Promise((resolve, reject) => {
      const req = https.request(
        `${this.sim.server}${path}`,
        { ca: this.sim.caPem, headers: { Authorization: `Bearer ${this.sim.adminToken}` }, timeout: 2_000 },
        (res) => {
          let body = '';
          res.setEncoding('utf8').on('data', (c: string) => (body += c));
          res.on('end', () => (res.statusCode === 200 ? resolve(JSON.parse(body)) : reject(new Error(`GET ${path}: ${res.statusCode}`))));
        },
      );
      req.on('error', reject);
      req.on('timeout', () => req.destroy(new Error(`GET ${path}: no answer in 2 s`)));
      req.end();
    });
  }
}
