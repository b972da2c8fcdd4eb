// kubeconfig `auth-provider: oidc` (client-go plugin/pkg/client/auth/oidc/oidc.go): the `id-token`
// is the bearer token; once it has expired, a refresh_token grant at `idp-issuer-url` (OpenID
// Connect discovery, then the token endpoint) yields a new one. client-node 1.x has this path, but
// its refresh hands openid-client 6 the issuer as a string where a URL is required, so every
// refresh fails with '"server" must be an instance of URL' (kubernetes-client/javascript#2202).
// We do the refresh ourselves and let client-node see a plain token user (token-source.ts).
//
// Like client-go we honour `idp-certificate-authority(-data)` for the issuer's TLS and
// `client-secret`, and keep the tokens in the kubeconfig file that defines the user (oidc-store.ts):
// read again before a refresh, written back after one.
import https from 'node:https';
import { readFileSync } from 'node:fs';
import * as openid from 'openid-client';
import type { TokenSource } from './token-source.js';
import type { OidcTokenStore } from './oidc-store.js';
import { monotonicMs } from '../core/clock.js';
import { errorMessage } from '../core/errors.js';

/** Refresh this long before the ID token's `exp`, so a request never carries one about to lapse. */
const EXPIRY_SKEW_S = 10;
/**
 * After a refresh fails, requests get its error for this long without asking the issuer again:
 * each client connection asks for credentials, and a browser opening page after page would send
 * the identity provider a refresh per connection (concurrent ones already share one).
 */
const FAILED_REFRESH_HOLD_MS = 5_000;
/** Each request to the issuer (discovery, token) must be answered in this long (openid-client's default). */
const ISSUER_TIMEOUT_S = 30;

type Config = Record<string, string | undefined>;

/** The `exp` claim of a JWT, or 0 when it cannot be read (treated as expired). */
export function jwtExpiry(token: string): number {
  const payload = token.split('.')[1];
  if (!payload) return 0;
  try {
    const exp = (JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { exp?: unknown }).exp;
    return typeof exp === 'number' ? exp : 0;
  } catch {
    return 0;
  }
}

/** fetch over node:https with the issuer's CA (openid-client's default fetch knows only the system CAs). */
function fetchWithCa(ca: Buffer): typeof fetch {
  return ((url: string, init: { method?: string; headers?: Record<string, string> | Headers; body?: string | URLSearchParams; signal?: AbortSignal }) =>
    new Promise<Response>((resolve, reject) => {
      const headers = init.headers instanceof Headers ? Object.fromEntries(init.headers.entries()) : (init.headers ?? {});
      const req = https.request(url, { method: init.method ?? 'GET', headers, ca, signal: init.signal }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const out = new Headers();
          for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) out.set(k, Array.isArray(v) ? v.join(', ') : v);
          resolve(new Response(Buffer.concat(chunks), { status: res.statusCode ?? 0, headers: out }));
        });
      });
      req.on('error', reject);
      req.end(init.body === undefined ? undefined : String(init.body));
    })) as unknown as typeof fetch;
}

export class OidcTokenSource implements TokenSource {
  private refreshing?: Promise<void>;
  private failed?: { at: number; err: unknown };

  constructor(
    private readonly config: Config,
    private readonly failedHoldMs = FAILED_REFRESH_HOLD_MS,
    private readonly store?: OidcTokenStore,
    private readonly timeoutS = ISSUER_TIMEOUT_S,
  ) {}

  /** A current ID token, refreshed first when expired (concurrent callers share one refresh). */
  async token(): Promise<string | undefined> {
    if (this.fresh() || this.adoptStored()) return this.config['id-token'];
    if (this.failed && monotonicMs() - this.failed.at < this.failedHoldMs) throw this.failed.err;
    this.refreshing ??= this.refresh()
      .catch((err: unknown) => {
        throw unreached(err, this.config['idp-issuer-url'] ?? '', this.timeoutS);
      })
      .then(
        () => void (this.failed = undefined),
        (err: unknown) => {
          this.failed = { at: monotonicMs(), err };
          throw err;
        },
      )
      .finally(() => (this.refreshing = undefined));
    await this.refreshing;
    return this.config['id-token'];
  }

