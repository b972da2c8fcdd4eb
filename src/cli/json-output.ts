// The shape of every `--json` output: one object with apiVersion and kind, as kubectl's `-o json`
// objects have, whatever the arguments. A list is always a List (`status ID` is a list of one).
// A change that is not purely additive gets a new apiVersion.
import { escapeJsonControls } from '../core/escape.js';

export const API_VERSION = 'kubectl-proxyout/v1';

export type JsonKind = 'ConnectResult' | 'DoctorReport' | 'ProxyStatusList';

export function jsonObject<T extends object>(kind: JsonKind, body: T): { apiVersion: string; kind: JsonKind } & T {
  return { apiVersion: API_VERSION, kind, ...body };
}

export function jsonList<T>(kind: JsonKind, items: readonly T[]): { apiVersion: string; kind: JsonKind; items: readonly T[] } {
  return { apiVersion: API_VERSION, kind, items };
}

/** JSON escapes C0 controls itself; DEL and C1 (0x9b, the 8-bit CSI) it leaves raw for a terminal. */
export function printJson(value: unknown): string {
  return escapeJsonControls(JSON.stringify(value, null, 2));
}
