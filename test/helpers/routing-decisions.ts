// Routing tables and the decisions they imply, shared by the matcher tests and the PAC tests so
// both are held to one truth. `route` is the route that must claim the host; undefined means no
// route does (direct pass-through when on, else refused).
import { parseConfig } from '../../src/config/validate.js';
import { tableFrom } from '../../src/config/load.js';
import type { RouteMatcher } from '../../src/routing/table.js';
import type { ClusterView } from '../../src/routes/route.js';
import type { RoutingTable } from '../../src/routing/table-spec.js';

export interface Decision {
  host: string;
  route: string | undefined;
  /** Refused even with direct pass-through on (an ingress host two clusters learnt); the PAC file: DIRECT. */
  refused?: true;
}

/** A table from config-file text, as the proxy would build it (no flags). */
export function tableFromYaml(text: string, direct?: boolean): RoutingTable {
  return tableFrom(parseConfig(text, 'config.yaml', 'cluster.local'), { contexts: [], clusterDomain: 'cluster.local', direct });
}

/**
 * A cluster route with generated suffix lists (an OpenShift cluster's: its exclude list, then its
 * include list), where one suffix is both included and excluded and a longer include sits under
 * an exclude: the longest suffix decides, and at equal length the exclude wins.
 */
export const EXCLUDE_INCLUDE_YAML = `
routes:
  - name: bettersmarter
    kind: cluster
    exclude:
    - apps.c-bettersmarter-prod01.vshnmanaged.net
    include:
    - console.apps.c-bettersmarter-prod01.vshnmanaged.net
    - apps.c-bettersmarter-prod01.vshnmanaged.net
    - api.c-bettersmarter-prod01.vshnmanaged.net
    - c-bettersmarter-prod01.vshnmanaged.net
    - storage.bettersmarter.ch
    - vcenter.bettersmarter.ch
`;

const B = 'bettersmarter';
export const EXCLUDE_INCLUDE_DECISIONS: Decision[] = [
  // The longer include beats the exclude: the console goes through the route.
  { host: 'console.apps.c-bettersmarter-prod01.vshnmanaged.net', route: B },
  { host: 'a.console.apps.c-bettersmarter-prod01.vshnmanaged.net', route: B },
  // apps.… is both included and excluded at the same length: the exclude wins, so it and the
  // apps under it are not routed through the proxy (direct, or refused without a direct route).
  { host: 'apps.c-bettersmarter-prod01.vshnmanaged.net', route: undefined },
  { host: 'oauth-openshift.apps.c-bettersmarter-prod01.vshnmanaged.net', route: undefined },
  { host: 'myapp.apps.c-bettersmarter-prod01.vshnmanaged.net', route: undefined },
  { host: 'api.c-bettersmarter-prod01.vshnmanaged.net', route: B },
  { host: 'c-bettersmarter-prod01.vshnmanaged.net', route: B },
  { host: 'etcd.c-bettersmarter-prod01.vshnmanaged.net', route: B },
  { host: 'a.storage.bettersmarter.ch', route: B },
  { host: 'b.storage.bettersmarter.ch', route: B },
  { host: 'storage.bettersmarter.ch', route: B },
  { host: 'vcenter.bettersmarter.ch', route: B },
  // Whole labels only, case-insensitive, trailing dot ignored.
  { host: 'API.C-BetterSmarter-Prod01.VSHNmanaged.net.', route: B },
  { host: 'xc-bettersmarter-prod01.vshnmanaged.net', route: undefined },
  { host: 'avcenter.bettersmarter.ch', route: undefined },
  { host: 'vcenter.bettersmarter.ch.evil.example', route: undefined },
  { host: 'bettersmarter.ch', route: undefined },
  { host: 'www.bettersmarter.ch', route: undefined },
  { host: 'vshnmanaged.net', route: undefined },
];

/** A table of every route kind: two clusters (ingress domains, CIDRs, excludes), a direct route with its own names and blocks, a reject route. */
export const MULTI_YAML = `
direct: true
routes:
  - name: prod
    kind: cluster
    context: prod-admin
    default: true
    include: [prod.example.com]
    exclude: [apps.prod.example.com]
    cidrs: [10.96.0.0/12, "fd00:10:96::/112"]
    ingress: { domains: ["*.apps.prod.example.com", "shop.example.org"], controller: openshift-ingress/router-default }
  - name: staging
    kind: cluster
    include: [staging.example.com, "*.pages.example.net"]
    cidrs: [10.96.5.0/24]
  - name: intranet
    kind: direct
    include: [intranet.example.com, wiki.staging.example.com]
    cidrs: [192.168.0.0/16]
  - name: blocked
    kind: reject
    include: [ads.example.com]
    cidrs: [203.0.113.0/24]
`;

/** Namespaces of the default cluster (prod), for "svc.ns" short names. */
export const PROD_NAMESPACES = ['shop', 'default', 'kube-system', 'monitoring'];