  describe(): string {
    return `its OIDC issuer ${this.config['idp-issuer-url'] ?? ''}`;
  }

  /** Until the ID token is due for a refresh (its `exp` less the skew); undefined without one. */
  validForMs(): number | undefined {
    const token = this.config['id-token'];
    return token ? (jwtExpiry(token) - EXPIRY_SKEW_S) * 1000 - Date.now() : undefined;
  }

  /**
   * Takes the tokens the file has now when they differ from ours (kubectl, or another proxy,
   * refreshed meanwhile: the refresh token we hold may be spent). True when that id-token is fresh.
   */
  private adoptStored(): boolean {
    const stored = this.store?.read();
    if (!stored?.['id-token'] || stored['id-token'] === this.config['id-token']) return false;
    this.config['id-token'] = stored['id-token'];
    if (stored['refresh-token']) this.config['refresh-token'] = stored['refresh-token'];
    return this.fresh();
  }

  private fresh(): boolean {
    const token = this.config['id-token'];
    return !!token && jwtExpiry(token) - EXPIRY_SKEW_S > Date.now() / 1000;
  }

  private async refresh(): Promise<void> {
    const issuer = this.config['idp-issuer-url'];
    const clientId = this.config['client-id'];
    const refreshToken = this.config['refresh-token'];
    // Without what a refresh needs, send what we have: the API server's 401 is the clearer message.
    if (!issuer || !clientId || !refreshToken) return;
    const ca = this.issuerCa();
    const options = { timeout: this.timeoutS, ...(ca ? { [openid.customFetch]: fetchWithCa(ca) } : {}) };
    const secret = this.config['client-secret'];
    const discover = (url: string) =>
      openid.discovery(new URL(url), clientId, secret ? { client_secret: secret } : undefined, secret ? undefined : openid.None(), options);
    // openid-client holds the discovered issuer to the URL letter for letter; client-go reads only
    // the token endpoint (oidc.go), so `https://idp/` works there for an issuer `https://idp`.
    const server = await discover(issuer).catch((err: unknown) => {
      const other = issuer.endsWith('/') ? issuer.replace(/\/+$/, '') : `${issuer}/`;
      if (!/issuer/i.test(errorMessage(err))) throw err;
      return discover(other).catch(() => {
        throw err;
      });
    });
    const tokens = await openid.refreshTokenGrant(server, refreshToken);
    if (!tokens.id_token) throw new Error(`the OIDC issuer ${issuer} returned no id_token on refresh`);
    this.config['id-token'] = tokens.id_token;
    if (tokens.refresh_token) this.config['refresh-token'] = tokens.refresh_token;
    // As kubectl does: a rotated refresh token is the only one the identity provider still takes.
    await this.store?.write({ 'id-token': tokens.id_token, 'refresh-token': this.config['refresh-token'] });
  }

  private issuerCa(): Buffer | undefined {
    const data = this.config['idp-certificate-authority-data'];
    if (data) return Buffer.from(data, 'base64');
    const file = this.config['idp-certificate-authority'];
    return file ? readFileSync(file) : undefined;
  }
}

/**
 * openid-client says only "something went wrong" when the issuer cannot be reached (refused,
 * reset, a name that does not resolve) or, through fetchWithCa, does not answer in time: the
 * route's `degraded` line and doctor said no more. Put in words, naming the issuer.
 */
function unreached(err: unknown, issuer: string, timeoutS: number): unknown {
  const code = (err as { code?: unknown }).code;
  if (!(err instanceof Error) || (err.message !== 'something went wrong' && code !== 'OAUTH_TIMEOUT')) return err;
  let cause: unknown = err.cause;
  while (cause instanceof Error && cause.cause instanceof Error && !(cause as NodeJS.ErrnoException).code) cause = cause.cause;
  const name = cause instanceof Error ? cause.name : '';
  const timedOut = code === 'OAUTH_TIMEOUT' || name === 'TimeoutError' || name === 'AbortError';
  const what = timedOut ? `did not answer within ${timeoutS} s` : `could not be reached: ${errorMessage(cause ?? err)}`;
  return new Error(`the OIDC issuer ${issuer} ${what}`, { cause: err });
}
