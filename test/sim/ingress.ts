// The simulated ingress controller: what the pods with 'ingress-http' / 'ingress-https' backends
// run. It reads the Ingresses (networking.k8s.io/v1) and, when served, OpenShift Routes from the
// store at every request, like a controller's synced view, and answers for the rule a request
// matches instead of proxying to the Service's pods: the answer says which Host, path and (on
// HTTPS) SNI it saw, so a test proves the bytes reached the controller untouched. HTTPS is
// terminated with a certificate from the simulated CA for the TLS host that covers the SNI name
// (issued on first use, cached), else with a default certificate, as ingress-nginx serves its
// "Fake Certificate" for names no Ingress has TLS for.
//
// Matching follows the Ingress API (k8s.io/api/networking/v1 types.go): a "*.x" host matches
// exactly one more label; an exact host beats a wildcard; paths by pathType (Exact, Prefix by
// whole path elements, ImplementationSpecific as Prefix), the longest first; then the
// Ingress's defaultBackend. Routes (openshift/router): spec.host, or every name beside it with
// wildcardPolicy Subdomain; spec.path as a prefix.
import type http from 'node:http';
import tls from 'node:tls';
import type { TLSSocket } from 'node:tls';
import { createHash } from 'node:crypto';
import type { IngressBackend, PodIdentity } from './backends.js';
import type { SimPki, KeyAndCert } from './pki.js';
import type { Store, KObject } from './store.js';

export interface IngressMatch {
  /** "ingress shop/web" or "route shop/web". */
  via: string;
  namespace: string;
  service: string;
  /** Service port number or name, as the rule gives it. */
  port: string;
}

/** The CommonName of the certificate served for names no TLS entry covers (ingress-nginx's). */
export const DEFAULT_CERT_CN = 'Kubernetes Ingress Controller Fake Certificate';

interface Candidate {
  match: IngressMatch;
  exactHost: boolean;
  pathLength: number;
}

function hostMatches(pattern: string, host: string): { exact: boolean } | undefined {
  const p = pattern.toLowerCase();
  if (p === host) return { exact: true };
  if (p.startsWith('*.')) {
    const dot = host.indexOf('.');
    if (dot > 0 && host.slice(dot + 1) === p.slice(2)) return { exact: false };
  }
  return undefined;
}

/** Length of the matched path, or -1 (k8s.io/api networking/v1 HTTPIngressPath semantics). */
function pathMatch(rulePath: string | undefined, pathType: string | undefined, path: string): number {
  const want = rulePath || '/';
  if (pathType === 'Exact') return path === want ? want.length : -1;
  if (want === '/') return 1;
  const prefix = want.replace(/\/+$/, '');
  return path === prefix || path.startsWith(prefix + '/') ? prefix.length : -1;
}

function backendOf(b: any): { service: string; port: string } | undefined {
  const svc = b?.service;
  if (!svc?.name) return undefined;
  return { service: svc.name, port: String(svc.port?.number ?? svc.port?.name ?? '') };
}

export class SimIngressController implements IngressBackend {
  private readonly certs = new Map<string, tls.SecureContext>();
  private defaultKeyCert?: KeyAndCert;

  constructor(
    private readonly store: Store,
    private readonly pki: SimPki,
    private readonly routesServed: () => boolean,
  ) {}

