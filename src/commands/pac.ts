// `kubectl proxyout pac [ID]`: the proxy auto-config file a managed proxy serves, or — with the
// proxy's own flags instead of an ID — the one such a proxy would serve (routing/pac.ts).
import { Args, Command } from '@oclif/core';
import { generatePac } from '../routing/pac.js';
import { RouteMatcher } from '../routing/table.js';
import { parseListen, routingTableFor } from '../proxy/startup-checks.js';
import { proxyOptionsFrom, proxyFlags, OFF } from '../cli/flags.js';
import type { HostPort } from '../core/address.js';
import { controlRequest, type ControlResponse } from '../managed/control.js';
import { layout, stateDirExists, validateId } from '../state/paths.js';
import { ElsewhereError, inspect } from '../managed/registry.js';
import { controlSocketOf } from '../managed/store.js';
import { withStateLock } from '../state/lock.js';
import { UnknownIdError } from '../managed/stop.js';
import { failOnKnownError } from '../cli/managed-errors.js';
import { StartupError, errorMessage } from '../core/errors.js';

/** A large table's PAC file is a few hundred KiB, made in milliseconds. */
const PAC_TIMEOUT_MS = 5_000;

/**
 * A proxy's flags that do not change its PAC file: still accepted (a proxy's whole command line
 * can be handed to `pac`), but left out of `pac --help`.
 */
const NOT_IN_PAC = new Set([
  'forward',
  'extra-ca',
  'log-level',
  'connect-timeout',
  'handshake-timeout',
  'shutdown-grace',
  'keepalive',
  'keepalive-timeout',
  'max-streams',
  'proxy-auth-file',
  'proxy-auth',
  'allow-host-network-pods',
  'transport',
]);

function pacFlags(): ReturnType<typeof proxyFlags> {
  const flags = proxyFlags('Unused here.', 'Unused here.');
  return Object.fromEntries(Object.entries(flags).map(([name, flag]) => [name, NOT_IN_PAC.has(name) ? { ...flag, hidden: true } : flag])) as typeof flags;
}

export default class Pac extends Command {
  static override summary = 'Print the proxy auto-config (PAC) file of a managed proxy, or of the proxy these flags would start.';
  static override description = [
    'Cluster names, route suffixes and CIDRs go to the proxy (SOCKS5, then the HTTP listener);',
    'everything else DIRECT, decided without DNS look-ups. A running proxy with an HTTP listener',
    'also serves it at http://127.0.0.1:PORT/proxy.pac (for --proxy-pac-url or the system settings);',
    'pac ID prints those same bytes. From flags, svc.ns names (which need the namespaces a running',
    'proxy knows) go DIRECT: use svc.ns.svc.',
  ].join(' ');
  static override usage = ['pac ID', 'pac [--config FILE] [--context C…] [--listen-socks ADDR] [--listen-http ADDR] [--direct]'];
  static override examples = [
    '<%= config.bin %> pac a1b2c3d4 > proxy.pac',
    '<%= config.bin %> pac --context prod --context staging --listen-http 127.0.0.1:3128',
  ];
  static override args = { id: Args.string({ description: 'Connection ID of a managed proxy (see `status`).', required: false, ignoreStdin: true }) };
  static override flags = pacFlags();

  async run(): Promise<void> {
    const { args, flags } = await this.parse(Pac);
    try {
      if (args.id !== undefined) {
        const l = layout();
        const id = validateId(args.id);
        // Under the lock, as every command that inspects (managed/reload.ts says why).
        const found = stateDirExists(l) ? await withStateLock(l, () => inspect(l, id)) : undefined;
        if (!found) throw new UnknownIdError(args.id);
        // As `reload` says it: `status` lists a dead proxy, so "no managed proxy" would be untrue.
        if (found.state === 'dead') throw new StartupError(`proxy ${id} is dead, not running (clean up with: kubectl proxyout disconnect ${id})`);
        if (found.state === 'elsewhere') throw new ElsewhereError(found.entry, 'ask it for its PAC file');
        // The file the proxy itself serves at /proxy.pac, byte for byte: its table in force, its
        // listeners, the namespaces its cache knows (svc.ns names) — asked over its control socket.
        process.stdout.write(await daemonPac(controlSocketOf(l, found.entry), id));
        return;
      }
      const options = proxyOptionsFrom(flags);
      // The listen addresses first, as the proxy reads them: the same one-line error for a bad one.
      const socks = tcpListen(options.listenSocks, '--listen-socks', 'socks');
      const http = tcpListen(options.listenHttp, '--listen-http', 'http');
      const table = routingTableFor(options);
      process.stdout.write(generatePac(new RouteMatcher(table), { socks, http }));
    } catch (err) {
      failOnKnownError(this, err);
    }
  }
}

/** A listen flag as the proxy parses it (proxy/startup-checks.ts); undefined for none or a unix socket, which browsers cannot use. */
function tcpListen(value: string | undefined, flag: string, kind: 'socks' | 'http'): HostPort | undefined {
  if (value === undefined || value === OFF) return undefined;
  const spec = parseListen(value, flag, kind);
  return 'host' in spec ? { host: spec.host, port: spec.port } : undefined;
}

/** The PAC file a managed proxy serves, from its control socket; a one-line error when it has none. */
async function daemonPac(socket: string, id: string): Promise<string> {
  let answer: ControlResponse;
  try {
    answer = await controlRequest(socket, { cmd: 'pac' }, PAC_TIMEOUT_MS);
  } catch (err) {
    throw new StartupError(`proxy ${id} does not answer on its control socket: ${errorMessage(err)}`, { cause: err });
  }
  if (answer.ok && typeof answer.pac === 'string') return answer.pac;
  const error = answer.ok ? 'no PAC file in its answer' : answer.error;
  // A daemon of an older release knows no "pac" request.
  if (/^unknown command/.test(error))
    throw new StartupError(`proxy ${id} runs an older kubectl-proxyout that cannot hand out its PAC file: disconnect and connect it again`);
  throw new StartupError(`proxy ${id}: no PAC file: ${error}`);
}
