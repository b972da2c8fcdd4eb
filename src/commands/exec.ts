// `kubectl proxyout exec [flags] -- CMD ARGS…`: CMD runs with the proxy variables set
// (cli/exec-env.ts) for the managed proxy `connect` would start or report for the same flags (same
// ID: managed/table.ts managedId), or — when none runs — for a temporary in-process proxy on
// 127.0.0.1:0 that lives exactly as long as CMD. CMD's exit status is ours (when it died of a
// signal we die of it too, or exit 128+N: cli/exec-signals.ts dieOfSignal); SIGINT, SIGQUIT,
// SIGTERM and SIGHUP are passed on to it unless the terminal sent them to its group already.
import { spawn } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { constants } from 'node:os';
import { Command, Errors, Flags } from '@oclif/core';
import { proxyAuthFrom, proxyFlags, proxyOptionsFrom } from '../cli/flags.js';
import { formatAddress } from '../listeners/bound-address.js';
import { escapeControls } from '../core/escape.js';
import { httpOnTcp, proxyEnvironment, variablesCanName, withProxyEnvironment, type ProxyEnvironment } from '../cli/exec-env.js';
import { apiServersOf } from '../routes/route.js';
import { failOnKnownError } from '../cli/managed-errors.js';
import { dieOfSignal, relaySignals } from '../cli/exec-signals.js';
import { endOnSignalWhile } from '../cli/signals.js';
import { hasControllingTerminal } from '../core/terminal.js';
import type { LogLevel } from '../core/log.js';
import { execLog, type ExecLog } from '../cli/exec-log.js';
import { logProcessWarnings } from '../core/process-warnings.js';
import { routingTableFor, startProxy } from '../proxy/proxy.js';
import type { RunningProxy } from '../proxy/running.js';
import { layout, stateDirExists, validateId } from '../state/paths.js';
import { withStateLock } from '../state/lock.js';
import { generateCredentials, readClientAuthFile } from '../state/proxy-auth.js';
import { describeTarget, type CredentialIdentity } from '../managed/store.js';
import { inspect, whereItRuns, type Inspected } from '../managed/registry.js';
import { askManaged, notAnswering } from '../managed/status.js';
import { credentialIdentity, managedId, resolveManagedTable } from '../managed/table.js';
import { whose } from '../managed/settings.js';
import { findExecutable } from '../doctor/exec-path.js';

/** The proxy flags that choose a cluster and tune a temporary proxy; its listeners are always 127.0.0.1:0. */
function execFlags() {
  const {
    'listen-socks': _socks,
    'listen-http': _http,
    forward: _forward,
    ...rest
  } = proxyFlags(
    'Log level of a temporary proxy: every line goes to `logs exec`; warnings and errors also to stderr.',
    'Time open connections of a temporary proxy get to finish after CMD exits.',
  );
  return rest;
}

export default class Exec extends Command {
  static override summary = 'Run a command with the proxy variables set (ALL_PROXY, HTTP(S)_PROXY, NO_PROXY).';
  static override description = [
    'Uses the managed proxy that `connect` with the same flags would report (its generated password',
    'goes into the URLs) when it has an HTTP listener on TCP (with --id, any it can name); otherwise',
    'starts a temporary proxy on 127.0.0.1 (free ports, a generated password, hosts outside the',
    'clusters passed through unless --no-direct) that lives exactly as long as CMD. Says on stderr',
    'which one it used.',
    "Exits with CMD's status (128+N when CMD died of signal N). SIGINT, SIGQUIT, SIGTERM and SIGHUP",
    'are passed on to CMD, except those a terminal sent to the whole job (Ctrl-C, Ctrl-\\, a hangup):',
    'CMD got those itself.',
  ].join(' ');
  static override usage = 'exec [flags] -- CMD [ARGS…]';
  static override strict = false;
  static override examples = [
    '<%= config.bin %> exec -- curl http://web.shop:8080/',
    '<%= config.bin %> exec --context staging -n shop -- ./integration-tests.sh',
  ];

  static override flags = {
    ...execFlags(),
    id: Flags.string({ summary: 'Use the managed proxy with this connection ID instead of the derived one.', helpValue: '<name>' }),
  };

