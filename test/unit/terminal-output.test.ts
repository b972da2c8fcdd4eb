// What the commands print (status, connect and serve lines, --json) quotes names a kubeconfig
// chose and reasons an API server wrote: their control characters reach the terminal escaped,
// and a newline in one cannot start a line of its own.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { statusTable } from '../../src/cli/status-table.js';
import { readyLines } from '../../src/cli/ready.js';
import { printJson } from '../../src/cli/json-output.js';
import { describeTarget } from '../../src/managed/store.js';
import { describeRoute, type RoutingTable } from '../../src/routing/table-spec.js';
import type { RouteSpec } from '../../src/routes/spec.js';
import { proxyStatusFixture } from '../helpers/proxy-status.js';

/** An OSC window title, CSI colours, the 8-bit CSI, a carriage return and a newline. */
const HOSTILE = '\x1b]0;PWNED\x07\x1b[31mRED\x9b2J\rX\nFORGED';
/** Any C0 control (the newline too: these are single lines), DEL, or C1. */
const RAW_CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

function assertClean(lines: readonly string[]): void {
  for (const line of lines) assert.doesNotMatch(line, RAW_CONTROL, JSON.stringify(line));
  assert.ok(!lines.some((l) => l.startsWith('FORGED')), 'no line of its own');
}

test('status: a hostile context, route reason and pod name are escaped, and the columns stay aligned', () => {
  const row = proxyStatusFixture({
    context: `ctx${HOSTILE}`,
    routes: [{ name: 'prod', kind: 'cluster', state: 'error', reason: `forbidden: ${HOSTILE}`, serves: `prod (cluster ctx${HOSTILE})` }],
    transports: [{ pod: `pod${HOSTILE}`, transport: 'spdy', tunnels: 1, streams: 0 }],
  });
  const lines = statusTable([row, proxyStatusFixture({ id: 'b2' })]);
  assertClean(lines);
  assert.match(lines[1]!, /ctx\\x1b\]0;PWNED\\x07\\x1b\[31mRED\\x9b2J\\x0dX\\x0aFORGED/);
  // The NAMESPACE column starts at the same place in the header and in every row.
  const at = lines[0]!.indexOf('NAMESPACE');
  for (const line of lines.slice(1, 3)) assert.match(line.slice(at), /^(shop|-)\s/, line);
  assert.ok(lines.some((l) => /forbidden: \\x1b\]0;PWNED/.test(l)));
  assert.ok(lines.some((l) => /pod\\x1b\]0;PWNED/.test(l)));
});

test('connect and serve lines: a hostile context name is escaped', () => {
  const lines = readyLines({ context: `ctx${HOSTILE}`, namespace: 'default', socks: { address: '127.0.0.1', family: 'IPv4', port: 1080 } });
  assertClean(lines);
  assert.match(lines[0]!, /\(context ctx\\x1b\]0;PWNED\\x07/);
  assertClean([describeTarget({ context: `ctx${HOSTILE}`, namespace: 'default' })]);
  const route = { name: 'prod', kind: 'cluster', context: `ctx${HOSTILE}`, include: [], exclude: [], cidrs: [] } as unknown as RouteSpec;
  const table: RoutingTable = { routes: [route], defaultRoute: 'prod', clusterDomain: 'cluster.local' };
  assertClean([describeRoute(table, route)]);
});

test('--json: DEL and C1, which JSON leaves raw, are escaped; the values are unchanged', () => {
  const value = { context: `ctx${HOSTILE}\x7f\x85` };
  const text = printJson(value);
  assert.doesNotMatch(text, /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/);
  assert.deepEqual(JSON.parse(text), value);
});
