// The routing decision: which route serves a destination, or why none does. One place decides,
// once per connection; the claim carries the parsed cluster name so no route parses it again.
//
// Names (normalized: lowercase, one trailing dot dropped), first match wins:
//   1. suffix rules by precedence (suffix-index.ts): includes, ingress domains and hosts, each
//      cluster route's own name (<svc>.<ns>.R, <svc>.<ns>.svc.R, <pod>.<svc>.<ns>.svc.R), the
//      default cluster route's cluster domain and ".svc"; excludes take their route out;
//   2. short names for the default cluster route: "svc", "svc.ns" (only when the cluster does not
//      know ns to be absent), "ip.ns.pod" — never "localhost" (RFC 6761);
//   3. "." includes (catch-alls);  4. the direct route (`direct: true`);  5. refused.
// IP literals (IPv4-mapped IPv6 taken as IPv4):
//   1. cidrs, longest prefix (/0 excepted);  2. the clusters that know the IP (ClusterIPs and Pod IPs
//      in their watch caches) — two knowing it is a refusal naming both;  3. /0 blocks;
//   4. the direct route;  5. refused.
import type { Destination } from '../core/types.js';
import { NotAllowedError } from '../core/errors.js';
import { unroutableIpMessage } from '../core/address.js';
import { CidrIndex, parseCidr, parseIp } from '../core/cidr.js';
import { noSuchNamespace, otherClusterDomain, parseClusterName, parseRouteName, shortHostnameName, type ClusterName } from '../routes/guest-cluster/names.js';
import { labelCount, ruleShape, RoutingTableError, SuffixIndex, type RuleSource, type SuffixRule } from './suffix-index.js';
import { normalizeHostName, parsePattern, type RoutingTable } from './table-spec.js';
import { hasClusterNames, type RouteSpec } from '../routes/spec.js';
import type { ClaimReason, ClusterView, RouteClaim } from '../routes/route.js';

/** The decision for a destination a route claims: what the route is handed (RouteClaim), and more. */
export interface Claim extends RouteClaim {
  readonly claimed: true;
  readonly route: RouteSpec;
  /** The suffix, wildcard or CIDR that matched (undefined for short names, known IPs, direct). */
  readonly pattern?: string;
  /**
   * Set on a "svc.ns" short name whose namespace the cluster could not confirm: when the route
   * finds no such namespace (NotAllowedError), this is the decision to use instead.
   */
  readonly fallback?: Decision;
}

export interface Refusal {
  readonly claimed: false;
  readonly message: string;
  /** Refused because learnt ingress hosts of these routes tie (claimRule). */
  readonly tie?: readonly string[];
}

export type Decision = Claim | Refusal;

/** The error a refusal is reported with (SOCKS 0x02, HTTP 403). */
export function refusalError(refusal: Refusal): NotAllowedError {
  return new NotAllowedError(refusal.message);
}

/** Serializable rules, for the PAC file. */
export interface TableSnapshot {
  routes: Array<{ name: string; kind: RouteSpec['kind'] }>;
  defaultRoute: number;
  clusterDomain: string;
  /** key → [route, exclude 0|1, length, keyLabels, minExtra, maxExtra (-1 = any)] in precedence order. */
  suffixes: Record<string, Array<[number, number, number, number, number, number]>>;
  cidrs: Array<{ cidr: string; route: number }>;
}

const ANY = Number.MAX_SAFE_INTEGER;
/** Rule "length" of learnt ingress hosts: above catch-alls (0), below any configured rule (≥ 1) and short names. */
const LEARNT_BASE = 0.5;
/** A label no configured rule names, to ask how a name under a learnt wildcard is decided. */
const UNNAMED_LABEL = 'x--ingress-conflict-check';

