// An upstream stand-in for stream wrappers' tests: records what it is sent (and whether it was
// ended); the test pushes what "the pod" answers.
import { Duplex } from 'node:stream';

export class RecordingDuplex extends Duplex {
  readonly written: Buffer[] = [];
  ended = false;
  constructor() {
    super({ allowHalfOpen: true });
  }
  override _read(): void {}
  override _write(chunk: Buffer, _enc: BufferEncoding, cb: () => void): void {
    this.written.push(chunk);
    cb();
  }
  override _final(cb: () => void): void {
    this.ended = true;
    cb();
  }
  text(): string {
    return Buffer.concat(this.written).toString();
  }
}
