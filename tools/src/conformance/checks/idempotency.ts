/**
 * Idempotent writes, on every operation whose contract declares the `Idempotency-Key` header. The
 * service records the answer to a keyed request once the request has passed validation: a success,
 * or a handler's refusal such as 404 (a 400 is never recorded, so the body must be valid). Each case
 * therefore sends a valid request that changes nothing and is still recorded: the contract's own
 * example body on a project that does not exist (404), or, where the path names no project, a
 * namespace the run already holds or a username another user of the run holds (409), or, where the
 * body names the project (LogSnag's routes), a project that does not exist (404). Then the same
 * key on another such request must be 422 `idempotency_key_reused`, and on the first request again
 * the first answer, same status and body, with `Idempotent-Replayed: true`.
 *
 * 409 `idempotency_in_progress` needs two requests with one key at once: see coverage.ts.
 */
import { randomBytes } from 'node:crypto';
import { Blocked, type CaseContext, type CaseDef } from '../case.js';
import type { ContractModel, Operation } from '../contract.js';
import type { Request } from '../http.js';
import { concretePath, sessionOf } from './common.js';

const group = 'idempotency';
const HEADER = 'idempotency-key';

/** Two valid requests to `op` that the service records and that change nothing, and the answer they get. */
function harmlessPair(t: CaseContext, op: Operation): { first: Request; other: Request; expect: [number, string] } {
  const token = sessionOf('a')(t);
  const body = op.requestExample;
  if (op.path.includes('{namespace}')) {
    const request = (which: string): Request => ({
      method: op.method,
      path: concretePath(op, `${t.state.tag}-${which}`),
      token,
      ...(body !== undefined ? { json: body } : {}),
    });
    return { first: request('gone1'), other: request('gone2'), expect: [404, 'not_found'] };
  }
  if (typeof body === 'object' && body !== null && 'project' in body) {
    // LogSnag's routes name the project in the body: one that does not exist is 404, and recorded.
    const request = (which: string): Request => ({
      method: op.method,
      path: op.path,
      token,
      json: { ...body, project: `${t.state.tag}-${which}` },
    });
    return { first: request('gone1'), other: request('gone2'), expect: [404, 'not_found'] };
  }
  if (typeof body === 'object' && body !== null && 'namespace' in body) {
    const request = (namespace: string): Request => ({ method: op.method, path: op.path, token, json: { ...body, namespace } });
    return {
      first: request(t.need(t.state.p1, 'project P1')),
      other: request(t.need(t.state.p2, 'project P2')),
      expect: [409, 'namespace_taken'],
    };
  }
  if (typeof body === 'object' && body !== null && 'username' in body) {
    // User B's username, taken, in two spellings: two requests, both refused.
    const username = t.need(t.state.b.id, 'user B') && t.state.b.username;
    const request = (name: string): Request => ({ method: op.method, path: op.path, token, json: { ...body, username: name } });
    return { first: request(username.toLowerCase()), other: request(username.toUpperCase()), expect: [409, 'username_taken'] };
  }
  throw new Blocked(`the suite knows no request to ${op.key} that the service records and that changes nothing`);
}

function keyed(request: Request, key: string): Request {
  return { ...request, headers: { ...request.headers, 'Idempotency-Key': key } };
}

export function idempotencyCases(contract: ContractModel): CaseDef[] {
  return contract.operations
    .filter((op) => op.requestHeaders.includes(HEADER))
    .map((op): CaseDef => ({
      group,
      op: op.key,
      expect: '422 idempotency_key_reused',
      title: 'a recorded Idempotency-Key on another request is refused; on the same request it answers the first answer again',
      run: async (t) => {
        const { first, other, expect } = harmlessPair(t, op);
        const key = `${t.state.tag}-${op.operationId}-${randomBytes(6).toString('hex')}`;
        const answer = await t.send(keyed(first, key));
        t.expect(answer, ...expect);
        t.check(answer.headers.get('idempotent-replayed') === null, 'a first answer is no replay', answer);
        t.expect(await t.send(keyed(other, key)), 422, 'idempotency_key_reused');
        const replay = await t.send(keyed(first, key));
        t.check(
          replay.status === answer.status && replay.text === answer.text,
          `the same key on the same request answers the first answer again (first: ${answer.status} ${answer.text})`,
          replay,
        );
        t.check(replay.headers.get('idempotent-replayed') === 'true', 'a replayed answer carries Idempotent-Replayed: true', replay);
      },
    }));
}
