// The managed proxy that holds the port a foreground proxy could not listen on, named in its error
// line: after `connect`, the README's `kubectl proxyout` meets exactly that (connect names it too).
import { formatHostPort } from '../core/address.js';
import type { StartupError } from '../core/errors.js';
import { collectStatus } from '../managed/status.js';
import { describeTarget } from '../managed/store.js';
import { layout } from '../state/paths.js';
import { IN_USE_HINT } from '../listeners/server-base.js';

/** The error's line, with the managed proxy listening where it could not, when one does. */
export async function withPortOwner(err: StartupError): Promise<string> {
  const cause = err.cause as (NodeJS.ErrnoException & { address?: string; port?: number }) | undefined;
  if (cause?.code !== 'EADDRINUSE' || typeof cause.address !== 'string' || typeof cause.port !== 'number') return err.message;
  const where = formatHostPort(cause.address, cause.port);
  const proxies = await collectStatus(layout()).catch(() => []);
  const owner = proxies.find(
    (p) => p.state !== 'dead' && p.state !== 'elsewhere' && [p.socks, p.http, ...(p.forwards ?? []).map((f) => f.listen)].includes(where),
  );
  if (!owner) return err.message;
  const line = err.message.endsWith(IN_USE_HINT) ? err.message.slice(0, -IN_USE_HINT.length) : err.message;
  return `${line}: managed proxy ${owner.id} (${describeTarget(owner)}) listens there; use it, stop it with \`kubectl proxyout disconnect ${owner.id}\`, or pick another port`;
}
