import { expect } from 'chai';
import { handlers } from '../../server/src/handlers/index.js';
import { Contract, contractDocument } from '../../server/src/http/contract.js';
import { http } from '../support/http.js';

describe('the contract as served', () => {
  let contract: Contract;
  before(async () => {
    contract = await Contract.load();
  });

  it("is valid OpenAPI by openapi-backend's strict check, which refuses a broken document", async () => {
    await Contract.checkDocument();
    const broken = structuredClone(contractDocument) as unknown as { paths: Record<string, Record<string, { responses?: unknown }>> };
    delete broken.paths['/v1/projects']!.post!.responses;
    let refused: unknown;
    await Contract.checkDocument(broken as never).catch((error: unknown) => (refused = error));
    expect(String(refused)).to.match(/responses/);
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
    const publicOperations = contract.operations
      .filter((op) => op.isPublic)
      .map((op) => op.operationId)
      .sort();
    expect(publicOperations).to.deep.equal([
      'confirmEmailChange',
      'confirmPasswordReset',
      'getHealth',
      'getOpenApi',
      'getReadiness',
      'getRoot',
      'login',
      'requestPasswordReset',
      'revertEmailChange',
      'signup',
      'stripeWebhook',
    ]);
  });

  it('marks exactly logout, project deletion, API token management, the billing portal, password and e-mail changes, the session list and end, account deletion and ownership transfer as session-only', () => {
    const sessionOnly = contract.operations
      .filter((op) => op.sessionOnly)
      .map((op) => op.operationId)
      .sort();
    expect(sessionOnly).to.deep.equal([
      'changeEmail',
      'changePassword',
      'createApiToken',
      'createPortalSession',
      'deleteApiToken',
      'deleteCurrentUser',
      'deleteProject',
      'deleteSession',
      'listApiTokens',
      'listSessions',
      'logout',
      'transferOwnership',
    ]);
  });

  it('names the scope an API token needs (x-scope, spec/scopes.tsp) on every operation an API token may call, and on no other', () => {
    const marked = contract.operations.map((op) => ({ op, scope: (op.operation as unknown as Record<string, unknown>)['x-scope'] }));
    const tokenUsable = marked.filter(({ op }) => !op.isPublic && !op.sessionOnly);
    const withoutScope = tokenUsable.filter(({ scope }) => scope === undefined).map(({ op }) => op.operationId);
    const unknownScope = tokenUsable
      .filter(({ scope }) => scope !== undefined && !['all', 'events:write', 'insights:write', 'read'].includes(scope as string))
      .map(({ op, scope }) => `${op.operationId}: ${JSON.stringify(scope)}`);
    const scopedButNotForTokens = marked.filter(({ op, scope }) => scope !== undefined && (op.isPublic || op.sessionOnly));
    expect({ withoutScope, unknownScope, scopedButNotForTokens: scopedButNotForTokens.map(({ op }) => op.operationId) }).to.deep.equal({
      withoutScope: [],
      unknownScope: [],
      scopedButNotForTokens: [],
    });
    // What a publish-only token can do, and that the service read it as written.
    const publishing = tokenUsable.filter(({ scope }) => scope === 'events:write').map(({ op }) => op.operationId);
    expect(publishing).to.include.members(['publishEvent', 'publishEvents']);
    for (const { op, scope } of tokenUsable) expect(op.scope, op.operationId).to.equal(scope);
  });

  it('answers CORS (x-cors, spec/cors.tsp) on publishing operations only, each callable with a publish-only token', () => {
    const cors = contract.operations.filter((op) => op.cors);
    expect(cors.map((op) => op.operationId)).to.include.members(['publishEvent', 'publishEvents']);
    for (const op of cors) expect([op.operationId, op.scope]).to.deep.equal([op.operationId, 'events:write']);
  });
});
