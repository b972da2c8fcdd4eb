// How the API connection leaves this machine (corporate egress proxies, some with their own CA).
// As client-go does it: the kubeconfig's proxy-url wins; else HTTPS_PROXY / HTTP_PROXY (by the
// server URL's scheme) unless NO_PROXY excludes the server, following
// golang.org/x/net/http/httpproxy (proxy.go: FromEnvironment, config.init, useProxy): upper case
// before lower case; NO_PROXY entries are "*", CIDRs, IPs, "host:port", "domain" (itself and
// names under it), ".domain" / "*.domain" (names under it); localhost (in any case: Go sends
// "LOCALHOST" to the proxy, which cannot reach it) and loopback IPs never go through a proxy. An extra CA bundle (--extra-ca, config `extra-ca`) is trusted besides the
// kubeconfig's CA, for proxies that intercept TLS.
import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import { domainToASCII } from 'node:url';
import tls from 'node:tls';
import { X509Certificate } from 'node:crypto';
import type { KubeConfig } from '@kubernetes/client-node';
import { StartupError } from '../core/errors.js';
import { parseIp, type IpAddress } from '../core/cidr.js';
import { agentThrough, type DialFunction } from './dial-agent.js';
import { boundProxyConnect, explainProxyFailures } from './proxy-failures.js';

export interface ExtraCA {
  file: string;
  pem: string;
}

export interface EgressOptions {
  /** Environment to read *_PROXY from (process.env by default). */
  env?: NodeJS.ProcessEnv;
  extraCA?: ExtraCA;
  /** `via: ROUTE`: every API connection is dialled through that route (beats proxies). */
  via?: { route: string; dial: DialFunction };
}

/** Which proxy (if any) the API connection uses, and why: for messages. */
export interface Egress {
  /** The proxy URL without credentials; undefined when connecting directly. */
  proxy?: string;
  /** "the kubeconfig's proxy-url", "HTTPS_PROXY", …; or why it is direct ("NO_PROXY entry x"). */
  source?: string;
}

