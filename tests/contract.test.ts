import { expect } from 'chai';
import { handlers } from '../server/src/handlers/index.js';
import { Contract } from '../server/src/http/contract.js';
import { http } from './support/harness.js';

describe('the contract as served', () => {
  let contract: Contract;
  before(async () => {
    contract = await Contract.load();
  });

  it('has exactly one handler per operation', () => {
    const operationIds = contract.operations.map((op) => op.operationId).sort();
    expect(Object.keys(handlers).sort()).to.deep.equal(operationIds);
  });

  it('asks for a credential before reading the body', async () => {
    const answer = await http('POST', '/v1/projects', { headers: { 'Content-Type': 'application/json' }, body: '{not json' });
    expect(answer.status).to.equal(401);
    expect(answer.json.error.code).to.equal('unauthenticated');
  });

  it('declares a credential on every operation but the public ones', () => {
    const publicOperations = contract.operations.filter((op) => op.isPublic).map((op) => op.operationId).sort();
    expect(publicOperations).to.deep.equal(['getHealth', 'getOpenApi', 'getReadiness', 'getRoot', 'login', 'signup', 'stripeWebhook']);
  });

  it('marks exactly logout, project deletion and API token management as session-only', () => {
    const sessionOnly = contract.operations.filter((op) => op.sessionOnly).map((op) => op.operationId).sort();
    expect(sessionOnly).to.deep.equal(['createApiToken', 'deleteApiToken', 'deleteProject', 'listApiTokens', 'logout']);
  });
});