export const MULTI_DECISIONS: Decision[] = [
  // Every cluster answers under its own name.
  { host: 'web.shop.svc.prod', route: 'prod' },
  { host: 'web.shop.prod', route: 'prod' },
  { host: 'db-0.db.shop.svc.prod', route: 'prod' },
  { host: 'web.shop.svc.staging', route: 'staging' },
  { host: 'web.shop.staging', route: 'staging' },
  { host: 'db-0.db.shop.svc.staging.', route: 'staging' },
  { host: 'x.y.z.w.staging', route: 'staging' },
  // The default cluster also answers the cluster.local forms and short names.
  { host: 'web.shop.svc.cluster.local', route: 'prod' },
  { host: 'web.shop.svc', route: 'prod' },
  { host: 'nothing.here.cluster.local', route: 'prod' },
  { host: 'web', route: 'prod' },
  { host: 'web.shop', route: 'prod' },
  { host: 'WEB.Monitoring.', route: 'prod' },
  { host: '10-244-1-7.shop.pod', route: 'prod' },
  // "svc.ns" only for namespaces the cluster has; "x.staging" is not a route-name form.
  { host: 'example.com', route: undefined },
  { host: 'web.staging', route: undefined },
  { host: 'localhost', route: undefined },
  { host: 'app.localhost', route: undefined },
  { host: 'under_score', route: undefined },
  // Includes, on whole labels.
  { host: 'prod.example.com', route: 'prod' },
  { host: 'api.prod.example.com', route: 'prod' },
  { host: 'aprod.example.com', route: undefined },
  { host: 'staging.example.com', route: 'staging' },
  { host: 'a.b.staging.example.com', route: 'staging' },
  // The exclude takes apps.prod.example.com from prod; the ingress wildcard is longer and wins below it.
  { host: 'apps.prod.example.com', route: undefined },
  { host: 'console.apps.prod.example.com', route: 'prod' },
  { host: 'a.b.apps.prod.example.com', route: 'prod' },
  { host: 'shop.example.org', route: 'prod' },
  { host: 'www.shop.example.org', route: undefined },
  { host: 'pages.example.net', route: undefined },
  { host: 'docs.pages.example.net', route: 'staging' },
  // A direct route carves a name out of a cluster's include; a reject route blocks.
  { host: 'wiki.staging.example.com', route: 'intranet' },
  { host: 'x.wiki.staging.example.com', route: 'intranet' },
  { host: 'intranet.example.com', route: 'intranet' },
  { host: 'ads.example.com', route: 'blocked' },
  { host: 'tracker.ads.example.com', route: 'blocked' },
  { host: 'www.example.com', route: undefined },
  // IP literals: longest prefix, both families, IPv4-mapped IPv6 as IPv4.
  { host: '10.96.0.10', route: 'prod' },
  { host: '10.111.255.254', route: 'prod' },
  { host: '10.112.0.1', route: undefined },
  { host: '10.96.5.7', route: 'staging' },
  { host: '::ffff:10.96.0.10', route: 'prod' },
  { host: '::ffff:10.96.5.7', route: 'staging' },
  { host: 'fd00:10:96::a', route: 'prod' },
  { host: '[fd00:10:96::ffff]', route: 'prod' },
  { host: 'fd00:10:96::1:0', route: undefined },
  { host: '192.168.1.1', route: 'intranet' },
  { host: '203.0.113.9', route: 'blocked' },
  { host: '8.8.8.8', route: undefined },
  { host: '2001:db8::1', route: undefined },
];

/**
 * Ingress hosts the clusters of MULTI_YAML learn, several of them in both (what their watchers
 * would report to RouteMatcher.setIngressHosts).
 */
export const MULTI_INGRESS_HOSTS: Record<string, string[]> = {
  prod: [
    'shop.example.io',
    '*.preview.example.io',
    'prod-only.example.io',
    '*.both.example.io',
    'apps.prod.example.com',
    'web',
    'console.apps.prod.example.com',
    'www.intranet.example.com',
  ],
  staging: [
    'shop.example.io',
    '*.preview.example.io',
    'staging-only.example.io',
    '*.both.example.io',
    'x.both.example.io',
    'apps.prod.example.com',
    'web',
    'console.apps.prod.example.com',
    'www.intranet.example.com',
  ],
};

/** The matcher of MULTI_YAML with MULTI_INGRESS_HOSTS learnt. */
export function withIngressHosts(matcher: RouteMatcher): RouteMatcher {
  for (const [route, hosts] of Object.entries(MULTI_INGRESS_HOSTS)) matcher.setIngressHosts(route, hosts);
  return matcher;
}

export const MULTI_INGRESS_DECISIONS: Decision[] = [
  // A host one cluster learnt is that cluster's.
  { host: 'prod-only.example.io', route: 'prod' },
  { host: 'staging-only.example.io', route: 'staging' },
  // One both learnt is refused, direct on or off: no silent pick between two clusters.
  { host: 'shop.example.io', route: undefined, refused: true },
  { host: 'pr-1.preview.example.io', route: undefined, refused: true },
  { host: 'a.b.preview.example.io', route: undefined, refused: true },
  { host: 'y.both.example.io', route: undefined, refused: true },
  // An exact host beats a wildcard of the same length: staging's x.both.example.io is staging's.
  { host: 'x.both.example.io', route: 'staging' },
  // A wildcard does not cover its own domain.
  { host: 'preview.example.io', route: undefined },
  { host: 'www.shop.example.io', route: undefined },
  // Configured rules decide before learnt hosts: prod's exclude leaves the name to staging; an
  // ingress domain, a direct route's include and a short name are never in question.
  { host: 'apps.prod.example.com', route: 'staging' },
  { host: 'console.apps.prod.example.com', route: 'prod' },
  { host: 'www.intranet.example.com', route: 'intranet' },
  { host: 'web', route: 'prod' },
];

/** A cluster view from fixed sets (what a ClusterRoute's watch cache answers). */
export function fixedView(ips: string[], namespaces: string[] | undefined, defaultNamespace = 'default'): ClusterView {
  const ipSet = new Set(ips);
  const nsSet = namespaces && new Set(namespaces);
  return {
    defaultNamespace,
    knowsIp: (ip) => ipSet.has(ip),
    namespaceExists: (ns) => (nsSet ? nsSet.has(ns) : undefined),
  };
}
