import { AsyncLocalStorage, AsyncResource } from 'node:async_hooks';
import * as fs from 'node:fs';
import * as http2 from 'node:http2';
import * as os from 'node:os';
import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { GrpcCallError, GrpcStatus, GrpcUnaryChannel } from './grpc-unary-channel';
import { pluginServices } from './plugin-protos';

/**
 * The plugin client's unary calls against a stock @grpc/grpc-js server of
 * the tfplugin6 service: messages both ways (one of them larger than the
 * HTTP/2 window), statuses in trailers and trailers-only answers,
 * deadlines, the message size cap and a server that goes away.
 */

jest.setTimeout(30_000);

type Handler = (
  call: grpc.ServerUnaryCall<Record<string, unknown>, unknown>,
  callback: grpc.sendUnaryData<unknown>,
) => void;

const methods = pluginServices().tfplugin6;
const read = methods.ReadResource;
let handler: Handler;
let server: grpc.Server;
let dir: string;
let socket: string;

function request(typeName: string, bytes = 0): object {
  return { type_name: typeName, current_state: { msgpack: Buffer.alloc(bytes, 7) } };
}

async function startServer(): Promise<void> {
  server = new grpc.Server({ 'grpc.max_receive_message_length': 64 * 1024 * 1024 });
  const definition = methods as unknown as grpc.ServiceDefinition;
  server.addService(definition, {
    ReadResource: (call: Parameters<Handler>[0], cb: Parameters<Handler>[1]) => handler(call, cb),
  });
  await new Promise<void>((resolve, reject) =>
    server.bindAsync(`unix://${socket}`, grpc.ServerCredentials.createInsecure(), (err) =>
      err ? reject(err) : resolve(),
    ),
  );
}

function connect(maxMessageBytes = 64 * 1024 * 1024): Promise<GrpcUnaryChannel> {
  return GrpcUnaryChannel.connect(
    { network: 'unix', address: socket, tls: null, maxMessageBytes },
    5_000,
  );
}

async function failure(p: Promise<unknown>): Promise<GrpcCallError> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(GrpcCallError);
    return e as GrpcCallError;
  }
  throw new Error('expected the call to fail');
}

beforeEach(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-grpc-channel-'));
  socket = path.join(dir, 'plugin.sock');
  await startServer();
});

