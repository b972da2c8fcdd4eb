// `kubectl proxyout [flags]`: the foreground proxy. Hidden because users never type "serve";
// src/cli/argv.ts routes bare and flag-first invocations here.
import { Command, Flags } from '@oclif/core';
import { StartupError } from '../core/errors.js';
import { createLogger, LOG_LEVELS } from '../core/log.js';
import { DEFAULTS, type ProxyOptions } from '../proxy/options.js';
import { startProxy } from '../proxy/proxy.js';
import { parseDuration } from '../cli/duration.js';
import { durationFlag } from '../cli/flags.js';
import { readyLines } from '../cli/ready.js';
import { firstShutdownSignal } from '../cli/signals.js';

/** A listener flag value that turns the listener off. */
const OFF = 'off';

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
    'listen-socks': Flags.string({
      summary: `SOCKS5 listen address host:port ("${OFF}" for none).`,
      helpValue: '<addr>',
      default: DEFAULTS.listenSocks,
    }),
    'listen-http': Flags.string({ summary: 'HTTP proxy listen address host:port (off unless given).', helpValue: '<addr>' }),
    kubeconfig: Flags.string({ summary: 'Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config).', helpValue: '<file>' }),
    context: Flags.string({ summary: 'Kubeconfig context to use (default: the current context).', helpValue: '<name>' }),
    namespace: Flags.string({ char: 'n', summary: "Namespace for short names (default: the context's namespace).", helpValue: '<ns>' }),
    'cluster-domain': Flags.string({ summary: 'Cluster DNS domain.', helpValue: '<domain>', default: DEFAULTS.clusterDomain }),
    'log-level': Flags.option({
      options: LOG_LEVELS,
      default: DEFAULTS.logLevel,
      helpValue: '<level>',
      summary: 'Log level (JSON lines on stderr).',
    })(),
    'connect-timeout': durationFlag('Time to resolve a target and open its stream.', DEFAULTS.connectTimeoutMs, false),
    'handshake-timeout': durationFlag('Time a client has to send its SOCKS/HTTP request.', DEFAULTS.handshakeTimeoutMs, false),
    'shutdown-grace': durationFlag('Time open connections get to finish on Ctrl-C/SIGTERM.', DEFAULTS.shutdownGraceMs, true),
  };

  async run(): Promise<void> {
    const { flags } = await this.parse(Serve);
    const listenSocks = flags['listen-socks'] === OFF ? undefined : flags['listen-socks'];
    if (listenSocks === undefined && flags['listen-http'] === undefined) {
      this.error('nothing to listen on: --listen-socks is off and --listen-http is not given', { exit: 2 });
    }
    const options: ProxyOptions = {
      listenSocks,
      listenHttp: flags['listen-http'],
      kubeconfig: flags.kubeconfig,
      context: flags.context,
      namespace: flags.namespace,
      clusterDomain: flags['cluster-domain'],
      logLevel: flags['log-level'],
      connectTimeoutMs: parseDuration(flags['connect-timeout']),
      handshakeTimeoutMs: parseDuration(flags['handshake-timeout']),
      shutdownGraceMs: parseDuration(flags['shutdown-grace']),
    };
    const log = createLogger(options.logLevel);

    const running = await startProxy(options, log).catch((err: unknown) => {
      // Expected failures (port taken, bad kubeconfig, API down) are one line, no stack.
      if (err instanceof StartupError) this.error(err.message, { exit: 1 });
      throw err;
    });
    this.log(readyLines(running).join('\n'));

    const signal = await firstShutdownSignal();
    log.info({ signal, graceMs: options.shutdownGraceMs }, 'shutting down');
    await running.stop(options.shutdownGraceMs);
    // pino writes asynchronously; without this the last lines are lost at exit.
    await new Promise<void>((resolve) => log.flush(() => resolve()));
    this.exit(0);
  }
}
