// kubeconfig impersonation beyond the user: `as-groups`, `as-uid` and `as-user-extra`
// (client-go tools/clientcmd/api/v1 AuthInfo; headers from client-go transport/round_trippers.go
// impersonatingRoundTripper). client-node sends only Impersonate-User for `as`, so a user
// impersonated "with groups" would reach the API server without them — usually with no rights
// at all. Each group is its own Impersonate-Group header line, as client-go sends them.
import type { KubeConfig } from '@kubernetes/client-node';

export interface Impersonation {
  groups: string[];
  uid?: string;
  extra: Record<string, string[]>;
}

const strings = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []);

/** What a raw kubeconfig user entry asks for beyond `as`; undefined when nothing. */
export function impersonationOf(user: Record<string, unknown> | undefined): Impersonation | undefined {
  if (!user || typeof user.as !== 'string' || !user.as) return undefined; // client-go impersonates only with a user
  const groups = strings(user['as-groups']);
  const uid = typeof user['as-uid'] === 'string' && user['as-uid'] ? user['as-uid'] : undefined;
  const extra: Record<string, string[]> = {};
  const rawExtra = user['as-user-extra'];
  if (rawExtra && typeof rawExtra === 'object') for (const [k, v] of Object.entries(rawExtra)) extra[k] = strings(v);
  if (groups.length === 0 && !uid && Object.keys(extra).length === 0) return undefined;
  return { groups, uid, extra };
}

/** Header lines to add (name → values; several values = several lines). */
export function impersonationHeaders(imp: Impersonation): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  if (imp.groups.length > 0) out['Impersonate-Group'] = imp.groups;
  if (imp.uid) out['Impersonate-Uid'] = [imp.uid];
  for (const [k, values] of Object.entries(imp.extra)) if (values.length > 0) out[`Impersonate-Extra-${headerKeyEscape(k)}`] = values;
  return out;
}

/** HTTP token characters (RFC 7230 tchar): what a header name may hold as it is. */
const TOKEN = /^[A-Za-z0-9!#$&'*+\-.^_`|~]$/;

/**
 * An extra's key made fit for a header name as client-go makes it (transport/round_trippers.go
 * headerKeyEscape): each UTF-8 byte outside the token set, and `%` (so the server can unescape it),
 * becomes %XX. encodeURIComponent left `(`, `)` and the like, which Node refuses in a header name.
 */
export function headerKeyEscape(key: string): string {
  let out = '';
  for (const b of Buffer.from(key, 'utf8')) {
    const c = String.fromCharCode(b);
    out += b < 0x80 && TOKEN.test(c) ? c : `%${b.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** `kc` whose request options also carry the impersonation headers client-node leaves out. */
export function withImpersonation(kc: KubeConfig, imp: Impersonation | undefined): KubeConfig {
  if (!imp) return kc;
  const headers = impersonationHeaders(imp);
  const scoped = Object.create(kc) as KubeConfig;
  scoped.applyToHTTPSOptions = async (opts) => {
    await kc.applyToHTTPSOptions(opts);
    opts.headers = { ...opts.headers, ...headers };
  };
  scoped.applyToFetchOptions = async (opts) => {
    const out = await kc.applyToFetchOptions(opts);
    const h = out.headers as unknown as Headers;
    for (const [name, values] of Object.entries(headers)) for (const v of values) h.append(name, v);
    return out;
  };
  return scoped;
}

/**
 * A 403 about the kubeconfig user's `as` / `as-groups` (the API server: "cannot impersonate …"),
 * not about what was asked: more rights on services or another namespace would not help.
 */
export function refusesImpersonation(message: string): boolean {
  return /cannot impersonate/.test(message);
}

export const IMPERSONATION_FIX = 'ask for the impersonate verb on the users and groups its `as`/`as-groups` name, or remove `as` from the kubeconfig user';
