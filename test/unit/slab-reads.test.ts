// SlabReads (src/tunnel/websocket/slab-reads.ts): reads land in slabs no byte of which is written
// twice, so every slice handed on keeps its bytes however long it is held; pieces keep their order
// across the handshake, the hold and attach().
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SlabReads } from '../../src/tunnel/websocket/slab-reads.js';

/** One read as Node's TLS layer does it: into the buffer onread gives, then the callback. */
function read(reads: SlabReads, bytes: Buffer): void {
  const into = reads.onread.buffer();
  assert.ok(into.length >= Math.min(bytes.length, 16 * 1024), 'room for a whole TLS record');
  bytes.copy(into, 0, 0, Math.min(bytes.length, into.length));
  reads.onread.callback(Math.min(bytes.length, into.length), into);
}

test('held slices keep their bytes while later reads fill the slab and the next ones', () => {
  const pieces: Buffer[] = [];
  const reads = new SlabReads((p) => pieces.push(p));
  const sent: Buffer[] = [];
  for (let i = 0; i < 60; i++) {
    const b = Buffer.alloc(1 + ((i * 7919) % (16 * 1024)), i);
    sent.push(b);
    read(reads, b);
  }
  assert.equal(pieces.length, sent.length);
  pieces.forEach((p, i) => assert.deepEqual(p, sent[i], `read ${i} intact`));
  const slabs = new Set(pieces.map((p) => p.buffer));
  assert.ok(slabs.size > 1 && slabs.size < pieces.length, `reads share slabs (${slabs.size} for ${pieces.length} reads)`);
});

test('after the handshake reads wait for attach(): the bytes behind the 101 first, then in order', async () => {
  const handshake: string[] = [];
  const reads = new SlabReads((p) => handshake.push(p.toString()));
  read(reads, Buffer.from('HTTP/1.1 101'));
  reads.hold();
  read(reads, Buffer.from('b,'));
  read(reads, Buffer.from('c,'));
  const got: string[] = [];
  reads.attach(Buffer.from('a,'), (p) => got.push(p.toString()));
  assert.deepEqual(got, [], 'nothing before the caller has wired its handlers');
  read(reads, Buffer.from('d,'));
  await new Promise((r) => process.nextTick(r));
  read(reads, Buffer.from('e'));
  assert.deepEqual(handshake, ['HTTP/1.1 101']);
  assert.equal(got.join(''), 'a,b,c,d,e');
});
