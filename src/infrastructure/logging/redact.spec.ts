import { Writable } from 'node:stream';
import { createLogger } from './logger';
import { redactDeep, redactUrls } from './redact';

describe('redactUrls', () => {
  it.each([
    ['postgres://kl:S3cret@db:5432/kl', 'postgres://kl:***@db:5432/kl'],
    ['connect to postgresql://u:p%40ss@h/db failed', 'connect to postgresql://u:***@h/db failed'],
    ['"postgres://:S3cret@h/db"', '"postgres://:***@h/db"'],
    ['mysql://u:pa/ss@word@h/db', 'mysql://u:***@h/db'],
    ['postgres://h/db?user=u&password=S3cret&x=1', 'postgres://h/db?user=u&password=***&x=1'],
    ['host=h password=S3cret dbname=x', 'host=h password=*** dbname=x'],
    [
      '/v1/api/states?token=kl_abcdefgh-ijklmnopqrstuvwxyz_ABCDEFGHIJKLMNO&x=1',
      '/v1/api/states?token=kl_abcdefgh***&x=1',
    ],
    ['Bearer kl_ABCDEFGHijklmnopqrstuvwxyz0123456789-_abcde.', 'Bearer kl_ABCDEFGH***.'],
  ])('masks the password in %s', (text, masked) => {
    expect(redactUrls(text)).toBe(masked);
  });

  it.each([
    'postgres://kl@db/kl',
    'http://127.0.0.1:8080/v1/states/a',
    'user@host: 12:30',
    'kl_query',
    'kl_abcdefgh',
  ])('leaves %s as it is', (text) => expect(redactUrls(text)).toBe(text));

  it('masks every string inside a value', () => {
    expect(redactDeep({ a: ['x://u:p@h'], b: { c: 'y://u:q@h', n: 1 } })).toEqual({
      a: ['x://u:***@h'],
      b: { c: 'y://u:***@h', n: 1 },
    });
  });
});

describe('the logger', () => {
  it('writes an error carrying a connection string (message, stack, input) without its password', async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(chunk.toString());
        done();
      },
    });
    const logger = createLogger('info', 'json', sink);
    const err = Object.assign(new Error('cannot reach postgres://kl:S3cret@db:5432/kl'), {
      input: 'postgres://kl:S3cret@db:99999/kl',
    });
    logger.error({ err }, 'database at postgres://kl:S3cret@db/kl is down');
    logger.flush();
    await new Promise((r) => setImmediate(r));
    const text = lines.join('');
    expect(text).toContain('kl:***@db');
    expect(text).toContain('"input":"postgres://kl:***@db:99999/kl"');
    expect(text).not.toContain('S3cret');
  });
});
