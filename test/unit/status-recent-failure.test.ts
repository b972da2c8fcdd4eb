// `status`'s line for a proxy whose streams fail (cli/status-table.ts recentFailure): shown for a
// minute after the failure, saying whether any stream opened since; never after.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { recentFailure } from '../../src/cli/status-table.js';

const at = Date.parse('2026-12-07T10:00:00Z');
const failure = (openedSince: boolean) => ({
  at: new Date(at).toISOString(),
  reason: 'not-allowed',
  message: 'pods "web-1" is forbidden: cannot create pods/portforward in namespace shop',
  target: 'web.shop:80',
  openedSince,
});

test('a failure within the minute is shown, with whether a stream opened since; an older one is not', () => {
  assert.equal(
    recentFailure({ id: 'abc', lastFailure: failure(false) }, at + 3_400),
    'the last stream failed 3 s ago (to web.shop:80): pods "web-1" is forbidden: cannot create pods/portforward in namespace shop; no stream opened since; see kubectl proxyout logs abc',
  );
  assert.doesNotMatch(recentFailure({ id: 'abc', lastFailure: failure(true) }, at + 3_400)!, /no stream opened since/);
  assert.equal(recentFailure({ id: 'abc', lastFailure: failure(false) }, at + 60_000), undefined);
  assert.equal(recentFailure({ id: 'abc' }, at), undefined);
  assert.equal(recentFailure({ id: 'abc', lastFailure: { ...failure(false), at: 'not a date' } }, at), undefined);
});
