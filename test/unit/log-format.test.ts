// The terminal log shape: pino records through pino-pretty, one line each, with no raw control
// character a client could have smuggled in (only pino-pretty's own colour sequences).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createLogger } from '../../src/core/log.js';
import { prettyDestination, resolveLogFormat } from '../../src/core/log-format.js';

function capture(colorize: boolean) {
  const lines: string[] = [];
  const dest = prettyDestination({ write: (t: string) => lines.push(t) }, { colorize });
  return { lines, log: createLogger('info', dest) };
}

const SGR = /\u001b\[[0-9;]*m/g;
const RAW_CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/;

test('auto is pretty only on a terminal; explicit formats win', () => {
  assert.equal(resolveLogFormat('auto', { isTTY: true }), 'pretty');
  assert.equal(resolveLogFormat('auto', { isTTY: false }), 'json');
  assert.equal(resolveLogFormat('auto', {}), 'json');
  assert.equal(resolveLogFormat('json', { isTTY: true }), 'json');
  assert.equal(resolveLogFormat('pretty', { isTTY: false }), 'pretty');
});

test('one short human line per record: time, level, message, fields; no pid', () => {
  const { lines, log } = capture(false);
  log.info({ target: 'web.shop:8080', pod: 'web-0' }, 'stream opened');
  log.warn('watch restarted');
  assert.equal(lines.length, 2);
  assert.match(lines[0]!, /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: stream opened \{"target":"web\.shop:8080","pod":"web-0"\}\n$/);
  assert.match(lines[1]!, /^\[\d\d:\d\d:\d\d\.\d{3}\] WARN: watch restarted\n$/);
  assert.doesNotMatch(lines[0]!, /"pid"/);
});

test('a failure keeps its error on its line (pino-pretty would put err/error on lines of their own)', () => {
  const { lines, log } = capture(false);
  log.info({ stream: 3, target: 'web.shop:8080', error: 'read ECONNRESET' }, 'stream closed with error');
  log.error({ err: new Error('kaboom') }, 'listener error');
  assert.equal(lines.length, 2);
  assert.match(lines[0]!, /^\[[\d:.]+\] INFO: stream closed with error \{"stream":3,"target":"web\.shop:8080","error":"read ECONNRESET"\}\n$/);
  assert.equal(lines[1]!.indexOf('\n'), lines[1]!.length - 1, JSON.stringify(lines[1]));
  assert.match(lines[1]!, /ERROR: listener error \{"err":\{"type":"Error","message":"kaboom"/);
});

test('client control characters (ESC, 8-bit CSI, NEL, newline) arrive escaped, never raw', () => {
  for (const colorize of [false, true]) {
    const { lines, log } = capture(colorize);
    log.info({ host: 'evil\u001b[2J\u009b31m\u0085x\ny' }, 'bad host \u009b2J');
    assert.equal(lines.length, 1);
    const plain = lines[0]!.replace(SGR, '');
    assert.doesNotMatch(plain.slice(0, -1), RAW_CONTROL, JSON.stringify(plain));
    assert.match(plain, /evil\\x1b\[2J\\x9b31m\\x85x\\x0ay/);
    assert.match(plain, /bad host \\x9b2J/);
    if (colorize) assert.match(lines[0]!, SGR, 'coloured when asked');
  }
});

test('secrets stay redacted in the pretty shape too', () => {
  const { lines, log } = capture(false);
  log.info({ token: 'sekret-token', headers: { authorization: 'Bearer x' } }, 'x');
  assert.doesNotMatch(lines[0]!, /sekret-token|Bearer x/);
  assert.match(lines[0]!, /\[redacted\]/);
});