afterEach(async () => {
  server.forceShutdown();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('GrpcUnaryChannel against a grpc-js server', () => {
  it('sends the request and decodes the answer, also when either is larger than one window', async () => {
    handler = (call, cb) => {
      const state = (call.request.current_state as { msgpack: Buffer }).msgpack;
      cb(null, {
        new_state: { msgpack: Buffer.concat([state, Buffer.from(String(call.request.type_name))]) },
        private: Buffer.from('p'),
      });
    };
    const channel = await connect();
    try {
      for (const bytes of [0, 10, 5 * 1024 * 1024]) {
        const res = (await channel.unary(read, request('kltest_item', bytes), 5_000)) as {
          new_state: { msgpack: Buffer };
          private: Buffer;
          diagnostics: unknown[];
        };
        expect(res.new_state.msgpack.length).toBe(bytes + 'kltest_item'.length);
        expect(res.new_state.msgpack.subarray(bytes).toString()).toBe('kltest_item');
        expect(res.private.toString()).toBe('p');
        expect(res.diagnostics).toEqual([]); // proto-loader's defaults, as grpc-js's client gave
      }
      // Calls in flight at once each get their own answer.
      const names = Array.from({ length: 20 }, (_, i) => `type_${i}`);
      const answers = await Promise.all(
        names.map((n) => channel.unary(read, request(n, 3), 5_000)),
      );
      expect(
        answers.map((a) =>
          (a as { new_state: { msgpack: Buffer } }).new_state.msgpack.subarray(3).toString(),
        ),
      ).toEqual(names);
    } finally {
      channel.close();
    }
  });

  it('rejects with the status and its percent-decoded message', async () => {
    handler = (_call, cb) =>
      cb({ code: grpc.status.FAILED_PRECONDITION, details: 'not configured: 100% sure' }, null);
    const channel = await connect();
    try {
      const err = await failure(channel.unary(read, request('x'), 5_000));
      expect(err.code).toBe(grpc.status.FAILED_PRECONDITION);
      expect(err.details).toBe('not configured: 100% sure');
    } finally {
      channel.close();
    }
  });

  it('reports an unknown method as UNIMPLEMENTED', async () => {
    const channel = await connect();
    try {
      const err = await failure(channel.unary(methods.ApplyResourceChange, {}, 5_000));
      expect(err.code).toBe(grpc.status.UNIMPLEMENTED);
    } finally {
      channel.close();
    }
  });

  it('gives up at the deadline with DEADLINE_EXCEEDED, and the channel still works', async () => {
    let slow = true;
    handler = (_call, cb) => setTimeout(() => cb(null, {}), slow ? 2_000 : 0);
    const channel = await connect();
    try {
      const t0 = Date.now();
      const err = await failure(channel.unary(read, request('x'), 200));
      expect(err.code).toBe(GrpcStatus.DEADLINE_EXCEEDED);
      expect(Date.now() - t0).toBeLessThan(1_900);
      slow = false;
      await expect(channel.unary(read, request('x'), 5_000)).resolves.toBeDefined();
    } finally {
      channel.close();
    }
  });

  it('keeps each call to its own deadline, a short one made after a long one too', async () => {
    // A server that never answers nor enforces grpc-timeout (the stock server above ends a call
    // at its grpc-timeout itself), so only the client's own deadline ends a call.
    const silent = http2.createServer();
    silent.on('stream', () => undefined);
    const silentSocket = path.join(dir, 'silent.sock');
    await new Promise<void>((resolve) => silent.listen(silentSocket, resolve));
    const channel = await GrpcUnaryChannel.connect(
      { network: 'unix', address: silentSocket, tls: null, maxMessageBytes: 1024 },
      5_000,
    );
    try {
      let longSettled = false;
      const long = channel.unary(read, request('long'), 20_000).finally(() => (longSettled = true));
      long.catch(() => undefined);
      const err = await failure(channel.unary(read, request('short'), 200));
      expect(err.code).toBe(GrpcStatus.DEADLINE_EXCEEDED);
      expect(longSettled).toBe(false);
    } finally {
      channel.close();
      await new Promise((resolve) => silent.close(resolve));
    }
  });

  it('refuses an answer above the message size cap', async () => {
    handler = (_call, cb) => cb(null, { new_state: { msgpack: Buffer.alloc(200_000) } });
    const channel = await connect(100_000);
    try {
      const err = await failure(channel.unary(read, request('x'), 5_000));
      expect(err.code).toBe(GrpcStatus.RESOURCE_EXHAUSTED);
    } finally {
      channel.close();
    }
  });

  it('answers UNAVAILABLE when the server goes away, during a call and after it', async () => {
    handler = () => server.forceShutdown(); // never answers
    const channel = await connect();
    try {
      const during = await failure(channel.unary(read, request('x'), 5_000));
      expect(during.code).toBe(GrpcStatus.UNAVAILABLE);
      const after = await failure(channel.unary(read, request('x'), 5_000));
      expect(after.code).toBe(GrpcStatus.UNAVAILABLE);
    } finally {
      channel.close();
    }
  });

  it("keeps the caller's async context and leaves AsyncResource#bind as Node has it", async () => {
    handler = (call, cb) => cb(null, { private: Buffer.from(String(call.request.type_name)) });
    const nodeBind = AsyncResource.prototype.bind;
    const context = new AsyncLocalStorage<string>();
    const channel = await connect();
    try {
      const seen = await Promise.all(
        ['a', 'b', 'c'].map((name) =>
          context.run(name, async () => {
            const res = (await channel.unary(read, request(name), 5_000)) as { private: Buffer };
            return `${res.private.toString()}:${context.getStore()}`;
          }),
        ),
      );
      expect(seen).toEqual(['a:a', 'b:b', 'c:c']);
      channel.close();
      // A request on a closed session throws inside request(): bind is restored all the same.
      expect((await failure(channel.unary(read, request('x'), 5_000))).code).toBe(
        GrpcStatus.UNAVAILABLE,
      );
      expect(AsyncResource.prototype.bind).toBe(nodeBind);
    } finally {
      channel.close();
    }
  });

  it('fails to connect to a socket nobody listens on', async () => {
    server.forceShutdown();
    await expect(connect()).rejects.toThrow();
  });
});
