// A client's WebSocket frames (RFC 6455 §5.2, masking §5.3): every frame carries the MASK bit and a
// 4-byte key. The frame is built as one buffer (header, then the payload pieces copied behind it)
// so TLS gets a single write: a header and a payload written apart would be joined by Node's TLS
// layer anyway, a second copy. When the key is all zeros (verified TLS, see ws-options.ts) the
// XOR pass is skipped: XOR with zero changes nothing.
import { randomFillSync } from 'node:crypto';

function headerLength(payload: number): number {
  return payload < 126 ? 6 : payload < 0x10000 ? 8 : 14;
}

export type MaskKeys = 'zero' | 'random';

/** One final frame of `opcode` holding `pieces` (`total` bytes), masked as `keys` says. */
export function encodeClientFrame(opcode: number, pieces: readonly Buffer[], total: number, keys: MaskKeys): Buffer {
  const head = headerLength(total);
  // Up to 3 bytes of slack in front so the payload begins on a 4-byte boundary in memory.
  const whole = Buffer.allocUnsafe(3 + head + total);
  const pad = (4 - ((whole.byteOffset + head) & 3)) & 3;
  const frame = whole.subarray(pad, pad + head + total);
  frame[0] = 0x80 | opcode;
  if (total < 126) frame[1] = 0x80 | total;
  else if (total < 0x10000) {
    frame[1] = 0x80 | 126;
    frame.writeUInt16BE(total, 2);
  } else {
    frame[1] = 0x80 | 127;
    frame.writeUInt32BE(Math.floor(total / 2 ** 32), 2);
    frame.writeUInt32BE(total >>> 0, 6);
  }
  const key = frame.subarray(head - 4, head);
  if (keys === 'zero') key.fill(0);
  else randomFillSync(key);
  let at = head;
  for (const p of pieces) at += p.copy(frame, at);
  if (keys === 'random') maskInPlace(frame, head, total, key);
  return frame;
}

/** XORs `length` bytes from `start` with the repeating key; `start` is 4-byte aligned in memory. */
export function maskInPlace(buf: Buffer, start: number, length: number, key: Buffer): void {
  const words = length >>> 2;
  if ((buf.byteOffset + start) % 4 === 0 && words > 0) {
    // The key's bytes in memory order, read as a word the same way the payload words are read.
    const keyWord = new Uint32Array(new Uint8Array([key[0]!, key[1]!, key[2]!, key[3]!]).buffer)[0]!;
    const view = new Uint32Array(buf.buffer, buf.byteOffset + start, words);
    for (let i = 0; i < words; i++) view[i] = view[i]! ^ keyWord;
    for (let i = words * 4; i < length; i++) buf[start + i] = buf[start + i]! ^ key[i & 3]!;
    return;
  }
  for (let i = 0; i < length; i++) buf[start + i] = buf[start + i]! ^ key[i & 3]!;
}
