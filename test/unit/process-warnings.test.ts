// core/process-warnings.ts: Node's warnings become log lines (each once; deprecations at debug),
// and Node's own stderr writer is removed, so nothing but log lines reaches stderr.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { Writable } from 'node:stream';
import pino from 'pino';
import { logProcessWarnings } from '../../src/core/process-warnings.js';
import type { Logger } from '../../src/core/log.js';

test("warnings are log lines, each once; Node's own writer is gone", () => {
  const lines: Array<{ level: number; msg: string; warning: string; code?: string }> = [];
  const sink = new Writable({ write: (chunk: Buffer, _enc, done) => (lines.push(JSON.parse(chunk.toString())), done()) });
  const log = pino({ level: 'debug' }, sink) as unknown as Logger;
  const proc = new EventEmitter();
  let nodeWriter = 0;
  proc.on('warning', () => nodeWriter++);
  logProcessWarnings(log, proc as unknown as NodeJS.Process);
  const dep = Object.assign(new Error('Setting the TLS ServerName to an IP address is not permitted by RFC 6066.'), {
    name: 'DeprecationWarning',
    code: 'DEP0123',
  });
  const leak = Object.assign(new Error('Possible EventEmitter memory leak detected.'), { name: 'MaxListenersExceededWarning' });
  for (const w of [dep, dep, leak, leak]) proc.emit('warning', w);
  assert.equal(nodeWriter, 0, "Node's writer no longer runs");
  assert.deepEqual(
    lines.map((l) => [l.level, l.warning, l.code, l.msg]),
    [
      [20, 'DeprecationWarning', 'DEP0123', dep.message],
      [40, 'MaxListenersExceededWarning', undefined, leak.message],
    ],
  );
});