export class RouteMatcher {
  private readonly suffixes: SuffixIndex;
  private readonly cidrs = new CidrIndex<{ route: number; cidr: string }>();
  private readonly cidrList: Array<{ cidr: string; route: number }> = [];
  private readonly routeIndex = new Map<string, number>();
  private readonly clusterViews: Array<{ route: number; view: ClusterView }> = [];
  private readonly viewOf: Array<ClusterView | undefined> = [];
  private readonly defaultRoute: number;
  private readonly directRoute: number;

  /** Throws RoutingTableError when two routes claim the same suffix or CIDR. */
  constructor(
    readonly table: RoutingTable,
    views: ReadonlyMap<string, ClusterView> = new Map(),
  ) {
    table.routes.forEach((r, i) => this.routeIndex.set(r.name, i));
    this.defaultRoute = table.defaultRoute === undefined ? -1 : this.indexOf(table.defaultRoute);
    this.directRoute = table.directRoute === undefined ? -1 : this.indexOf(table.directRoute);
    this.suffixes = new SuffixIndex((i) => `${table.routes[i]!.name} (${table.routes[i]!.origin})`);
    table.routes.forEach((route, i) => {
      this.addRoute(route, i);
      const view = views.get(route.name);
      if (view && hasClusterNames(route)) {
        this.clusterViews.push({ route: i, view });
        this.viewOf[i] = view;
      }
    });
  }

  private indexOf(name: string): number {
    const i = this.routeIndex.get(name);
    if (i === undefined) throw new RoutingTableError(`the table names route "${name}" but has no such route`);
    return i;
  }

  private addRoute(route: RouteSpec, i: number): void {
    const add = (pattern: string, source: RuleSource, extra?: { minExtra?: number; maxExtra?: number }) => {
      const shape = ruleShape(pattern);
      const rule: SuffixRule = {
        route: i,
        source,
        pattern,
        exclude: source === 'exclude',
        length: shape.length,
        keyLabels: shape.keyLabels,
        minExtra: extra?.minExtra ?? shape.minExtra,
        maxExtra: extra?.maxExtra ?? ANY,
        dynamic: false,
      };
      this.suffixes.add(shape.key, rule);
    };
    // Excludes first: a clash check sees what the route gives up (suffix-index.ts excludedOverlap).
    for (const p of route.exclude) add(parsePattern(p, { wildcard: true, root: false }), 'exclude');
    for (const p of route.include) add(parsePattern(p, { wildcard: true, root: true }), 'include');
    if (hasClusterNames(route)) {
      add(route.name, 'route-name', { minExtra: 2 });
      if (i === this.defaultRoute) {
        add(this.table.clusterDomain, 'cluster-domain', { minExtra: 1 });
        add('svc', 'cluster-domain', { minExtra: 1 });
      }
      for (const d of (route.kind === 'cluster' ? route.ingress?.domains : undefined) ?? []) {
        const p = parsePattern(d, { wildcard: true, root: false });
        add(p, 'ingress', p.startsWith('*.') ? undefined : { maxExtra: 0 });
      }
    }
    for (const text of route.cidrs) {
      const cidr = parseCidr(text);
      const other = this.cidrs.add(cidr, { route: i, cidr: cidr.text });
      if (other !== undefined && other.route !== i) {
        const first = this.table.routes[other.route]!;
        throw new RoutingTableError(
          `routes ${first.name} (${first.origin}) and ${route.name} (${route.origin}) both claim ${cidr.text}: give it to one of them`,
        );
      }
      this.cidrList.push({ cidr: cidr.text, route: i });
    }
  }

