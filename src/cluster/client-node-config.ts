// client-node's KubeConfig: its dist/config.js module, not the package index (the index also
// loads every generated API model and client, which nothing here uses).
//
// config.js itself still imports its generated API package ('./gen/index.js': ~800 modules, ~1 s
// of every start from a clone and ~60 MiB of heap) for two names that only makeApiClient() uses.
// `npm run build` therefore replaces the compiled form of this file with a copy of config.js
// whose imports point at the same files, except that one, which gets the slim stand-in the bundle
// also uses (scripts/slim-client-node.mjs; scripts/client-node-gen-slim.mjs). Compiled by tsc
// alone, this re-export stands: the full package loads, slower but the same.
export { KubeConfig } from '@kubernetes/client-node/dist/config.js';