  /** The rule a request for host (no port) and path goes to; undefined = the controller's 404. */
  match(hostHeader: string, path: string): IngressMatch | undefined {
    const host = hostHeader.toLowerCase().replace(/:\d+$/, '').replace(/\.$/, '');
    const found: Candidate[] = [];
    for (const ing of this.store.list('ingresses') as any[]) {
      const ns = ing.metadata.namespace;
      for (const rule of ing.spec?.rules ?? []) {
        const hm = rule.host ? hostMatches(rule.host, host) : { exact: false };
        if (!hm) continue;
        for (const p of rule.http?.paths ?? []) {
          const len = pathMatch(p.path, p.pathType, path);
          const b = backendOf(p.backend);
          if (len >= 0 && b)
            found.push({ match: { via: `ingress ${ns}/${ing.metadata.name}`, namespace: ns, ...b }, exactHost: hm.exact && !!rule.host, pathLength: len });
        }
      }
    }
    if (this.routesServed()) {
      for (const r of this.store.list('routes') as any[]) {
        const spec = r.spec ?? {};
        if (!spec.host || !spec.to?.name) continue;
        const exact = spec.host.toLowerCase() === host;
        const sub = spec.wildcardPolicy === 'Subdomain' && hostMatches(`*.${spec.host.slice(spec.host.indexOf('.') + 1)}`, host);
        if (!exact && !sub) continue;
        const len = pathMatch(spec.path, 'Prefix', path);
        const ns = r.metadata.namespace;
        if (len >= 0)
          found.push({
            match: { via: `route ${ns}/${r.metadata.name}`, namespace: ns, service: spec.to.name, port: String(spec.port?.targetPort ?? '') },
            exactHost: exact,
            pathLength: len,
          });
      }
    }
    found.sort((a, b) => Number(b.exactHost) - Number(a.exactHost) || b.pathLength - a.pathLength);
    if (found[0]) return found[0].match;
    for (const ing of this.store.list('ingresses') as any[]) {
      const b = backendOf(ing.spec?.defaultBackend);
      if (b) return { via: `ingress ${ing.metadata.namespace}/${ing.metadata.name} (default backend)`, namespace: ing.metadata.namespace, ...b };
    }
    return undefined;
  }

  /** The TLS host entry (of an Ingress, or of a Route with spec.tls) that covers a server name. */
  tlsHostFor(servername: string): string | undefined {
    const name = servername.toLowerCase();
    let wildcard: string | undefined;
    const consider = (h: string) => {
      const m = hostMatches(h, name);
      if (m?.exact) return h.toLowerCase();
      if (m) wildcard ??= h.toLowerCase();
      return undefined;
    };
    for (const ing of this.store.list('ingresses') as any[]) {
      for (const t of ing.spec?.tls ?? []) for (const h of t.hosts ?? []) if (consider(h)) return name;
    }
    if (this.routesServed()) {
      for (const r of this.store.list('routes') as any[]) if (r.spec?.tls && r.spec.host && consider(r.spec.host)) return name;
    }
    return wildcard;
  }

  defaultCert(): { key: string; cert: string } {
    this.defaultKeyCert ??= this.pki.hostCert(['ingress.local'], DEFAULT_CERT_CN);
    return { key: this.defaultKeyCert.keyPem, cert: this.defaultKeyCert.certPem };
  }

  /** SNICallback: a certificate for the TLS host covering the name, or the default one. */
  sniContext(servername: string, cb: (err: Error | null, ctx?: tls.SecureContext) => void): void {
    const host = this.tlsHostFor(servername);
    if (!host) return cb(null, undefined);
    let ctx = this.certs.get(host);
    if (!ctx) {
      const kc = this.pki.hostCert([host]);
      ctx = tls.createSecureContext({ key: kc.keyPem, cert: kc.certPem });
      this.certs.set(host, ctx);
    }
    cb(null, ctx);
  }

  /**
   * One line per request: "ingress <host> <path> -> <ns>/<service>:<port> via <ingress|route>
   * <ns>/<name>; tls <sni|off>; body <bytes> <sha256 prefix>" (200), or "... -> no rule" (404).
   */
  handler(pod: PodIdentity, _port: number, secure: boolean): http.RequestListener {
    return (req, res) => {
      const hash = createHash('sha256');
      let bytes = 0;
      req.on('data', (c: Buffer) => {
        bytes += c.length;
        hash.update(c);
      });
      req.on('end', () => {
        const host = req.headers.host ?? '';
        const path = req.url ?? '/';
        const m = this.match(host, new URL(path, 'http://x').pathname);
        const sni = secure ? (req.socket as TLSSocket).servername || 'none' : 'off';
        const target = m ? `${m.namespace}/${m.service}:${m.port} via ${m.via}` : 'no rule';
        const body = `ingress ${host} ${path} -> ${target}; tls ${sni}; body ${bytes} ${hash.digest('hex').slice(0, 16)}\n`;
        res.writeHead(m ? 200 : 404, {
          'Content-Type': 'text/plain; charset=utf-8',
          'Content-Length': Buffer.byteLength(body),
          'X-Sim-Ingress-Controller': `${pod.namespace}/${pod.name}`,
        });
        res.end(body);
      });
    };
  }
}

