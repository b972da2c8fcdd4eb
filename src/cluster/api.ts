import { createHash } from 'node:crypto';
import https from 'node:https';
import http from 'node:http';
import type { KubeConfig } from '@kubernetes/client-node';
import { applyEgress, describeEgress, type Egress, type EgressOptions } from './egress-proxy.js';
import { ProxyRefusedError } from './proxy-failures.js';
import { CredentialWait } from './credential-wait.js';
import { untilSocket } from './socket-wait.js';
import { expireExecCredentials, withoutPluginOutput } from './exec-credential.js';
import { credentialValidForMs, tokenRefused } from './token-source.js';
import { caFileStamp, caProblem, clientCertValidity, clientPairProblem, unreadableFile } from './tls-material.js';
import { escapeControls } from '../core/escape.js';
import { explainHandshakeError, notJsonMessage, redirectMessage } from './foreign-answer.js';
import { retryAfterSeconds, statusMessage } from './status-message.js';
import { readBoundedBody } from './bounded-body.js';
import { monotonicMs } from '../core/clock.js';
import { errorMessage } from '../core/errors.js';
import { boundRequest } from './request-deadline.js';
import { sharedLookup } from './shared-lookup.js';

// Their callers import them from here, beside ApiConnection.
export { retryAfterSeconds, statusMessage } from './status-message.js';

/**
 * Connection options for the API server, as the kubeconfig dictates (TLS, auth, proxy-url).
 * Header values may be lists: some headers (Impersonate-Group) repeat, one line per value.
 */
export type ApiRequestOptions = https.RequestOptions & {
  headers: Record<string, string | string[]>;
  /** An extra CA is trusted (--extra-ca): a TLS-intercepting proxy may read what we send. */
  tlsMayBeIntercepted?: boolean;
  /**
   * No proxy in between: any agent given these request options (their TLS material is part of
   * Node's pool key) reaches the server as `agent` would — so a keep-alive pool may be used
   * instead of client-node's agent, which keeps no connection alive.
   */
  direct?: boolean;
};

export class ApiStatusError extends Error {
  constructor(
    readonly statusCode: number,
    message: string,
    /** The response's Retry-After in seconds (429, 503), when it gave one. */
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
    this.name = 'ApiStatusError';
  }
}

/**
 * The kubeconfig's credentials could not be had: an exec plugin failed (an SSO session expired),
 * an OIDC refresh was refused, a token file is unreadable. The message carries the plugin's own
 * first line of stderr, which usually says what to run (`aws sso login`).
 */
export class CredentialError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'CredentialError';
  }
}

const OPTIONS_TTL_MS = 60_000;
/**
 * Options whose credential had already expired when they were made (a plugin that returns an
 * expired ExecCredential, an OIDC token with no way to refresh it) are kept this long, so that
 * requests do not each run the plugin or build a new agent: nothing fresher can be had.
 */
const EXPIRED_OPTIONS_TTL_MS = 1_000;
/**
 * After credentials fail, every request gets that failure at once for this long, doubling to the
 * maximum while they keep failing: a plugin is run once per step, however many requests arrive,
 * and a user who logs in again is noticed within the step.
 */
const CREDENTIAL_HOLD_MIN_MS = 1_000;
const CREDENTIAL_HOLD_MAX_MS = 8_000;

/**
 * One place that knows how to talk to the API server. client-node computes TLS material, auth
 * headers (running exec plugins, refreshing OIDC) and the proxy agent; we cache that result for a
 * minute, or until the credential expires if sooner, so a new stream costs no kubeconfig work and
 * reuses one agent (and its TLS session cache).
 */
