// The proxy auto-config file (PAC: the FindProxyForURL(url, host) script browsers fetch, as
// Netscape specified it and Chromium/Firefox run it). It carries the matcher's own rules as data
// and the same decision procedure in plain ES5, so the browser decides exactly as the proxy would
// (test/unit/pac.test.ts runs both over one decision table):
//   names and IP literals a cluster or reject route claims → "SOCKS5 <socks>; PROXY <http>";
//   names a direct route claims, everything unclaimed, and what the proxy refuses (an ingress
//   host two clusters learnt) → "DIRECT": sending the browser to a proxy that refuses the name
//   would only give it an error page.
// Deliberately without dnsResolve/isInNet: no DNS look-up of any name the browser visits. IP
// literals are matched by parsing the host text. Two things only the proxy knows are left out:
// the ClusterIPs and Pod IPs in the watch caches (route them with `cidrs`), and whether "svc.ns"
// names a namespace, unless `namespaces` is given (else such names go DIRECT; use svc.ns.svc).
import { isIPv4 } from 'node:net';
import { formatHostPort, isLoopbackHost, type HostPort } from '../core/address.js';
import { parseCidr } from '../core/cidr.js';
import type { RouteMatcher } from './table.js';

export interface PacListeners {
  /** Where browsers reach the SOCKS5 listener; 0.0.0.0 / :: are written as `reachedAt`, else as loopback. */
  socks?: HostPort;
  /** Where browsers reach the HTTP listener. */
  http?: HostPort;
  /**
   * The address of this machine that the browser asking for the file connected to (the PAC
   * request's local address). A browser on another machine cannot use a wildcard written as
   * loopback, which is its own, nor a listener bound to loopback only: the first is written as
   * this address, the second left out.
   */
  reachedAt?: string;
}

export interface PacOptions {
  /** The default cluster's namespaces, so "svc.ns" names in them go through the proxy. */
  namespaces?: Iterable<string>;
}

/** "SOCKS5 127.0.0.1:1080; PROXY 127.0.0.1:3128", with only the listeners that exist. */
export function proxyDirective(listeners: PacListeners): string {
  const parts: string[] = [];
  const socks = listeners.socks && reachable(listeners.socks, listeners.reachedAt);
  const http = listeners.http && reachable(listeners.http, listeners.reachedAt);
  if (socks) parts.push(`SOCKS5 ${socks}`);
  if (http) parts.push(`PROXY ${http}`);
  if (parts.length === 0) throw new Error('a PAC file needs a SOCKS5 or HTTP listener');
  return parts.join('; ');
}

/** "host:port" at which a browser that reached this machine at `reachedAt` finds `l`; undefined when it cannot. */
function reachable(l: HostPort, reachedAt?: string): string | undefined {
  // A dual-stack socket reports an IPv4 client's address as ::ffff:a.b.c.d.
  const at = reachedAt?.toLowerCase().startsWith('::ffff:') && isIPv4(reachedAt.slice(7)) ? reachedAt.slice(7) : reachedAt;
  const wildcard = l.host === '0.0.0.0' || l.host === '' || l.host === '::';
  if (at === undefined || isLoopbackHost(at)) return formatHostPort(wildcard ? (l.host === '::' ? '::1' : '127.0.0.1') : l.host, l.port);
  // From another address: an IPv4 wildcard is not reachable at an IPv6 one.
  if (wildcard) return l.host === '::' || isIPv4(at) ? formatHostPort(at, l.port) : undefined;
  return isLoopbackHost(l.host) ? undefined : formatHostPort(l.host, l.port);
}

/**
 * A value as an ASCII-only JavaScript literal. JSON leaves U+2028 and U+2029 as they are, which
 * older PAC engines take for line ends (a namespace name from a hostile API server could end the
 * comment it stands in, or break the file), and some engines read the file as Latin-1: every
 * character past ASCII is written as an escape.
 */