  async run(): Promise<void> {
    const { flags, argv } = await this.parse(Exec);
    // After the first `--`, the command exactly as given: oclif's parsed argv drops every `--`,
    // also those CMD needs (`exec -- kubectl exec pod -- ls`, `npm test -- --grep x`).
    const separator = this.argv.indexOf('--');
    const command = separator >= 0 ? this.argv.slice(separator + 1) : (argv as string[]);
    if (command.length === 0) throw new Errors.CLIError('no command to run: kubectl proxyout exec [flags] -- CMD [ARGS…]', { exit: 2 });
    // A CMD that cannot run fails as a shell's does, before any proxy starts (a temporary one was
    // started, then stopped, for a typo).
    const unrunnable = cannotRun(command[0]!);
    if (unrunnable) {
      process.stderr.write(`kubectl-proxyout: ${escapeControls(command[0]!)}: ${unrunnable.message}\n`);
      this.exit(unrunnable.code);
    }
    const options = proxyOptionsFrom({ ...flags, 'listen-socks': '127.0.0.1:0', 'listen-http': '127.0.0.1:0', forward: undefined });
    const given = proxyAuthFrom(flags);

    const lookup = await this.findManaged(flags.id, options).catch((err: unknown) => failOnKnownError(this, err));
    const found = lookup?.inspected.state === 'running' ? lookup.inspected.entry : undefined;
    // One that serves port mappings only (or HTTP on a unix socket) gives CMD nothing to use; one
    // without HTTP on TCP (connect's default) gives Go, Python and Node clients nothing they read,
    // so it is used only when named (--id). One with other credentials is not CMD's to use.
    const managed = found && !lookup?.otherCredentials && (flags.id !== undefined ? variablesCanName(found) : httpOnTcp(found)) ? found : undefined;
    let env: ProxyEnvironment;
    let temporary: RunningProxy | undefined;
    let log: ExecLog | undefined;
    if (managed) {
      const generated = managed.proxyAuthGenerated ? readClientAuthFile(layout(), managed.id) : undefined;
      const auth = generated ?? (given && given.username === managed.proxyAuthUser ? given : undefined);
      if (managed.proxyAuthUser !== undefined && !auth) {
        this.warn(
          `proxy ${managed.id} requires the password of user ${managed.proxyAuthUser}, which exec does not know: give it with --proxy-auth-file or $KUBECTL_PROXYOUT_PROXY_AUTH`,
        );
      }
      const { apiServers, answering } = await askManaged(layout(), managed);
      env = proxyEnvironment({ socks: managed.socks, http: managed.http }, auth, apiServers, managed.options.clusterDomain);
      const where = [managed.socks && `socks ${formatAddress(managed.socks)}`, managed.http && `http ${formatAddress(managed.http)}`]
        .filter(Boolean)
        .join(', ');
      process.stderr.write(`kubectl-proxyout: using managed proxy ${managed.id} (${describeTarget(managed)}; ${where})\n`);
      if (!answering) process.stderr.write(`kubectl-proxyout: ${notAnswering(managed.id)}\n`);
      // Whole lines, as the one above (oclif's warn() wraps them).
      if (!httpOnTcp(managed))
        process.stderr.write(
          `kubectl-proxyout: proxy ${managed.id} has no HTTP listener: Go, Python and Node clients in CMD cannot use it (connect --listen-http adds one)\n`,
        );
      if (managed.options.table?.directRoute === undefined)
        process.stderr.write(
          `kubectl-proxyout: proxy ${managed.id} passes no other hosts through: CMD reaches only cluster names through it (connect --direct passes the rest)\n`,
        );
    } else {
      // Any local user can reach a loopback port while CMD runs: a password keeps them out.
      const proxyAuth = given ?? generateCredentials();
      log = execLog(layout(), options.logLevel as LogLevel);
      if ('reason' in log.kept) process.stderr.write(`kubectl-proxyout: exec's log is not kept: ${escapeControls(log.kept.reason)}\n`);
      logProcessWarnings(log.log);
      // Its listeners are loopback port 0, as --help says: not the config file's port mappings,
      // which a proxy already running (service-install) may hold.
      const table = (() => {
        try {
          // CMD sends every request here, and could dial what is not a cluster's itself: passed through.
          return { ...routingTableFor({ ...options, directByDefault: true }), forwards: [] };
        } catch (err) {
          return failOnKnownError(this, err);
        }
      })();
      temporary = await endOnSignalWhile(startProxy({ ...options, table, proxyAuth }, log.log)).catch((err: unknown) => failOnKnownError(this, err));
      env = proxyEnvironment({ socks: temporary.socks, http: temporary.http }, proxyAuth, apiServersOf(temporary.routes()), table.clusterDomain);
      // With --id, the proxy asked for by name: naming the context instead hid a mistyped ID.
      const why = lookup?.otherCredentials
        ? `managed proxy ${lookup.inspected.entry.id} serves ${describeTarget(lookup.inspected.entry)} with other credentials (${whose(lookup.otherCredentials)})`
        : found
          ? variablesCanName(found)
            ? `managed proxy ${found.id} has no HTTP listener, which Go, Python and Node clients need (connect --listen-http adds one)`
            : `managed proxy ${found.id} has no SOCKS listener or HTTP one on TCP`
          : flags.id !== undefined
            ? notRunning(flags.id, lookup?.inspected)
            : `no managed proxy for ${temporary.context ? `context ${escapeControls(temporary.context)}` : 'this routing table'}`;
      process.stderr.write(
        `kubectl-proxyout: ${why}; started a temporary one for this command ` +
          `(${describeTarget(temporary)}; socks ${formatAddress(temporary.socks!)}, http ${formatAddress(temporary.http!)}; ` +
          `log: ${'file' in log.kept ? 'kubectl proxyout logs exec' : 'warnings on stderr only'})\n`,
      );
    }

    const hadTerminal = hasControllingTerminal();
    const { code, signal } = await runCommand(command, env);
    if (temporary) {
      await temporary.stop(options.shutdownGraceMs);
      await log!.flush();
    }
    // Dying of CMD's signal tells a shell what CMD's death would have (a loop stops on Ctrl-C).
    if (signal) dieOfSignal(signal);
    // CMD outlived its terminal's hangup (ssh exits 255 on it): a normal exit would write to the gone
    // terminal, and Node 20 aborts restoring its modes. Die of the hangup, as without CMD.
    if (hadTerminal && !hasControllingTerminal()) dieOfSignal('SIGHUP');
    this.exit(code);
  }