export class ApiConnection {
  private cached?: { until: number; options: ApiRequestOptions };
  private pending?: { generation: number; options: Promise<ApiRequestOptions> };
  /** Bumped by invalidate(): options computed before it are not cached or shared after it. */
  private generation = 0;
  readonly serverUrl: URL;
  /** For messages: the kubeconfig's cluster name, and the --extra-ca file trusted besides its CA. */
  readonly trust: { cluster?: string; extraCA?: string };
  /** The proxy the last requestOptions() chose (egress-proxy.ts), for messages. */
  egress?: Egress;
  /** The last computation of credentials failed: its error, held until `until`, failing since `since`. */
  private credentialFailure?: { error: CredentialError; until: number; holdMs: number; since: number };
  /** The API server answered 401 to this credential (a digest), and nothing took it since. */
  private refused?: { credential: string; since: number };
  /** The client certificate the last options carried (kept after invalidate(), for refusalAdvice). */
  private lastCert?: unknown;
  /** The CA file (caFileStamp) the cached options were read from. */
  private caStamp?: string;
  private readonly credentialWait = new CredentialWait();
  /** The server's name looked up once for connections opened together (shared-lookup.ts). */
  private readonly lookup = sharedLookup();

  constructor(
    private readonly kc: KubeConfig,
    private readonly egressOptions: EgressOptions = {},
  ) {
    const server = kc.getCurrentCluster()?.server;
    if (!server) throw new Error('kubeconfig has no current cluster');
    this.serverUrl = new URL(server);
    this.trust = { cluster: kc.getCurrentCluster()?.name, extraCA: egressOptions.extraCA?.file };
  }

  /**
   * Callers that arrive together share one computation: each would otherwise run the exec plugin
   * (client-node's ExecAuth has no lock; client-go's exec.go Authenticator holds one), so a
   * start-up or a burst of streams after a 401 spawned a plugin per request.
   */
  requestOptions(): Promise<ApiRequestOptions> {
    if (this.cached && monotonicMs() < this.cached.until) return Promise.resolve(this.cached.options);
    const failure = this.credentialFailure;
    if (failure && monotonicMs() < failure.until) return Promise.reject(failure.error);
    if (this.pending?.generation === this.generation) return this.pending.options;
    const generation = this.generation;
    const options = this.credentialWait.during(this.computeOptions(generation)).finally(() => {
      if (this.pending?.options === options) this.pending = undefined;
    });
    this.pending = { generation, options };
    return options;
  }

  private async computeOptions(generation: number): Promise<ApiRequestOptions> {
    const opts: https.RequestOptions = { headers: {} };
    // Before reading it: a CA file rewritten meanwhile then differs from what the options say.
    const caStamp = caFileStamp(this.kc);
    try {
      await this.kc.applyToHTTPSOptions(opts);
    } catch (err) {
      const unreadable = unreadableFile(this.kc, err);
      throw this.credentialsFailed(unreadable ? new Error(unreadable) : withoutPluginOutput(err), !!unreadable);
    }
    const tls = caProblem(this.kc, opts) ?? clientPairProblem(this.kc, opts);
    if (tls) throw this.credentialsFailed(new Error(tls), true);
    this.credentialFailure = undefined;
    this.lastCert = opts.cert;
    this.egress = applyEgress(this.kc, opts, this.egressOptions);
    const headers: Record<string, string | string[]> = {};
    for (const [k, v] of Object.entries(opts.headers ?? {})) if (v !== undefined) headers[k] = Array.isArray(v) ? v.map(String) : String(v);
    if (opts.auth) {
      headers.Authorization = `Basic ${Buffer.from(opts.auth).toString('base64')}`;
      delete opts.auth;
    }
    const options: ApiRequestOptions = {
      ...opts,
      // HTTP/1.1 said in the handshake, as client-go's upgrades do: a server that speaks only
      // HTTP/2 then refuses at once (explainHandshakeError) instead of leaving us waiting.
      ...(this.serverUrl.protocol === 'https:' ? { ALPNProtocols: ['http/1.1'] } : {}),
      // Node's 16 KiB would refuse what kubectl reads (Go takes 10 MiB): a front's cookies, warnings.
      maxHeaderSize: API_HEADERS_MAX,
      headers,
      lookup: this.lookup,
      direct: this.egress.proxy === undefined,
      ...(this.egressOptions.extraCA ? { tlsMayBeIntercepted: true } : {}),
    };
    // Computed before an invalidate(): may carry the credential the server just refused.
    if (generation === this.generation) {
      this.cached = { until: monotonicMs() + this.cacheMs(), options };
      this.caStamp = caStamp;
    }
    return options;
  }

