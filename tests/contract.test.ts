import { expect } from 'chai';
import { handlers } from '../server/src/handlers/index.js';
import { notImplemented } from '../server/src/http/dispatch.js';
import { Contract } from '../server/src/http/contract.js';
import { http, signUp } from './support/harness.js';

/** A well-formed value for each path parameter of the contract. */
const SAMPLE_PARAMS: Record<string, string> = {
  namespace: 'no-such-project',
  username: 'someone',
  insight_id: '01900000-0000-7000-8000-000000000000',
  id: '01900000-0000-7000-8000-000000000000',
  feed: 'general',
};

describe('the contract as served', () => {
  let contract: Contract;
  before(async () => {
    contract = await Contract.load();
  });

  it('has exactly one handler per operation', () => {
    const operationIds = contract.operations.map((op) => op.operationId).sort();
    expect(Object.keys(handlers).sort()).to.deep.equal(operationIds);
  });

  it('answers every operation not implemented yet with 501 not_implemented in the envelope', async () => {
    const { token } = await signUp();
    const pending = contract.operations.filter((op) => handlers[op.operationId as keyof typeof handlers] === notImplemented);
    expect(pending.length).to.be.greaterThan(0);
    for (const op of pending) {
      const path = op.path.replace(/\{([^}]+)\}/g, (_, name: string) => SAMPLE_PARAMS[name]!);
      const answer = await http(op.method, path, {
        headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
        ...(op.hasBody ? { body: '{}' } : {}),
      });
      expect(answer.status, `${op.method} ${path}`).to.equal(501);
      expect(answer.json, `${op.method} ${path}`).to.deep.equal({
        success: false,
        error: { code: 'not_implemented', message: 'This route is in the contract but not implemented in this release.' },
      });
    }
  });

  it('still asks for a credential on a route that needs one before saying it is not implemented', async () => {
    const answer = await http('POST', '/v1/projects', { headers: { 'Content-Type': 'application/json' }, body: '{}' });
    expect(answer.status).to.equal(401);
    expect(answer.json.error.code).to.equal('unauthenticated');
  });
});
