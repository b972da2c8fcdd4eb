import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SocksReply } from '../../src/core/errors.js';
import { hopError, hopFailureOf } from '../../src/ssh/failures.js';
import type { SshHop } from '../../src/ssh/chain.js';

const hop = { alias: 'jump1', user: 'admin', hostName: '203.0.113.7', port: 22 } as SshHop;
/** An error as ssh2's client.js emits it for a DISCONNECT: the reason code on `code`, no level. */
const disconnect = (reason: number, text: string) => Object.assign(new Error(text), { code: reason });

test('a DISCONNECT during login is about logging in or the protocol, never an unreachable hop', () => {
  const cases: Array<[Error, string, number]> = [
    [disconnect(2, 'Too many authentication failures'), 'auth', SocksReply.generalFailure],
    [disconnect(14, 'No more authentication methods available'), 'auth', SocksReply.generalFailure],
    [disconnect(2, 'Packet corrupt'), 'protocol', SocksReply.generalFailure],
    [disconnect(12, 'Too many connections'), 'protocol', SocksReply.generalFailure],
  ];
  for (const [err, kind, socks] of cases) {
    const mapped = hopError(err, hop);
    assert.deepEqual([hopFailureOf(mapped)?.kind, mapped.socksReply], [kind, socks], err.message);
    assert.match(mapped.message, /^ssh hop jump1 \(admin@203\.0\.113\.7:22\)/);
    assert.ok(mapped.message.includes(err.message), mapped.message);
  }
  assert.match(hopError(disconnect(2, 'Too many authentication failures'), hop).message, /refused our keys/);
  // A string code is an errno: the socket failed, the hop is unreachable.
  const refused = hopError(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED', level: 'client-socket' }), hop);
  assert.deepEqual([hopFailureOf(refused)?.kind, refused.socksReply], ['unreachable', SocksReply.hostUnreachable]);
});
