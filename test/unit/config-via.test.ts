// `via`: a cluster route whose API connections ride another route (an SSH chain).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig } from '../../src/config/validate.js';
import { tableFrom } from '../../src/config/load.js';

const flags = { contexts: [], clusterDomain: 'cluster.local' };
const table = (yaml: string) => tableFrom(parseConfig(yaml, 'c.yaml', 'cluster.local'), flags);

test('via names the ssh route that carries a cluster route; it is kept in the table', () => {
  const t = table(
    'routes:\n  - name: jump\n    kind: ssh\n    ssh: { host: bastion }\n    include: [corp.example]\n  - name: prod\n    kind: cluster\n    via: Jump\n',
  );
  const prod = t.routes.find((r) => r.name === 'prod');
  assert.equal(prod?.kind === 'cluster' && prod.via, 'jump', 'lowercased, as route names are');
});

test('via to no route, or to a route that cannot carry a connection, is an error naming the line', () => {
  assert.throws(
    () => table('routes:\n  - name: prod\n    kind: cluster\n    via: nowhere\n'),
    /c\.yaml:4: route prod: via "nowhere" names no route of the table/,
  );
  assert.throws(
    () => table('routes:\n  - name: out\n    kind: direct\n    include: [x.example]\n  - name: prod\n    kind: cluster\n    via: out\n'),
    /c\.yaml:7: route prod: via "out" is a direct route; only ssh routes can carry a cluster's API connection/,
  );
  assert.throws(() => table('routes:\n  - name: prod\n    kind: cluster\n    via: [a]\n'), /via/);
});
