// Routing decisions per second with a 1,000-route table (RouteMatcher, src/routing/table.ts).
// Pure CPU, no sockets: about 2 s. Runs from `npm run bench` (bench/run.ts) and on its own:
//   npm run build && node dist/bench/routing-table.js
import { pathToFileURL } from 'node:url';
import { RouteMatcher } from '../src/routing/table.js';
import type { ClusterView } from '../src/routes/route.js';
import { generatePac } from '../src/routing/pac.js';
import type { RoutingTable } from '../src/routing/table-spec.js';
import type { RouteSpec } from '../src/routes/spec.js';

const ROUTES = 1000;
const MS_PER_ROW = Number(process.env.BENCH_ROUTING_MS ?? 250);

/** 1,000 cluster routes, each with two includes, an ingress wildcard, an exclude and a /24; direct on. */
function bigTable(): { table: RoutingTable; views: Map<string, ClusterView> } {
  const routes: RouteSpec[] = [];
  const views = new Map<string, ClusterView>();
  for (let i = 0; i < ROUTES; i++) {
    const name = `c${i}`;
    routes.push({
      kind: 'cluster',
      name,
      context: name,
      origin: 'bench',
      include: [`${name}.example.com`, `${name}.corp.example.net`],
      exclude: [`legacy.${name}.example.com`],
      cidrs: [`10.${i >> 8}.${i & 255}.0/24`],
      ingress: { domains: [`*.apps.${name}.example.com`] },
    });
    const podIp = `172.${16 + (i >> 8)}.${i & 255}.9`;
    views.set(name, { defaultNamespace: 'default', knowsIp: (ip) => ip === podIp, namespaceExists: (ns) => ns === 'shop' });
  }
  routes.push({ kind: 'direct', name: 'direct', include: [], exclude: [], cidrs: [], origin: 'bench' });
  return { table: { routes, defaultRoute: 'c0', directRoute: 'direct', clusterDomain: 'cluster.local' }, views };
}

function perSecond(hosts: string[], decide: (host: string) => unknown): number {
  let n = 0;
  const started = process.hrtime.bigint();
  const deadline = started + BigInt(MS_PER_ROW) * 1_000_000n;
  let now = started;
  while (now < deadline) {
    for (let i = 0; i < 1000; i++) decide(hosts[(n + i) % hosts.length]!);
    n += 1000;
    now = process.hrtime.bigint();
  }
  return n / (Number(now - started) / 1e9);
}

export function reportRoutingTable(): void {
  const { table, views } = bigTable();
  const t0 = process.hrtime.bigint();
  const matcher = new RouteMatcher(table, views);
  const buildMs = Number(process.hrtime.bigint() - t0) / 1e6;
  const pick = (f: (i: number) => string) => Array.from({ length: 997 }, (_, k) => f((k * 7919) % ROUTES));
  const rows: Array<[string, string[]]> = [
    ['<svc>.<ns>.svc.<route>', pick((i) => `web.shop.svc.c${i}`)],
    ['include suffix (4 labels)', pick((i) => `api.c${i}.example.com`)],
    ['ingress wildcard', pick((i) => `console.apps.c${i}.example.com`)],
    ['excluded → direct', pick((i) => `legacy.c${i}.example.com`)],
    ['short name / cluster.local', pick((i) => (i % 2 ? `web${i}.shop` : `web${i}.shop.svc.cluster.local`))],
    ['unmatched name → direct', pick((i) => `www.site${i}.example.org`)],
    ['IPv4 by CIDR', pick((i) => `10.${i >> 8}.${i & 255}.7`)],
    ['IP known to a cluster (1,000 asked)', pick((i) => `172.${16 + (i >> 8)}.${i & 255}.9`)],
  ];
  console.log(`\nRouting decisions with ${ROUTES} routes (table built in ${buildMs.toFixed(1)} ms):`);
  console.log('destination                            decisions/s');
  for (const [label, hosts] of rows) {
    console.log(
      `${label.padEnd(36)} ${Math.round(perSecond(hosts, (h) => matcher.matchHost(h)))
        .toLocaleString('en-US')
        .padStart(14)}`,
    );
  }
  const p0 = process.hrtime.bigint();
  const pac = generatePac(matcher, { socks: { host: '127.0.0.1', port: 1080 } });
  console.log(`PAC file for the table: ${(pac.length / 1024).toFixed(0)} KiB, generated in ${(Number(process.hrtime.bigint() - p0) / 1e6).toFixed(1)} ms`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) reportRoutingTable();
