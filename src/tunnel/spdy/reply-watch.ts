// Notices a tunnel whose kubelet stopped answering SYN_STREAMs. The streaming server replies to a
// SYN_STREAM as it accepts the stream, before it dials the pod (spdystream's connection.go
// handleStreamFrame, httpstream.go in k8s.io/kubelet/pkg/cri/streaming/portforward), so no reply
// for SLOW_REPLY_MS while a stream waits for one means a slow or silent path: the pool then checks
// the tunnel with a PING rather than let streams wait for the keepalive (spdy-transport.ts).
// One timer per tunnel, not per stream: it counts opens and replies, and runs only while some wait.

/** Without a single SYN_REPLY for this long while a stream waits, the tunnel is suspect. */
export const SLOW_REPLY_MS = 2_000;

export class ReplyWatch {
  private opens = 0;
  private replies = 0;
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly onSilent: () => void,
    private readonly slowMs = SLOW_REPLY_MS,
  ) {}

  /** A stream's SYN_STREAMs went out: its replies are awaited. */
  opened(): void {
    this.opens++;
    if (!this.timer) this.arm();
  }

  /** A SYN_REPLY came. */
  replied(): void {
    this.replies++;
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private arm(): void {
    const opens = this.opens;
    const replies = this.replies;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      // Nothing answered in the window: suspect. Something did: the path lives; streams opened
      // since are watched in a window of their own.
      if (this.replies === replies) this.onSilent();
      else if (this.opens > opens) this.arm();
    }, this.slowMs);
    this.timer.unref();
  }
}
