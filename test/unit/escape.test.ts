// Control characters from clients never reach a terminal: the escape itself, the logger (every
// line), the one error mapping (every error body), and the `logs` command's output.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { escapeControls, escapeJsonControls } from '../../src/core/escape.js';
import { createLogger } from '../../src/core/log.js';
import { BadRequestError, replyFor } from '../../src/core/errors.js';
import { formatLogLine, rawLogLine } from '../../src/managed/logs.js';

/** Any C0 control but the line end, DEL, or C1 (U+009B is the 8-bit CSI). */
const RAW_CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/;
const hostile = 'evil\u001b[31m\u009b2J\u0007\u007f\u0085\ud800.example';

test('escapeControls writes C0, DEL, C1 and lone surrogates as visible escapes; other text is kept', () => {
  assert.equal(escapeControls(hostile), 'evil\\x1b[31m\\x9b2J\\x07\\x7f\\x85\\ud800.example');
  assert.equal(escapeControls('web.shop:8080 café 🙂 \u00a0'), 'web.shop:8080 café 🙂 \u00a0');
  assert.equal(escapeControls('a\nb\tc'), 'a\\x0ab\\x09c', 'line ends too: a message cannot forge a log line');
});

test('escapeJsonControls keeps the JSON value and leaves no raw control', () => {
  const line = JSON.stringify({ h: hostile });
  assert.match(line, RAW_CONTROL, 'JSON.stringify alone leaves DEL and C1 raw');
  const escaped = escapeJsonControls(line);
  assert.doesNotMatch(escaped, RAW_CONTROL);
  assert.deepEqual(JSON.parse(escaped), { h: hostile });
});

test('every log line leaves the logger without raw control characters, in message and fields', () => {
  const lines: string[] = [];
  const sink = new Writable({ write: (chunk: Buffer, _enc, cb) => (lines.push(chunk.toString('utf8')), cb()) });
  const log = createLogger('info', sink).child({ client: hostile });
  log.warn({ target: hostile, nested: { name: hostile } }, `stream failed: ${hostile}`);
  assert.equal(lines.length, 1);
  assert.doesNotMatch(lines[0]!.replace(/\n$/, ''), RAW_CONTROL);
  const parsed = JSON.parse(lines[0]!) as Record<string, unknown>;
  assert.equal(parsed.target, hostile, 'lossless: the JSON value is the text as received');
});

test('error replies (bodies and log messages) carry client text escaped', () => {
  const reply = replyFor(new BadRequestError(`"GET /" is not a proxy request; Host ${hostile}`));
  assert.doesNotMatch(reply.message, RAW_CONTROL);
  assert.match(reply.message, /evil\\x1b\[31m\\x9b2J/);
  assert.doesNotMatch(replyFor(new Error(hostile)).message, RAW_CONTROL);
});

test('`logs` prints no raw control character, readable or --json, even from old or non-JSON lines', () => {
  const unescapedJson = JSON.stringify({ level: 40, time: 0, msg: `stream failed: ${hostile}`, target: hostile });
  for (const line of [unescapedJson, `crash trace ${hostile}`]) {
    assert.doesNotMatch(formatLogLine(line), RAW_CONTROL, line);
    assert.doesNotMatch(rawLogLine(line), RAW_CONTROL, line);
  }
  assert.deepEqual(JSON.parse(rawLogLine(unescapedJson)), JSON.parse(unescapedJson), '--json stays lossless');
  assert.match(formatLogLine(unescapedJson), /stream failed: evil\\x1b\[31m\\x9b2J/);
});