  /**
   * The server's certificate was refused: a CA file rewritten since the options were made (a
   * rotated cluster CA) is read now, not at the next minute. True when it had changed.
   */
  rereadChangedCa(): boolean {
    if (!this.cached || caFileStamp(this.kc) === this.caStamp) return false;
    this.cached = undefined;
    this.generation++;
    return true;
  }

  /**
   * Never past the credential's own expiry (client-go exec.go and oidc.go check it per request):
   * an exec plugin's expirationTimestamp, an OIDC id-token's exp, a token file's re-read.
   */
  private cacheMs(): number {
    const valid = credentialValidForMs(this.kc);
    if (valid === undefined) return OPTIONS_TTL_MS;
    return valid <= 0 ? EXPIRED_OPTIONS_TTL_MS : Math.min(valid, OPTIONS_TTL_MS);
  }

  /** The kubeconfig user whose credentials these are, for messages. */
  get userName(): string | undefined {
    return this.kc.getCurrentUser()?.name;
  }

  /**
   * While credentials fail: the message (the plugin's first line) and since when (ms since the
   * epoch); `waiting` while they take long to come (credential-wait.ts); `refused` when they could be had but the API server refuses them (401) — a static
   * token revoked or expired — which the next request may still find taken.
   */
  get credentialProblem(): { message: string; since: number; refused?: true; waiting?: true } | undefined {
    const f = this.credentialFailure;
    if (f) return { message: f.error.message, since: f.since };
    const r = this.refused;
    // Until a request is taken: a credential worked out since may be refused too (a lapsed login's
    // plugin hands out a new dead token at each run), and nothing says otherwise before it is sent.
    if (!r) return this.credentialWait.problem(this.kc);
    const message = `the API server refuses the credentials of context "${this.kc.getCurrentContext()}" (user "${this.userName}", 401 Unauthorized): ${this.refusalAdvice()}`;
    return { message, since: r.since, refused: true };
  }

  /**
   * What to do about a 401: a client certificate out of its validity is named with its date (the
   * API server says only "Unauthorized", to kubectl too); else log in again or renew the token.
   */
  refusalAdvice(): string {
    const cert = clientCertValidity(this.lastCert);
    return cert ? `${cert}: get a new one (log in again, or renew it)` : 'log in again or renew the token';
  }

  /** A request was answered, not with 401: the credential is taken (again). */
  accepted(): void {
    this.refused = undefined;
  }

  /** `whole`: the message says all (a kubeconfig file or key pair), not what a plugin printed. */
  private credentialsFailed(err: unknown, whole = false): CredentialError {
    const text = err instanceof Error ? err.message : String(err);
    // client-node rejects with the plugin's whole stderr: its first line says what is wrong.
    const first =
      text
        .split('\n')
        .map((l) => l.trim())
        .find(Boolean)
        ?.slice(0, 300) ?? 'the exec credential plugin failed and wrote nothing on stderr';
    const context = this.kc.getCurrentContext();
    const message = whole
      ? `context "${context}": ${escapeControls(first)}`
      : `the credentials of context "${context}" could not be obtained: ${escapeControls(first)}`;
    const error = new CredentialError(message, { cause: err });
    const prev = this.credentialFailure;
    const holdMs = prev ? Math.min(prev.holdMs * 2, CREDENTIAL_HOLD_MAX_MS) : CREDENTIAL_HOLD_MIN_MS;
    this.credentialFailure = { error, until: monotonicMs() + holdMs, holdMs, since: prev?.since ?? Date.now() };
    return error;
  }

  /** The error with the proxy used named (and a hint when TLS verification failed behind one). */
  withEgress(original: Error & { code?: string }): Error {
    const err = explainHandshakeError(original);
    const via = describeEgress(this.egress);
    // A proxy's refusal names the proxy already.
    if (!via || err instanceof ProxyRefusedError) return err;
    const tlsHint = /CERT|SELF_SIGNED|UNABLE_TO_(GET|VERIFY)/.test(err.code ?? '') ? '; if the proxy intercepts TLS, trust its CA with --extra-ca FILE' : '';
    // errorMessage: an IPv6 address bracketed ("connect ECONNREFUSED [::1]:3128"), an
    // AggregateError (a proxy name with an address per family) put in words.
    const wrapped = new Error(`${errorMessage(err)}${via}${tlsHint}`, { cause: err });
    return Object.assign(wrapped, { code: err.code });
  }

