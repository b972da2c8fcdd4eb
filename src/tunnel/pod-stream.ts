// What every port-forward transport shares once its bytes reach the kubelet: neither the v4
// WebSocket protocol nor SPDY port-forward says "dialled". The kubelet dials the pod port when the
// stream opens and reports a failure as text on the error channel/stream (kubelet
// staging/src/k8s.io/kubelet/pkg/cri/streaming/portforward/{websocket.go,httpstream.go}; the text
// comes from the runtime, e.g. containerd's "failed to connect to localhost:PORT inside namespace").
// So "connected" is an inference, made the same way for both transports:
//  - a port not seen accepting lately: the tunnel is up, then `confirmMs` passes without error text
//    (or the pod sends a byte first);
//  - a port that accepted lately (confirmMs 0): connected as soon as the tunnel is up. If a dial
//    failure still shows before the pod has sent a byte, the stream fails with a *retryable* error
//    and ClusterRoute replays the client's bytes to another endpoint (routes/cluster/retry-stream.ts);
//  - error text after the pod has spoken is a broken connection: the stream fails (the relay
//    resets the client, as TCP does on a reset), never ends as if whole. Error text before the
//    pod's first byte — a refused dial, a sandbox that is gone, a timeout, wordings we do not
//    know — means the dial never completed: the stream fails *retryable* and moves to another
//    endpoint; only text that proves the pod had accepted ("reset by peer") fails it where it is.
// A PodStream never lets an 'error' go unheard: it is created, failed and handed over within one
// burst of frames, before anyone can listen (a noop listener stays; real listeners still hear it).
import { Duplex, type DuplexOptions } from 'node:stream';
import type { Logger } from '../core/log.js';
import {
  ConnectTimeoutError,
  ConnectionRefusedError,
  HostUnreachableError,
  PortForwardForbiddenError,
  UpstreamApiError,
  type ProxyError,
} from '../core/errors.js';
import type { OpenOptions, PodPort, PodRef } from './transport.js';
import { statusMessage } from '../cluster/api.js';
import { htmlPageMessage, redirectMessage } from '../cluster/foreign-answer.js';

export const where = (t: PodPort) => `${t.namespace}/${t.pod}:${t.port}`;

/**
 * The kubelet's error text, with the JSON `{closeConnection, message}` of kubelets after the 1.36
 * line unwrapped (both forms map to the same replies).
 */
export function errorStreamMessage(text: string): string {
  const t = text.trim();
  if (t.startsWith('{')) {
    try {
      const m = (JSON.parse(t) as { message?: unknown }).message;
      if (typeof m === 'string') return m;
    } catch {
      /* not JSON after all */
    }
  }
  return t;
}

/**
 * The API server's answer to a port-forward request that reached it without its Upgrade header
 * (apimachinery proxy/upgradeaware.go). We sent one: something in between dropped it, a proxy that
 * does not pass upgrades. No other endpoint or transport fares better, so it is said, not retried.
 */
export function upgradeDropped(target: PodPort, status: number, detail: string, cause?: unknown): UpstreamApiError | undefined {
  if (status !== 400 || detail !== 'Upgrade request required') return undefined;
  const msg = `port-forward to ${where(target)}: the API server got the request without its Upgrade header (400 Upgrade request required): a proxy, ingress or load balancer in front of it drops it; it must pass WebSocket upgrades`;
  return new UpstreamApiError(msg, { cause });
}

/**
 * What a refused port-forward upgrade says, and whether something in front of the API server
 * said it. A redirect is said by where it sends us and never by its body: the query may carry a
 * session, and a Go front's body repeats the whole Location (`<a href="…">Found</a>.`).
 */
export function upgradeRefusalDetail(status: number, body: string, location?: string | string[]): { detail: string; fromFront: boolean } {
  if (status >= 300 && status < 400) return { detail: redirectMessage(status, location) ?? `HTTP ${status}`, fromFront: true };
  return { detail: statusMessage(body) ?? `HTTP ${status}`, fromFront: htmlPageMessage(body) !== undefined };
}

/** containerd's answer on a session whose pod sandbox is gone (the pod was deleted under it). */
export function isSandboxGone(text: string): boolean {
  return /failed to find sandbox .* not found|sandbox .* (?:not found|does not exist)/i.test(errorStreamMessage(text));
}

/**
 * The API server's 403 on a port-forward upgrade, with the rights to ask for: its own words may
 * name none (the create check 1.35 adds for a WebSocket answers `pods "x" is forbidden: `). The
 * check names the pod and the verb refused: a Role's resourceNames may allow other pods. An HTML
 * page (`fromFront`) is a front's refusal, which no RBAC right changes.
 */
export function upgradeForbidden(refusal: string, target: PodRef, cause?: unknown, fromFront = false): PortForwardForbiddenError {
  if (fromFront) return new PortForwardForbiddenError(refusal, { cause });
  const verb = /cannot (get|create) resource "pods\/portforward"/.exec(refusal)?.[1] ?? 'create';
  const ns = target.namespace;
  const rights = `the proxy needs get and create on pods/portforward in namespace ${ns} (check: kubectl auth can-i ${verb} pods/${target.pod} --subresource=portforward -n ${ns})`;
  return new PortForwardForbiddenError(`${refusal.replace(/[:\s]+$/, '')}; ${rights}`, { cause });
}

