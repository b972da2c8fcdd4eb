// The root of this CLI is itself runnable (`kubectl proxyout [flags]` is the hidden `serve`
// command, see argv.ts), so root help must show serve's flags as well as the command list,
// which oclif's stock root help cannot do.
import { CommandHelp, Help, type Command, type Interfaces } from '@oclif/core';
import { SERVE_COMMAND } from './argv.js';

/** How users type it: kubectl finds `kubectl-proxyout` on PATH and runs it as `kubectl proxyout`. */
export const DISPLAY_BIN = 'kubectl proxyout';

/** oclif prints `config.bin`; shadow it for help only, so env-var names etc. keep the real bin. */
function withDisplayBin(config: Interfaces.Config): Interfaces.Config {
  return Object.create(config, { bin: { value: DISPLAY_BIN } }) as Interfaces.Config;
}

const BIN_TEMPLATE = '<%= config.bin %>';

/**
 * oclif renders every help string through ejs (a template compiled per string, ~15 ms of a
 * `--help`); ours use no template but `<%= config.bin %>`, which needs none of that.
 */
function fastRender(ejsRender: (t: string) => string): (t: string) => string {
  return (t) => {
    if (!t.includes('<%')) return t;
    const plain = t.replaceAll(BIN_TEMPLATE, DISPLAY_BIN);
    return plain.includes('<%') ? ejsRender(t) : plain;
  };
}

class ProxyoutCommandHelp extends CommandHelp {
  constructor(...args: ConstructorParameters<typeof CommandHelp>) {
    super(...args);
    this.render = fastRender(this.render);
    // oclif marks as a command line ("$ ") only an example that starts with the bin: `eval
    // "$(kubectl proxyout connect)"` stood unmarked among them. (A private method: patched here.)
    const own = this as unknown as { formatIfCommand(example: string): string };
    const format = own.formatIfCommand.bind(this);
    own.formatIfCommand = (example) => {
      const line = this.render(example);
      return line.startsWith('eval ') && line.includes(DISPLAY_BIN) ? `$ ${line}` : format(example);
    };
  }
}

export default class ProxyoutHelp extends Help {
  protected override CommandHelpClass = ProxyoutCommandHelp;

  constructor(config: Interfaces.Config, opts: Partial<Interfaces.HelpOptions> = {}) {
    super(withDisplayBin(config), opts);
    this.render = fastRender(this.render);
  }

  protected override async showRootHelp(): Promise<void> {
    const serve = this.config.findCommand(SERVE_COMMAND);
    const summary = this.config.pjson.description ?? '';
    const usage = [`$ ${DISPLAY_BIN} [flags]`, `$ ${DISPLAY_BIN} COMMAND [flags]`].join('\n');
    const parts = [this.wrap(summary), this.section('USAGE', usage)];
    if (serve) {
      // Reuse oclif's flag/example rendering so root and `serve --help` never drift apart.
      const serveHelp = new this.CommandHelpClass(serve, this.config, { ...this.opts, sections: ['flags'] });
      parts.push(serveHelp.generate());
      if (serve.description) parts.push(this.section('DESCRIPTION', this.wrap(this.render(serve.description))));
      const examples = new this.CommandHelpClass(serve, this.config, { ...this.opts, sections: ['examples'] });
      parts.push(examples.generate());
    }
    parts.push(this.section('COMMANDS', this.renderList(this.commandRows(), { indentation: 2, spacer: '\n' })));
    this.log(parts.filter((p) => p.trim() !== '').join('\n\n') + '\n');
  }

  /** Visible commands plus `help`, which argv.ts provides without the help plugin. */
  private commandRows(): string[][] {
    const visible = this.sortedCommands.filter((c: Command.Loadable) => c.id !== SERVE_COMMAND && !c.id.includes(':'));
    const rows = visible.map((c) => [c.id.replaceAll(':', ' '), this.summary(c) ?? '']);
    rows.push(['help [COMMAND]', `Show help for ${DISPLAY_BIN} or one of its commands.`]);
    return rows.sort((a, b) => a[0]!.localeCompare(b[0]!));
  }
}
