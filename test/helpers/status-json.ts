// `status --json` prints a ProxyStatusList whatever its arguments (cli/json-output.ts).
import assert from 'node:assert/strict';

/** The items of a `status --json` output, after checking its apiVersion and kind. */
export function statusItems<T = any>(stdout: string): T[] {
  const list = JSON.parse(stdout) as { apiVersion?: unknown; kind?: unknown; items?: unknown };
  assert.equal(list.apiVersion, 'kubectl-proxyout/v1');
  assert.equal(list.kind, 'ProxyStatusList');
  assert.ok(Array.isArray(list.items), 'items is an array');
  return list.items as T[];
}

/** The one item of `status ID --json`. */
export function statusItem<T = any>(stdout: string): T {
  const items = statusItems<T>(stdout);
  assert.equal(items.length, 1, 'status ID --json lists exactly that proxy');
  return items[0]!;
}