  /**
   * Replaces the exact host names a cluster route serves through its ingress controller, as its
   * watch cache learns them (Ingress and OpenShift Route hosts; "*.x" wildcard hosts allowed).
   * Invalid names are skipped. Two clusters serving the same host make it a refusal naming both.
   */
  setIngressHosts(routeName: string, hosts: Iterable<string>): void {
    const route = this.indexOf(routeName);
    this.suffixes.removeDynamic(route);
    for (const host of hosts) {
      let pattern: string;
      try {
        pattern = parsePattern(host, { wildcard: true, root: false });
      } catch {
        continue;
      }
      const shape = ruleShape(pattern);
      const wildcard = pattern.startsWith('*.');
      // Learnt hosts rank below every configured rule and the default route's short names
      // (anyone who may create an Ingress in that cluster names them): longest first among
      // themselves, ahead only of catch-alls, direct pass-through and refusal.
      const length = LEARNT_BASE + shape.length / 1000;
      this.suffixes.add(shape.key, {
        route,
        source: 'ingress-host',
        pattern,
        exclude: false,
        length,
        keyLabels: shape.keyLabels,
        minExtra: shape.minExtra,
        maxExtra: wildcard ? ANY : 0,
        dynamic: true,
      });
    }
  }

  /**
   * The learnt hosts (as patterns: "shop.example.io", "*.apps.example.io") that more than one
   * cluster route learnt and that no configured rule decides first, with those routes, sorted. A
   * name such a host decides is refused (see claimRule; the PAC file sends it DIRECT), so the
   * proxy logs them.
   */
  ingressHostConflicts(): Array<{ host: string; routes: string[] }> {
    const out: Array<{ host: string; routes: string[] }> = [];
    for (const [, rules] of this.suffixes.entries()) {
      let learnt = 0;
      for (const r of rules) if (r.dynamic) learnt++;
      if (learnt < 2) continue; // most keys: nothing to compare, nothing to allocate
      const byPattern = new Map<string, Set<number>>();
      for (const r of rules) if (r.dynamic) byPattern.set(r.pattern, (byPattern.get(r.pattern) ?? new Set()).add(r.route));
      for (const [host, routes] of byPattern) {
        if (routes.size < 2) continue;
        // Only where the tie decides: a configured rule (an include, an exclude, the default
        // route's short names) that outranks learnt hosts leaves no conflict to report. A
        // wildcard is asked with a name under it that no configured name rule spells out.
        const decision = this.matchName(host.startsWith('*.') ? `${UNNAMED_LABEL}${host.slice(1)}` : host);
        if (decision.claimed || !decision.tie) continue;
        out.push({ host, routes: [...routes].sort((a, b) => a - b).map((i) => this.table.routes[i]!.name) });
      }
    }
    return out.sort((a, b) => (a.host < b.host ? -1 : a.host > b.host ? 1 : 0));
  }

  match(destination: Destination): Decision {
    return destination.type === 'domain' ? this.matchHost(destination.host) : this.matchIp(destination.host);
  }

  /** Like match, for a bare host: a name, or an IP literal (some clients send those as names). */
  matchHost(host: string): Decision {
    return host.includes(':') || parseIp(host) ? this.matchIp(host) : this.matchName(host);
  }

  private matchIp(text: string): Decision {
    const ip = parseIp(text);
    if (!ip) {
      return { claimed: false, message: unroutableIpMessage(text) };
    }
    const claim = (route: number, reason: ClaimReason, pattern?: string): Claim => ({
      claimed: true,
      route: this.table.routes[route]!,
      reason,
      pattern,
      host: ip.text,
      isIp: true,
    });
    const hit = this.cidrs.lookup(ip);
    if (hit && hit.prefix > 0) return claim(hit.value.route, 'cidr', hit.value.cidr);
    const knowers = this.clusterViews.filter((c) => c.view.knowsIp(ip.text));
    if (knowers.length === 1) return claim(knowers[0]!.route, 'known-ip');
    if (knowers.length > 1) {
      const names = knowers.map((c) => this.table.routes[c.route]!.name);
      return {
        claimed: false,
        message: `${ip.text} is known to clusters ${names.join(' and ')} (a ClusterIP or Pod IP in each): add it, or its block, to the cidrs of the route it belongs to`,
      };
    }
    return this.unknownIp(ip.text, hit);
  }

  /**
   * The decision for an IP literal as if no cluster knew it: a cidr route's or direct. For a known
   * IP the cluster refuses (a node's IP, which only hostNetwork pods have), asked by the router.
   */
  matchIpAsUnknown(text: string): Decision {
    const ip = parseIp(text);
    return ip ? this.unknownIp(ip.text, this.cidrs.lookup(ip)) : this.matchIp(text);
  }

