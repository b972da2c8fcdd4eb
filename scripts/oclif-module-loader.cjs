// Stand-in for @oclif/core/lib/module-loader.js inside the bundle (scripts/package.mjs): oclif
// asks it for the command map and the help class by path; there are no such files, so the
// bundle's entry (src/cli/bundle-main.ts) answers from memory.
'use strict';
const lookup = (target) => globalThis.__proxyoutModules(String(target));
exports.load = async (_config, modulePath) => lookup(modulePath);
exports.loadWithData = async (_config, modulePath) => ({ filePath: String(modulePath), isESM: false, module: lookup(modulePath) });
exports.loadWithDataFromManifest = async (cached, modulePath) => ({ filePath: String(modulePath), isESM: false, module: lookup(modulePath) });
exports.isPathModule = () => false;
