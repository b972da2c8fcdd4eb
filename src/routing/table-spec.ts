// The routing table as data: what the config file and the flags produce (config/), what the
// matcher indexes (table.ts) and the PAC file is made from (pac.ts). Each route's own part (its
// kind, patterns and what that kind needs) is a RouteSpec (routes/spec.ts), which the routes are
// built from without reaching up here.
//
// Patterns, compared on whole DNS labels, case-insensitively, without a trailing dot:
//   suffix   "prod.example.com"        that name and every name under it
//   wildcard "*.apps.prod.example.com" every name under apps.prod.example.com, not that name itself
//   root     "."                       every name (a catch-all, consulted after everything else)
// Label charset: letters, digits, "-" and "_" (the last appears in real host names, e.g. SRV-style).

import { domainToASCII } from 'node:url';
import { inetAton } from '../core/address.js';
import { escapeControls } from '../core/escape.js';
import { hasClusterNames, type RouteKind, type RouteSpec } from '../routes/spec.js';

export interface RoutingTable {
  /** In order; the order matters only for which cluster route is the default. */
  routes: RouteSpec[];
  /** The cluster route that also answers <cluster domain> names and short names, if any. */
  defaultRoute?: string;
  /** The direct route that takes what no other route claims (`direct: true`, --direct), if any. */
  directRoute?: string;
  /** Lines to warn with at start: old spellings the config file used. */
  deprecations?: string[];
  /** The clusters' DNS domain (cluster.local). */
  clusterDomain: string;
  /** --extra-ca / `extraCA`: a PEM bundle trusted for API connections (cluster/egress-proxy.ts loadExtraCA). */
  extraCA?: string;
  /**
   * The config file's `forward:` port mappings. Listeners, not routes: carried with the table only
   * because the file is read once; they take effect when the proxy starts (a reload keeps the
   * listeners it has).
   */
  forwards?: string[];
}

/** The route name given to the pass-through route made by `direct: true` / --direct. */
export const DIRECT_ROUTE_NAME = 'direct';

const LABEL = /^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$/;

/** Lowercase, without one trailing dot, when every label is a host-name label; else undefined. */
export function normalizeHostName(text: string): string | undefined {
  const name = (text.endsWith('.') ? text.slice(0, -1) : text).toLowerCase();
  if (name.length === 0 || name.length > 253) return undefined;
  return name.split('.').every((l) => LABEL.test(l)) ? name : undefined;
}

/** A name pattern, checked and normalized; throws an Error whose message says what is wrong. */
export function parsePattern(text: string, allow: { wildcard: boolean; root: boolean }): string {
  // An internationalized name (bücher.example) as clients send it, and browsers give it to the
  // PAC file: in its ASCII form (xn--bcher-kva.example).
  if (/[^\x00-\x7f]/.test(text)) {
    const ascii = domainToASCII(text);
    if (!ascii) throw new Error(`"${text}" is not a valid internationalized domain name`);
    return parsePattern(ascii, allow);
  }
  if (text === '.') {
    if (allow.root) return '.';
    throw new Error('"." (every name) is only allowed in include');
  }
  const host = hostInside(text);
  if (host !== undefined && !looksLikeIp(host)) throw new Error(`"${text}": a rule is a host name, matched on every port and scheme: write "${host}"`);
  // A name the resolver reads as an address (2130706433, 127.1) never reaches the name rules.
  const aton = looksLikeIp(text) ? undefined : inetAton(text);
  if (aton !== undefined) throw new Error(`"${text}" is the IP address ${aton} (as resolvers and browsers read it): put it in cidrs`);
  if (looksLikeIp(text) || text.includes('/')) {
    throw new Error(`"${text}" is an IP address or block: put it in cidrs`);
  }
  if (text.startsWith('*.')) {
    if (!allow.wildcard) throw new Error(`"${text}": write "${text.slice(2)}" (a suffix already matches every name under it)`);
    const rest = normalizeHostName(text.slice(2));
    if (!rest) throw new Error(`"${text}" is not a valid wildcard domain (expected *.example.com)`);
    return `*.${rest}`;
  }
  if (text.startsWith('.')) throw new Error(`"${text}": write "${text.slice(1)}" without the leading dot (suffixes match whole labels)`);
  if (text.includes('*')) throw new Error(`"${text}": a "*" may only stand alone as the first label (*.example.com)`);
  const name = normalizeHostName(text);
  if (!name) throw new Error(`"${text}" is not a valid DNS name (labels of letters, digits, "-" and "_", at most 63 characters each)`);
  return name;
}

