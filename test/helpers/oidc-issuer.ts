// A minimal OpenID Connect issuer for the kubeconfig `auth-provider: oidc` path that client-node
// runs (its oidc_auth.js: openid-client discovery + refresh_token grant). HTTPS with its own CA
// (openid-client insists on TLS; the proxy trusts the CA through NODE_EXTRA_CA_CERTS), RS256 ID
// tokens, and a callback that registers each new ID token with the simulated API server. It also
// serves its JWKS, so a real kube-apiserver can take its tokens (real-cluster-jwt.ts), and
// `/exec-credential?ttl=S`: an ExecCredential with a fresh ID token, for a curl exec plugin.
import https from 'node:https';
import { createPublicKey, generateKeyPairSync, sign } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { SimPki } from '../sim/pki.js';

export interface OidcIssuer {
  url: string;
  caPem: string;
  clientId: string;
  /** Refresh-token grants served. */
  refreshes: number;
  /** Token requests received, refused ones included. */
  tokenRequests: number;
  /** ExecCredentials handed out by /exec-credential. */
  execCredentials: number;
  /** The lifetime of the ID tokens refreshes give (seconds); may be changed. */
  ttlSeconds: number;
  /** A signed ID token for `sub`, valid for `ttlSeconds` (negative: already expired). */
  idToken(sub: string, ttlSeconds: number): string;
  close(): Promise<void>;
}

const jwtExp = (token: string): number => (JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as { exp: number }).exp;

const b64url = (v: object | Buffer) => (Buffer.isBuffer(v) ? v : Buffer.from(JSON.stringify(v))).toString('base64url');

/**
 * `path`: the issuer's own path under its origin (Keycloak's /realms/NAME), none by default.
 * `rotate`: each refresh hands out a new refresh token and takes only that one from then on (Dex).
 */
export async function startOidcIssuer(opts: {
  refreshToken: string;
  onIdToken?: (token: string) => void;
  path?: string;
  rotate?: boolean;
  ttlSeconds?: number;
}): Promise<OidcIssuer> {
  const base = opts.path ?? '';
  let accepted = opts.refreshToken;
  const pki = new SimPki();
  const serving = pki.servingCert();
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const clientId = 'proxyout-test';
  let url = '';
  const issuer: OidcIssuer = {
    url: '',
    caPem: pki.caPem,
    clientId,
    refreshes: 0,
    tokenRequests: 0,
    execCredentials: 0,
    ttlSeconds: opts.ttlSeconds ?? 3600,
    idToken(sub, ttlSeconds) {
      const now = Math.floor(Date.now() / 1000);
      const head = `${b64url({ alg: 'RS256', typ: 'JWT', kid: 'k1' })}.${b64url({ iss: url, aud: clientId, sub, iat: now, exp: now + ttlSeconds })}`;
      return `${head}.${b64url(sign('RSA-SHA256', Buffer.from(head), privateKey))}`;
    },
    close: () => new Promise((r) => server.close(() => r())),
  };
  const server = https.createServer({ key: serving.keyPem, cert: serving.certPem }, (req, res) => {
    const json = (status: number, body: object) => {
      res.writeHead(status, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' });
      res.end(JSON.stringify(body));
    };
    if (req.method === 'GET' && req.url === `${base}/.well-known/openid-configuration`) {
      return json(200, {
        issuer: url,
        token_endpoint: `${url}/token`,
        authorization_endpoint: `${url}/authorize`,
        jwks_uri: `${url}/jwks`,
        response_types_supported: ['code'],
        subject_types_supported: ['public'],
        id_token_signing_alg_values_supported: ['RS256'],
        token_endpoint_auth_methods_supported: ['client_secret_post', 'none'],
      });
    }
    if (req.method === 'POST' && req.url === `${base}/token`) {
      issuer.tokenRequests++;
      let body = '';
      req.setEncoding('utf8').on('data', (c: string) => (body += c));
      req.on('end', () => {
        const form = new URLSearchParams(body);
        if (form.get('grant_type') !== 'refresh_token' || form.get('refresh_token') !== accepted) {
          return json(400, { error: 'invalid_grant' });
        }
        issuer.refreshes++;
        if (opts.rotate) accepted = `${opts.refreshToken}.${issuer.refreshes}`;
        const idToken = issuer.idToken('alice@example.com', issuer.ttlSeconds);
        opts.onIdToken?.(idToken);
        json(200, { access_token: `at-${issuer.refreshes}`, token_type: 'Bearer', expires_in: issuer.ttlSeconds, id_token: idToken, refresh_token: accepted });
      });
      return;
    }
    if (req.method === 'GET' && req.url === `${base}/jwks`) {
      return json(200, { keys: [{ ...createPublicKey(privateKey).export({ format: 'jwk' }), kid: 'k1', use: 'sig', alg: 'RS256' }] });
    }
    const exec = req.method === 'GET' ? new URL(req.url ?? '/', 'https://x').searchParams : undefined;
    if (exec && req.url?.startsWith(`${base}/exec-credential?`)) {
      issuer.execCredentials++;
      const ttl = Number(exec.get('ttl') ?? 3600);
      const token = issuer.idToken(exec.get('sub') ?? 'alice@example.com', ttl);
      const expirationTimestamp = new Date(jwtExp(token) * 1000).toISOString().replace(/\.\d+Z$/, 'Z');
      return json(200, { apiVersion: 'client.authentication.k8s.io/v1', kind: 'ExecCredential', status: { token, expirationTimestamp } });
    }
    json(404, { error: 'not_found' });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `https://127.0.0.1:${(server.address() as AddressInfo).port}${base}`;
  issuer.url = url;
  return issuer;
}
