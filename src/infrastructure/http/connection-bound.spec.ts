import { EventEmitter } from 'node:events';
import type { Server, Socket } from 'node:net';
import { ConnectionBudget, connectionBound, RESERVED_FDS } from './connection-bound';

const limits = (soft: string, hard: string) =>
  [
    'Limit                     Soft Limit           Hard Limit           Units     ',
    'Max processes             127694               127694               processes ',
    `Max open files            ${soft.padEnd(21)}${hard.padEnd(21)}files     `,
    'Max locked memory         8388608              8388608              bytes     ',
  ].join('\n');

describe('connectionBound', () => {
  it('is the open-file limit less what kld keeps for itself', () => {
    expect(connectionBound(limits('1048576', '1048576'))).toBe(1048576 - RESERVED_FDS);
    expect(connectionBound(limits('1024', '4096'))).toBe(1024 - RESERVED_FDS);
  });

  it('is half a small limit, and no bound where the limit is unknown', () => {
    expect(connectionBound(limits('256', '256'))).toBe(128);
    expect(connectionBound(limits('unlimited', 'unlimited'))).toBeNull();
    expect(connectionBound(null)).toBeNull();
    expect(connectionBound('')).toBeNull();
  });
});

describe('ConnectionBudget', () => {
  const socket = () => new EventEmitter() as unknown as Socket;
  const server = () =>
    Object.assign(new EventEmitter(), { maxConnections: 0 }) as unknown as Server;

  it('counts gRPC connections with HTTP ones, gRPC holding at most half, and gives them back', () => {
    const budget = new ConnectionBudget(10);
    const http = server();
    budget.watchHttp(http);
    expect(http.maxConnections).toBe(10);
    const held = Array.from({ length: 6 }, socket);
    expect(held.map((s) => budget.admitGrpc(s))).toEqual([true, true, true, true, true, false]);
    expect(http.maxConnections).toBe(5);
    const httpSockets = Array.from({ length: 5 }, socket);
    for (const s of httpSockets) http.emit('connection', s);
    held[0].emit('close');
    expect(http.maxConnections).toBe(6);
    // Five of each would be ten: the whole budget.
    expect(budget.admitGrpc(socket())).toBe(true);
    expect(budget.admitGrpc(socket())).toBe(false);
    httpSockets[0].emit('close');
    expect(budget.admitGrpc(socket())).toBe(false); // gRPC holds its half
  });

  it('bounds nothing where the limit is unknown', () => {
    const budget = new ConnectionBudget(null);
    const http = server();
    budget.watchHttp(http);
    expect(http.maxConnections).toBe(0);
    expect(Array.from({ length: 1000 }, () => budget.admitGrpc(socket())).every(Boolean)).toBe(
      true,
    );
  });
});
