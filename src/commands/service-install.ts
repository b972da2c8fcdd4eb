// `kubectl proxyout service-install`: run the foreground proxy as a login service (systemd user
// unit on Linux, launchd LaunchAgent on macOS).
import os from 'node:os';
import { Command, Flags } from '@oclif/core';
import { LOG_LEVELS } from '../core/log.js';
import { selfProgram } from '../core/self.js';
import { ensureStateDir, layout, stateDir, stateDirExists } from '../state/paths.js';
import { DEFAULT_SERVICE_NAME, installService, validateServiceName } from '../service/install.js';
import { egressEnvironment, serviceSpec } from '../service/spec.js';
import { executableLines, serviceExecutable } from '../service/executable.js';
import { checkServiceFlags } from '../service/check.js';
import { failOnKnownError } from '../cli/managed-errors.js';
import { tableFlagDefinitions } from '../cli/table-flags.js';
import { namespaceFlag, proxyFlags } from '../cli/flags.js';
import { SERVICE_PASSED_FLAGS } from '../service/spec.js';

/** The proxy's flags service-install carries as they are given: no defaults here, so only what the user set lands in the unit. */
function passedThrough() {
  const proxy = proxyFlags('', 'Time open connections get to finish when the service is stopped (systemctl stop, launchctl bootout).');
  const names = [...SERVICE_PASSED_FLAGS];
  return Object.fromEntries(names.map((name) => [name, { ...proxy[name], default: undefined }])) as {
    [K in (typeof SERVICE_PASSED_FLAGS)[number]]: (typeof proxy)[K];
  };
}

export default class ServiceInstall extends Command {
  static override summary = 'Install a login service (systemd user unit / launchd agent) that runs the proxy.';
  static override description = [
    'Writes ~/.config/systemd/user/NAME.service (Linux) or ~/Library/LaunchAgents/NAME.plist (macOS) running',
    'the foreground proxy with these flags (a routing table: --config, --context…, --direct) and absolute paths;',
    'it restarts on failure, logs JSON lines to',
    '<state dir>/logs/NAME.log and gets SSH_AUTH_SOCK. It runs the kubectl-proxyout on your PATH that is this',
    "program (krew's, Homebrew's or npm's link, which upgrades keep), else this program's own file.",
    'Prints what it runs and the systemctl/launchctl lines that start it. Flags the proxy would refuse (a bad',
    'listen address, a missing or group-readable --proxy-auth-file, a kubeconfig or context that does not load)',
    'are an error, and nothing is written.',
    'A file you edited is not overwritten without --force.',
  ].join(' ');
  static override usage = 'service-install [--context C]… [--config F] [--listen-socks ADDR] [--listen-http ADDR] [--forward MAP]… [--dry-run] [--force]';
  static override examples = ['<%= config.bin %> service-install --context prod --listen-http 127.0.0.1:3128', '<%= config.bin %> service-install --dry-run'];

  static override flags = {
    name: Flags.string({ summary: 'Service name (unit name / launchd label).', helpValue: '<name>', default: DEFAULT_SERVICE_NAME }),
    kubeconfig: Flags.string({ summary: 'Kubeconfig file for the service (default: $KUBECONFIG as now, then ~/.kube/config).', helpValue: '<file>' }),
    context: Flags.string({
      summary: 'Kubeconfig context (repeatable; default: the config file routes, else the current context when the service starts).',
      helpValue: '<name>',
      multiple: true,
      multipleNonGreedy: true,
    }),
    config: Flags.string({
      summary: 'Routing table file for the service (default: config.yaml in your config directory, read at each start, when no --context is given).',
      helpValue: '<file>',
    }),
    'extra-ca': tableFlagDefinitions()['extra-ca'],
    direct: tableFlagDefinitions().direct,
    'cluster-domain': Flags.string({ summary: 'Cluster DNS domain.', helpValue: '<domain>' }),
    forward: Flags.string({
      summary: 'Port mapping [ADDR:]LPORT=TARGET:PORT (repeatable), as the proxy takes it.',
      helpValue: '<map>',
      multiple: true,
      multipleNonGreedy: true,
    }),
    namespace: namespaceFlag('Namespace for short names.'),
    'listen-socks': Flags.string({ summary: 'SOCKS5 listen address host:port ("off" for none).', helpValue: '<addr>' }),
    'listen-http': Flags.string({ summary: 'HTTP proxy listen address host:port.', helpValue: '<addr>' }),
    'proxy-auth-file': Flags.string({ summary: 'Require proxy credentials from this file (chmod 600).', helpValue: '<file>' }),
    'log-level': Flags.option({ options: LOG_LEVELS, helpValue: '<level>', summary: 'Log level.' })(),
    // The foreground proxy's tuning, carried into the unit when given (its own defaults otherwise).
    ...passedThrough(),
    'dry-run': Flags.boolean({ summary: 'Print the file instead of writing it.' }),
    force: Flags.boolean({ summary: 'Overwrite a service file that was edited since it was written.' }),
  };

  async run(): Promise<void> {
    const { flags } = await this.parse(ServiceInstall);
    try {
      const name = validateServiceName(flags.name);
      // The unit appends to a log in the state directory: the same checks as connect's (owned by
      // us, 0700), else another user could point that log anywhere of ours.
      const state = layout(stateDir());
      if (flags['dry-run']) stateDirExists(state);
      else ensureStateDir(state);
      // A unit that fails on every start is refused before anything is written (--dry-run too).
      const warnings = checkServiceFlags(flags);
      const host = { platform: process.platform, home: os.homedir(), uid: process.getuid?.() ?? 0, env: process.env };
      // The unit keeps the installing shell's PATH (spec.ts): the stable name is looked up there.
      const executable = serviceExecutable(selfProgram(), process.env.PATH, host.home);
      const spec = serviceSpec({ name, flags, invocation: executable, stateRoot: state.root, env: process.env, cwd: process.cwd(), home: host.home });
      const result = installService(host, spec, { dryRun: flags['dry-run'], force: flags.force });
      for (const line of warnings) process.stderr.write(`warning: ${line}\n`);
      const { withheld } = egressEnvironment(process.env);
      if (withheld.length)
        process.stderr.write(
          `warning: ${withheld.join(', ')} ${withheld.length > 1 ? 'carry' : 'carries'} a password and ${withheld.length > 1 ? 'are' : 'is'} not written into the service file (every local user can read it): the service reaches the API server without that proxy; give the proxy as proxy-url in the kubeconfig (kubectl reads it too)\n`,
        );
      if (flags['dry-run']) {
        this.log(result.text.trimEnd());
        // stdout is the file; what it runs goes to stderr.
        for (const line of executableLines(executable)) process.stderr.write(`${line}\n`);
        return;
      }
      this.log(result.changed ? `wrote ${result.file}` : `${result.file} is already up to date`);
      for (const line of executableLines(executable)) this.log(line);
      this.log(`logs: ${spec.logFile}`);
      this.log('start it with:');
      for (const line of result.next) this.log(`  ${line}`);
      this.log('after editing its config file or kubeconfig, reload it (the routing table is read again) with:');
      this.log(`  ${result.reload}`);
    } catch (err) {
      failOnKnownError(this, err);
    }
  }
}
