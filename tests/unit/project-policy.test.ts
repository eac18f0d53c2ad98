/**
 * The project policy (`server/src/policies/project.ts`) on its own: every action of its table for
 * every kind of caller, decided on plain facts with nothing loaded. The access matrix
 * (tests/projects/access-matrix.test.ts) checks the same rules end to end through the routes; this shows
 * what `permit` itself decides, and that each rule of the table means what its name says.
 */
import { expect } from 'chai';
import { ApiError } from '../../server/src/errors.js';
import { needsInviteFact, permit, PROJECT_RULES, type AccessFacts, type ProjectAction } from '../../server/src/policies/project.js';

/** The callers a rule tells apart, as the facts `permit` gets. */
const CALLERS = {
  owner: { role: 'owner', isSubject: false, hasPendingInvite: false },
  member: { role: 'member', isSubject: false, hasPendingInvite: false },
  memberNamingItself: { role: 'member', isSubject: true, hasPendingInvite: false },
  invitee: { role: undefined, isSubject: true, hasPendingInvite: true },
  outsiderNamingItself: { role: undefined, isSubject: true, hasPendingInvite: false },
  outsider: { role: undefined, isSubject: false, hasPendingInvite: false },
} as const satisfies Record<string, AccessFacts>;
type Caller = keyof typeof CALLERS;

/** What `permit` answers: the role it lets the caller act as, or the refusal's status and code. */
function decide(action: ProjectAction, facts: AccessFacts): string {
  try {
    return permit(action, facts);
  } catch (error) {
    if (error instanceof ApiError) return `${error.status} ${error.code}`;
    throw error;
  }
}

const NOT_FOUND = '404 not_found';
const NOT_OWNER = '403 not_owner';

/** Each rule of the table, as what every caller gets. */
const EXPECTED: Record<string, Record<Caller, string>> = {
  member: {
    owner: 'owner',
    member: 'member',
    memberNamingItself: 'member',
    invitee: NOT_FOUND,
    outsiderNamingItself: NOT_FOUND,
    outsider: NOT_FOUND,
  },
  owner: {
    owner: 'owner',
    member: NOT_OWNER,
    memberNamingItself: NOT_OWNER,
    invitee: NOT_FOUND,
    outsiderNamingItself: NOT_FOUND,
    outsider: NOT_FOUND,
  },
  'owner-or-self': {
    owner: 'owner',
    member: NOT_OWNER,
    memberNamingItself: 'member',
    invitee: NOT_FOUND,
    outsiderNamingItself: NOT_FOUND,
    outsider: NOT_FOUND,
  },
  invitee: {
    owner: '403 forbidden',
    member: '403 forbidden',
    memberNamingItself: NOT_FOUND,
    invitee: 'invitee',
    outsiderNamingItself: NOT_FOUND,
    outsider: NOT_FOUND,
  },
  'owner-or-invitee': {
    owner: 'owner',
    member: NOT_OWNER,
    memberNamingItself: NOT_FOUND,
    invitee: 'invitee',
    outsiderNamingItself: NOT_FOUND,
    outsider: NOT_FOUND,
  },
};

describe('unit: the project policy', () => {
  for (const [action, rule] of Object.entries(PROJECT_RULES) as [ProjectAction, string][]) {
    it(`${action} (${rule})`, () => {
      const actual = Object.fromEntries(Object.entries(CALLERS).map(([caller, facts]) => [caller, decide(action, facts)]));
      expect(actual).to.deep.equal(EXPECTED[rule]);
    });
  }

  it('has an expectation for every rule the table uses', () => {
    expect([...new Set(Object.values(PROJECT_RULES))].sort()).to.deep.equal(Object.keys(EXPECTED).sort());
  });

  it('asks whether the caller has a pending invite only on invite routes that name the caller', () => {
    const asked = (Object.keys(PROJECT_RULES) as ProjectAction[]).filter((action) => needsInviteFact(action, true)).sort();
    expect(asked).to.deep.equal(['invite.accept', 'invite.delete']);
    expect((Object.keys(PROJECT_RULES) as ProjectAction[]).filter((action) => needsInviteFact(action, false))).to.deep.equal([]);
  });

  it('never lets an outsider learn that the project exists: every action is 404 to it', () => {
    for (const action of Object.keys(PROJECT_RULES) as ProjectAction[]) {
      expect(decide(action, CALLERS.outsider), action).to.equal(NOT_FOUND);
    }
  });
});