/** Reads a PEM bundle for --extra-ca / extra-ca; every certificate in it must parse. */
export function loadExtraCA(file: string): ExtraCA {
  let pem: string;
  try {
    pem = readFileSync(file, 'utf8');
  } catch (err) {
    throw new StartupError(`cannot read the extra CA bundle ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, { cause: err });
  }
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) throw new StartupError(`the extra CA bundle ${file} holds no PEM certificate`);
  for (const block of blocks) {
    try {
      new X509Certificate(block);
    } catch (err) {
      throw new StartupError(`the extra CA bundle ${file} holds a certificate that does not parse: ${(err as Error).message}`, { cause: err });
    }
  }
  return { file, pem: blocks.join('\n') };
}

type Matcher = (host: string, port: string, ip: IpAddress | undefined) => boolean;

/** NO_PROXY as httpproxy's config.init reads it: a predicate "do not proxy host:port". */
export function noProxyMatcher(noProxy: string): (host: string, port: string) => boolean {
  const matchers: Matcher[] = [];
  for (const raw of noProxy.split(',')) {
    const entry = raw.trim().toLowerCase();
    if (!entry) continue;
    if (entry === '*') return () => true;
    if (entry.includes('/')) {
      // net.ParseCIDR: host bits may be set ("10.1.2.3/8" is 10.0.0.0/8).
      const [addr, len] = entry.split('/', 2) as [string, string];
      let base = parseIp(addr);
      let prefix = Number(len);
      // An IPv4-mapped block (::ffff:10.0.0.0/104) holds IPv4 addresses (10.0.0.0/8), as in Go;
      // one shorter than /96 loses the ffff when masked and is an IPv6 block.
      const mapped = base?.family === 4 && addr.includes(':');
      if (base && mapped && prefix >= 96) prefix -= 96;
      else if (base && mapped) base = { family: 6, bytes: Uint8Array.from([...new Uint8Array(10), 0xff, 0xff, ...base.bytes]), text: addr };
      if (base && /^\d{1,3}$/.test(len) && Number(len) <= (mapped ? 128 : base.bytes.length * 8))
        matchers.push((_h, _p, ip) => ip !== undefined && inBlock(base, prefix, ip));
      continue;
    }
    let host = entry;
    let port = '';
    const hp = /^(\[[^\]]+\]|[^:]+):(\d+)$/.exec(entry);
    if (hp) {
      host = hp[1]!.replace(/^\[|\]$/g, '');
      port = hp[2]!;
    }
    // "[fd00::1]" without a port is no IP to httpproxy (net.SplitHostPort fails, net.ParseIP too): it matches nothing.
    const literal = host.startsWith('[') ? undefined : parseIp(host);
    if (literal) {
      matchers.push((_h, p, ip) => ip?.text === literal.text && (port === '' || port === p));
      continue;
    }
    if (!host) continue;
    if (host.startsWith('*.')) host = host.slice(1);
    const matchHost = !host.startsWith('.');
    // idnaASCII in httpproxy: a non-ASCII entry matches the punycode names URLs carry; an invalid one stays.
    const suffix = domainToASCII(matchHost ? `.${host}` : host) || (matchHost ? `.${host}` : host);
    matchers.push((h, p) => (h.endsWith(suffix) || (matchHost && h === suffix.slice(1))) && (port === '' || port === p));
  }
  return (host, port) => {
    const h = host.toLowerCase().replace(/^\[|\]$/g, '');
    const ip = parseIp(h);
    return matchers.some((m) => m(h, port, ip));
  };
}

function inBlock(base: IpAddress, prefix: number, ip: IpAddress): boolean {
  if (base.family !== ip.family) return false;
  for (let bit = 0; bit < prefix; bit++) {
    const mask = 0x80 >> (bit & 7);
    if ((base.bytes[bit >> 3]! & mask) !== (ip.bytes[bit >> 3]! & mask)) return false;
  }
  return true;
}

function env(e: NodeJS.ProcessEnv, name: string): { value: string; name: string } | undefined {
  for (const n of [name, name.toLowerCase()]) {
    const v = e[n];
    if (v) return { value: v, name: n };
  }
  return undefined;
}

/** The proxy for a server URL from the environment (httpproxy ProxyFunc), or why there is none. */
export function proxyFromEnvironment(server: URL, e: NodeJS.ProcessEnv = process.env): Egress & { url?: string } {
  const scheme = server.protocol.replace(/:$/, '');
  const chosen = scheme === 'https' ? env(e, 'HTTPS_PROXY') : scheme === 'http' ? env(e, 'HTTP_PROXY') : undefined;
  if (!chosen) return {};
  const host = server.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  const port = server.port || (scheme === 'https' ? '443' : '80');
  const ip = parseIp(host);
  if (host === 'localhost' || (ip && (ip.text.startsWith('127.') || ip.text === '::1'))) return { source: 'loopback is never proxied' };
  const noProxy = env(e, 'NO_PROXY');
  if (noProxy && noProxyMatcher(noProxy.value)(host, port)) return { source: `${noProxy.name} excludes ${host}` };
  const url = normalizeProxyUrl(chosen.value, chosen.name);
  return { url, proxy: redact(url), source: chosen.name };
}

/** httpproxy parseProxy: a bare "host:port" means http://; only http, https, socks5(h) are proxies. */
function normalizeProxyUrl(value: string, from: string): string {
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(value) ? value : `http://${value}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    throw new StartupError(`${from}=${redactText(value)} is not a proxy URL`);
  }
  if (!['http:', 'https:', 'socks5:', 'socks5h:'].includes(url.protocol) || !url.hostname) {
    throw new StartupError(`${from}=${redactText(value)} is not a supported proxy (http://, https://, socks5://, socks5h://)`);
  }
  return url.toString();
}

/** A proxy URL fit for messages: no user or password. */
export function redact(url: string): string {
  try {
    const u = new URL(url);
    u.username = '';
    u.password = '';
    return u.toString().replace(/\/$/, '');
  } catch {
    return redactText(url);
  }
}

function redactText(text: string): string {
  return text.replace(/\/\/[^@/]*@/, '//');
}

/**
 * Applies the egress rules to request options client-node has just filled in (applyToHTTPSOptions):
 * with the extra CA, a proxy from the environment or a socks5:// proxy-url, the agent is made
 * again (client-node's own createAgent, so proxy-url keeps its agent types). Returns what was
 * chosen, for messages.
 */
export function applyEgress(kc: KubeConfig, opts: https.RequestOptions, options: EgressOptions): Egress {
  const cluster = kc.getCurrentCluster();
  if (!cluster) return {};
  let egress: Egress & { url?: string };
  if (options.via) egress = { proxy: `route ${options.via.route}`, source: 'via' };
  else if (cluster.proxyUrl) egress = { url: cluster.proxyUrl, proxy: redact(cluster.proxyUrl), source: "the kubeconfig's proxy-url" };
  else egress = proxyFromEnvironment(new URL(cluster.server), options.env ?? process.env);
  if (options.extraCA) {
    // Without a kubeconfig CA, Node's roots apply; extra CAs must add to them, not replace them.
    const base = opts.ca ? (Array.isArray(opts.ca) ? opts.ca : [opts.ca]) : [...tls.rootCertificates];
    opts.ca = [...base, options.extraCA.pem];
  }
  const chosen: Egress = egress.proxy ? { proxy: egress.proxy, source: egress.source } : egress.source ? { source: egress.source } : {};
  remakeAgent(kc, opts, options, egress);
  if (egress.url && opts.agent instanceof http.Agent) dialBareIPv6Proxy(opts.agent);
  if (egress.url && opts.agent instanceof http.Agent && /^https?:/i.test(egress.url)) boundProxyConnect(opts.agent);
  if (egress.url && opts.agent instanceof http.Agent) explainProxyFailures(opts.agent, { ...chosen, url: egress.url, extraCA: options.extraCA?.file });
  return chosen;
}

function remakeAgent(kc: KubeConfig, opts: https.RequestOptions, options: EgressOptions, egress: Egress & { url?: string }): void {
  const cluster = kc.getCurrentCluster()!;
  // client-node's agent for socks5:// resolves the server's name here; Go's SOCKS5 dialer (and so
  // kubectl) sends the name to the proxy, which socks-proxy-agent does only for socks5h://.
  const remoteDns = egress.url?.replace(/^socks5:/i, 'socks5h:');
  // A CA bundle caProblem kept only the readable certificates of: client-node's agent has the whole
  // one, and an agent's own options win over a request's.
  const caTrimmed = opts.agent instanceof https.Agent && opts.agent.options.ca !== opts.ca;
  const remake = options.via || options.extraCA || caTrimmed || (egress.url && (!cluster.proxyUrl || remoteDns !== egress.url));
  if (!remake) return;
  const agentOptions: https.AgentOptions & { proxyRequestOptions?: https.RequestOptions } = {
    ca: opts.ca,
    cert: opts.cert,
    key: opts.key,
    pfx: opts.pfx,
    passphrase: opts.passphrase,
    rejectUnauthorized: opts.rejectUnauthorized,
    servername: opts.servername ?? serverName(cluster.server),
  };
  if (options.via) {
    opts.agent = agentThrough(options.via.dial, agentOptions, cluster.server.startsWith('https:'));
    return;
  }
  // hpagent verifies an https:// proxy's own certificate with proxyRequestOptions alone (Node's
  // roots): a corporate proxy's is signed by the corporate CA, the one --extra-ca names.
  if (options.extraCA && remoteDns?.toLowerCase().startsWith('https:'))
    agentOptions.proxyRequestOptions = { ca: [...tls.rootCertificates, options.extraCA.pem] };
  const create = (kc as unknown as { createAgent(c: object, o: object): https.Agent }).createAgent.bind(kc);
  opts.agent = create({ ...cluster, proxyUrl: remoteDns }, agentOptions);
}

/** SNI for the server URL: none for an IP, "[::1]" included (URL keeps the brackets, and a bracketed name matched no IP SAN). */
function serverName(server: string): string | undefined {
  const host = new URL(server).hostname.replace(/^\[(.*)\]$/, '$1');
  return isIP(host) ? undefined : host;
}

/**
 * hpagent and socks-proxy-agent dial the proxy URL's `hostname`, which keeps an IPv6 address's
 * brackets: `http://[fd00::1]:3128` failed with "getaddrinfo ENOTFOUND [fd00::1]" (kubectl
 * dials it). The agent's parsed proxy gets the bare address.
 */
function dialBareIPv6Proxy(agent: http.Agent): void {
  const a = agent as unknown as { proxy?: URL | { host?: string } };
  if (a.proxy instanceof URL && a.proxy.hostname.startsWith('[')) {
    const u = a.proxy;
    a.proxy = { protocol: u.protocol, hostname: u.hostname.slice(1, -1), port: u.port, username: u.username, password: u.password } as unknown as URL;
  } else if (a.proxy && !(a.proxy instanceof URL) && a.proxy.host?.startsWith('[')) a.proxy.host = a.proxy.host.slice(1, -1);
}

/** " (through proxy http://proxy:3128 from HTTPS_PROXY)", or "" when direct: for error messages. */
export function describeEgress(egress: Egress | undefined): string {
  if (!egress?.proxy) return '';
  if (egress.source === 'via') return ` (through ${egress.proxy})`;
  return ` (through proxy ${egress.proxy}, from ${egress.source})`;
}
