/**
 * Invites and membership: inviting, the invitee accepting or declining, the owner
 * revoking, members leaving or being removed, and the activity each step writes. Every answer is
 * checked whole; the database is checked for the rows each step adds or removes.
 */
import { expect } from 'chai';
import { count, sql } from '../support/harness.js';
import { signUp, type TestUser } from '../support/accounts.js';
import { call, expectData, expectError, expectInvalid, expectNoContent, ISO_UTC, tally, UUID7, walk } from '../support/http.js';
import { accept, activityRows, addMember, createProject, invite, member, projectPath } from '../support/projects.js';

async function inviteRows(projectId: string): Promise<{ user_id: string; invited_by_id: string | null }[]> {
  return sql('select user_id, invited_by_id from project_invites where project_id = ? order by id', [projectId]);
}

async function memberRows(projectId: string): Promise<{ user_id: string; role: string }[]> {
  return sql('select user_id, role from project_members where project_id = ? order by created_at, id', [projectId]);
}

/** The newest activity record of a project, from the database. */
async function latestActivity(projectId: string) {
  const [row] = await activityRows(projectId);
  return row;
}

describe('invites', () => {
  let owner: TestUser;
  before(async () => {
    owner = await signUp();
  });

  describe('POST /v1/projects/{namespace}/invites', () => {
    it('invites an existing user: 201 with the invite, a row, and invite.created in the activity', async () => {
      const guest = await signUp();
      const project = await createProject(owner.token);
      const answer = await call('POST', projectPath(project.namespace, '/invites'), owner.token, { username: guest.username });
      const created = expectData(answer, 201);
      expect(created).to.deep.equal({
        id: created.id,
        user: member(guest),
        invited_by: member(owner),
        created_at: created.created_at,
      });
      expect(created.id).to.match(UUID7);
      expect(created.created_at).to.match(ISO_UTC);
      expect(await inviteRows(project.id)).to.deep.equal([{ user_id: guest.id, invited_by_id: owner.id }]);
      expect(await latestActivity(project.id)).to.deep.include({
        type: 'invite.created',
        actor_id: owner.id,
        data: { username: guest.username },
      });
      // An invitee is not a member.
      expect(await memberRows(project.id)).to.deep.equal([{ user_id: owner.id, role: 'owner' }]);
    });

    it('finds the user without regard to case', async () => {
      const guest = await signUp();
      const project = await createProject(owner.token);
      const created = await invite(owner.token, project.namespace, guest.username.toUpperCase());
      expect(created.user).to.deep.equal(member(guest));
    });

    it('answers 404 not_found for a username nobody has, and stores nothing', async () => {
      const project = await createProject(owner.token);
      expectError(
        await call('POST', projectPath(project.namespace, '/invites'), owner.token, { username: 'nobody-has-this-name' }),
        404,
        'not_found',
      );
      expect(await inviteRows(project.id)).to.deep.equal([]);
    });

    it('answers 409 already_member for a member or the owner, and stores nothing', async () => {
      const mate = await signUp();
      const project = await createProject(owner.token);
      await addMember(owner.token, project.namespace, mate);
      for (const username of [mate.username, owner.username]) {
        expectError(
          await call('POST', projectPath(project.namespace, '/invites'), owner.token, { username }),
          409,
          'already_member',
          username,
        );
      }
      expect(await inviteRows(project.id)).to.deep.equal([]);
    });

    it('answers 409 already_invited for a user with a pending invite, and keeps the one invite', async () => {
      const guest = await signUp();
      const project = await createProject(owner.token);
      await invite(owner.token, project.namespace, guest.username);
      expectError(
        await call('POST', projectPath(project.namespace, '/invites'), owner.token, { username: guest.username }),
        409,
        'already_invited',
      );
      expect(await inviteRows(project.id)).to.deep.equal([{ user_id: guest.id, invited_by_id: owner.id }]);
    });

    it(
      'settles a race: 10 concurrent invites of one user give one 201 and nine 409 already_invited, one row, one activity ' + 'record',
      async () => {
        const guest = await signUp();
        const project = await createProject(owner.token);
        const answers = await Promise.all(
          Array.from({ length: 10 }, () =>
            call('POST', projectPath(project.namespace, '/invites'), owner.token, { username: guest.username }),
          ),
        );
        expect(tally(answers.map((a) => a.status))).to.deep.equal({ 201: 1, 409: 9 });
        for (const answer of answers.filter((a) => a.status === 409)) expectError(answer, 409, 'already_invited');
        expect(await inviteRows(project.id)).to.have.length(1);
        expect((await activityRows(project.id)).filter((r) => r.type === 'invite.created')).to.have.length(1);
      },
    );

    it('refuses a username that breaks the format and a body with unknown fields with 400', async () => {
      const project = await createProject(owner.token);
      expectInvalid(await call('POST', projectPath(project.namespace, '/invites'), owner.token, { username: 'a b' }), '/body/username');
      expectInvalid(await call('POST', projectPath(project.namespace, '/invites'), owner.token, {}), '/body/username');
      const guest = await signUp();
      expectError(
        await call('POST', projectPath(project.namespace, '/invites'), owner.token, { username: guest.username, role: 'owner' }),
        400,
        'invalid_request',
      );
      expect(await inviteRows(project.id)).to.deep.equal([]);
    });
  });

  describe('GET /v1/projects/{namespace}/invites', () => {
    it('lists the pending invites, newest first, to every member, paginated; accepted and declined ones are gone', async () => {
      const [mate, x, y, z] = await Promise.all([signUp(), signUp(), signUp(), signUp()]);
      const project = await createProject(owner.token);
      await addMember(owner.token, project.namespace, mate);
      const ix = await invite(owner.token, project.namespace, x.username);
      const iy = await invite(owner.token, project.namespace, y.username);
      await invite(owner.token, project.namespace, z.username);
      expectNoContent(await call('DELETE', projectPath(project.namespace, `/invites/${z.username}`), z.token));

      for (const token of [owner.token, mate.token]) {
        const page = expectData(await call('GET', projectPath(project.namespace, '/invites'), token));
        expect(page).to.deep.equal({ items: [iy, ix], next_cursor: null });
      }
      const walked = await walk(mate.token, projectPath(project.namespace, '/invites'), 1);
      expect(walked.pages).to.deep.equal([1, 1]);
      expect(walked.items).to.deep.equal([iy, ix]);
    });
  });

  describe('GET /v1/users/me/invites', () => {
    it('shows the invitee its own pending invites, newest first, and nobody else’s', async () => {
      const [guest, other, host] = await Promise.all([signUp(), signUp(), signUp()]);
      const first = await createProject(owner.token, { name: 'First' });
      const second = await createProject(host.token, { name: 'Second' });
      const sent1 = await invite(owner.token, first.namespace, guest.username);
      const sent2 = await invite(host.token, second.namespace, guest.username);
      await invite(owner.token, first.namespace, other.username);

      const page = expectData(await call('GET', '/v1/users/me/invites', guest.token));
      expect(page).to.deep.equal({
        items: [
          { project: { namespace: second.namespace, name: 'Second', icon: null }, invited_by: member(host), created_at: sent2.created_at },
          { project: { namespace: first.namespace, name: 'First', icon: null }, invited_by: member(owner), created_at: sent1.created_at },
        ],
        next_cursor: null,
      });
      const walked = await walk(guest.token, '/v1/users/me/invites', 1);
      expect(walked.items).to.deep.equal(page.items);
      expect(expectData(await call('GET', '/v1/users/me/invites', host.token))).to.deep.equal({ items: [], next_cursor: null });
    });
  });

  describe('PUT /v1/projects/{namespace}/invites/{username} (accept)', () => {
    it('makes the invitee a member: 200 with the project, the invite row gone, member.joined in the activity', async () => {
      const guest = await signUp();
      const project = await createProject(owner.token);
      await invite(owner.token, project.namespace, guest.username);
      const joined = await accept(guest.token, project.namespace, guest.username);
      expect(joined).to.deep.equal({ ...project, members: [member(owner, 'owner'), member(guest, 'member')] });
      expect(await inviteRows(project.id)).to.deep.equal([]);
      expect(await memberRows(project.id)).to.deep.equal([
        { user_id: owner.id, role: 'owner' },
        { user_id: guest.id, role: 'member' },
      ]);
      expect(await latestActivity(project.id)).to.deep.include({
        type: 'member.joined',
        actor_id: guest.id,
        data: { username: guest.username },
      });
      // The new member sees the project, in its list too; its invite is no longer waiting.
      expect(expectData(await call('GET', projectPath(project.namespace), guest.token))).to.deep.equal(joined);
      expect(expectData(await call('GET', '/v1/projects', guest.token)).items.map((p: any) => p.id)).to.deep.equal([project.id]);
      expect(expectData(await call('GET', '/v1/users/me/invites', guest.token)).items).to.deep.equal([]);
      // Accepting again finds nothing.
      expectError(await call('PUT', projectPath(project.namespace, `/invites/${guest.username}`), guest.token), 404, 'not_found');
    });

    it('accepts the username in any case', async () => {
      const guest = await signUp();
      const project = await createProject(owner.token);
      await invite(owner.token, project.namespace, guest.username);
      expectData(await call('PUT', projectPath(project.namespace, `/invites/${guest.username.toUpperCase()}`), guest.token));
      expect(await memberRows(project.id)).to.have.length(2);
    });

    it('answers a member who accepts someone else’s invite 403 forbidden, and the invite stays', async () => {
      const [mate, guest] = await Promise.all([signUp(), signUp()]);
      const project = await createProject(owner.token);
      await addMember(owner.token, project.namespace, mate);
      await invite(owner.token, project.namespace, guest.username);
      expectError(await call('PUT', projectPath(project.namespace, `/invites/${guest.username}`), mate.token), 403, 'forbidden');
      expect(await inviteRows(project.id)).to.deep.equal([{ user_id: guest.id, invited_by_id: owner.id }]);
      expect(await memberRows(project.id)).to.have.length(2);
    });

    it('answers a user without an invite 404 not_found, even naming itself', async () => {
      const stranger = await signUp();
      const project = await createProject(owner.token);
      expectError(await call('PUT', projectPath(project.namespace, `/invites/${stranger.username}`), stranger.token), 404, 'not_found');
      expect(await memberRows(project.id)).to.have.length(1);
    });

    it('of two concurrent accepts, one answers 200 and the other 404; one membership', async () => {
      const guest = await signUp();
      const project = await createProject(owner.token);
      await invite(owner.token, project.namespace, guest.username);
      const answers = await Promise.all(
        [1, 2].map(() => call('PUT', projectPath(project.namespace, `/invites/${guest.username}`), guest.token)),
      );
      expect(answers.map((a) => a.status).sort()).to.deep.equal([200, 404]);
      expect(await memberRows(project.id)).to.have.length(2);
      expect((await activityRows(project.id)).filter((r) => r.type === 'member.joined')).to.have.length(1);
    });
  });

  describe('DELETE /v1/projects/{namespace}/invites/{username}', () => {
    it('lets the invitee decline: 204, the row gone, invite.declined by the invitee', async () => {
      const guest = await signUp();
      const project = await createProject(owner.token);
      await invite(owner.token, project.namespace, guest.username);
      expectNoContent(await call('DELETE', projectPath(project.namespace, `/invites/${guest.username}`), guest.token));
      expect(await inviteRows(project.id)).to.deep.equal([]);
      expect(await memberRows(project.id)).to.have.length(1);
      expect(await latestActivity(project.id)).to.deep.include({
        type: 'invite.declined',
        actor_id: guest.id,
        data: { username: guest.username },
      });
      expectError(await call('GET', projectPath(project.namespace), guest.token), 404, 'not_found');
      expectError(await call('DELETE', projectPath(project.namespace, `/invites/${guest.username}`), guest.token), 404, 'not_found');
    });

    it('lets the owner revoke: 204, the row gone, invite.revoked by the owner; the user can no longer accept', async () => {
      const guest = await signUp();
      const project = await createProject(owner.token);
      await invite(owner.token, project.namespace, guest.username);
      expectNoContent(await call('DELETE', projectPath(project.namespace, `/invites/${guest.username}`), owner.token));
      expect(await inviteRows(project.id)).to.deep.equal([]);
      expect(await latestActivity(project.id)).to.deep.include({
        type: 'invite.revoked',
        actor_id: owner.id,
        data: { username: guest.username },
      });
      expectError(await call('PUT', projectPath(project.namespace, `/invites/${guest.username}`), guest.token), 404, 'not_found');
      expect(await memberRows(project.id)).to.have.length(1);
    });

    it('answers the owner 404 not_found for a user with no pending invite, and writes no activity', async () => {
      const stranger = await signUp();
      const project = await createProject(owner.token);
      const before = await activityRows(project.id);
      for (const username of [stranger.username, 'nobody-has-this-name']) {
        expectError(await call('DELETE', projectPath(project.namespace, `/invites/${username}`), owner.token), 404, 'not_found', username);
      }
      expect(await activityRows(project.id)).to.deep.equal(before);
    });

    it('answers a member revoking someone else’s invite 403 not_owner, and the invite stays', async () => {
      const [mate, guest] = await Promise.all([signUp(), signUp()]);
      const project = await createProject(owner.token);
      await addMember(owner.token, project.namespace, mate);
      await invite(owner.token, project.namespace, guest.username);
      expectError(await call('DELETE', projectPath(project.namespace, `/invites/${guest.username}`), mate.token), 403, 'not_owner');
      expect(await inviteRows(project.id)).to.have.length(1);
    });
  });
});

