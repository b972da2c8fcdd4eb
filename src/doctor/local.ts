// This machine: the listen addresses are free, the state directory is private, and every managed
// proxy answers on its control socket with its caches synced.
import { accessSync, constants, existsSync, lstatSync, readdirSync } from 'node:fs';
import { replaceableAt, type ReplaceableAt } from '../core/replaceable-path.js';
import { bindRefusal } from '../listeners/loopbacks.js';
import path from 'node:path';
import { errorMessage } from '../core/errors.js';
import { parseListenAddress, unixListenPath } from '../core/address.js';
import { collectStatus, otherVersion, type ProxyStatus } from '../managed/status.js';
import { layout, stateDirRefusal, type StateLayout } from '../state/paths.js';
import type { Check } from './report.js';
import { isProxyout, portHolders } from './port-holder.js';
import { shellQuote } from '../core/escape.js';
import type { RouteStatus } from '../routes/route.js';

const scope = 'local';

/** Each "host:port" can be bound now; one held by a kubectl-proxyout (managed or foreground) is a warning, not a failure. */
export async function checkListen(addresses: Array<{ flag: string; address: string }>, running: readonly ProxyStatus[]): Promise<Check[]> {
  const checks: Check[] = [];
  for (const { flag, address } of addresses) {
    if (address.trim() === 'off') continue;
    if (unixListenPath(address) !== undefined) {
      // A unix socket path is checked when the proxy makes it (the directory's owner and mode).
      checks.push({ scope, name: 'listen', status: 'ok', detail: `${flag} ${address}: a unix socket` });
      continue;
    }
    let parsed: { host: string; port: number };
    try {
      // As the proxy reads it: ":3128" is 127.0.0.1:3128.
      parsed = parseListenAddress(address);
    } catch (err) {
      checks.push({ scope, name: 'listen', status: 'fail', detail: `${flag} ${address}: ${errorMessage(err)}`, fix: `pass ${flag} 127.0.0.1:PORT` });
      continue;
    }
    const err = await tryListenAll(parsed.host, parsed.port);
    if (!err) {
      checks.push({ scope, name: 'listen', status: 'ok', detail: `${flag} ${address} is free` });
      continue;
    }
    const exact = running.find((p) => p.socks === address || p.http === address);
    // Another process may hold the same port number on another address: a kubectl-proxyout among
    // the holders is the likelier one in the way.
    const holders = exact ? [] : portHolders(parsed.port);
    const holder = holders.find((h) => running.some((p) => p.pid === h.pid)) ?? holders.find(isProxyout) ?? holders[0];
    // Asked in another spelling ([0:0::1], [::] over its [::1]): the holder's pid names the managed proxy.
    const owner = exact ?? (holder ? running.find((p) => p.pid === holder.pid) : undefined);
    if (owner) {
      checks.push({
        scope,
        name: 'listen',
        status: 'warn',
        detail: `${flag} ${address} is used by managed proxy ${owner.id}`,
        fix: `use that proxy, or \`kubectl proxyout disconnect ${owner.id}\`, or pick another port`,
      });
    } else if (holder && isProxyout(holder)) {
      // Your own proxy in the foreground: information, not a failure.
      checks.push({
        scope,
        name: 'listen',
        status: 'warn',
        detail: `${flag} ${address} is used by a kubectl-proxyout in the foreground (pid ${holder.pid})`,
        fix: `use that proxy, or stop it (kill ${holder.pid}), or pick another port`,
      });
    } else {
      const by = holder ? ` by pid ${holder.pid} (${holder.program})` : '';
      checks.push({
        scope,
        name: 'listen',
        status: 'fail',
        detail: `${flag} ${address}: ${err}${by}`,
        fix: `stop what listens there${holder ? '' : ` (\`lsof -iTCP:${parsed.port} -sTCP:LISTEN\` or \`ss -ltnp 'sport = :${parsed.port}'\`)`} or pass ${flag} with another port (port 0 picks a free one)`,
      });
    }
  }
  return checks;
}

/** As the proxy binds it (listeners/loopbacks.ts): why it could not, naming which of localhost's two addresses refused. */
async function tryListenAll(host: string, port: number): Promise<string | undefined> {
  const refused = await bindRefusal(host, port);
  if (!refused) return undefined;
  const why = refused.err.code === 'EADDRINUSE' ? 'address in use' : errorMessage(refused.err);
  return refused.at ? `${refused.at}: ${why}` : why;
}

/**
 * Why the first connect could not create `dir`, or undefined: the nearest directory above it that
 * exists is not writable (a read-only file system: a container's, a CI job's home).
 */
function whyNotCreatable(dir: string): string | undefined {
  let above = path.dirname(dir);
  while (path.dirname(above) !== above && !existsSync(above)) above = path.dirname(above);
  try {
    accessSync(above, constants.W_OK);
    return undefined;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === 'EROFS' ? `${above} is on a read-only file system` : `${above} is not writable (${code ?? errorMessage(err)})`;
  }
}

/**
 * The state directory: what every command refuses (state/paths.ts stateDirRefusal, the one rule)
 * fails; what it accepts but others can read — a 0755 directory, a 0644 file — is a warning.
 */
export function checkStateDir(l: StateLayout = layout(), uid: number | undefined = process.getuid?.()): Check[] {
  let root;
  try {
    root = lstatSync(l.root);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
      const cannot = whyNotCreatable(l.root);
      if (cannot)
        return [
          {
            scope,
            name: 'state-dir',
            status: 'warn',
            detail: `${l.root} does not exist and cannot be created: ${cannot}`,
            fix: 'set KUBECTL_PROXYOUT_STATE_DIR to a directory you can write: connect needs one (the foreground proxy and exec do not)',
          },
        ];
      return [{ scope, name: 'state-dir', status: 'ok', detail: `${l.root} does not exist yet (created on the first connect)` }];
    }
    return [
      {
        scope,
        name: 'state-dir',
        status: 'fail',
        detail: `${l.root}: ${errorMessage(err)}`,
        fix: 'make the directory readable by you, or set KUBECTL_PROXYOUT_STATE_DIR',
      },
    ];
  }
  if (uid === undefined) return [{ scope, name: 'state-dir', status: 'ok', detail: `${l.root} (owner and mode checks are for Unix)` }];
  const refused = [l.root, l.proxiesDir, l.logsDir].flatMap((dir) => {
    try {
      return [stateDirRefusal(dir, uid)].filter((r): r is string => r !== undefined);
    } catch {
      return []; // proxies/ or logs/ not made yet
    }
  });
  if (refused.length > 0) {
    return [
      {
        scope,
        name: 'state-dir',
        status: 'fail',
        detail: refused.join('; '),
        fix: `every command refuses it: chown and chmod 700 it, or set KUBECTL_PROXYOUT_STATE_DIR to a directory of your own`,
      },
    ];
  }
  const readable: string[] = [];
  const fixes: string[] = [];
  const check = (file: string, dir: boolean) => {
    let st;
    try {
      st = lstatSync(file);
    } catch {
      return;
    }
    if (st.isSymbolicLink() || st.uid !== uid) {
      readable.push(`${file} is ${st.isSymbolicLink() ? 'a symbolic link' : `owned by uid ${st.uid}`}`);
      fixes.push(`remove ${file}`);
    } else if ((st.mode & 0o077) !== 0) {
      readable.push(`${file} has mode ${(st.mode & 0o777).toString(8)}`);
      fixes.push(`chmod ${dir ? '700' : '600'} ${file}`);
    }
  };
  check(l.root, root.isDirectory());
  for (const dir of [l.proxiesDir, l.logsDir]) {
    check(dir, true);
    for (const name of safeList(dir)) {
      const file = path.join(dir, name);
      const isDir = safeIsDir(file);
      check(file, isDir);
      if (isDir) for (const inner of safeList(file)) if (!inner.endsWith('.sock')) check(path.join(file, inner), false);
    }
  }
  const above = safeReplaceableAt(l.root, uid);
  if (readable.length === 0 && !above)
    return [{ scope, name: 'state-dir', status: 'ok', detail: `${l.root}: owned by you, private (0700 directories, 0600 files)` }];
  const more = readable.length > 3 ? ` (+${readable.length - 3} more)` : '';
  const details = [
    ...(readable.length ? [`others may read what it holds: ${readable.slice(0, 3).join('; ')}${more}`] : []),
    ...(above ? [`another user could replace it through a directory above it: ${aboveWhy(above)}`] : []),
  ];
  const aboveFix = above
    ? [
        `${above.owner !== undefined ? `chown ${above.dir}` : `chmod go-w ${above.dir}`}, or set KUBECTL_PROXYOUT_STATE_DIR under directories only you or root can write`,
      ]
    : [];
  return [{ scope, name: 'state-dir', status: 'warn', detail: `accepted, but ${details.join('; and ')}`, fix: [...fixes.slice(0, 3), ...aboveFix].join('; ') }];
}

function safeList(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

function safeIsDir(file: string): boolean {
  try {
    return lstatSync(file).isDirectory();
  } catch {
    return false;
  }
}

/** Every managed proxy: answering, caches synced; dead ones are listed with how to clear them. */
export function checkDaemons(proxies: readonly ProxyStatus[], currentVersion?: string): Check[] {
  if (proxies.length === 0) return [{ scope, name: 'daemon', status: 'ok', detail: 'no managed proxies' }];
  return proxies.map((p): Check => {
    const name = 'daemon';
    const what = `${p.id} (${p.context ? `context ${p.context}` : 'no cluster'}, pid ${p.pid ?? '-'})`;
    if (p.state === 'dead')
      return {
        scope,
        name,
        status: 'warn',
        detail: `${what} is dead${p.error ? `: ${p.error}` : ''}`,
        fix: `see \`kubectl proxyout logs ${p.id}\`; \`kubectl proxyout disconnect ${p.id}\` clears it`,
      };
    if (p.state === 'elsewhere')
      return {
        scope,
        name,
        status: 'skip',
        detail: `${what} runs elsewhere (recorded on host ${p.elsewhere}): not checked from here`,
        fix: `run \`kubectl proxyout doctor\` there; \`kubectl proxyout disconnect ${p.id} --forget\` drops it here`,
      };
    if (p.state === 'running' && p.answering === false) {
      return {
        scope,
        name,
        status: 'fail',
        detail: `${what} does not answer on its control socket`,
        fix: `\`kubectl proxyout disconnect ${p.id}\`, then connect again; see \`kubectl proxyout logs ${p.id}\``,
      };
    }
    // A route that is not serving (degraded, failing) is named with why and since when.
    const troubled = (p.routes ?? []).filter((r) => r.state === 'degraded' || r.state === 'error');
    if (p.state === 'running' && troubled.length > 0) {
      const lines = troubled.map((r) => `route ${r.name} ${r.state}${r.since ? ` since ${r.since}` : ''}: ${r.reason ?? 'unknown'}`);
      return {
        scope,
        name,
        status: 'warn',
        detail: `${what}: ${lines.join('; ')}`,
        fix: `${readyzChecks(troubled)}see \`kubectl proxyout logs ${p.id}\``,
      };
    }
    const upgraded = currentVersion === undefined ? undefined : otherVersion(p, currentVersion);
    if (upgraded) return { scope, name, status: 'warn', detail: `${what} was ${upgraded.started}`, fix: upgraded.fix };
    const cache = p.cache?.state ?? 'unknown';
    if (p.state === 'running' && cache !== 'synced')
      return {
        scope,
        name,
        status: 'warn',
        detail: `${what} is running, caches ${cache}`,
        fix: `see \`kubectl proxyout logs ${p.id}\` (the API server or RBAC)`,
      };
    // A daemon that did not say (starting, stopping) has no count: none is made up.
    const streams = p.openStreams === null ? '' : `, ${p.openStreams} open streams`;
    return { scope, name, status: 'ok', detail: `${what} is ${p.state}, caches ${cache}${streams}` };
  });
}

export async function runningProxies(l: StateLayout = layout()): Promise<ProxyStatus[]> {
  return collectStatus(l);
}

/**
 * "check that the API server answers (`kubectl --kubeconfig F --context C get --raw /readyz`); "
 * for each troubled cluster route: its kubeconfig is the daemon's (a context name alone would be
 * looked up in the user's default kubeconfig, which may not have it).
 */
function readyzChecks(routes: readonly RouteStatus[]): string {
  const lines = routes.flatMap((r) => {
    const { context, kubeconfig } = r.details ?? {};
    if (r.kind !== 'cluster' || typeof context !== 'string') return [];
    const file = typeof kubeconfig === 'string' ? `--kubeconfig ${shellQuote(kubeconfig)} ` : '';
    return [`\`kubectl ${file}--context ${shellQuote(context)} get --raw /readyz\``];
  });
  if (lines.length === 0) return '';
  return `check that the API server answers (${[...new Set(lines)].join(', ')}); `;
}

/** Who could swap the state directory for theirs (core/replaceable-path.ts); doctor warns, commands accept it. */
function safeReplaceableAt(dir: string, uid: number): ReplaceableAt | undefined {
  try {
    return replaceableAt(dir, uid);
  } catch {
    return undefined; // a directory above that cannot be read: the state directory's own checks say so
  }
}

function aboveWhy(at: ReplaceableAt): string {
  return at.owner !== undefined
    ? `${at.dir} is owned by uid ${at.owner}`
    : `${at.dir} is writable by group or others (mode ${at.mode!.toString(8).padStart(3, '0')}) and not sticky`;
}
