/**
 * What an API token reaches (the second part of `server/src/policies/project.ts`) on its own: its
 * scopes against every scope an operation can need, on operations that name a project and on the
 * account's, and its projects. The access matrix (tests/projects/access-matrix.test.ts) calls every
 * route with such tokens; tests/accounts/scoped-tokens.test.ts shows what the refusals leave in the
 * database. Here, each cell of the rule is written out by hand.
 */
import { expect } from 'chai';
import { ApiError } from '../../server/src/errors.js';
import {
  coversOperation,
  isScopeSet,
  permitProject,
  permitScope,
  reachesProject,
  UNLIMITED,
  type Grant,
  type TokenScope,
} from '../../server/src/policies/project.js';

const PROJECT_A = '019cadd9-0000-7000-8000-00000000000a';
const PROJECT_B = '019cadd9-0000-7000-8000-00000000000b';

const GRANTS = {
  unlimited: UNLIMITED,
  allOnA: { scopes: ['all'], projectIds: new Set([PROJECT_A]) },
  allOnNone: { scopes: ['all'], projectIds: new Set<string>() },
  read: { scopes: ['read'], projectIds: undefined },
  eventsWrite: { scopes: ['events:write'], projectIds: undefined },
  insightsWrite: { scopes: ['insights:write'], projectIds: undefined },
  eventsWriteAndRead: { scopes: ['events:write', 'read'], projectIds: undefined },
  everyNarrowScopeOnA: { scopes: ['events:write', 'insights:write', 'read'], projectIds: new Set([PROJECT_A]) },
} as const satisfies Record<string, Grant>;
type GrantName = keyof typeof GRANTS;

const NEEDS: TokenScope[] = ['all', 'events:write', 'insights:write', 'read'];

/** What `permitScope` answers: 'ok', or the refusal's status and code. */
function decide(grant: Grant, needed: TokenScope, namesProject: boolean): string {
  try {
    permitScope(grant, needed, namesProject);
    return 'ok';
  } catch (error) {
    if (error instanceof ApiError) return `${error.status} ${error.code}`;
    throw error;
  }
}

const OK = 'ok';
const REFUSED = '403 insufficient_scope';

/** By grant, then by the scope an operation needs: on an operation that names a project, and on one of the account. */
const EXPECTED: Record<GrantName, Record<TokenScope, { project: string; account: string }>> = {
  unlimited: {
    all: { project: OK, account: OK },
    'events:write': { project: OK, account: OK },
    'insights:write': { project: OK, account: OK },
    read: { project: OK, account: OK },
  },
  // Scope all on its projects, but the account's own `all` operations reach beyond them.
  allOnA: {
    all: { project: OK, account: REFUSED },
    'events:write': { project: OK, account: OK },
    'insights:write': { project: OK, account: OK },
    read: { project: OK, account: OK },
  },
  allOnNone: {
    all: { project: OK, account: REFUSED },
    'events:write': { project: OK, account: OK },
    'insights:write': { project: OK, account: OK },
    read: { project: OK, account: OK },
  },
  read: {
    all: { project: REFUSED, account: REFUSED },
    'events:write': { project: REFUSED, account: REFUSED },
    'insights:write': { project: REFUSED, account: REFUSED },
    read: { project: OK, account: OK },
  },
  eventsWrite: {
    all: { project: REFUSED, account: REFUSED },
    'events:write': { project: OK, account: OK },
    'insights:write': { project: REFUSED, account: REFUSED },
    read: { project: REFUSED, account: REFUSED },
  },
  insightsWrite: {
    all: { project: REFUSED, account: REFUSED },
    'events:write': { project: REFUSED, account: REFUSED },
    'insights:write': { project: OK, account: OK },
    read: { project: REFUSED, account: REFUSED },
  },
  eventsWriteAndRead: {
    all: { project: REFUSED, account: REFUSED },
    'events:write': { project: OK, account: OK },
    'insights:write': { project: REFUSED, account: REFUSED },
    read: { project: OK, account: OK },
  },
  // Every narrower scope together is still not `all`.
  everyNarrowScopeOnA: {
    all: { project: REFUSED, account: REFUSED },
    'events:write': { project: OK, account: OK },
    'insights:write': { project: OK, account: OK },
    read: { project: OK, account: OK },
  },
};

describe('unit: what an API token reaches (the project policy, second part)', () => {
  for (const [name, grant] of Object.entries(GRANTS) as [GrantName, Grant][]) {
    it(`scopes: ${name}`, () => {
      const actual = Object.fromEntries(
        NEEDS.map((needed) => [needed, { project: decide(grant, needed, true), account: decide(grant, needed, false) }]),
      );
      expect(actual).to.deep.equal(EXPECTED[name]);
      for (const needed of NEEDS) {
        for (const namesProject of [true, false]) {
          expect(coversOperation(grant, needed, namesProject), `${needed}, names a project: ${namesProject}`).to.equal(
            decide(grant, needed, namesProject) === OK,
          );
        }
      }
    });
  }

  it('says in the refusal what the operation needs and what the token has', () => {
    expect(() => permitScope(GRANTS.eventsWrite, 'read', true)).to.throw(
      'This operation needs an API token with scope read; this one has events:write.',
    );
    expect(() => permitScope(GRANTS.allOnA, 'all', false)).to.throw(/not limited to projects/);
  });

  it('reaches every project without a limit, and only its own with one: any other is 404 not_found, as for a non-member', () => {
    const reach = (grant: Grant) => [PROJECT_A, PROJECT_B].map((id) => reachesProject(grant, id));
    expect(reach(UNLIMITED)).to.deep.equal([true, true]);
    expect(reach(GRANTS.read)).to.deep.equal([true, true]);
    expect(reach(GRANTS.allOnA)).to.deep.equal([true, false]);
    expect(reach(GRANTS.everyNarrowScopeOnA)).to.deep.equal([true, false]);
    // A limited token whose projects were all deleted reaches none, not all.
    expect(reach(GRANTS.allOnNone)).to.deep.equal([false, false]);
    expect(() => permitProject(GRANTS.allOnA, PROJECT_A)).to.not.throw();
    let refused: unknown;
    try {
      permitProject(GRANTS.allOnA, PROJECT_B);
    } catch (error) {
      refused = error;
    }
    expect(refused).to.be.instanceOf(ApiError);
    expect([(refused as ApiError).status, (refused as ApiError).code, (refused as ApiError).message]).to.deep.equal([
      404,
      'not_found',
      'No project with this namespace.',
    ]);
  });

  it('makes tokens with all alone, or with any non-empty set of the narrower scopes', () => {
    expect(isScopeSet(['all'])).to.equal(true);
    expect(isScopeSet(['read'])).to.equal(true);
    expect(isScopeSet(['events:write', 'insights:write', 'read'])).to.equal(true);
    expect(isScopeSet([])).to.equal(false);
    expect(isScopeSet(['all', 'read'])).to.equal(false);
    expect(isScopeSet(['events:write', 'all'])).to.equal(false);
  });
});