describe('members', () => {
  let owner: TestUser;
  before(async () => {
    owner = await signUp();
  });

  it('lets a member leave: 204, the membership gone, member.left by that member; the project is then 404 to it', async () => {
    const mate = await signUp();
    const project = await createProject(owner.token);
    await addMember(owner.token, project.namespace, mate);
    expectNoContent(await call('DELETE', projectPath(project.namespace, `/members/${mate.username}`), mate.token));
    expect(await memberRows(project.id)).to.deep.equal([{ user_id: owner.id, role: 'owner' }]);
    expect(await latestActivity(project.id)).to.deep.include({ type: 'member.left', actor_id: mate.id, data: { username: mate.username } });
    expectError(await call('GET', projectPath(project.namespace), mate.token), 404, 'not_found');
    expect(expectData(await call('GET', projectPath(project.namespace), owner.token)).members).to.deep.equal([member(owner, 'owner')]);
  });

  it('lets the owner remove a member: 204, member.removed by the owner', async () => {
    const [mate, stays] = await Promise.all([signUp(), signUp()]);
    const project = await createProject(owner.token);
    await addMember(owner.token, project.namespace, mate);
    await addMember(owner.token, project.namespace, stays);
    expectNoContent(await call('DELETE', projectPath(project.namespace, `/members/${mate.username.toUpperCase()}`), owner.token));
    expect(await memberRows(project.id)).to.deep.equal([
      { user_id: owner.id, role: 'owner' },
      { user_id: stays.id, role: 'member' },
    ]);
    expect(await latestActivity(project.id)).to.deep.include({
      type: 'member.removed',
      actor_id: owner.id,
      data: { username: mate.username },
    });
    expectError(await call('GET', projectPath(project.namespace), mate.token), 404, 'not_found');
    expect(expectData(await call('GET', projectPath(project.namespace), stays.token)).members).to.deep.equal([
      member(owner, 'owner'),
      member(stays, 'member'),
    ]);
  });

  it('keeps the owner: removing or leaving is 409 owner_cannot_leave (a member trying is 403 not_owner)', async () => {
    const mate = await signUp();
    const project = await createProject(owner.token);
    await addMember(owner.token, project.namespace, mate);
    const before = await activityRows(project.id);
    expectError(await call('DELETE', projectPath(project.namespace, `/members/${owner.username}`), owner.token), 409, 'owner_cannot_leave');
    expectError(await call('DELETE', projectPath(project.namespace, `/members/${owner.username}`), mate.token), 403, 'not_owner');
    expect(await memberRows(project.id)).to.deep.equal([
      { user_id: owner.id, role: 'owner' },
      { user_id: mate.id, role: 'member' },
    ]);
    expect(await activityRows(project.id)).to.deep.equal(before);
  });

  it('answers 404 not_found for a username that is not a member (an invitee, another user, nobody)', async () => {
    const [guest, stranger] = await Promise.all([signUp(), signUp()]);
    const project = await createProject(owner.token);
    await invite(owner.token, project.namespace, guest.username);
    for (const username of [guest.username, stranger.username, 'nobody-has-this-name']) {
      expectError(await call('DELETE', projectPath(project.namespace, `/members/${username}`), owner.token), 404, 'not_found', username);
    }
    expect(await inviteRows(project.id)).to.have.length(1);
    expect(await count('select count(*)::int as n from project_members where project_id = ?', [project.id])).to.equal(1);
  });

  it('answers a member removing another member 403 not_owner, and nothing changes', async () => {
    const [a, b] = await Promise.all([signUp(), signUp()]);
    const project = await createProject(owner.token);
    await addMember(owner.token, project.namespace, a);
    await addMember(owner.token, project.namespace, b);
    expectError(await call('DELETE', projectPath(project.namespace, `/members/${b.username}`), a.token), 403, 'not_owner');
    expect(await memberRows(project.id)).to.have.length(3);
  });

  it('never shows an email address: not in projects, lists, invites, received invites or activity', async () => {
    const [mate, guest] = await Promise.all([signUp(), signUp()]);
    const project = await createProject(owner.token);
    const answers = [
      await call('POST', projectPath(project.namespace, '/invites'), owner.token, { username: mate.username }),
      await call('PUT', projectPath(project.namespace, `/invites/${mate.username}`), mate.token),
      await call('POST', projectPath(project.namespace, '/invites'), owner.token, { username: guest.username }),
      await call('GET', projectPath(project.namespace, '/invites'), mate.token),
      await call('GET', '/v1/users/me/invites', guest.token),
      await call('GET', projectPath(project.namespace), mate.token),
      await call('GET', '/v1/projects', mate.token),
      await call('PATCH', projectPath(project.namespace), owner.token, { name: 'Renamed' }),
      await call('GET', projectPath(project.namespace, '/activity'), owner.token),
    ];
    for (const answer of answers) {
      expect(answer.status, answer.text).to.be.oneOf([200, 201]);
      for (const user of [owner, mate, guest]) {
        expect(answer.text).to.not.include(user.email);
      }
      expect(answer.text).to.not.match(/"email"/);
    }
  });
});
