import { parseHclogLine, PluginLogRecord, PluginStderr } from './plugin-stderr';

describe('plugin stderr', () => {
  it('parses hclog JSON lines across chunk boundaries and passes every line to the logger', () => {
    const records: PluginLogRecord[] = [];
    const stderr = new PluginStderr((r) => records.push(r));
    stderr.write(
      'Starting provider\n{"@level":"trace","@message":"Found resource type","@module":"sdk.proto","tf_resource_type":"aws_s3',
    );
    stderr.write('_bucket"}\n{"@level":"error","@message":"boom"}\npanic: runtime error');
    stderr.end();
    expect(records.map((r) => [r.level, r.message, r.structured])).toEqual([
      ['info', 'Starting provider', false],
      ['trace', 'Found resource type', true],
      ['error', 'boom', true],
      ['error', 'panic: runtime error', false],
    ]);
    expect(records[1].fields).toEqual({
      '@module': 'sdk.proto',
      tf_resource_type: 'aws_s3_bucket',
    });
  });

  it('keeps a bounded tail of the lines worth showing in an error, without trace noise', () => {
    const stderr = new PluginStderr(undefined, 3);
    for (let i = 0; i < 10; i++) stderr.write(`{"@level":"trace","@message":"t${i}"}\n`);
    stderr.write('line 1\nline 2\n{"@level":"warn","@message":"w"}\npanic: nil pointer\n');
    expect(stderr.tailText()).toBe('line 2\n{"@level":"warn","@message":"w"}\npanic: nil pointer');
  });

  it('treats malformed JSON as a plain line', () => {
    expect(parseHclogLine('{not json')).toMatchObject({ message: '{not json', structured: false });
  });
});
