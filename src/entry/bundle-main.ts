// Entry of the single-file bundle and the single executable (scripts/package.mjs): no package.json,
// no manifest file and no command files on disk. oclif gets the package metadata in memory; the
// stand-ins the bundle puts in place of oclif's module loader and file reader
// (scripts/oclif-module-loader.cjs, scripts/package.mjs) answer from here: the committed manifest
// (so help and command lookup load no command), the help class, and each command when it runs.
import path from 'node:path';
import type { Interfaces } from '@oclif/core';
import { COMMAND_LOADERS } from './command-map.js';
import ProxyoutHelp from '../cli/help.js';
import { main } from '../cli/main.js';

declare const __PROXYOUT_PJSON__: Interfaces.PJSON;
declare const __PROXYOUT_MANIFEST__: unknown;

const bundle = globalThis as {
  __proxyoutModules?: (target: string) => unknown;
  __proxyoutCommand?: (id: string) => Promise<unknown>;
  __proxyoutManifest?: unknown;
};
bundle.__proxyoutManifest = __PROXYOUT_MANIFEST__;
bundle.__proxyoutModules = (target: string) => {
  if (/help(\.js)?$/.test(target)) return { default: ProxyoutHelp };
  throw new Error(`the bundle has no module ${target}`);
};
bundle.__proxyoutCommand = (id: string) => {
  const load = COMMAND_LOADERS[id];
  if (!load) throw new Error(`the bundle has no command ${id}`);
  return load();
};

void main(process.argv.slice(2), { root: path.dirname(process.execPath), pjson: __PROXYOUT_PJSON__, isRoot: true });
