import { decodeMsgpack, encodeMsgpack } from './cty-codec';
import { CtyJson } from './cty-type';
import { blockType } from './implied-type';
import { SchemaBlock } from './schema';
import fixture from './fixtures/aws-provider-5.100.0-values.json';

/**
 * new_state bytes the AWS provider 5.100.0 sent from ReadResource (against
 * moto), with the resource schema it declared and the value Terraform would
 * store. Our encoder must give back exactly the provider's bytes.
 */
const cases = Object.entries(
  fixture as Record<string, { block: SchemaBlock; msgpackHex: string; json: CtyJson }>,
);

describe('cty codec against bytes recorded from the AWS provider', () => {
  it.each(cases)(
    '%s decodes to the stored JSON and re-encodes byte for byte',
    (_type, { block, msgpackHex, json }) => {
      const type = blockType(block);
      const decoded = decodeMsgpack(type, Buffer.from(msgpackHex, 'hex'));
      expect(decoded).toEqual(json);
      // Through JSON text, as the value travels to and from PostgreSQL.
      const stored = JSON.parse(JSON.stringify(decoded)) as CtyJson;
      expect(Buffer.from(encodeMsgpack(type, stored)).toString('hex')).toBe(msgpackHex);
    },
  );

  it('covers nested set blocks, maps and non-ASCII strings', () => {
    const bucket = fixture.aws_s3_bucket.json as Record<string, CtyJson>;
    expect(bucket.grant).toHaveLength(1);
    expect(bucket.tags).toEqual({ env: 'dev', team: 'core' });
    expect((fixture.aws_ssm_parameter.json as Record<string, CtyJson>).description).toBe(
      'fixture ✓',
    );
  });
});
