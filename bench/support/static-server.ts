import { ChildProcess, spawn } from 'node:child_process';

/** The peer for GET: a plain Node server that reads the file and sends it, nothing else. */
const STATIC_SERVER = `
const http = require('node:http');
const fs = require('node:fs');
const file = process.argv[1];
const server = http.createServer((req, res) => {
  fs.readFile(file, (err, body) => {
    if (err) { res.statusCode = 500; res.end(); return; }
    res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': body.length });
    res.end(body);
  });
});
server.listen(0, '127.0.0.1', () => process.stdout.write(server.address().port + '\\n'));
process.on('SIGTERM', () => process.exit(0));
`;

/** Serves `file` on 127.0.0.1 from a child process; the caller kills `child` when done. */
export async function startStaticServer(
  file: string,
): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, ['-e', STATIC_SERVER, file], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      if (out.includes('\n')) resolve(Number(out.trim()));
    });
    child.once('exit', (code) => reject(new Error(`static server exited (${code})`)));
  });
  return { url: `http://127.0.0.1:${port}/current.tfstate`, child };
}
