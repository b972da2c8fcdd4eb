// Entry of the single-file bundle and the single executable (scripts/package.mjs): no package.json
// and no command files on disk, so oclif gets the package metadata in memory and, through the
// module loader the bundle substitutes for oclif's own (scripts/oclif-module-loader.cjs), the
// command map and help class from here.
import path from 'node:path';
import type { Interfaces } from '@oclif/core';
import { COMMANDS } from './command-map.js';
import ProxyoutHelp from './help.js';
import { main } from './main.js';

declare const __PROXYOUT_PJSON__: { name: string; version: string; oclif: Record<string, unknown> } & Record<string, unknown>;

/** What oclif's module loader answers in the bundle, by the target it asks for. */
(globalThis as { __proxyoutModules?: (target: string) => unknown }).__proxyoutModules = (target: string) => {
  if (/help(\.js)?$/.test(target)) return { default: ProxyoutHelp };
  if (/command-map(\.js)?$/.test(target)) return { COMMANDS };
  throw new Error(`the bundle has no module ${target}`);
};

const pjson = {
  ...__PROXYOUT_PJSON__,
  oclif: {
    ...__PROXYOUT_PJSON__.oclif,
    commands: { strategy: 'explicit', target: './command-map.js', identifier: 'COMMANDS' },
    helpClass: './help.js',
  },
};

void main(process.argv.slice(2), { root: path.dirname(process.execPath), pjson: pjson as unknown as Interfaces.PJSON, isRoot: true });