/** Error text before the pod answered → the reply it maps to (always retryable elsewhere). */
export function dialError(target: PodPort, text: string): ProxyError {
  const message = errorStreamMessage(text);
  const msg = `pod ${where(target)}: ${message.slice(0, 500)}`;
  if (isSandboxGone(message)) return new HostUnreachableError(msg, { retryable: true });
  if (/timed? ?out/i.test(message)) return new ConnectTimeoutError(msg, { retryable: true });
  return new ConnectionRefusedError(msg, { retryable: true });
}

/**
 * Whether error text proves the pod had accepted the connection, which then broke ("reset by
 * peer", "broken pipe"): the client's bytes may have reached the pod, so the stream must not be
 * replayed elsewhere. Any other wording (refused, timed out, sandbox gone, text we do not know)
 * means the dial never completed.
 */
export function connectionWasUp(text: string): boolean {
  return /reset by peer|broken pipe/i.test(errorStreamMessage(text));
}

const noop = (): void => {};

interface Opening {
  fail(err: ProxyError): void;
  spoke(): void;
  ready(): void;
}

/** One TCP stream to a pod port, as a Duplex; subclasses move the bytes. */
export abstract class PodStream extends Duplex {
  /** Some payload came from the pod: error text is a break from now on, never a failed dial. */
  private podSpoke = false;
  private errorText = '';
  private opening?: Opening;

  constructor(
    protected readonly target: PodPort,
    protected readonly log: Logger,
    options: DuplexOptions,
  ) {
    super({ ...options, allowHalfOpen: true });
    this.on('error', noop);
  }

  /** Whether connected() is still deciding. */
  protected get isOpening(): boolean {
    return this.opening !== undefined;
  }

  /**
   * Resolves with this stream once open (see the header); rejects with a ProxyError on a failed
   * dial, an abort, or `fail` from `start`, which wires the transport's own failure events.
   * `cleanup` runs before a rejection destroys the stream.
   */
  protected connected(options: OpenOptions, start: (fail: (err: ProxyError) => void) => void, cleanup?: () => void): Promise<Duplex> {
    const target = this.target;
    return new Promise<Duplex>((resolve, reject) => {
      let confirmTimer: NodeJS.Timeout | undefined;
      const done = (err?: ProxyError) => {
        if (!this.opening) return;
        this.opening = undefined;
        clearTimeout(confirmTimer);
        options.signal.removeEventListener('abort', onAbort);
        if (err) {
          cleanup?.();
          this.destroy();
          reject(err);
        } else resolve(this);
      };
      const onAbort = () => done(new ConnectTimeoutError(`port-forward to ${where(target)} did not open in time`, { cause: options.signal.reason }));
      this.opening = {
        fail: done,
        spoke: () => done(),
        ready: () => {
          if (options.confirmMs <= 0) done();
          else confirmTimer ??= setTimeout(() => done(), options.confirmMs);
        },
      };
      if (options.signal.aborted) return onAbort();
      options.signal.addEventListener('abort', onAbort);
      start(done);
    });
  }

  /** The tunnel is up: connected now, or after the confirm window. */
  protected tunnelReady(): void {
    this.opening?.ready();
  }

  /** The transport failed while opening (no-op once open). */
  protected failOpening(err: ProxyError): void {
    this.opening?.fail(err);
  }

  /** The transport failed: the open with `err`, or the stream once open (no-op once destroyed). */
  failStream(err: ProxyError): void {
    if (this.opening) this.opening.fail(err);
    else if (!this.destroyed) this.destroy(err);
  }

  /** Call before pushing payload from the pod. */
  protected podSending(): void {
    this.podSpoke = true;
    this.opening?.spoke();
  }

  /** The pod side ended before it spoke: while opening, that is a connection that opened and closed. */
  protected podEndedEarly(): void {
    this.opening?.spoke();
  }

  /** Whether the pod has sent payload (error text is a break from then on, not a failed dial). */
  protected get podHasSpoken(): boolean {
    return this.podSpoke;
  }

  /** Text on the error channel/stream (it may come in pieces). */
  protected errorFromKubelet(text: string): void {
    this.errorText += text;
    if (this.errorText.length > 4096) this.errorText = this.errorText.slice(0, 4096);
    if (this.opening) return this.opening.fail(dialError(this.target, this.errorText));
    if (this.destroyed) return;
    if (!this.podSpoke && !connectionWasUp(this.errorText)) {
      // Called connected without waiting (the port accepted lately), yet the kubelet reports a
      // failure before the pod said anything: the route may still move this stream elsewhere.
      this.destroy(dialError(this.target, this.errorText));
      return;
    }
    // The pod's connection broke (reset, a failed write): what it sent may be cut short, so the
    // stream fails and the relay resets the client, as TCP would; a FIN would pass it for whole.
    const message = errorStreamMessage(this.errorText).slice(0, 500);
    this.log.info({ target: where(this.target), error: message }, 'pod connection ended with an error');
    this.destroy(new UpstreamApiError(`pod ${where(this.target)}: the connection broke: ${message}`));
  }
}
