// The doctor's POSTs (SelfSubjectAccessReview, SelfSubjectRulesReview): the answer is read within
// the request timeout and up to a bound, as getJson reads (cluster/api.ts). A server that sends
// without end (or a gzip bomb) must not take all memory, nor one that trickles hold the doctor for ever.
import http from 'node:http';
import https from 'node:https';
import { ApiStatusError, statusMessage, type ApiConnection } from '../cluster/api.js';
import { untilSocket } from '../cluster/socket-wait.js';
import { notJsonMessage, redirectMessage } from '../cluster/foreign-answer.js';
import { bodyDecoder, type BodyDecoder } from '../cluster/content-encoding.js';
import { boundRequest } from '../cluster/request-deadline.js';

/** A review's answer is a few KiB; a rules review lists every rule of the user's roles. */
export const REVIEW_ANSWER_MAX = 8 * 1024 * 1024;
const ERROR_ANSWER_MAX = 64 * 1024;

export async function postJson<T>(api: Pick<ApiConnection, 'requestOptions' | 'url'>, path: string, body: unknown, timeoutMs: number): Promise<T> {
  const options = await api.requestOptions();
  const url = api.url(path);
  const text = JSON.stringify(body);
  const client = url.protocol === 'http:' ? http : https;
  const timedOut = () => new Error(`API request timed out after ${timeoutMs} ms`);
  return new Promise<T>((resolve, reject) => {
    // The whole answer, body included, within the timeout (as kubectl's --request-timeout).
    const whole = setTimeout(() => {
      req.destroy();
      reject(timedOut());
    }, timeoutMs);
    whole.unref();
    const settle = (f: () => void) => {
      clearTimeout(whole);
      f();
    };
    const req = client.request(
      url,
      {
        ...options,
        method: 'POST',
        headers: { ...options.headers, Accept: 'application/json', 'Content-Type': 'application/json', 'Content-Length': String(Buffer.byteLength(text)) },
      },
      (res) => {
        const status = res.statusCode ?? 0;
        const ok = status >= 200 && status < 300;
        const limit = ok ? REVIEW_ANSWER_MAX : ERROR_ANSWER_MAX;
        const chunks: Buffer[] = [];
        let size = 0;
        let cut = false;
        const finish = () => {
          const answer = Buffer.concat(chunks).toString('utf8');
          if (!ok)
            return settle(() => reject(new ApiStatusError(status, redirectMessage(status, res.headers.location) ?? statusMessage(answer) ?? `HTTP ${status}`)));
          try {
            const parsed = JSON.parse(answer) as T;
            settle(() => resolve(parsed));
          } catch {
            settle(() => reject(new ApiStatusError(status, notJsonMessage(path, answer))));
          }
        };
        let decode: BodyDecoder;
        try {
          decode = bodyDecoder(res.headers);
        } catch (err) {
          req.destroy();
          return settle(() => reject(new ApiStatusError(status, `${path}: ${(err as Error).message}`)));
        }
        res.on('data', (raw: Buffer) => {
          if (cut) return;
          let c: Buffer;
          try {
            c = decode(raw);
          } catch (err) {
            cut = true;
            req.destroy();
            return settle(() => reject(new ApiStatusError(status, `${path}: ${(err as Error).message}`)));
          }
          size += c.length;
          if (size <= limit) return void chunks.push(c);
          cut = true;
          req.destroy();
          // An error's start is enough for its message; an answer beyond the bound is refused.
          if (ok) settle(() => reject(new ApiStatusError(status, `the answer to ${path} is larger than ${limit / 1024 / 1024} MiB`)));
          else finish();
        });
        res.on('error', (err) => settle(() => reject(err)));
        res.on('end', () => {
          if (!cut) finish();
        });
      },
    );
    boundRequest(req, timeoutMs, timedOut);
    untilSocket(req, timeoutMs, () => settle(() => reject(timedOut())));
    req.on('error', (err) => settle(() => reject(err)));
    req.end(text);
  });
}
