// Credentials being worked out (an exec plugin running, an OIDC refresh) past a few seconds: an SSO
// plugin waiting for a browser login, a hung plugin (killed only after 5 minutes), an identity
// provider that does not answer. Every new stream waited for them until its connect timeout while
// the route said `ready` and the streams only that their tunnel "did not open in time".
import path from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import { monotonicMs } from '../core/clock.js';
import { tokenSourceName } from './token-source.js';

/** A computation of credentials that has run this long is a route's problem (health.ts). */
export const CREDENTIALS_SLOW_MS = 5_000;

export class CredentialWait {
  private running = 0;
  private since?: { mono: number; wall: number };

  /** `computing` counts as awaited until it settles. */
  during<T>(computing: Promise<T>): Promise<T> {
    if (this.running++ === 0) this.since = { mono: monotonicMs(), wall: Date.now() };
    return computing.finally(() => {
      if (--this.running === 0) this.since = undefined;
    });
  }

  /** The wait, once it has lasted CREDENTIALS_SLOW_MS: what is awaited, and since when (ms since the epoch). */
  problem(kc: KubeConfig): { message: string; since: number; waiting: true } | undefined {
    const s = this.since;
    if (!s || monotonicMs() - s.mono < CREDENTIALS_SLOW_MS) return undefined;
    return { message: `waiting for the credentials of context "${kc.getCurrentContext()}": ${source(kc)} has not answered`, since: s.wall, waiting: true };
  }
}

function source(kc: KubeConfig): string {
  const command = kc.getCurrentUser()?.exec?.command;
  if (command) return `its exec plugin ${path.basename(command)}`;
  return tokenSourceName(kc) ?? 'what provides them';
}
