// Which routes a reload keeps (proxy/build-table.ts): a route whose spec is unchanged is the same
// live route in the new table (its watch cache, tunnels and open streams stay); only a route the
// edit changed is made anew. Built without starting: construction needs no network.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseConfig } from '../../src/config/validate.js';
import { tableFrom } from '../../src/config/load.js';
import { buildTable, type BuildSettings, type BuiltTable } from '../../src/proxy/build-table.js';
import { createLogger } from '../../src/core/log.js';
import { scratchDir } from '../helpers/scratch-dir.js';

const KUBECONFIG = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: 'https://127.0.0.1:9'}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: a, context: {cluster: c, user: u}}, {name: b, context: {cluster: c, user: u}}]
current-context: a
`;

const YAML = `routes:
  - {name: jump, kind: ssh, ssh: {host: jump.example.com}}
  - name: a
    kind: cluster
    via: jump
  - {name: b, kind: cluster, include: [b.example.com]}
`;

function build(text: string, reuse?: BuiltTable): BuiltTable {
  const dir = scratchDir('kpo-reuse-');
  const kubeconfig = path.join(dir, 'kubeconfig');
  writeFileSync(kubeconfig, KUBECONFIG);
  const table = tableFrom(parseConfig(text, 'config.yaml', 'cluster.local'), { contexts: [], clusterDomain: 'cluster.local' });
  const settings: BuildSettings = {
    kubeconfig,
    ownListeners: () => [],
    clusterDomain: 'cluster.local',
    transport: 'auto',
    keepalive: { intervalMs: 0, timeoutMs: 15_000 },
    connectTimeoutMs: 1000,
    allowHostNetworkPods: false,
  };
  return buildTable(table, reuse?.settings ?? settings, createLogger('silent'), reuse);
}

async function closeAll(...tables: BuiltTable[]): Promise<void> {
  for (const t of tables) for (const r of t.fresh) await r.close(true);
}

test('a reload keeps every route an edit did not change, also when lines moved (a comment, a route above)', async () => {
  const before = build(YAML);
  const moved = build(`# routes of the team\n\n${YAML.replace('routes:\n', 'routes:\n  - {name: lan, kind: direct, include: [lan.example.com]}\n')}`, before);
  try {
    // (assert.ok: a failing assert.equal would print the whole live route)
    for (const name of ['jump', 'a', 'b']) assert.ok(moved.routes.get(name) === before.routes.get(name), `route ${name} made anew`);
    assert.deepEqual(
      moved.fresh.map((r) => r.name),
      ['lan'],
    );
  } finally {
    await closeAll(before, moved);
  }
});

test('a reload makes anew only the route whose spec changed, and a cluster route whose carrier is new', async () => {
  const before = build(YAML);
  const oneChanged = build(YAML.replace('include: [b.example.com]', 'include: [b.example.org]'), before);
  const carrierChanged = build(YAML.replace('jump.example.com', 'jump2.example.com'), before);
  try {
    assert.deepEqual(
      oneChanged.fresh.map((r) => r.name),
      ['b'],
    );
    assert.ok(oneChanged.routes.get('a') === before.routes.get('a'));
    assert.deepEqual(carrierChanged.fresh.map((r) => r.name).sort(), ['a', 'jump']);
    assert.ok(carrierChanged.routes.get('b') === before.routes.get('b'));
  } finally {
    await closeAll(before, oneChanged, carrierChanged);
  }
});
