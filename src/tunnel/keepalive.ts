// WebSocket keepalive for long-lived tunnels. An idle port-forward carries no bytes, so a NAT or
// load balancer on the way may forget it, and a peer that vanished without a FIN or RST (host
// gone, state dropped) is never noticed by TCP until we send — an idle stream would then hang
// forever. Pings keep the path warm and prove the peer is still there.
import WebSocket from 'ws';

export interface KeepaliveOptions {
  /** Ping this often; 0 turns keepalive off. */
  intervalMs: number;
  /** After a ping, the peer must send something (pong or data) within this time. */
  timeoutMs: number;
}

const noop = (): void => {};

/**
 * Pings `ws` every intervalMs; calls onDead (once) when nothing came back within timeoutMs of a
 * ping. Anything received counts as an answer, so a busy tunnel never looks dead. Two local
 * states stop the clock, because a live peer's pong could not have been seen in them: we paused
 * reading (a slow client), or our own bytes — the ping behind them — still wait to be sent (the
 * peer, or the pod behind it, is slow to take an upload). TCP itself gives up on those in time.
 * Returns a function that stops it; it also stops when ws closes.
 */
export function startKeepalive(ws: WebSocket, options: KeepaliveOptions, onDead: (silentMs: number) => void): () => void {
  if (options.intervalMs <= 0) return noop;
  let deadline: NodeJS.Timeout | undefined;
  let pingAt = 0;
  const heard = (): void => {
    clearTimeout(deadline);
    deadline = undefined;
  };
  const expire = (): void => {
    deadline = undefined;
    if (ws.readyState !== WebSocket.OPEN) return;
    if (ws.isPaused || ws.bufferedAmount > 0) {
      deadline = setTimeout(expire, options.timeoutMs);
      deadline.unref();
      return;
    }
    stop();
    onDead(Date.now() - pingAt);
  };
  const ping = (): void => {
    if (ws.readyState !== WebSocket.OPEN || deadline) return;
    pingAt = Date.now();
    ws.ping();
    deadline = setTimeout(expire, Math.max(1, options.timeoutMs));
    deadline.unref();
  };
  const interval = setInterval(ping, options.intervalMs);
  interval.unref();
  ws.on('pong', heard);
  ws.on('message', heard);
  function stop(): void {
    clearInterval(interval);
    clearTimeout(deadline);
    ws.off('pong', heard);
    ws.off('message', heard);
    ws.off('close', stop);
  }
  ws.once('close', stop);
  return stop;
}
