/**
 * Stopping an HTTP server without cutting a request, when clients keep their connections alive
 * (proxies, the SDK's fetch and most HTTP clients do).
 *
 * Node's `server.close()` stops accepting and closes the connections idle at that instant, but a
 * busy keep-alive connection goes on carrying new requests for as long as its client sends them,
 * and closing an idle one races a client that is sending on it just then. So once draining starts:
 * - the listener is closed: new connections are refused;
 * - every answer not yet started carries `Connection: close`, and Node closes its connection once
 *   that answer is written: each busy connection carries at most the request it is serving;
 * - an answer already started (an event stream, or one whose headers went out just before) is
 *   finished by its owner, and its connection is then idle like any other;
 * - an idle connection is never closed by the server: the client believes it may send on it, so
 *   closing it races that send (the request is lost without the client knowing whether it was
 *   applied: ECONNRESET). It closes at its keep-alive timeout, which every answer announced
 *   (`Keep-Alive: timeout=…`) and which well-behaved clients undercut; a request sent before then
 *   is answered, with `Connection: close`.
 * Draining is done when no connection is left. The deadline bounds it: whatever is still open then
 * is cut.
 */
import type http from 'node:http';
import net from 'node:net';
import type { Socket } from 'node:net';

export interface DrainReport {
  /** Every connection closed by itself before the deadline. */
  drained: boolean;
  ms: number;
  /** Requests answered after draining started (in flight then, or sent on a connection still open). */
  answered: number;
  /** Connections cut at the deadline. */
  cut: number;
}

export class ConnectionDrain {
  private readonly connections = new Set<Socket>();
  private readonly pending = new Set<http.ServerResponse>();
  private draining = false;
  private answered = 0;
  private onEmpty: (() => void) | undefined;

  constructor(private readonly server: http.Server) {
    server.on('connection', (socket: Socket) => {
      this.connections.add(socket);
      socket.once('close', () => {
        this.connections.delete(socket);
        if (this.connections.size === 0) this.onEmpty?.();
      });
    });
  }

  /** Call for every request before the app sees it. */
  track(res: http.ServerResponse): void {
    this.pending.add(res);
    if (this.draining) res.setHeader('Connection', 'close');
    // Node emits 'close' once for every answer: after it is written, or when its connection went first.
    res.on('close', () => {
      if (this.pending.delete(res) && this.draining) this.answered += 1;
    });
  }

  /**
   * Drains as described above and resolves when no connection is left, or at `deadlineMs`, when
   * the rest are cut. `endStreams` is called once the listener is closed: long-lived answers never
   * finish by themselves.
   */
  async drain(deadlineMs: number, endStreams: () => void): Promise<DrainReport> {
    const started = performance.now();
    this.draining = true;
    // net.Server's close, not http.Server's: the latter also closes the idle keep-alive connections
    // at once, racing clients that are sending on them.
    const closed = new Promise<void>((resolve) => net.Server.prototype.close.call(this.server, () => resolve()));
    for (const res of this.pending) if (!res.headersSent) res.setHeader('Connection', 'close');
    endStreams();
    let timer: NodeJS.Timeout | undefined;
    const empty = new Promise<boolean>((resolve) => {
      if (this.connections.size === 0) return resolve(true);
      this.onEmpty = () => resolve(true);
      timer = setTimeout(() => resolve(false), deadlineMs);
    });
    const drained = await empty;
    clearTimeout(timer);
    const cut = this.connections.size;
    this.server.closeAllConnections();
    await closed;
    this.server.close(); // http.Server's own timers (the connection checks) stop here
    return { drained, ms: Math.round(performance.now() - started), answered: this.answered, cut };
  }
}
