// cli/status-table.ts: a "since" of another day shows its date in the zone of its time.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';

test('a route state since another day: date and time both local (UTC+14 and UTC-8)', () => {
  const module = new URL('../../src/cli/status-table.js', import.meta.url).href;
  const script = `const { routeLine } = await import(${JSON.stringify(module)});
process.stdout.write(routeLine({ name: 'prod', kind: 'cluster', state: 'error', since: '2020-01-01T20:30:00.000Z' }));`;
  const at = (zone: string): string => {
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { env: { ...process.env, TZ: zone }, encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    return r.stdout;
  };
  assert.match(at('Pacific/Kiritimati'), / since 2020-01-02 10:30:00/);
  assert.match(at('America/Los_Angeles'), / since 2020-01-01 12:30:00/);
  assert.match(at('UTC'), / since 2020-01-01 20:30:00/);
});