  /**
   * After a 401 to a request made with `refused`: the credential worked out anew, or undefined when
   * it is the same (a static token, a plugin handing out the refused token again), which would be
   * refused too. So a stream need not fail once because a token was rotated or revoked.
   */
  async renewedAfter401(refused: ApiRequestOptions): Promise<ApiRequestOptions | undefined> {
    if (this.cached?.options === refused) this.invalidate();
    const fresh = await this.requestOptions();
    const same = (k: 'cert' | 'key') => String(fresh[k] ?? '') === String(refused[k] ?? '');
    return fresh.headers.Authorization === refused.headers.Authorization && same('cert') && same('key') ? undefined : fresh;
  }

  /** Drop cached credentials (after a 401, so an exec plugin or token file is asked again). */
  invalidate(): void {
    // Called for a 401: what was cached is what the server refused (a second 401 finds it gone).
    if (this.cached) {
      const credential = credentialDigest(this.cached.options);
      if (this.refused?.credential !== credential) this.refused = { credential, since: Date.now() };
    }
    this.cached = undefined;
    this.generation++;
    expireExecCredentials(this.kc);
    tokenRefused(this.kc);
  }

  /** Full URL for an API path, keeping any path prefix the server URL has (e.g. Rancher's). */
  url(path: string, protocol?: 'ws'): URL {
    const base = this.serverUrl.pathname.replace(/\/$/, '');
    const u = new URL(this.serverUrl.toString());
    const [pathname, query] = path.split('?', 2);
    u.pathname = base + pathname;
    u.search = query ? `?${query}` : '';
    if (protocol === 'ws') u.protocol = u.protocol === 'http:' ? 'ws:' : 'wss:';
    return u;
  }

  /** GET a JSON document; non-2xx becomes ApiStatusError carrying the Status message. */
  async getJson<T>(path: string, timeoutMs = 30_000): Promise<T> {
    const options = await this.requestOptions();
    const url = this.url(path);
    const client = url.protocol === 'http:' ? http : https;
    return new Promise<T>((resolve, reject) => {
      const req = client.request(url, { ...options, method: 'GET', headers: { ...options.headers, Accept: 'application/json' } }, (res) => {
        const status = res.statusCode ?? 0;
        readBoundedBody(req, res, path, { ok: JSON_ANSWER_MAX, error: ERROR_ANSWER_MAX }, (read) => {
          if ('failed' in read) return reject(read.failed);
          if ('refused' in read) return reject(new ApiStatusError(status, read.refused));
          if (status === 401) this.invalidate();
          else if (status < 500) this.accepted();
          if (status < 200 || status >= 300) {
            const message = redirectMessage(status, res.headers.location) ?? statusMessage(read.text) ?? `HTTP ${status}`;
            return reject(new ApiStatusError(status, message, retryAfterSeconds(res.headers['retry-after'])));
          }
          try {
            resolve(JSON.parse(read.text) as T);
          } catch {
            reject(new ApiStatusError(status, notJsonMessage(path, read.text)));
          }
        });
      });
      const timedOut = () => new Error(`API request timed out after ${timeoutMs} ms`);
      boundRequest(req, timeoutMs, timedOut);
      untilSocket(req, timeoutMs, () => reject(this.withEgress(timedOut())));
      req.on('error', (err: Error & { code?: string }) => reject(this.withEgress(err)));
      req.end();
    });
  }
}

/** The most of an answer's headers read (Node's default is 16 KiB). */
export const API_HEADERS_MAX = 1024 * 1024;

/** Bounds on what getJson reads: discovery documents and pod pages are a few MiB at most. */
const JSON_ANSWER_MAX = 64 * 1024 * 1024;
const ERROR_ANSWER_MAX = 64 * 1024;

/** Which credential request options carry (bearer token, client certificate), as a digest. */
function credentialDigest(o: ApiRequestOptions): string {
  return createHash('sha256')
    .update(`${String(o.headers.Authorization ?? '')}\0${String(o.cert ?? '')}`)
    .digest('hex');
}
