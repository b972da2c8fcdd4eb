// `kubectl proxyout connect --socks`: a managed proxy that keeps running after the terminal
// closes (src/managed/connect.ts does the work; this is flags and output).
import { Command, Flags } from '@oclif/core';
import { proxyFlags, proxyOptionsFrom } from '../cli/flags.js';
import { readyParts } from '../cli/ready.js';
import { exportedVariables } from '../proxy/client-env.js';
import { formatAddress } from '../listeners/bound-address.js';
import { askManaged, notAnswering, otherVersion } from '../managed/status.js';
import { layout } from '../state/paths.js';
import { connect } from '../managed/connect.js';
import { ConnectInterrupted } from '../managed/interrupts.js';
import { failOnKnownError } from '../cli/managed-errors.js';
import { jsonObject, printJson } from '../cli/json-output.js';
import { ARGV_WARNING } from '../auth/credentials.js';

export default class Connect extends Command {
  static override summary = 'Start a managed proxy in the background (one per cluster context).';
  static override description = [
    'Checks the context and the API server first, then starts a detached proxy from a private',
    'single-context copy of the kubeconfig and prints its connection ID, addresses and the lines to',
    'paste (on stdout, alone: eval "$(kubectl proxyout connect)" sets them). The ID is stable for the same server, context and namespace, so connecting twice',
    'reports the running proxy (flags that ask for other settings than it runs with are an error).',
    'Without proxy credentials it generates a password, carried by the printed lines (connect',
    'again prints them again); --no-proxy-auth for browsers, which cannot send SOCKS credentials.',
    'Stop it with `disconnect ID`; see all with `status`.',
  ].join(' ');
  static override usage = 'connect [--socks] [flags]';
  static override examples = [
    '<%= config.bin %> connect --socks',
    'eval "$(<%= config.bin %> connect)"',
    '<%= config.bin %> connect --context staging -n shop --listen-socks 127.0.0.1:0 --listen-http 127.0.0.1:0',
    '<%= config.bin %> connect --id prod --json',
  ];

  static override flags = {
    socks: Flags.boolean({ summary: 'SOCKS5 mode (the default and, for now, the only mode).' }),
    ...proxyFlags('Log level of the daemon (see `logs ID`).', 'Time open connections get to finish on disconnect (which waits a second more before SIGKILL).'),
    id: Flags.string({ summary: 'Connection ID to use instead of the derived one (a-z, 0-9, "-", not first; up to 40).', helpValue: '<name>' }),
    json: Flags.boolean({ summary: 'Print one JSON object (apiVersion, kind ConnectResult, id, pid, context, namespace, socks, http, logFile, env, …).' }),
    'no-proxy-auth': Flags.boolean({
      aliases: ['no-auth'],
      deprecateAliases: true,
      summary:
        'No proxy credentials, for browsers (Chrome cannot send SOCKS credentials): any local user can then use the proxy. Without this or credentials, connect generates a password.',
      exclusive: ['proxy-auth-file', 'proxy-auth'],
    }),
  };

  async run(): Promise<void> {
    const { flags, metadata } = await this.parse(Connect);
    const explicitFlags = new Set(Object.keys(flags).filter((name) => !metadata.flags[name]?.setFromDefault));
    // proxyAuth is split off: it reaches the daemon through a private file, never state.json.
    const { kubeconfig, context, namespace, proxyAuth: given, ...options } = proxyOptionsFrom(flags);
    // --no-proxy-auth is explicit: it also wins over $KUBECTL_PROXYOUT_PROXY_AUTH.
    const noAuth = flags['no-proxy-auth'];
    const proxyAuth = noAuth ? undefined : given;
    if (proxyAuth?.source === 'argv') this.warn(ARGV_WARNING);
    const result = await connect({
      kubeconfig,
      context,
      namespace,
      id: flags.id,
      options,
      proxyAuth,
      noAuth,
      explicitFlags,
      programVersion: this.config.version,
    }).catch((err: unknown) => {
      // Ctrl-C: the exit status a shell expects of a command it interrupted (130), after the line.
      if (err instanceof ConnectInterrupted) this.error(err.message, { exit: err.exitCode });
      return failOnKnownError(this, err);
    });

    const { entry, existing, logFile, generatedAuth } = result;
    const { apiServers, answering, warnings } = await askManaged(layout(), entry);
    // A running proxy stopped with SIGSTOP or hung: "already running" alone handed out lines that hang.
    const hung = existing && !answering ? `kubectl-proxyout: ${notAnswering(entry.id)}` : undefined;
    if (flags.json) {
      // The values the export lines set (unquoted), upper case only.
      const { ALL_PROXY, HTTP_PROXY, HTTPS_PROXY, NO_PROXY } = exportedVariables(
        { socks: entry.socks, http: entry.http, apiServers, clusterDomain: entry.options.clusterDomain },
        entry.proxyAuthUser,
        generatedAuth?.password,
      );
      const env = Object.fromEntries(Object.entries({ ALL_PROXY, HTTP_PROXY, HTTPS_PROXY, NO_PROXY }).filter(([, v]) => v !== undefined));
      const socks = entry.socks ? formatAddress(entry.socks) : null;
      const http = entry.http ? formatAddress(entry.http) : null;
      const auth = entry.proxyAuthUser === undefined ? null : { user: entry.proxyAuthUser, generated: !!entry.proxyAuthGenerated };
      const forwards = (entry.forwards ?? []).map((f) => ({ listen: formatAddress(f.address), port: f.address.port, target: f.target }));
      const out = jsonObject('ConnectResult', {
        id: entry.id,
        pid: entry.pid,
        state: entry.phase,
        existing,
        context: entry.context,
        namespace: entry.namespace,
        server: entry.server,
        socks,
        http,
        forwards,
        logFile,
        auth,
        env,
      });
      if (hung) this.logToStderr(hung);
      for (const w of warnings) this.logToStderr(`kubectl-proxyout: warning: ${w}`);
      this.log(printJson(out));
      return;
    }
    const { info, shell } = readyParts(
      {
        socks: entry.socks,
        http: entry.http,
        forwards: entry.forwards,
        context: entry.context,
        namespace: entry.namespace,
        apiServers,
        table: entry.options.table,
        clusterDomain: entry.options.clusterDomain,
        warnings,
      },
      entry.proxyAuthUser,
      generatedAuth?.password,
    );
    const what = existing ? `${entry.id} is already running` : `connected ${entry.id}`;
    // What a person reads on stderr, the shell lines alone on stdout: `eval "$(kubectl proxyout
    // connect)"` sets the variables (a line of prose made the whole eval a syntax error).
    this.logToStderr(`kubectl-proxyout: ${what} (pid ${entry.pid}); stop it with: kubectl proxyout disconnect ${entry.id}`);
    const upgraded = existing ? otherVersion({ id: entry.id, state: 'running', version: entry.programVersion ?? null }, this.config.version) : undefined;
    if (upgraded) this.logToStderr(`kubectl-proxyout: ${entry.id} was ${upgraded.started}; ${upgraded.fix}`);
    if (hung) this.logToStderr(hung);
    if (info.length > 0) this.logToStderr(info.join('\n'));
    if (shell.length > 0) this.log(shell.join('\n'));
  }
}
