// `npm run bench:recovery`: the recovery section of `npm run bench` alone (bench/recovery.ts).
import { reportRecovery } from './recovery.js';

await reportRecovery();
process.exit(0);
