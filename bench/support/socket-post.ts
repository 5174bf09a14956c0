import * as net from 'node:net';

/**
 * A POST of `body` (JSON) on a socket of its own, `Connection: close`;
 * resolves once its last byte is written. The answer is the raw bytes kld
 * sent by then: a request a stop comes in the middle of may end with an
 * answer, a cut, or nothing, which a fetch would all report as one error.
 */
export async function socketPost(
  url: string,
  route: string,
  headers: Record<string, string>,
  body: string,
): Promise<{ answer: () => string; closed: Promise<void> }> {
  const socket = net.connect(Number(new URL(url).port), '127.0.0.1');
  let answer = '';
  const closed = new Promise<void>((resolve) => {
    socket.on('data', (d: Buffer) => (answer += d.toString()));
    socket.on('close', () => resolve());
    socket.on('error', () => undefined);
  });
  const head = Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  socket.write(
    `POST ${route} HTTP/1.1\r\nHost: 127.0.0.1\r\n${head}Content-Type: application/json\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n`,
  );
  await new Promise<void>((resolve) => socket.write(body, () => resolve()));
  return { answer: () => answer, closed };
}
