// The message rules of plain-HTTP forwarding (src/listeners/http-messages.ts), without sockets.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { earlyHintsFrom, maxForwardsFor, originFormTarget, reasonWithMessage, splitLinks } from '../../src/listeners/http-messages.js';

test('originFormTarget keeps the raw path and query; an OPTIONS with neither becomes "*"', () => {
  assert.equal(originFormTarget('http://h/a/../b?x=%41', 'GET'), '/a/../b?x=%41');
  assert.equal(originFormTarget('http://h:8080', 'GET'), '/');
  assert.equal(originFormTarget('http://h', 'OPTIONS'), '*');
  assert.equal(originFormTarget('HTTP://h:80', 'OPTIONS'), '*');
  assert.equal(originFormTarget('http://h/', 'OPTIONS'), '/');
  assert.equal(originFormTarget('http://h?q', 'OPTIONS'), '/?q');
  assert.equal(originFormTarget('http://h/p#frag', 'GET'), '/p');
});

test('maxForwardsFor: only TRACE and OPTIONS, only numbers; 0 answers here, N goes on as N-1', () => {
  assert.deepEqual(maxForwardsFor('TRACE', '0'), { answerHere: true });
  assert.deepEqual(maxForwardsFor('OPTIONS', '00'), { answerHere: true });
  assert.deepEqual(maxForwardsFor('OPTIONS', '5'), { answerHere: false, forwardAs: '4' });
  assert.deepEqual(maxForwardsFor('TRACE', '99999999999999999999'), { answerHere: false, forwardAs: String(Number.MAX_SAFE_INTEGER - 1) });
  assert.deepEqual(maxForwardsFor('GET', '0'), { answerHere: false });
  assert.deepEqual(maxForwardsFor('TRACE', undefined), { answerHere: false });
  assert.deepEqual(maxForwardsFor('TRACE', '-1'), { answerHere: false });
  assert.deepEqual(maxForwardsFor('TRACE', '1, 2'), { answerHere: false });
});

test('splitLinks splits at commas outside <URI> and quoted strings', () => {
  assert.deepEqual(splitLinks('</a.css>; rel=preload; as=style, </b,c.js>; rel=preload; as=script'), [
    '</a.css>; rel=preload; as=style',
    '</b,c.js>; rel=preload; as=script',
  ]);
  assert.deepEqual(splitLinks('</x>; title="a, \\"b\\", c"; rel=next ,, '), ['</x>; title="a, \\"b\\", c"; rel=next']);
  assert.deepEqual(splitLinks(''), []);
});

test('earlyHintsFrom: the links one per entry, end-to-end fields beside them; nothing without a Link', () => {
  assert.deepEqual(earlyHintsFrom(['Link', '</a>; rel=preload, </b>; rel=preload', 'Link', '</c>; rel=preconnect', 'X-Hint', '1', 'Connection', 'close']), {
    link: ['</a>; rel=preload', '</b>; rel=preload', '</c>; rel=preconnect'],
    'x-hint': '1',
  });
  assert.equal(earlyHintsFrom(['X-Hint', '1']), undefined);
});

test('reasonWithMessage: the standard phrase, then the message in printable ASCII, bounded for a 1 KiB status line', () => {
  assert.equal(
    reasonWithMessage(502, 'kubectl-proxyout: cluster route a: no Service "x" in namespace "y"\n'),
    'Bad Gateway (kubectl-proxyout: cluster route a: no Service "x" in namespace "y")',
  );
  assert.equal(reasonWithMessage(403, ''), 'Forbidden');
  // CR/LF would end the status line; Node refuses code points above U+00FF in a reason phrase.
  assert.equal(reasonWithMessage(502, 'a\r\nX-Injected: 1 é \u4e2d'), 'Bad Gateway (a??X-Injected: 1 ? ?)');
  const long = reasonWithMessage(504, 'x'.repeat(2000));
  assert.ok(long.length < 400 && long.endsWith('...)'), long);
});
