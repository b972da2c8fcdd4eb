// Credentials that change while the proxy runs, applied where client-node cannot: a kubeconfig
// user with `tokenFile` (re-read, as client-go does) or an `auth-provider: oidc` (refreshed, see
// oidc.ts). The KubeConfig every consumer gets (ApiConnection, informers, WebSockets) then shows
// client-node a plain token user whose token is fetched fresh before each use.
import { readFileSync } from 'node:fs';
import type { KubeConfig, User } from '@kubernetes/client-node';
import { monotonicMs } from '../core/clock.js';
import { execCredentialValidForMs } from './exec-credential.js';

export interface TokenSource {
  /** The bearer token to send now; undefined sends none (the API server's 401 then explains). */
  token(): Promise<string | undefined>;
  /** How much longer the token token() last gave may be sent (ms); undefined: no limit known. */
  validForMs?(): number | undefined;
  /** The API server refused the token last given (a 401): the next token() looks again. */
  refused?(): void;
  /** What token() waits for, for messages ("its OIDC issuer https://…"). */
  describe?(): string;
}

/** Where withTokenSource leaves its source's validForMs (found through Object.create chains). */
const VALID_FOR = Symbol('credentialValidForMs');
/** Where withTokenSource leaves its source's refused(), likewise. */
const REFUSED = Symbol('credentialRefused');

/** Where withTokenSource leaves its source's describe(), likewise. */
const DESCRIBE = Symbol('credentialSource');

/** What `kc`'s token source waits for, when it has one that says. */
export function tokenSourceName(kc: KubeConfig): string | undefined {
  return (kc as unknown as { [DESCRIBE]?: () => string | undefined })[DESCRIBE]?.();
}

/** The API server refused what `kc`'s token source gave: it looks again at the next request. */
export function tokenRefused(kc: KubeConfig): void {
  (kc as unknown as { [REFUSED]?: () => void })[REFUSED]?.();
}

/**
 * How much longer the credentials `kc` last gave may be sent (ms), or undefined when they carry
 * no expiry (a static token, a client certificate): the least of a token source's (OIDC `exp`,
 * token file re-read) and an exec plugin's expirationTimestamp.
 */
export function credentialValidForMs(kc: KubeConfig): number | undefined {
  const fromSource = (kc as unknown as { [VALID_FOR]?: () => number | undefined })[VALID_FOR]?.();
  const fromExec = execCredentialValidForMs(kc);
  if (fromSource === undefined) return fromExec;
  return fromExec === undefined ? fromSource : Math.min(fromSource, fromExec);
}

/** How often a token file is read again: client-go's cached file token source uses one minute. */
const TOKEN_FILE_TTL_MS = 60_000;
/** After a 401 the file is read again at once, but not more often than this under a 401 storm. */
const TOKEN_FILE_REREAD_MS = 1_000;

/**
 * kubeconfig `tokenFile` (client-go tools/clientcmd/api/v1 AuthInfo.TokenFile; client-node reads
 * only a non-standard `token-file`, once, and keeps its trailing newline — an invalid header).
 * Projected service-account tokens rotate hourly, so the file is read again every minute; a read
 * that fails or finds the file empty keeps the last token that was read, as client-go does.
 */
export class TokenFileSource implements TokenSource {
  private cached?: { token: string; at: number };

  constructor(
    readonly file: string,
    private readonly ttlMs = TOKEN_FILE_TTL_MS,
    /**
     * The user's `token` beside the file: sent while the file has never been read, as client-go
     * does (transport/round_trippers.go NewBearerAuthWithRefreshRoundTripper), kubectl too.
     */
    private readonly fallback?: string,
  ) {}

  async token(): Promise<string | undefined> {
    if (this.cached && monotonicMs() - this.cached.at < this.ttlMs) return this.cached.token;
    try {
      const token = readFileSync(this.file, 'utf8').trim();
      // A file rewritten in place (truncated, then written) can be read empty: that is no token,
      // so the last one stays (client-go transport/token_source.go: "read empty token from file").
      if (!token) throw new Error('the file is empty');
      this.cached = { token, at: monotonicMs() };
    } catch (err) {
      if (!this.cached && this.fallback) return this.fallback;
      if (!this.cached) throw new Error(`cannot read the kubeconfig tokenFile ${this.file}: ${(err as Error).message}`, { cause: err });
    }
    return this.cached.token;
  }

  /**
   * A 401 for the token read: a file rotated since is read at the next request, as client-go's
   * token source is reset on a 401 (transport/token_source.go ResetTokenOlderThan), not a minute on.
   */
  refused(): void {
    if (this.cached) this.cached.at = Math.min(this.cached.at, this.cached.at + TOKEN_FILE_REREAD_MS - this.ttlMs);
  }

  /** Until the file is read again: a rotated token is then sent within the TTL, as before. */
  validForMs(): number | undefined {
    return this.cached ? this.ttlMs - (monotonicMs() - this.cached.at) : undefined;
  }
}

/** `kc` as seen through `source`: its current user carries the source's token and no auth-provider. */
export function withTokenSource(kc: KubeConfig, source: TokenSource): KubeConfig {
  const scoped = Object.create(kc) as KubeConfig;
  let token: string | undefined;
  (scoped as unknown as { [VALID_FOR]: () => number | undefined })[VALID_FOR] = () => source.validForMs?.();
  (scoped as unknown as { [REFUSED]: () => void })[REFUSED] = () => source.refused?.();
  (scoped as unknown as { [DESCRIBE]: () => string | undefined })[DESCRIBE] = () => source.describe?.();
  scoped.getCurrentUser = (): User | null => {
    const u = kc.getCurrentUser();
    return u ? ({ ...u, authProvider: undefined, token: token ?? u.token } as User) : null;
  };
  const proto = Object.getPrototypeOf(kc) as KubeConfig;
  scoped.applyToHTTPSOptions = async (opts) => {
    token = await source.token();
    return proto.applyToHTTPSOptions.call(scoped, opts);
  };
  scoped.applyToFetchOptions = async (opts) => {
    token = await source.token();
    return proto.applyToFetchOptions.call(scoped, opts);
  };
  return scoped;
}
