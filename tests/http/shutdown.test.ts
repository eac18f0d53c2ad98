/**
 * What a deploy does to clients: the service gets SIGTERM while keep-alive clients hammer it with
 * writes and a live stream is open (class: a shutdown that cuts requests or leaves them unacknowledged),
 * and what slow or greedy connections can hold (class: connections a client can keep without bound).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import type { RunningServer } from '../../server/src/server.js';
import { secret, startExtraServer } from '../support/harness.js';
import { callAt } from '../support/http.js';
import { embeddedServiceEnv, operatorInviteCode, startServiceProcess, type ServiceProcess } from '../support/service-process.js';
import { eventually, RawStream } from '../support/sse.js';

/** A request of KeepAliveClient that failed, and whether it went on a connection used before. */
class RequestFailed extends Error {
  constructor(
    readonly error: NodeJS.ErrnoException,
    readonly reused: boolean,
  ) {
    super(error.message, { cause: error });
  }
}

/**
 * One client of the hammer: PATCHes on a keep-alive agent of its own with at most one connection,
 * so that the connection each request went on is known (`reusedSocket`), which fetch's pool, shared
 * by every client, does not tell.
 */
class KeepAliveClient {
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: 1 });

  constructor(private readonly origin: string) {}

  /** The status and whether the answer said `Connection: close`; throws RequestFailed when the request fails. */
  patch(path: string, token: string, body: unknown): Promise<{ status: number; closes: boolean }> {
    const json = JSON.stringify(body);
    return new Promise((resolve, reject) => {
      const request = http.request(
        `${this.origin}${path}`,
        {
          method: 'PATCH',
          agent: this.agent,
          headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(json) },
        },
        (response) => {
          response.resume();
          response.on('end', () => resolve({ status: response.statusCode!, closes: response.headers.connection === 'close' }));
          response.on('error', (error) => reject(new RequestFailed(error, request.reusedSocket)));
        },
      );
      request.on('error', (error) => reject(new RequestFailed(error, request.reusedSocket)));
      request.end(json);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

/**
 * How a request failed: `never sent` when it never reached the service, otherwise the error code,
 * the system call and the connection (ECONNRESET on a kept-alive connection is a request cut that
 * may have been applied). Never sent:
 * - it failed while connecting: refused by a closed listener, or reset by the kernel while in the
 *   backlog of the listener as it closed;
 * - it was reset on a NEW connection (the previous answer said `Connection: close`, so the agent
 *   opened another). The handshake of such a connection can complete in the kernel's backlog before
 *   the listener closes; the client then writes its request, and the kernel resets the connection
 *   the service never accepted, which Node reports as `read ECONNRESET` rather than as a failed
 *   connect. Every connection the service accepted is answered (the drain), so a reset one it never
 *   accepted carried nothing to it. The stored count below still proves that no such request was
 *   applied.
 */
function howItFailed(failure: unknown): string {
  if (!(failure instanceof RequestFailed)) return (failure as Error).message;
  const { error, reused } = failure;
  if (error.syscall === 'connect') return 'never sent';
  if (!reused && error.code === 'ECONNRESET') return 'never sent';
  return `${error.code ?? error.message}${error.syscall ? ` (${error.syscall})` : ''} on a ${reused ? 'kept-alive' : 'new'} connection`;
}

/** GET on a connection of its own (fetch would reuse one it keeps alive): `answered <status>`, or the connection error's code. */
function newConnectionGet(url: string): Promise<string> {
  return new Promise((resolve) => {
    const request = http.get(url, { agent: false, timeout: 5_000 }, (response) => {
      response.resume();
      resolve(`answered ${response.statusCode}`);
    });
    request.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
  });
}

describe('SIGTERM with keep-alive clients hammering the service', function () {
  this.timeout(180_000);
  let dataDir = '';
  const services: ServiceProcess[] = [];

  after(() => {
    for (const service of services) if (service.child.exitCode === null) service.child.kill('SIGKILL');
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('answers every request in flight with Connection: close, ends streams cleanly, exits 0, and loses or invents no write', async () => {
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'signalboard-shutdown-'));
    const env = embeddedServiceEnv(dataDir);
    const service = await startServiceProcess(env);
    services.push(service);
    const invite = secret(await operatorInviteCode(env));
    // The set-up's requests and the stream close their connections when answered: an idle kept-alive
    // connection would hold the drain (and the exit) until the client's own keep-alive timeout, about
    // 3 s of waiting per service; that case is tests/http/drain.test.ts's. The hammer's connections
    // below stay kept alive.
    const close = { Connection: 'close' };
    const signup = await callAt(
      service.url,
      'POST',
      '/v1/auth/signup',
      undefined,
      { username: 'drainer', email: 'drainer@example.com', password: secret('drainer-password'), invite },
      close,
    );
    expect(signup.status).to.equal(201);
    const token = secret(signup.json.data.token as string);
    expect((await callAt(service.url, 'POST', '/v1/projects', token, { namespace: 'drain', name: 'Drain' }, close)).status).to.equal(201);
    const insight = await callAt(service.url, 'POST', '/v1/projects/drain/insights', token, { title: 'count', value: 0 }, close);
    expect(insight.status).to.equal(201);
    const insightPath = `/v1/projects/drain/insights/${insight.json.data.id}`;
    const stream = await RawStream.open(`${service.url}/v1/projects/drain/events/stream`, { token, headers: close });
    await stream.until(() => stream.retry !== undefined, 10_000);

    // Eight clients, each sending its next increment as soon as the last is answered, on the
    // connection it keeps alive, until a request fails.
    let signalledAt = Infinity;
    const progress: number[] = [];
    const hammer = async (_: unknown, n: number) => {
      const client = new KeepAliveClient(service.url);
      let acknowledged = 0;
      let afterSignal = 0;
      let closeAnswers = 0;
      try {
        for (;;) {
          const answer = await client.patch(insightPath, token, { increment: 1 });
          expect(answer.status).to.equal(200);
          acknowledged += 1;
          progress[n] = acknowledged;
          if (performance.now() > signalledAt) afterSignal += 1;
          if (answer.closes) closeAnswers += 1;
        }
      } catch (failure) {
        const ended = howItFailed(failure);
        const when = `${Math.round(performance.now() - signalledAt)} ms after SIGTERM`;
        return { acknowledged, afterSignal, closeAnswers, ended: ended === 'never sent' ? ended : `${ended}, ${when}` };
      } finally {
        client.close();
      }
    };
    const clients = Array.from({ length: 8 }, hammer);
    // SIGTERM once every client is hammering on a connection it has kept alive (five answers each).
    await eventually(() => progress.filter((acknowledged) => acknowledged >= 5).length === 8, 15_000, 'eight busy clients', 10);
    signalledAt = performance.now();
    service.child.kill('SIGTERM');
    const results = await Promise.all(clients);
    const code = await service.exited;
    const exitMs = performance.now() - signalledAt;
    const drained = await service.waitForLog((entry) => entry.msg === 'drained' || entry.msg === 'drain deadline passed', 1_000);
    const streamEnd = await Promise.race([stream.ended, new Promise((resolve) => setTimeout(() => resolve('still open'), 1_000))]);

    const acknowledged = results.reduce((sum, r) => sum + r.acknowledged, 0);
    const afterSignal = results.reduce((sum, r) => sum + r.afterSignal, 0);
    console.log(
      `      ${acknowledged} increments acknowledged, ${afterSignal} of them after SIGTERM; ` +
        `drain: ${String(drained.ms)} ms, ${String(drained.answered)} requests answered during it, ${String(drained.cut)} cut; ` +
        `exit ${code} after ${Math.round(exitMs)} ms`,
    );
    expect(code, `exit code; stderr: ${service.stderr()}`).to.equal(0);
    expect(drained.msg).to.equal('drained');
    expect(drained.cut).to.equal(0);
    // Each client's last request never reached the service (see howItFailed), so was never applied.
    expect(
      results.map((r) => r.ended),
      'how each client ended',
    ).to.deep.equal(results.map(() => 'never sent'));
    expect(
      results.every((r) => r.closeAnswers >= 1),
      'each busy connection was told Connection: close',
    ).to.equal(true);
    expect(streamEnd, 'the live stream').to.equal('end');

    // Every acknowledged increment is stored, and no unacknowledged one.
    const again = await startServiceProcess(env);
    services.push(again);
    const stored = await callAt(again.url, 'GET', '/v1/projects/drain/insights', token, undefined, close);
    expect(stored.status).to.equal(200);
    expect(stored.json.data.items.map((item: { value: number }) => item.value)).to.deep.equal([acknowledged]);
    again.child.kill('SIGTERM');
    expect(await again.exited).to.equal(0);
  });
});

describe('SIGTERM with slow requests in flight', function () {
  this.timeout(180_000);
  let dataDir = '';
  let service: ServiceProcess | undefined;

  after(() => {
    if (service && service.child.exitCode === null) service.child.kill('SIGKILL');
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('finishes the requests in flight, refuses new connections, closes and exits 0', async () => {
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'signalboard-drain-'));
    // Slow sign-ups: bcrypt at 11 rounds takes a few hundred milliseconds each, one after another.
    const env = embeddedServiceEnv(dataDir, { BCRYPT_ROUNDS: '11' });
    service = await startServiceProcess(env);
    const { url, log } = service;
    const code = secret(await operatorInviteCode(env));

    const inFlight = Array.from({ length: 3 }, (_, i) =>
      callAt(url, 'POST', '/v1/auth/signup', undefined, {
        username: `drain_${i}`,
        email: `drain_${i}@example.com`,
        password: secret(`drain-password-${i}`),
        invite: code,
      }).then((answer) => {
        if (answer.json?.data?.token) secret(answer.json.data.token as string);
        return { status: answer.status, done: performance.now() };
      }),
    );
    // Let the requests reach the service (the first bcrypt round is under way), then stop it.
    await new Promise((resolve) => setTimeout(resolve, 150));
    const signalled = performance.now();
    service.child.kill('SIGTERM');

    // New connections must be refused from the moment the service says it is shutting down (its
    // signal handler ran; bcrypt may delay that), while the old ones are still served: probe with
    // a new connection every 50 ms until one is refused.
    let pending = true;
    const allDone = Promise.all(inFlight).finally(() => (pending = false));
    const probes: { at: number; outcome: string }[] = [];
    await service.waitForLog((e) => e.msg === 'shutting down', 10_000);
    const acknowledged = Math.round(performance.now() - signalled);
    for (;;) {
      const at = performance.now() - signalled;
      const outcome = await newConnectionGet(`${url}/v1`);
      probes.push({ at: Math.round(at), outcome });
      if (outcome !== 'answered 200' || probes.length >= 200) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const firstRefusal = probes.find((p) => p.outcome !== 'answered 200');
    const stillPendingAtRefusal = pending;
    const finished = await allDone;
    const exitCode = await service.exited;

    console.log(
      `      in flight at SIGTERM: ${finished.length} sign-ups, answered ${finished.map((f) => f.status).join(', ')} ` +
        `after ${finished.map((f) => Math.round(f.done - signalled)).join(', ')} ms; 'shutting down' logged ${acknowledged} ms after ` +
        `SIGTERM; ` +
        `first new connection refused at ${
          firstRefusal
            ? `${firstRefusal.at} ms (${firstRefusal.outcome}` +
              `${stillPendingAtRefusal ? ', sign-ups still in flight' : ', after the sign-ups were done'})`
            : 'never'
        }; exit ${exitCode}`,
    );
    expect(
      finished.map((f) => f.status),
      'the in-flight sign-ups complete normally',
    ).to.deep.equal([201, 201, 201]);
    expect(
      finished.some((f) => f.done - signalled > 50),
      'some sign-up was still in flight at SIGTERM',
    ).to.equal(true);
    // Refused: the listener is closed (ECONNREFUSED), or the connection was still in the kernel's
    // backlog when it closed and is reset; never served.
    expect(
      probes[0]!.outcome,
      `a new connection once the service said it is shutting down (probes: ${JSON.stringify(probes)})`,
    ).to.be.oneOf(['ECONNREFUSED', 'ECONNRESET']);
    expect(exitCode, 'exit code').to.equal(0);
    expect(
      log.some((e) => e.msg === 'shutting down' && e.signal === 'SIGTERM'),
      'the log says it is shutting down',
    ).to.equal(true);
  });
});

describe('slow and greedy connections', function () {
  this.timeout(60_000);
  let server: RunningServer;
  let port = 0;
  before(async () => {
    server = await startExtraServer({ HTTP_HEADERS_TIMEOUT_MS: '1000', HTTP_REQUEST_TIMEOUT_MS: '2000', HTTP_MAX_CONNECTIONS: '5' });
    port = Number(new URL(server.url).port);
  });
  after(async () => {
    await server.close();
  });

  /** A connection that writes `first`, then `then` every `everyMs`; resolves with how long the server let it live. */
  function trickle(first: string, then: string, everyMs: number): Promise<{ ms: number; received: string }> {
    return new Promise((resolve) => {
      const started = performance.now();
      const socket = net.connect(port, '127.0.0.1');
      let received = '';
      socket.write(first);
      const timer = setInterval(() => socket.write(then), everyMs);
      socket.on('data', (chunk) => (received += chunk.toString()));
      socket.on('error', () => undefined);
      socket.on('close', () => {
        clearInterval(timer);
        resolve({ ms: performance.now() - started, received });
      });
    });
  }

  it('closes a connection whose headers trickle in past HTTP_HEADERS_TIMEOUT_MS within about a second of it', async () => {
    const { ms, received } = await trickle('GET /v1 HTTP/1.1\r\nHost: x\r\n', 'X-Slow: 1\r\n', 200);
    console.log(`      slow headers closed after ${Math.round(ms)} ms`);
    // Node checks every connection each second, so the bound is the setting plus up to a second.
    expect(ms).to.be.below(3_000);
    expect(received).to.match(/^HTTP\/1\.1 408 /);
  });

  it('closes a connection whose body trickles in past HTTP_REQUEST_TIMEOUT_MS within about a second of it', async () => {
    const head = `POST /v1/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n`;
    const { ms } = await trickle(head, ' ', 200);
    console.log(`      slow body closed after ${Math.round(ms)} ms`);
    expect(ms).to.be.within(1_900, 4_500);
  });

  it(
    'accepts at most HTTP_MAX_CONNECTIONS connections at once; the next one is closed unanswered, and a freed slot serves ' + 'again',
    async () => {
      const open = await Promise.all(
        Array.from(
          { length: 5 },
          () =>
            new Promise<net.Socket>((resolve) => {
              const socket = net.connect(port, '127.0.0.1', () => resolve(socket));
            }),
        ),
      );
      await new Promise((resolve) => setTimeout(resolve, 100));
      const extra = await trickle('GET /v1 HTTP/1.1\r\nHost: x\r\n\r\n', '', 50);
      expect(extra.received).to.equal('');
      expect(extra.ms).to.be.below(1_000);
      for (const socket of open) socket.destroy();
      await new Promise((resolve) => setTimeout(resolve, 100));
      const answer = await fetch(`${server.url}/v1`, { headers: { Connection: 'close' } });
      expect(answer.status).to.equal(200);
    },
  );
});
