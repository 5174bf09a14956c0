import { DomainError } from '../../domain/shared/domain-error';
import { SecretMask } from './secret-mask';

function maskOf(...values: string[]): SecretMask {
  const mask = new SecretMask();
  for (const v of values) mask.add(v);
  return mask;
}

describe('SecretMask', () => {
  it('masks a value wherever it stands, and its JSON-escaped and URL-encoded forms', () => {
    const mask = maskOf('pa ss"w/rd\\1');
    expect(mask.text('login pa ss"w/rd\\1 refused')).toBe('login *** refused');
    expect(mask.text('{"password":"pa ss\\"w/rd\\\\1"}')).toBe('{"password":"***"}');
    expect(mask.text('GET /login?p=pa%20ss%22w%2Frd%5C1')).toBe('GET /login?p=***');
    expect(mask.text('body p=pa+ss%22w%2Frd%5C1&x=1')).toBe('body p=***&x=1');
  });

  it('masks a longer value whole, not around a shorter one it holds', () => {
    const mask = maskOf('abcdefgh', 'abcdefgh-ijklmn');
    expect(mask.text('key abcdefgh-ijklmn and abcdefgh')).toBe('key *** and ***');
  });

  it('masks each line of a value of several lines, so an error cut to one line keeps none', () => {
    const mask = maskOf('-----BEGIN KEY-----\nMIIEvQIBADANBgkq\n-----END KEY-----');
    expect(mask.text('bad key: MIIEvQIBADANBgkq')).toBe('bad key: ***');
  });

  it('leaves values too short to be secrets alone: masking them would wreck every text', () => {
    const mask = maskOf('1', 'true', 'prod', '443');
    expect(mask.text('enabled true on port 443 in prod, retry 1')).toBe(
      'enabled true on port 443 in prod, retry 1',
    );
  });

  it('hands back an error that holds no value as it is', () => {
    const e = new DomainError('REFRESH.INVALID', 'nothing to hide', { n: 1 });
    expect(maskOf('s3cr3t-value').error(e)).toBe(e);
    expect(new SecretMask().error(e)).toBe(e);
  });

  it('replaces an error holding a value anywhere (message, metadata, cause) by one of its code, masked', () => {
    const mask = maskOf('s3cr3t-value');
    const inMessage = mask.error(new DomainError('REFRESH.INVALID', 'bad s3cr3t-value'));
    expect(inMessage).toMatchObject({ code: 'REFRESH.INVALID', message: 'bad ***' });
    expect(String((inMessage as Error).stack)).not.toContain('s3cr3t-value');

    const inMetadata = mask.error(
      new DomainError('PROVIDER.RPC_FAILED', 'failed', { stderrTail: 'key=s3cr3t-value' }),
    ) as DomainError;
    expect(inMetadata).toMatchObject({ code: 'PROVIDER.RPC_FAILED', message: 'failed' });
    expect(inMetadata.metadata).toEqual({});

    const inCause = mask.error(new Error('failed', { cause: new Error('s3cr3t-value') }));
    expect(inCause).toBeInstanceOf(Error);
    expect((inCause as Error).cause).toBeUndefined();
  });
});
