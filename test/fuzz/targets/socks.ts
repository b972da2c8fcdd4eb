// Fuzz target: the SOCKS handshake parser (src/listeners/socks-protocol.ts: SOCKS5 RFC 1928,
// RFC 1929 username/password, SOCKS4/4a) driven as the listener drives it. The first input byte
// steers the driver (method policy, the verdict on credentials, how the bytes are chunked); the
// rest is what the client sends. The parser must never throw, must settle (no endless run of
// steps), and every step must be well formed.
import net from 'node:net';
import { ProxyError, SocksReply, replyFor } from '../../../src/core/errors.js';
import { SocksHandshakeParser, encodeSocks5Reply, noAuthPolicy, userPassPolicy, type SocksStep } from '../../../src/listeners/socks-protocol.js';
import type { FuzzTarget } from '../engine.js';

const CHUNKS = [1, 2, 3, 5, 8, 64, Infinity];
const REPLY_CODES = new Set<number>(Object.values(SocksReply));

class Invariant extends Error {}

function check(cond: boolean, what: string): void {
  if (!cond) throw new Invariant(what);
}

function checkStep(step: SocksStep): void {
  switch (step.type) {
    case 'greeting':
      check(step.methods.length <= 255, 'greeting with more than 255 methods');
      break;
    case 'auth':
      check(step.username.length <= 255 && step.password.length <= 255, 'RFC 1929 field longer than 255 bytes');
      break;
    case 'connect': {
      const d = step.destination;
      check(Number.isInteger(d.port) && d.port > 0 && d.port < 65536, `port ${d.port}`);
      check(d.host.length > 0 && d.host.length <= 255, `host length ${d.host.length}`);
      if (d.type === 'ipv4') check(net.isIPv4(d.host), `ipv4 "${d.host}"`);
      if (d.type === 'ipv6') check(net.isIPv6(d.host), `ipv6 "${d.host}"`);
      if (d.type === 'domain') check(/^[\x21-\x7e]+$/.test(d.host) && !net.isIP(d.host), `domain "${d.host}"`);
      // What the listener would answer must encode without throwing.
      encodeSocks5Reply(SocksReply.succeeded, { address: d.host, port: d.port });
      break;
    }
    case 'reject': {
      check(step.error instanceof ProxyError, `untyped reject: ${String(step.error)}`);
      check(REPLY_CODES.has(replyFor(step.error).socks), 'reply code outside RFC 1928 §6');
      break;
    }
    case 'close':
      check(typeof step.reason === 'string' && step.reason.length > 0, 'close without a reason');
      break;
    case 'more':
      break;
  }
}

export const socksTarget: FuzzTarget = {
  name: 'socks',
  maxLen: 1024,
  dictionary: [
    [5],
    [4],
    [1],
    [2],
    [3],
    [0],
    [0xff],
    [5, 1, 0],
    [5, 2, 0, 2],
    [5, 1, 2],
    [1, 5],
    [5, 1, 0, 3],
    [5, 1, 0, 1],
    [5, 1, 0, 4],
    [0, 80],
    [0x1f, 0x90],
    [4, 1, 0, 80, 0, 0, 0, 1],
    [0, 0, 0, 1],
  ]
    .map((a) => Buffer.from(a))
    .concat(['web.shop', 'svc.cluster.local', 'alice', '\0', '..', '::1', '%00'].map((s) => Buffer.from(s))),
  include: (url) => url.includes('/dist/src/'),
  run(input) {
    if (input.length === 0) return;
    const control = input[0]!;
    const policy = control & 1 ? userPassPolicy : noAuthPolicy;
    const accept = (control & 2) !== 0;
    const chunk = CHUNKS[(control >> 2) % CHUNKS.length]!;
    const data = input.subarray(1);
    const parser = new SocksHandshakeParser();
    for (let off = 0; off < data.length || off === 0; off += chunk) {
      parser.push(data.subarray(off, Math.min(data.length, off + chunk)));
      for (let steps = 0; ; steps++) {
        check(steps < 16, 'the parser does not settle: 16 steps from one chunk');
        const step = parser.next();
        checkStep(step);
        if (step.type === 'more') break;
        if (step.type === 'greeting') parser.methodSelected(policy.selectMethod(step.methods));
        else if (step.type === 'auth') parser.authResult(accept);
        else {
          check(parser.finished, `not finished after ${step.type}`);
          check(parser.next().type === 'close', 'a finished parser must only close');
          check(parser.rest().length <= data.length, 'rest longer than the input');
          return;
        }
        // A refused method or credentials end the handshake: the listener stops reading.
        if (parser.finished) return;
      }
      if (data.length === 0) break;
    }
  },
};
