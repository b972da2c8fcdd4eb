// Stand-in for @oclif/core/lib/module-loader.js inside the bundle (scripts/package.mjs). There are
// no files to import: oclif's requests are answered by the bundle's entry (src/entry/bundle-main.ts)
// — a command by its manifest id, loaded only when it runs, and the help class.
'use strict';
const lookup = (target) => globalThis.__proxyoutModules(String(target));
exports.load = async (_config, modulePath) => lookup(modulePath);
exports.loadWithData = async (_config, modulePath) => ({ filePath: String(modulePath), isESM: false, module: lookup(modulePath) });
exports.loadWithDataFromManifest = async (cached, modulePath) => ({
  filePath: String(modulePath),
  isESM: cached.isESM,
  module: await globalThis.__proxyoutCommand(cached.id),
});
exports.isPathModule = () => false;
