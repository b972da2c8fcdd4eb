// `kubectl proxyout service-uninstall`: remove what service-install wrote.
import os from 'node:os';
import { Command, Flags } from '@oclif/core';
import { StartupError } from '../core/errors.js';
import { DEFAULT_SERVICE_NAME, uninstallService, validateServiceName } from '../service/install.js';

export default class ServiceUninstall extends Command {
  static override summary = 'Remove the login service written by service-install.';
  static override description =
    'Removes the unit (and its enable link) or the LaunchAgent, and prints the lines that stop the running service. A file you edited is not removed without --force.';
  static override usage = 'service-uninstall [--name NAME] [--force]';
  static override examples = ['<%= config.bin %> service-uninstall'];

  static override flags = {
    name: Flags.string({ summary: 'Service name (unit name / launchd label).', helpValue: '<name>', default: DEFAULT_SERVICE_NAME }),
    force: Flags.boolean({ summary: 'Remove the file even if it was edited since it was written.' }),
    'dry-run': Flags.boolean({ summary: 'Say what would be removed, remove nothing.' }),
  };

  async run(): Promise<void> {
    const { flags } = await this.parse(ServiceUninstall);
    try {
      const host = { platform: process.platform, home: os.homedir(), uid: process.getuid?.() ?? 0, env: process.env };
      const result = uninstallService(host, validateServiceName(flags.name), { force: flags.force, dryRun: flags['dry-run'] });
      if (result.next.length === 0) {
        this.log(`${result.file} does not exist: nothing to remove`);
        return;
      }
      this.log(result.removed ? `removed ${result.file}` : `would remove ${result.file}`);
      this.log('stop the running service with:');
      for (const line of result.next) this.log(`  ${line}`);
    } catch (err) {
      if (err instanceof StartupError) this.error(err.message, { exit: 1 });
      throw err;
    }
  }
}
