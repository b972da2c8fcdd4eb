#!/usr/bin/env node
// Runs after `oclif manifest` (see "manifest" in package.json): rewrites the file in the one
// committed form, the same serializer the staleness test compares against.
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { serializeManifest } from '../dist/src/cli/manifest.js';

const file = fileURLToPath(new URL('../oclif.manifest.json', import.meta.url));
writeFileSync(file, serializeManifest(JSON.parse(readFileSync(file, 'utf8'))));
console.log(`normalized ${file}`);
