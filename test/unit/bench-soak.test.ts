import { test } from 'node:test';
import assert from 'node:assert/strict';
import { describeSoak, type SoakResult } from '../../bench/soak.js';

test('the soak line names every held stream that could not be opened and every refused download, with its reason, and the downloads cut with no fault to blame', () => {
  const r: SoakResult = {
    seconds: 30,
    held: 200,
    heldCut: 1,
    downloads: 40,
    downloadsCut: 3,
    downloadsCutWithoutFault: 1,
    downloadsRefused: 3,
    bytesMoved: 10 << 20,
    bytesLost: 0,
    failures: { held: { 'SOCKS reply 5': 2 }, downloads: { 'SOCKS reply 4': 2, 'SOCKS handshake failed: ECONNRESET: read ECONNRESET': 1 } },
    faults: { podDeletions: 5, backendResets: 5, droppedWatches: 5 },
    rssStart: 50 << 20,
    rssEnd: 52 << 20,
  };
  assert.equal(
    describeSoak(r, (b) => (b / (1 << 20)).toFixed(1)),
    'soak 30 s: 200 streams held (2 could not be opened: 2 × SOCKS reply 5; 1 cut), 40 downloads (3 cut short, 1 of them with no fault injected meanwhile; 3 refused: 2 × SOCKS reply 4, 1 × SOCKS handshake failed: ECONNRESET: read ECONNRESET), ' +
      '10.0 MiB moved; faults: 5 pod deletions, 5 backend resets, 5 dropped watches; bytes lost 0; proxy RSS 50.0 → 52.0 MiB',
  );
});