  private unknownIp(ip: string, hit: ReturnType<RouteMatcher['cidrs']['lookup']>): Decision {
    const claim = (route: number, reason: ClaimReason, pattern?: string): Claim => ({
      claimed: true,
      route: this.table.routes[route]!,
      reason,
      pattern,
      host: ip,
      isIp: true,
    });
    if (hit) return claim(hit.value.route, 'cidr', hit.value.cidr);
    if (this.directRoute >= 0) return claim(this.directRoute, 'direct');
    return {
      claimed: false,
      message: `${ip} is in no route's cidrs and no cluster knows it as a Service ClusterIP or Pod IP (direct pass-through is off)`,
    };
  }

  private matchName(host: string): Decision {
    const name = normalizeHostName(host);
    if (!name) return { claimed: false, message: `"${host}" is not a valid host name` };
    const labels = labelCount(name);
    const rules = this.suffixes.candidates(name, labels);
    const blocked: SuffixRule[] = [];
    let i = 0;
    // Configured rules (length ≥ 1) first; learnt ingress hosts only after the short names, which
    // are the default route's by configuration (an Ingress elsewhere must not take `web.shop`).
    for (; i < rules.length && rules[i]!.length >= 1; i++) {
      const r = rules[i]!;
      if (r.exclude) blocked.push(r);
      else if (!blocked.some((b) => b.route === r.route)) return this.claimRule(rules, i, blocked, name);
    }
    let why: string | undefined;
    const rest = () => this.afterShortNames(rules, i, blocked, name, why);
    const d = this.defaultRoute;
    if (d >= 0 && labels <= 3 && !blocked.some((b) => b.route === d) && name !== 'localhost' && !name.endsWith('.localhost')) {
      const view = this.viewOf[d];
      // A StatefulSet peer's short name (`mysql-0.mysql`, `mysql-0.mysql.shop`) first, as a pod's
      // search path tries `<ns>.svc.<zone>` before `svc.<zone>`; only when DNS names that pod.
      const peer = labels > 1 && view?.namesPodHostname ? shortHostnameName(name, view.defaultNamespace) : undefined;
      if (peer?.kind === 'pod-hostname' && view?.namesPodHostname?.(peer.namespace, peer.service, peer.hostname)) {
        return { claimed: true, route: this.table.routes[d]!, reason: 'short-name', host: name, isIp: false, name: peer };
      }
      const parsed = parseClusterName(name, this.table.clusterDomain, view?.defaultNamespace ?? 'default');
      if (parsed) {
        const route = this.table.routes[d]!;
        const claim: Claim = { claimed: true, route, reason: 'short-name', host: name, isIp: false, name: parsed };
        if (parsed.kind !== 'service' || !parsed.namespaceNeedsCheck) return claim;
        const exists = view?.namespaceExists(parsed.namespace);
        if (exists === true) return claim;
        if (exists === undefined) return { ...claim, fallback: rest() };
        // A mistyped namespace (`web.shpo`) is refused saying so, as when the route finds it out itself.
        why = `${route.kind} route ${route.name}: ${noSuchNamespace(name, parsed.service, parsed.namespace)}`;
        // `web.prod` for a route prod: its names have a namespace between (web.shop.prod).
        if (this.table.routes.some((r) => r.name === parsed.namespace))
          why += `; under route ${parsed.namespace} a Service is SERVICE.NAMESPACE.${parsed.namespace}`;
      }
    }
    return rest();
  }

