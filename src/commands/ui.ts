// `kubectl proxyout ui`: a live page of every managed proxy (managed/ui.ts), served on loopback
// with a token (ui/page-server.ts), opened in the browser unless --no-open.
import { Command, Flags } from '@oclif/core';
import { layout } from '../state/paths.js';
import { managedHub } from '../managed/ui.js';
import { startPageServer } from '../ui/page-server.js';
import { newPageToken } from '../ui/page-access.js';
import { openBrowser } from '../cli/open-browser.js';
import { firstShutdownSignal } from '../cli/signals.js';
import { errorMessage } from '../core/errors.js';

export default class Ui extends Command {
  static override summary = 'Show a live page of every managed proxy: routes, health, streams and the pod that served each.';
  static override description = [
    'Serves the page on 127.0.0.1 (this machine only) with a token made at each start, prints its',
    'URL and opens the browser. The page follows each proxy over its private control socket and',
    'shows proxies started later too. Stop with Ctrl-C. A foreground proxy with an HTTP listener',
    'serves its own page (its URL is in its ready lines).',
  ].join(' ');
  static override usage = 'ui [--port PORT] [--no-open]';
  static override examples = ['<%= config.bin %> ui', '<%= config.bin %> ui --no-open --port 8765'];

  static override flags = {
    port: Flags.integer({ helpValue: '<port>', summary: 'Port on 127.0.0.1 to serve the page on (0: any free port).', default: 0, min: 0, max: 65535 }),
    open: Flags.boolean({ summary: 'Open the page in the browser (--no-open: only print its URL).', default: true, allowNo: true }),
  };

  async run(): Promise<void> {
    const { flags } = await this.parse(Ui);
    const stop = firstShutdownSignal();
    const server = await startPageServer(managedHub(layout()), newPageToken(), flags.port).catch((err: unknown) =>
      this.error(`cannot serve the page on 127.0.0.1:${flags.port}: ${errorMessage(err)}`, { exit: 1 }),
    );
    this.log(`kubectl-proxyout: live page at ${server.url} (this machine only; Ctrl-C stops it)`);
    if (flags.open) {
      const failed = await openBrowser(server.url);
      if (failed) this.logToStderr(`kubectl-proxyout: could not open a browser (${failed}); open the URL above yourself`);
    }
    await stop;
    await server.close();
    this.exit(0);
  }
}
