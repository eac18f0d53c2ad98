/**
 * Conditional reads, on every GET whose contract declares `If-None-Match`: the suite reads it once
 * (user A's session, project P1, its webhook endpoint W) and, when the 200 carries an `ETag`, reads it again naming that tag,
 * which must be 304 with no body, since nothing changed in between. A 200 without an `ETag` leaves
 * nothing to try: the case notes it, and the coverage then shows the 304 as not seen.
 */
import type { CaseDef } from '../case.js';
import type { ContractModel } from '../contract.js';
import { concretePath, ns, sessionOf } from './common.js';

const group = 'conditional reads';

export function conditionalCases(contract: ContractModel): CaseDef[] {
  return contract.operations
    .filter((op) => op.method === 'GET' && op.requestHeaders.includes('if-none-match'))
    .map((op): CaseDef => ({
      group,
      op: op.key,
      expect: '304',
      title: 'the same read naming the ETag of its 200 in If-None-Match answers 304 with no body',
      run: async (t) => {
        const request = {
          method: 'GET',
          path: concretePath(op, op.path.includes('{namespace}') ? ns(t) : '', { webhook_id: t.state.webhook }),
          ...(op.isPublic ? {} : { token: sessionOf('a')(t) }),
        };
        const answer = await t.send(request);
        t.expect(answer, 200);
        const etag = answer.headers.get('etag');
        if (etag === null) {
          t.note('its 200 carries no ETag: no conditional read to try');
          return;
        }
        const again = await t.send({ ...request, headers: { 'If-None-Match': etag } });
        t.expect(again, 304);
        t.check(again.text === '', 'a 304 has no body', again);
      },
    }));
}
