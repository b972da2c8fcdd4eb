// The connection budget: clients and the upstream files beside them stay under what the open-file
// limit leaves; upstreams no client uses (idle in a pool) are closed before a client is refused.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { ConnectionBudget } from '../../src/listeners/connection-budget.js';
import { createLogger } from '../../src/core/log.js';

/** Idle upstreams as the budget sees them: `count`, and `shed` closing up to n. */
const pool = (count: () => number, closed: (n: number) => void) => ({
  count,
  shed: (n: number) => {
    const shed = Math.min(n, count());
    closed(shed);
    return shed;
  },
});

test('idle pooled upstreams are closed for a client before it would be refused; without them it is refused', () => {
  let idle = 3;
  const budget = new ConnectionBudget(
    createLogger('silent'),
    () => idle,
    pool(
      () => idle,
      (n) => (idle -= n),
    ),
  );
  budget.limit(10, 5, 'test');
  const socket = () => new net.Socket();
  assert.equal(budget.take(socket()), true);
  assert.equal(budget.take(socket()), true); // 2 clients + 3 idle upstreams: the budget is full
  assert.equal(idle, 3);
  for (let i = 0; i < 3; i++) assert.equal(budget.take(socket()), true); // each closes an idle upstream
  assert.equal(idle, 0);
  const refused = socket();
  assert.equal(budget.take(refused), false, 'no idle upstream left: refused');
  assert.equal(refused.destroyed, true);
});

test('too few idle pooled upstreams to let a client in: none is closed for it', () => {
  let idle = 0;
  const inUse = 3;
  const budget = new ConnectionBudget(
    createLogger('silent'),
    () => inUse + idle,
    pool(
      () => idle,
      (n) => (idle -= n),
    ),
  );
  budget.limit(10, 5, 'test');
  assert.equal(budget.take(new net.Socket()), true);
  assert.equal(budget.take(new net.Socket()), true); // 2 clients + 3 streams: full
  idle = 1; // a stream gone idle in a pool since: 2 over, 1 to close
  const refused = new net.Socket();
  assert.equal(budget.take(refused), false, 'closing the idle one would still leave no room');
  assert.equal(idle, 1, 'the idle upstream was closed for a client refused anyway');
});
