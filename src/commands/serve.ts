// `kubectl proxyout [flags]`: the foreground proxy. Hidden because users never type "serve";
// src/cli/argv.ts routes bare and flag-first invocations here.
import { Command, Flags } from '@oclif/core';
import { StartupError, errorMessage } from '../core/errors.js';
import { withPortOwner } from '../cli/port-owner.js';
import { createLogger } from '../core/log.js';
import { logProcessWarnings } from '../core/process-warnings.js';
import { startGcGuard } from '../core/gc-guard.js';
import { LOG_FORMATS, stderrDestination, type LogFormat } from '../core/log-format.js';
import { startProxy } from '../proxy/proxy.js';
import type { RunningProxy } from '../proxy/running.js';
import { managedHub } from '../managed/ui.js';
import { layout } from '../state/paths.js';
import { proxyFlags, proxyOptionsFrom } from '../cli/flags.js';
import { readyLines } from '../cli/ready.js';
import { apiServersOf } from '../routes/route.js';
import { endOnSignalWhile, firstShutdownSignal } from '../cli/signals.js';
import { hasControllingTerminal } from '../core/terminal.js';
import { dieOfSignal } from '../cli/exec-signals.js';

export default class Serve extends Command {
  static override hidden = true;
  static override summary = 'Run a local SOCKS5/HTTP proxy into a Kubernetes cluster, in the foreground.';
  static override description = [
    "Clients reach Services and Pods by their cluster DNS names through the API server's pod",
    'port-forward, as `kubectl port-forward` does. Stop with Ctrl-C: open connections get',
    '--shutdown-grace to finish; a second Ctrl-C stops at once.',
  ].join(' ');
  static override usage = '[flags]';
  static override examples = [
    '<%= config.bin %>',
    '<%= config.bin %> --context staging -n shop --listen-http 127.0.0.1:3128',
    '<%= config.bin %> --listen-socks 127.0.0.1:0 --log-level debug',
  ];

  static override flags = {
    ...proxyFlags('Log level (on stderr).', 'Time open connections get to finish on Ctrl-C/SIGTERM.'),
    'log-format': Flags.option({
      options: LOG_FORMATS,
      default: 'auto' as const,
      helpValue: '<format>',
      summary: 'Log shape on stderr: pretty (one coloured line per event), json (JSON lines), or auto (pretty in a terminal, else json).',
    })(),
  };

  async run(): Promise<void> {
    const { flags } = await this.parse(Serve);
    const options = proxyOptionsFrom(flags);
    const log = createLogger(options.logLevel, stderrDestination(flags['log-format'] as LogFormat));
    logProcessWarnings(log);
    // Bulk transfers can make V8 mark the whole heap every few dozen ms (core/gc-guard.ts).
    const gcGuard = startGcGuard(log);

    // SIGHUP re-reads the routing table (config file, kubeconfig); a bad one changes nothing.
    // Handled from before the start, which can wait many seconds on a slow cluster: its default
    // action would end the proxy. One that comes meanwhile reloads as soon as it has started.
    let running: RunningProxy | undefined;
    let reloadWhenStarted = false;
    const reload = (proxy: RunningProxy) => {
      log.info('SIGHUP: reloading the routing table');
      proxy.reload().catch((err: unknown) => log.error({ error: errorMessage(err) }, 'reload failed; the routing table is unchanged'));
    };
    // Started without a controlling terminal (setsid, a service), though its output may go to
    // one, no terminal can hang up on it: every SIGHUP is a `kill -HUP`, a reload.
    const onTerminal = (process.stdin.isTTY === true || process.stderr.isTTY === true) && hasControllingTerminal();
    let hungUp = false;
    process.on('SIGHUP', () => {
      // The terminal it runs in was closed: a hangup, as for any program in it — stop.
      if (onTerminal && !hasControllingTerminal()) {
        hungUp = true;
        // Still starting: nothing to drain. The SIGTERM would end it through Node's exit, which aborts.
        if (!running) return dieOfSignal('SIGHUP');
        return void process.kill(process.pid, 'SIGTERM');
      }
      if (running) return reload(running);
      if (!reloadWhenStarted) log.info('SIGHUP while starting: the routing table is read again once the proxy has started');
      reloadWhenStarted = true;
    });
    // Its page shows the user's managed proxies too.
    running = await endOnSignalWhile(startProxy({ ...options, page: true, otherProxies: managedHub(layout()) }, log)).catch(async (err: unknown) => {
      // Expected failures (port taken, bad kubeconfig, API down) are one line, no stack.
      if (err instanceof StartupError) this.error(await withPortOwner(err), { exit: 1 });
      throw err;
    });
    // Signal handlers are installed before the ready lines: whoever reads them may signal at once,
    // and the default actions end the process (SIGINT/SIGTERM without the drain and exit 0).
    const stopSignal = firstShutdownSignal();
    this.log(
      readyLines(
        { ...running, socks: running.socks, http: running.http, table: running.table(), apiServers: apiServersOf(running.routes()) },
        options.proxyAuth?.username,
      ).join('\n'),
    );

    if (reloadWhenStarted) reload(running);

    const signal = await stopSignal;
    log.info({ signal, graceMs: options.shutdownGraceMs }, 'shutting down');
    await running.stop(options.shutdownGraceMs);
    gcGuard?.stop();
    // pino writes asynchronously; without this the last lines are lost at exit.
    await new Promise<void>((resolve) => log.flush(() => resolve()));
    // After a hangup, die of it: a normal exit writes to the gone terminal (oclif's flush threw
    // EIO) and Node 20 aborts restoring its modes (SIGABRT and a core file).
    if (hungUp) dieOfSignal('SIGHUP');
    this.exit(0);
  }
}
