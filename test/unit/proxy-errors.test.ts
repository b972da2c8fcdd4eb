// ProxyErrors are answers to clients, made on the data path for every refused name or failed
// open: no stack trace is captured for them (core/errors.ts), and the process's own limit is left
// as it was, also when the constructor throws.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { HostUnreachableError, NotAllowedError, StartupError, replyFor } from '../../src/core/errors.js';

test('a ProxyError carries its message, reply and cause but no stack frames; other errors keep theirs', () => {
  const before = Error.stackTraceLimit;
  const cause = new Error('underneath');
  const err = new HostUnreachableError('no Service "web" in namespace "shop"', { cause, retryable: true });
  assert.equal(err.stack, 'HostUnreachableError: no Service "web" in namespace "shop"');
  assert.equal(err.cause, cause);
  assert.match(cause.stack!, /\n\s+at /, 'the cause keeps its frames');
  assert.equal(err.retryable, true);
  assert.equal(replyFor(new NotAllowedError('x')).socks, 0x02);
  assert.equal(Error.stackTraceLimit, before, 'the limit is restored');
  assert.match(new StartupError('boom').stack!, /\n\s+at /, 'a StartupError (printed with DEBUG=1) keeps its frames');
  assert.match(new Error('plain').stack!, /\n\s+at /);
});
