// Notices a tunnel whose kubelet stopped answering SYN_STREAMs. The streaming server replies to a
// SYN_STREAM as it accepts the stream, before it dials the pod (spdystream's connection.go
// handleStreamFrame, httpstream.go in k8s.io/kubelet/pkg/cri/streaming/portforward), so no reply
// for SLOW_REPLY_MS while a stream waits for one means a slow or silent path: the pool then checks
// the tunnel with a PING rather than let streams wait for the keepalive (spdy-transport.ts).
// Bytes heard meanwhile prove the path alive (SYN_REPLYs wait behind a busy download): only a
// window with no reply and nothing heard is suspect. One timer per tunnel, not per stream: it
// counts opens, replies and bytes, and runs only while some stream waits.

/** Without a single SYN_REPLY for this long while a stream waits, the tunnel is suspect. */
export const SLOW_REPLY_MS = 2_000;

export class ReplyWatch {
  private opens = 0;
  private replies = 0;
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly onSilent: () => void,
    /** Bytes heard on the tunnel so far. */
    private readonly heard: () => number,
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
    const heard = this.heard();
    this.timer = setTimeout(() => {
      this.timer = undefined;
      const replied = this.replies !== replies;
      // Nothing answered, nothing heard in the window: suspect.
      if (!replied && this.heard() === heard) return this.onSilent();
      // The path lives. Streams opened since, or still unanswered behind what is heard, are
      // watched in a window of their own.
      if (this.opens > opens || !replied) this.arm();
    }, this.slowMs);
    this.timer.unref();
  }
}