  private afterShortNames(rules: SuffixRule[], from: number, blocked: SuffixRule[], name: string, why?: string): Decision {
    for (let i = from; i < rules.length; i++) {
      const r = rules[i]!;
      if (!r.exclude && !blocked.some((b) => b.route === r.route)) return this.claimRule(rules, i, blocked, name);
    }
    if (this.directRoute >= 0) return { claimed: true, route: this.table.routes[this.directRoute]!, reason: 'direct', host: name, isIp: false };
    const excluded = blocked.length ? `; excluded from ${blocked.map((b) => `route ${this.table.routes[b.route]!.name} by "${b.pattern}"`).join(', ')}` : '';
    // web.shop.svc.corp.local with the default domain: the cluster's domain is the likely mistake.
    const domain = otherClusterDomain(name, this.table.clusterDomain);
    if (domain && !why)
      why = `it is a cluster name under "${domain}", but the cluster domain here is ${this.table.clusterDomain} (--cluster-domain ${domain} if the cluster uses that)`;
    return {
      claimed: false,
      message: `${name} is not served by any route (no route name, include or cluster name matches it${excluded}) and direct pass-through is off${why ? `; ${why}` : ''}`,
    };
  }

  private claimRule(rules: SuffixRule[], i: number, blocked: SuffixRule[], name: string): Decision {
    const r = rules[i]!;
    // Static rules cannot tie (checked when the table is built); learnt ingress hosts can.
    for (let j = i + 1; j < rules.length && rules[j]!.length === r.length && rules[j]!.keyLabels === r.keyLabels; j++) {
      const o = rules[j]!;
      if (!o.exclude && o.route !== r.route && !blocked.some((b) => b.route === o.route)) {
        // Refused, not a silent pick between two clusters (the PAC file sends it DIRECT, as any
        // name the proxy refuses; the proxy logs the conflict when it arises: ingress-feed.ts).
        // In the table's order, whichever cluster learnt the host first.
        const both = [r.route, o.route].sort((a, b) => a - b).map((k) => this.table.routes[k]!.name);
        return {
          claimed: false,
          tie: both,
          message: `${name} is served by both ${both[0]} and ${both[1]} (an Ingress or Route host in each): add it to one route's include to choose`,
        };
      }
    }
    const route = this.table.routes[r.route]!;
    let parsed: ClusterName | undefined;
    let reason = r.source as ClaimReason;
    if (r.source === 'route-name') parsed = parseRouteName(name, r.pattern);
    else if (r.source === 'cluster-domain') {
      parsed = parseClusterName(name, this.table.clusterDomain, this.viewOf[r.route]?.defaultNamespace ?? 'default');
    } else if (r.source === 'include' && route.kind === 'cluster') {
      // Under a cluster route's include, a Service or Pod form (web.shop.INCLUDE, svc.ns when ns
      // exists) names one, as under its route name; any other name is a host of its web apps: the
      // ingress controller's, as ingress.domains (what the refusal of a host two clusters serve advises).
      parsed = this.includedClusterName(name, r);
      if (!parsed) reason = 'ingress';
    }
    return { claimed: true, route, reason, pattern: r.pattern, host: name, isIp: false, name: parsed };
  }

  private includedClusterName(name: string, r: SuffixRule): ClusterName | undefined {
    if (r.pattern === '.' || r.pattern.startsWith('*')) return undefined;
    const parsed = parseRouteName(name, r.pattern);
    if (parsed?.kind !== 'service' || name.endsWith(`.svc.${r.pattern}`)) return parsed;
    return this.viewOf[r.route]?.namespaceExists(parsed.namespace) === false ? undefined : parsed;
  }

  /** The rules as plain data (PAC file, status). */
  snapshot(): TableSnapshot {
    const suffixes: TableSnapshot['suffixes'] = {};
    for (const [key, rules] of this.suffixes.entries()) {
      suffixes[key] = rules.map((r) => [r.route, r.exclude ? 1 : 0, r.length, r.keyLabels, r.minExtra, r.maxExtra === ANY ? -1 : r.maxExtra]);
    }
    return {
      routes: this.table.routes.map((r) => ({ name: r.name, kind: r.kind })),
      defaultRoute: this.defaultRoute,
      clusterDomain: this.table.clusterDomain,
      suffixes,
      cidrs: [...this.cidrList],
    };
  }
}