export function pacLiteral(value: unknown): string {
  return JSON.stringify(value).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

export function generatePac(matcher: RouteMatcher, listeners: PacListeners, options: PacOptions = {}): string {
  const snap = matcher.snapshot();
  const v4: Array<[number, number, number]> = [];
  const v6: Array<[number[], number, number]> = [];
  for (const { cidr, route } of snap.cidrs) {
    const c = parseCidr(cidr);
    if (c.family === 4) v4.push([((c.network[0]! << 24) | (c.network[1]! << 16) | (c.network[2]! << 8) | c.network[3]!) >>> 0, c.prefix, route]);
    else v6.push([Array.from({ length: 8 }, (_, i) => (c.network[2 * i]! << 8) | c.network[2 * i + 1]!), c.prefix, route]);
  }
  v4.sort((a, b) => b[1] - a[1]);
  v6.sort((a, b) => b[1] - a[1]);
  const namespaces = options.namespaces ? Object.fromEntries([...options.namespaces].map((n) => [n, 1])) : null;
  const data = [
    `var PROXY = ${pacLiteral(proxyDirective(listeners))};`,
    `// Route names: ${pacLiteral(snap.routes.map((r) => r.name))}; 1 = through the proxy (cluster, reject), 0 = DIRECT.`,
    `var ROUTES = ${pacLiteral(snap.routes.map((r) => (r.kind === 'direct' ? 0 : 1)))};`,
    `var DEFAULT_ROUTE = ${snap.defaultRoute};`,
    `var CLUSTER_DOMAIN = ${pacLiteral(snap.clusterDomain)};`,
    `var NAMESPACES = ${pacLiteral(namespaces)};`,
    `// suffix -> [route, exclude, length, key labels, min extra labels, max extra labels (-1 any)], in precedence order`,
    `var SUFFIXES = ${pacLiteral(snap.suffixes)};`,
    `var CIDRS4 = ${pacLiteral(v4)};`,
    `var CIDRS6 = ${pacLiteral(v6)};`,
  ];
  return `// kubectl-proxyout proxy auto-config: generated, do not edit.\n${data.join('\n')}\n${PAC_LOGIC}`;
}

/** The decision procedure of table.ts in ES5, for PAC engines. */
const PAC_LOGIC = String.raw`
function FindProxyForURL(url, host) {
  var r = kpoRoute(host);
  return r >= 0 && ROUTES[r] ? PROXY : "DIRECT";
}

function kpoHas(o, k) { return Object.prototype.hasOwnProperty.call(o, k); }

function kpoRoute(host) {
  var h = String(host).toLowerCase();
  if (h.charAt(0) == "[" && h.charAt(h.length - 1) == "]") h = h.substring(1, h.length - 1);
  if (h.indexOf(":") >= 0) return kpoIp6(h);
  if (/^(0|[1-9]\d{0,2})(\.(0|[1-9]\d{0,2})){3}$/.test(h) && kpoOctets(h)) return kpoIp4(h);
  if (h.charAt(h.length - 1) == ".") h = h.substring(0, h.length - 1);
  return kpoName(h);
}

function kpoName(name) {
  var labels = name.split("."), n = labels.length, cands = [], i, j, r, rules, blocked = {};
  if (name.length == 0 || name.length > 253) return -1;
  for (i = 0; i < n; i++) if (!/^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$/.test(labels[i])) return -1;
  for (i = 0; i <= n; i++) {
    var key = labels.slice(i).join(".");
    if (!kpoHas(SUFFIXES, key)) continue;
    rules = SUFFIXES[key];
    for (j = 0; j < rules.length; j++) {
      r = rules[j];
      if (i >= r[4] && (r[5] < 0 || i <= r[5])) cands.push(r);
    }
  }
  cands.sort(function (a, b) { return (b[2] - a[2]) || (b[1] - a[1]) || (b[3] - a[3]); });
  for (i = 0; i < cands.length && cands[i][2] >= 1; i++) {
    r = cands[i];
    if (r[1]) blocked[r[0]] = 1;
    else if (!blocked[r[0]]) return kpoClaim(cands, i, blocked);
  }
  if (DEFAULT_ROUTE >= 0 && !blocked[DEFAULT_ROUTE] && n <= 3 && kpoShortName(labels)) return DEFAULT_ROUTE;
  for (; i < cands.length; i++) {
    r = cands[i];
    if (!r[1] && !blocked[r[0]]) return kpoClaim(cands, i, blocked);
  }
  return -1;
}

function kpoClaim(cands, i, blocked) {
  var r = cands[i], j, o;
  // A rule of another route as long and keyed alike (one ingress host two clusters learnt): refused.
  for (j = i + 1; j < cands.length && cands[j][2] == r[2] && cands[j][3] == r[3]; j++) {
    o = cands[j];
    if (!o[1] && o[0] != r[0] && !blocked[o[0]]) return -1;
  }
  return r[0];
}

function kpoShortName(labels) {
  var n = labels.length, i;
  if (labels[n - 1] == "localhost" || labels.join(".") == CLUSTER_DOMAIN) return false;
  for (i = 0; i < n; i++) if (!/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/.test(labels[i])) return false;
  if (n == 1) return labels[0] != "svc";
  if (n == 2) return NAMESPACES !== null && kpoHas(NAMESPACES, labels[1]);
  return labels[2] == "pod" && kpoDashedIp(labels[0]);
}

function kpoDashedIp(label) {
  var p = label.split("-"), i;
  if (p.length == 4) {
    for (i = 0; i < 4; i++) if (!/^\d{1,3}$/.test(p[i]) || Number(p[i]) > 255) return false;
    return true;
  }
  return (label.indexOf("--") >= 0 || p.length > 4) && /^[0-9a-f-]+$/.test(label);
}

function kpoOctets(h) {
  var p = h.split("."), i;
  for (i = 0; i < 4; i++) if (Number(p[i]) > 255) return false;
  return true;
}

function kpoIp4(h) {
  var p = h.split("."), v = 0, i, c, s;
  for (i = 0; i < 4; i++) v = v * 256 + Number(p[i]);
  for (i = 0; i < CIDRS4.length; i++) {
    c = CIDRS4[i]; s = 32 - c[1];
    if (c[1] == 0 || Math.floor(v / Math.pow(2, s)) == Math.floor(c[0] / Math.pow(2, s))) return c[2];
  }
  return -1;
}

function kpoIp6(h) {
  var g = kpoGroups(h), i, k, c, full, bits, mask;
  if (!g) return -1;
  if (g[0] == 0 && g[1] == 0 && g[2] == 0 && g[3] == 0 && g[4] == 0 && g[5] == 65535) {
    return kpoIp4([g[6] >> 8, g[6] & 255, g[7] >> 8, g[7] & 255].join("."));
  }
  for (i = 0; i < CIDRS6.length; i++) {
    c = CIDRS6[i]; full = Math.floor(c[1] / 16); bits = c[1] % 16;
    for (k = 0; k < full && g[k] == c[0][k]; k++) {}
    if (k < full) continue;
    mask = bits ? (65535 << (16 - bits)) & 65535 : 0;
    if (!bits || (g[full] & mask) == c[0][full]) return c[2];
  }
  return -1;
}

function kpoGroups(h) {
  if (!/^[0-9a-f:.]+$/.test(h)) return null;
  var tail = [], m = /^(.*:)(\d{1,3}(\.\d{1,3}){3})$/.exec(h), halves, head, rest, gap, out = [], i, q;
  if (m) {
    q = m[2].split(".");
    for (i = 0; i < 4; i++) if (Number(q[i]) > 255 || (q[i].length > 1 && q[i].charAt(0) == "0")) return null;
    tail = [Number(q[0]) * 256 + Number(q[1]), Number(q[2]) * 256 + Number(q[3])];
    h = m[1];
    if (h.substring(h.length - 2) != "::") h = h.substring(0, h.length - 1);
  }
  halves = h.split("::");
  if (halves.length > 2) return null;
  head = halves[0] === "" ? [] : halves[0].split(":");
  rest = halves.length == 2 && halves[1] !== "" ? halves[1].split(":") : [];
  gap = 8 - tail.length - head.length - rest.length;
  if (halves.length == 1 ? gap != 0 : gap < 1) return null;
  for (i = 0; i < head.length; i++) out.push(head[i]);
  for (i = 0; i < gap && halves.length == 2; i++) out.push("0");
  for (i = 0; i < rest.length; i++) out.push(rest[i]);
  for (i = 0; i < out.length; i++) {
    if (!/^[0-9a-f]{1,4}$/.test(out[i])) return null;
    out[i] = parseInt(out[i], 16);
  }
  return out.concat(tail);
}
`;
