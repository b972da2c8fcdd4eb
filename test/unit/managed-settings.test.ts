// settings.ts: which explicitly requested settings conflict with a running proxy.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { settingDifferences } from '../../src/managed/settings.js';
import type { DaemonOptions, ProxyEntry } from '../../src/managed/store.js';

const options: DaemonOptions = {
  listenSocks: '127.0.0.1:1080',
  clusterDomain: 'cluster.local',
  logLevel: 'info',
  connectTimeoutMs: 15_000,
  handshakeTimeoutMs: 10_000,
  shutdownGraceMs: 4_000,
  transport: 'auto',
};
const entry = (o: Partial<DaemonOptions> = {}, extra: Partial<ProxyEntry> = {}): ProxyEntry => ({
  version: 1,
  id: 'abc',
  context: 'c',
  namespace: 'n',
  server: 's',
  options: { ...options, ...o },
  phase: 'running',
  createdAt: '',
  ...extra,
});

test('defaults that differ do not count; explicit flags do', () => {
  const asked = { ...options, listenSocks: '127.0.0.1:1081', logLevel: 'debug' };
  assert.deepEqual(settingDifferences(entry(), { options: asked, explicitFlags: new Set() }), []);
  assert.deepEqual(settingDifferences(entry(), { options: asked, explicitFlags: new Set(['log-level']) }), ['--log-level (running: info, asked: debug)']);
  assert.deepEqual(
    settingDifferences(entry(), {
      options: { ...options, listenSocks: undefined, listenHttp: '127.0.0.1:0' },
      explicitFlags: new Set(['listen-socks', 'listen-http']),
    }),
    ['--listen-socks (running: 127.0.0.1:1080, asked: off)', '--listen-http (running: off, asked: 127.0.0.1:0)'],
  );
});

test('an entry written before a flag existed ran with its default', () => {
  assert.deepEqual(
    settingDifferences(entry({ transport: undefined }), { options: { ...options, transport: 'auto' }, explicitFlags: new Set(['transport']) }),
    [],
  );
  assert.deepEqual(settingDifferences(entry({ transport: undefined }), { options: { ...options, transport: 'spdy' }, explicitFlags: new Set(['transport']) }), [
    '--transport (running: auto, asked: spdy)',
  ]);
});

test('proxy auth: asked for a user the running proxy does not have', () => {
  assert.deepEqual(settingDifferences(entry(), { options, explicitFlags: new Set(), proxyAuthUser: 'alice' }), [
    'proxy authentication (running: off, asked: user alice)',
  ]);
  assert.deepEqual(settingDifferences(entry({}, { proxyAuthUser: 'bob' }), { options, explicitFlags: new Set(), proxyAuthUser: 'alice' }), [
    'proxy authentication (running: user bob, asked: user alice)',
  ]);
  assert.deepEqual(settingDifferences(entry({}, { proxyAuthUser: 'alice' }), { options, explicitFlags: new Set(), proxyAuthUser: 'alice' }), []);
  assert.deepEqual(settingDifferences(entry({}, { proxyAuthUser: 'alice' }), { options, explicitFlags: new Set() }), [], 'not asking for auth is no conflict');
});

test('--no-proxy-auth against a proxy with credentials is a difference; without it, none', () => {
  assert.deepEqual(
    settingDifferences(entry({}, { proxyAuthUser: 'proxyout', proxyAuthGenerated: true }), {
      options,
      explicitFlags: new Set(['no-proxy-auth']),
      proxyAuthOff: true,
    }),
    ['proxy authentication (running: user proxyout, asked: off with --no-proxy-auth)'],
  );
  assert.deepEqual(settingDifferences(entry(), { options, explicitFlags: new Set(['no-proxy-auth']), proxyAuthOff: true }), []);
  assert.deepEqual(settingDifferences(entry({}, { proxyAuthUser: 'proxyout', proxyAuthGenerated: true }), { options, explicitFlags: new Set() }), []);
});

test('a listen address asked in another spelling of the same address is no difference', () => {
  const running = entry({ listenSocks: '[::1]:21790', listenHttp: '127.0.0.1:3128' });
  const flags = new Set(['listen-socks', 'listen-http']);
  for (const [socks, http] of [
    ['[0:0::1]:21790', ':3128'],
    ['[0:0:0:0:0:0:0:1]:21790', '127.0.0.1:3128'],
  ]) {
    assert.deepEqual(
      settingDifferences(running, { options: { ...options, listenSocks: socks, listenHttp: http }, explicitFlags: flags }),
      [],
      `${socks} ${http}`,
    );
  }
  assert.deepEqual(settingDifferences(running, { options: { ...options, listenSocks: '[::]:21790', listenHttp: '127.0.0.1:3128' }, explicitFlags: flags }), [
    '--listen-socks (running: [::1]:21790, asked: [::]:21790)',
  ]);
});
