// Keepalive for long-lived tunnels (per-stream WebSockets and SPDY tunnels). An idle port-forward
// carries no bytes, so a NAT or load balancer on the way may forget it, and a peer that vanished
// without a FIN or RST (host gone, state dropped) is never noticed by TCP until we send — an idle
// stream would then hang forever. Pings keep the path warm and prove the peer is still there.
import WebSocket from 'ws';
import { monotonicMs } from '../core/clock.js';

export interface KeepaliveOptions {
  /** Ping this often; 0 turns keepalive off. */
  intervalMs: number;
  /** After a ping, the peer must send something (pong or data) within this time. */
  timeoutMs: number;
  /**
   * How long after an unanswered ping a peer we sent data to since it last spoke may stay silent
   * (our bytes, and the ping behind them, may wait in the kernel while it reads slowly); default
   * 2 minutes.
   */
  busySilenceMs?: number;
}

const BUSY_SILENCE_MS = 120_000;
/**
 * Bytes sent since the peer last spoke that can hold a ping back: a socket's send buffer holds
 * this much and more, a slow reader's window keeps it there. Less (a client that keeps sending a
 * little) is out of the kernel at once on a live path, so it pauses nothing.
 */
const BUSY_BYTES = 64 * 1024;

/** Keepalive when the owner gives none (tests, tools); the proxy passes --keepalive values. */
export const DEFAULT_KEEPALIVE: KeepaliveOptions = { intervalMs: 10_000, timeoutMs: 15_000 };

const noop = (): void => {};

/** What keepalive needs of a tunnel. */
export interface Pingable {
  readonly isOpen: boolean;
  /** A live peer's answer could not have been seen: we paused reading, or our bytes still queue. */
  readonly isStalled: boolean;
  /** Data bytes sent so far: bytes the kernel has taken may still wait for the peer. */
  readonly sent?: number;
  /** Sends a ping the peer answers (WebSocket ping → pong; SPDY PING → PING). */
  ping(): void;
  /** Calls `heard` on every answer or other message; `closed` once; returns an unsubscribe. */
  listen(heard: () => void, closed: () => void): () => void;
}

/**
 * A WebSocket as a Pingable: the API server answers its pings (v4 per-stream tunnels).
 * `alongside` runs with each ping (what the far end counts as activity, where a ping is not).
 */
export function pingableWebSocket(ws: WebSocket, sent: () => number = () => 0, alongside: () => void = noop): Pingable {
  return {
    get isOpen() {
      return ws.readyState === WebSocket.OPEN;
    },
    get isStalled() {
      return ws.isPaused || ws.bufferedAmount > 0;
    },
    get sent() {
      return sent();
    },
    ping: () => {
      ws.ping();
      alongside();
    },
    listen(heard, closed) {
      ws.on('pong', heard);
      ws.on('message', heard);
      ws.once('close', closed);
      return () => {
        ws.off('pong', heard);
        ws.off('message', heard);
        ws.off('close', closed);
      };
    },
  };
}

/**
 * Pings every intervalMs; calls onDead (once) when nothing came back within timeoutMs of a
 * ping. Anything received counts as an answer, so a busy tunnel never looks dead. A stalled
 * tunnel (see Pingable.isStalled) stops the clock — TCP itself gives up on a peer that is gone,
 * in time — and so, for up to busySilenceMs after the ping, does one we sent data on since we
 * last heard from it: our bytes may sit in the kernel's buffers with the ping behind them while the
 * peer reads slowly (a pod that does not keep up with an upload).
 * Returns a function that stops it; it also stops when the tunnel closes.
 */
export function startKeepalive(tunnel: Pingable, options: KeepaliveOptions, onDead: (silentMs: number) => void): () => void {
  if (options.intervalMs <= 0) return noop;
  let deadline: NodeJS.Timeout | undefined;
  let pingAt = 0;
  // What we had sent when the peer last spoke (a count: no clock read per message).
  let sentWhenHeard = tunnel.sent ?? 0;
  const heard = (): void => {
    sentWhenHeard = tunnel.sent ?? 0;
    clearTimeout(deadline);
    deadline = undefined;
  };
  const expire = (): void => {
    deadline = undefined;
    if (!tunnel.isOpen) return;
    const busy = (tunnel.sent ?? 0) - sentWhenHeard >= BUSY_BYTES && monotonicMs() - pingAt < (options.busySilenceMs ?? BUSY_SILENCE_MS);
    if (tunnel.isStalled || busy) {
      deadline = setTimeout(expire, options.timeoutMs);
      deadline.unref();
      return;
    }
    stop();
    onDead(Math.round(monotonicMs() - pingAt));
  };
  const ping = (): void => {
    if (!tunnel.isOpen || deadline) return;
    pingAt = monotonicMs();
    tunnel.ping();
    deadline = setTimeout(expire, Math.max(1, options.timeoutMs));
    deadline.unref();
  };
  const interval = setInterval(ping, options.intervalMs);
  interval.unref();
  const unlisten = tunnel.listen(heard, () => stop());
  function stop(): void {
    clearInterval(interval);
    clearTimeout(deadline);
    unlisten();
  }
  return stop;
}
