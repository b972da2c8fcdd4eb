// `kubectl proxyout reload [ID]`: a managed proxy re-reads its routing table (src/managed/reload.ts).
import { Args, Command } from '@oclif/core';
import { layout, validateId } from '../state/paths.js';
import { reloadProxy } from '../managed/reload.js';
import { failOnKnownError } from '../cli/managed-errors.js';
import { describeRoute } from '../routing/table-spec.js';

export default class Reload extends Command {
  static override summary = "Re-read a managed proxy's routing table (config file, contexts).";
  static override description = [
    'Makes the table again from what the proxy was connected with (--config file, --context…,',
    'your kubeconfig), then the proxy starts every new route and swaps the table in only when all',
    'of them answer and sync (one still syncing after 35 s, but getting further, is swapped in and',
    'serves once synced). A bad table changes nothing: the error is printed and the exit status',
    'is 1. Open connections are never cut; a removed route closes once its connections end.',
    'For a foreground proxy, send it SIGHUP.',
  ].join(' ');
  static override usage = 'reload [ID]';
  static override examples = ['<%= config.bin %> reload', '<%= config.bin %> reload a1b2c3d4'];
  static override args = {
    id: Args.string({ description: 'Connection ID (see `status`); may be left out when one proxy runs.', required: false, ignoreStdin: true }),
  };

  async run(): Promise<void> {
    const { args } = await this.parse(Reload);
    // A bad ID is a known error too (one line, exit 1), as in the other commands.
    const { id, table, mappingsKept } = await Promise.resolve()
      .then(() =>
        reloadProxy(layout(), args.id === undefined ? undefined : validateId(args.id), {
          onWait: () => this.logToStderr('kubectl-proxyout: another reload of this proxy is under way; waiting for it to finish'),
        }),
      )
      .catch((err: unknown) => failOnKnownError(this, err));
    this.log(`kubectl-proxyout: ${id} reloaded: ${table.routes.length} route${table.routes.length === 1 ? '' : 's'}`);
    for (const r of table.routes) this.log(`kubectl-proxyout:   route ${describeRoute(table, r)}`);
    // A reload keeps the listeners: say so here, not only in the proxy's log.
    if (mappingsKept) {
      const list = (m: string[]) => (m.length > 0 ? m.join(' ') : 'none');
      this.warn(
        `the config file's port mappings changed (running: ${list(mappingsKept.running)}; file: ${list(mappingsKept.file)}): a reload keeps the running ones; disconnect ${id} and connect again to change them`,
      );
    }
  }
}