const looksLikeIp = (text: string): boolean => /^\d{1,3}(\.\d{1,3}){3}$/.test(text) || text.includes(':');

/** The host of "https://example.com/x" or "example.com:443", written where a bare name belongs. */
function hostInside(text: string): string | undefined {
  if (text.includes('://')) {
    try {
      return new URL(text).hostname || undefined;
    } catch {
      return undefined;
    }
  }
  return /^([^:/[\]]+):\d{1,5}$/.exec(text)?.[1];
}

/** Why a route name cannot be used; undefined when it can. */
export function routeNameProblem(name: string, kind: RouteKind, clusterDomain: string): string | undefined {
  const normalized = normalizeHostName(name);
  if (!normalized || normalized !== name || name.includes('_'))
    return `"${name}" is not a valid route name: use lowercase DNS labels (letters, digits, "-"), e.g. "prod"`;
  if (kind !== 'cluster' && kind !== 'konnectivity') return undefined;
  const domain = clusterDomain.toLowerCase();
  const reserved = ['svc', 'pod', 'localhost'];
  const last = name.split('.').pop()!;
  if (reserved.includes(last) || name === domain || name.endsWith(`.${domain}`)) {
    return `"${name}" cannot name a cluster route: it is also a suffix of the cluster DNS names (${reserved.join(', ')}, ${domain})`;
  }
  return undefined;
}

/**
 * A route name for a kube context given with --context: the context name when it is a valid
 * route name, else a readable stand-in ("arn:aws:eks:…/prod" → "arn-aws-eks-…-prod"). Use the
 * config file to choose a shorter one.
 */
export function routeNameForContext(context: string): string {
  const labels = context
    .toLowerCase()
    .split('.')
    .map((l) =>
      l
        .replace(/[^a-z0-9-]+/g, '-')
        .replace(/^-+|-+$/g, '')
        .slice(0, 63)
        .replace(/-+$/, ''),
    )
    .filter((l) => l.length > 0);
  return labels.join('.');
}

/**
 * What a route serves, one line for the startup lines and `status`:
 * "prod (cluster prod-admin, default): <svc>.<ns>.prod, *.cluster.local, *.svc, short names,
 *  prod.example.com, not apps.prod.example.com, 10.96.0.0/12, ingress *.apps.prod.example.com".
 */
export function describeRoute(table: RoutingTable, route: RouteSpec): string {
  const parts: string[] = [];
  if (hasClusterNames(route)) {
    parts.push(`<svc>.<ns>.${route.name}`);
    if (table.defaultRoute === route.name) parts.push(`*.${table.clusterDomain}`, '*.svc', 'short names');
  }
  parts.push(...route.include.map((p) => (p === '.' ? 'every other name' : p)));
  parts.push(...route.exclude.map((p) => `not ${p}`));
  parts.push(...route.cidrs);
  if (route.kind === 'cluster') parts.push(...(route.ingress?.domains ?? []).map((d) => `ingress ${d}`));
  if (table.directRoute === route.name) parts.push('everything no other route claims');
  if (route.kind === 'direct' && route.allow?.length) parts.push(`may dial ${route.allow.join(', ')}`);
  const isDefault = table.defaultRoute === route.name ? ', default' : '';
  const what =
    route.kind === 'cluster'
      ? `cluster ${escapeControls(route.context)}${isDefault}`
      : route.kind === 'konnectivity'
        ? `konnectivity ${escapeControls(route.context)} via ${route.konnectivity.server} (${route.konnectivity.mode})${isDefault}`
        : route.kind === 'ssh'
          ? `ssh ${route.ssh.host}`
          : route.kind;
  return `${route.name} (${what}): ${parts.join(', ') || 'nothing'}`;
}