  /**
   * The managed proxy for these flags (or --id), as it is (running or not); `otherCredentials`: the
   * derived one runs as another kubeconfig identity (connect refuses it too: its rights are not the
   * ones asked for).
   */
  private async findManaged(
    id: string | undefined,
    options: ReturnType<typeof proxyOptionsFrom>,
  ): Promise<{ inspected: Inspected; otherCredentials?: CredentialIdentity } | undefined> {
    const l = layout();
    if (!stateDirExists(l)) return undefined;
    const managed =
      id === undefined
        ? resolveManagedTable({
            kubeconfig: options.kubeconfig,
            contexts: options.contexts ?? [],
            config: options.config,
            direct: options.direct,
            clusterDomain: options.clusterDomain,
            extraCA: options.extraCA,
            namespace: options.namespace,
          })
        : undefined;
    const wanted = managed ? managedId(managed) : validateId(id!);
    const found = await withStateLock(l, () => inspect(l, wanted));
    if (!found) return undefined;
    if (found.state !== 'running') return { inspected: found };
    const was = found.entry.credentials;
    const now = managed?.primary && credentialIdentity(managed.primary, options.kubeconfig);
    return { inspected: found, ...(was && now && was.key !== now.key ? { otherCredentials: was } : {}) };
  }
}

/** Why `--id ID` is not used: it said "no managed proxy ID is running" of one `status` lists as starting. */
function notRunning(id: string, found: Inspected | undefined): string {
  if (!found) return `no managed proxy ${id} is running`;
  if (found.state === 'elsewhere') return `managed proxy ${id} runs elsewhere (${whereItRuns(found.entry)})`;
  if (found.state === 'dead') return `managed proxy ${id} is dead (clean up with: kubectl proxyout disconnect ${id})`;
  return `managed proxy ${id} is ${found.state === 'starting' ? 'still starting' : 'stopping'}, not running`;
}

/** Why CMD cannot be run, with a shell's exit status (127: not found, 126: not executable); undefined when it can. */
export function cannotRun(cmd: string): { code: number; message: string } | undefined {
  if (findExecutable(cmd)) return undefined;
  const hasPath = cmd.includes('/') || (process.platform === 'win32' && cmd.includes('\\'));
  // An empty PATH entry is the working directory to execvp: left to the spawn to find.
  if (!hasPath && process.platform !== 'win32' && (process.env.PATH ?? '').split(':').includes('')) return undefined;
  if (!hasPath) return { code: 127, message: 'command not found' };
  return existsSync(cmd)
    ? { code: 126, message: statSync(cmd).isDirectory() ? 'Is a directory' : 'Permission denied' }
    : { code: 127, message: 'No such file or directory' };
}

/** Runs CMD with the variables added; resolves with its exit status (128+N for signal N) and the signal it died of. */
function runCommand(command: string[], env: ProxyEnvironment): Promise<{ code: number; signal?: NodeJS.Signals }> {
  return new Promise((resolve) => {
    const child = spawn(command[0]!, command.slice(1), { stdio: 'inherit', env: withProxyEnvironment(process.env, env) });
    // A signal the terminal sent to CMD's group reaches CMD once (cli/exec-signals.ts).
    const stopRelaying = relaySignals(child);
    const done = (code: number, signal?: NodeJS.Signals) => {
      stopRelaying();
      resolve({ code, ...(signal ? { signal } : {}) });
    };
    child.once('error', (err: NodeJS.ErrnoException) => {
      // As a shell: 127 for a command not found, 126 for one that cannot be run.
      process.stderr.write(`kubectl-proxyout: cannot run ${command[0]}: ${err.message}\n`);
      done(err.code === 'ENOENT' ? 127 : 126);
    });
    child.once('exit', (code, signal) => (signal ? done(128 + (constants.signals[signal] ?? 0), signal) : done(code ?? 1)));
  });
}
