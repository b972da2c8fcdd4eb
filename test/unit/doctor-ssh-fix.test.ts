// doctor's advice for an ssh hop the one before it cannot reach names the address as ssh and
// kubectl write it: an IPv6 jump host in brackets, so its port does not read as part of it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fixFor } from '../../src/doctor/ssh.js';
import type { SshHop } from '../../src/ssh/chain.js';

const hop = (alias: string, hostName: string, port: number) => ({ alias, hostName, port, user: 'u', knownHostsFiles: [] }) as unknown as SshHop;

test('a hop the one before cannot reach: an IPv6 address is bracketed before its port, a name is not', () => {
  const v6 = fixFor('unreachable', [hop('bastion', 'bastion.example', 22), hop('inner', 'fd00:10::5', 2222)], 1, 'inner');
  assert.match(v6, /^bastion cannot reach \[fd00:10::5\]:2222: check HostName and Port of inner/);
  const named = fixFor('unreachable', [hop('bastion', 'bastion.example', 22), hop('inner', 'inner.internal', 22)], 1, 'inner');
  assert.match(named, /^bastion cannot reach inner\.internal:22: /);
});
