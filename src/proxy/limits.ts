// The cap on concurrent streams (--max-streams). Every stream holds a client socket, a WebSocket
// to the API server and buffers; without a cap a burst of clients (or a runaway script) exhausts
// file descriptors or memory and takes every other stream down with the process. Past the cap
// a new connection is refused at once with OverloadedError (SOCKS 0x01, HTTP 503), which the
// listeners report and StreamStats logs and counts like any other failure.
import type { OpenRequest, OpenedStream, StreamOpener } from '../core/types.js';
import { OverloadedError } from '../core/errors.js';

export class StreamLimiter implements StreamOpener {
  private active = 0;

  constructor(
    private readonly inner: StreamOpener,
    /** 0 or less: no limit. */
    readonly maxStreams: number,
  ) {}

  /** Streams holding a slot: open, or still opening. */
  get inUse(): number {
    return this.active;
  }

  async open(request: OpenRequest): Promise<OpenedStream> {
    if (this.maxStreams > 0 && this.active >= this.maxStreams) {
      throw new OverloadedError(`too many concurrent streams: ${this.active} open, the limit is ${this.maxStreams} (--max-streams)`);
    }
    // The slot is taken while opening too: a flood of slow opens must not get past the cap.
    this.active++;
    let opened: OpenedStream;
    try {
      opened = await this.inner.open(request);
    } catch (err) {
      this.active--;
      throw err;
    }
    const { stream } = opened;
    if (stream.destroyed) this.active--;
    else stream.once('close', () => this.active--);
    return opened;
  }
}