export interface SimIngressBackendRef {
  service: string;
  /** Service port number or name. */
  port: number | string;
}

export interface SimIngressSpec {
  namespace: string;
  name: string;
  className?: string;
  /** Metadata annotations (e.g. the legacy kubernetes.io/ingress.class). */
  annotations?: Record<string, string>;
  rules?: Array<{ host?: string; paths?: Array<SimIngressBackendRef & { path?: string; pathType?: 'Prefix' | 'Exact' | 'ImplementationSpecific' }> }>;
  tls?: Array<{ hosts: string[]; secretName?: string }>;
  defaultBackend?: SimIngressBackendRef;
}

export interface SimRouteSpec {
  namespace: string;
  name: string;
  host: string;
  path?: string;
  service: string;
  targetPort?: number | string;
  tls?: 'edge' | 'passthrough' | 'reencrypt';
  wildcardPolicy?: 'None' | 'Subdomain';
}

const backendRef = (b: SimIngressBackendRef) => ({ service: { name: b.service, port: typeof b.port === 'number' ? { number: b.port } : { name: b.port } } });

/** An Ingress as the API server stores it (pathType defaulted to Prefix here for brevity), admitted by the controller. */
export function ingressObject(spec: SimIngressSpec, address: string): KObject {
  const s: Record<string, unknown> = {};
  if (spec.className) s.ingressClassName = spec.className;
  if (spec.defaultBackend) s.defaultBackend = backendRef(spec.defaultBackend);
  if (spec.tls) s.tls = spec.tls.map((t) => ({ hosts: t.hosts, ...(t.secretName ? { secretName: t.secretName } : {}) }));
  if (spec.rules) {
    s.rules = spec.rules.map((r) => ({
      ...(r.host ? { host: r.host } : {}),
      ...(r.paths ? { http: { paths: r.paths.map((p) => ({ path: p.path ?? '/', pathType: p.pathType ?? 'Prefix', backend: backendRef(p) })) } } : {}),
    }));
  }
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'Ingress',
    metadata: { name: spec.name, namespace: spec.namespace, generation: 1, ...(spec.annotations ? { annotations: spec.annotations } : {}) },
    spec: s,
    status: { loadBalancer: { ingress: [{ ip: address }] } },
  };
}

/** An OpenShift Route (route.openshift.io/v1), admitted by the default router. */
export function routeObject(spec: SimRouteSpec): KObject {
  const s: Record<string, unknown> = {
    host: spec.host,
    to: { kind: 'Service', name: spec.service, weight: 100 },
    wildcardPolicy: spec.wildcardPolicy ?? 'None',
  };
  if (spec.path) s.path = spec.path;
  if (spec.targetPort !== undefined) s.port = { targetPort: spec.targetPort };
  if (spec.tls) s.tls = { termination: spec.tls, insecureEdgeTerminationPolicy: 'Redirect' };
  return {
    apiVersion: 'route.openshift.io/v1',
    kind: 'Route',
    metadata: { name: spec.name, namespace: spec.namespace },
    spec: s,
    status: {
      ingress: [{ host: spec.host, routerName: 'default', wildcardPolicy: spec.wildcardPolicy ?? 'None', conditions: [{ type: 'Admitted', status: 'True' }] }],
    },
  };
}
