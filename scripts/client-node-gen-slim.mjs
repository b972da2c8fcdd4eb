// What @kubernetes/client-node's config.js (KubeConfig) takes from its generated API package
// (`import { createConfiguration, ServerConfiguration } from './gen/index.js'`), without the
// ~1,000 generated model and API classes that index re-exports (about 60 MiB of heap). The
// bundle (scripts/package.mjs) resolves config.js's './gen/index.js' here;
// test/unit/client-node-slim.test.ts checks that config.js asks for nothing else.
export { createConfiguration } from '@kubernetes/client-node/dist/gen/configuration.js';
export { ServerConfiguration } from '@kubernetes/client-node/dist/gen/servers.js';
