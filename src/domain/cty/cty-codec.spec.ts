import { decodeMsgpack, encodeMsgpack } from './cty-codec';
import { CtyError } from './cty-error';
import {
  BOOL,
  compareUtf8,
  CtyType,
  DYNAMIC,
  listOf,
  mapOf,
  NUMBER,
  objectOf,
  setOf,
  STRING,
  tupleOf,
} from './cty-type';
import { blockType } from './implied-type';
import { canonicalHash } from '../terraform/canonical-hash';
import type { JsonValue } from '../terraform/json-value';
import { numberFromText, parseJsonLossless, stringifyJson } from '../terraform/lossless-json';
import { SchemaBlock } from './schema';

const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');
const bytes = (h: string): Uint8Array => new Uint8Array(Buffer.from(h.replace(/\s+/g, ''), 'hex'));
const ascii = (s: string): string => Buffer.from(s).toString('hex');

function roundTrip(type: CtyType, value: unknown): { encoded: string; decoded: unknown } {
  const encoded = encodeMsgpack(type, value);
  const decoded = decodeMsgpack(type, encoded);
  expect(hex(encodeMsgpack(type, decoded))).toBe(hex(encoded));
  return { encoded: hex(encoded), decoded };
}

function codeOf(fn: () => unknown): { code: string; path: string } {
  try {
    fn();
  } catch (e) {
    if (e instanceof CtyError) return { code: e.code, path: e.path };
    throw e;
  }
  throw new Error('expected a CtyError');
}

describe('cty msgpack codec', () => {
  describe('primitives', () => {
    it('writes strings with fixstr, str8 and str16 headers', () => {
      expect(roundTrip(STRING, 'hi')).toEqual({ encoded: 'a2' + ascii('hi'), decoded: 'hi' });
      const s40 = 'x'.repeat(40);
      expect(roundTrip(STRING, s40).encoded).toBe('d928' + ascii(s40));
      const s300 = 'y'.repeat(300);
      expect(roundTrip(STRING, s300).encoded).toBe('da012c' + ascii(s300));
      expect(roundTrip(STRING, 'é').encoded).toBe('a2c3a9');
    });

    it('spells every string byte for byte, ASCII or not, short or long', () => {
      // Short ASCII strings take a fast path both ways; each length around its bounds.
      for (const n of [0, 1, 30, 31, 32, 63, 64, 65]) {
        for (const text of [
          'a'.repeat(n),
          'é'.repeat(n),
          `${'b'.repeat(n)}€`,
          `😀${'c'.repeat(n)}`,
        ]) {
          const utf8 = Buffer.from(text);
          const { encoded, decoded } = roundTrip(STRING, text);
          expect(encoded.endsWith(utf8.toString('hex'))).toBe(true);
          expect(decoded).toBe(text);
        }
      }
      expect(decodeMsgpack(STRING, bytes('a3 00 7f 41'))).toBe('\u0000\u007fA');
    });

    it('writes booleans and null', () => {
      expect(roundTrip(BOOL, true).encoded).toBe('c3');
      expect(roundTrip(BOOL, false).encoded).toBe('c2');
      expect(roundTrip(STRING, null)).toEqual({ encoded: 'c0', decoded: null });
    });

    it('applies cty primitive conversions to configuration values', () => {
      expect(hex(encodeMsgpack(STRING, true))).toBe('a4' + ascii('true'));
      expect(hex(encodeMsgpack(STRING, 12))).toBe('a2' + ascii('12'));
      expect(hex(encodeMsgpack(NUMBER, '5'))).toBe('05');
      expect(hex(encodeMsgpack(BOOL, 'false'))).toBe('c2');
    });

    it('writes integers in the smallest format, unsigned ones for non-negative values', () => {
      const cases: [number | string, string][] = [
        [0, '00'],
        [127, '7f'],
        [128, 'cc80'],
        [300, 'cd012c'],
        [70000, 'ce00011170'],
        [2 ** 40, 'cf0000010000000000'],
        [-1, 'ff'],
        [-32, 'e0'],
        [-33, 'd0df'],
        [-200, 'd1ff38'],
        [-70000, 'd2fffeee90'],
        [-(2 ** 40), 'd3ffffff0000000000'],
      ];
      for (const [n, h] of cases) expect([n, roundTrip(NUMBER, n).encoded]).toEqual([n, h]);
    });

    it('writes float64 for non-integers', () => {
      expect(roundTrip(NUMBER, 1.5)).toEqual({ encoded: 'cb3ff8000000000000', decoded: 1.5 });
      expect(roundTrip(NUMBER, 0.1).decoded).toBe(0.1);
      expect(roundTrip(NUMBER, 1e300).encoded).toBe(
        'cb' +
          Buffer.from(new Float64Array([1e300]).buffer)
            .reverse()
            .toString('hex'),
      );
    });

    it('keeps int64 values beyond 2^53 exact, as marked numbers in JSON', () => {
      const big = '9007199254740993'; // 2^53 + 1
      const { encoded, decoded } = roundTrip(NUMBER, big);
      expect(encoded).toBe('cf0020000000000001');
      expect(decoded).toBe(numberFromText(big));
      expect(stringifyJson(decoded)).toBe(big);
      expect(roundTrip(NUMBER, numberFromText(big)).encoded).toBe('cf0020000000000001');
      expect(roundTrip(NUMBER, '-9223372036854775808')).toEqual({
        encoded: 'd38000000000000000',
        decoded: numberFromText('-9223372036854775808'),
      });
      expect(hex(encodeMsgpack(NUMBER, 2n ** 62n))).toBe('cf4000000000000000');
    });

    it('uses float64 when exact beyond int64 and the decimal string form otherwise', () => {
      expect(hex(encodeMsgpack(NUMBER, 2n ** 64n))).toBe('cb43f0000000000000');
      const beyond = '18446744073709551617';
      expect(roundTrip(NUMBER, beyond)).toEqual({
        encoded: 'b4' + ascii(beyond),
        decoded: numberFromText(beyond),
      });
      // 0.1 is not exact in binary, so it goes as decimal text; it comes back as
      // the number a document spelling 0.1 holds.
      expect(hex(encodeMsgpack(NUMBER, '0.1'))).toBe('a3' + ascii('0.1'));
      expect(decodeMsgpack(NUMBER, bytes('a3' + ascii('0.1')))).toBe(0.1);
      const precise = '3.14159265358979323846264338327950288';
      expect(roundTrip(NUMBER, precise)).toEqual({
        encoded: 'd9' + '25' + ascii(precise),
        decoded: numberFromText(precise),
      });
      expect(hex(encodeMsgpack(NUMBER, '2.5e0'))).toBe('cb4004000000000000');
      expect(hex(encodeMsgpack(NUMBER, '1.0'))).toBe('01');
      const huge = hex(encodeMsgpack(NUMBER, '1e400'));
      expect(huge).toBe('da0191' + ascii('1' + '0'.repeat(400)));
    });

    it('accepts every msgpack number format a provider may use', () => {
      expect(decodeMsgpack(NUMBER, bytes('ca3fc00000'))).toBe(1.5); // float32
      expect(decodeMsgpack(NUMBER, bytes('d00a'))).toBe(10); // int8 holding a positive value
      expect(decodeMsgpack(NUMBER, bytes('a135'))).toBe(5);
      expect(decodeMsgpack(NUMBER, bytes('cfffffffffffffffff'))).toBe(
        numberFromText('18446744073709551615'),
      );
    });

    it('carries numbers of a losslessly parsed document to the provider and back unchanged', () => {
      const text =
        '{"big":12345678901234567890,"frac":0.1000000000000000055511151231257827,"id":"x","plain":1.5}';
      const attributes = parseJsonLossless(text);
      const type = objectOf({ id: STRING, big: NUMBER, frac: NUMBER, plain: NUMBER });
      const wire = encodeMsgpack(type, attributes);
      // Beyond int64 and float64 the numbers go as decimal text, as go-cty writes them.
      expect(hex(wire)).toContain('b4' + ascii('12345678901234567890'));
      expect(hex(wire)).toContain('d9' + '24' + ascii('0.1000000000000000055511151231257827'));
      const back = decodeMsgpack(type, wire) as JsonValue;
      expect(back).toEqual(attributes);
      expect(canonicalHash(back)).toBe(canonicalHash(attributes));
      expect(stringifyJson(back)).toBe(text);
    });

    it('converts a big number to its digits where a string is expected', () => {
      const big = numberFromText('98765432109876543210');
      expect(hex(encodeMsgpack(STRING, big))).toBe('b4' + ascii('98765432109876543210'));
    });

    it('refuses values of the wrong type with the path', () => {
      expect(codeOf(() => encodeMsgpack(NUMBER, 'five'))).toEqual({
        code: 'CTY.TYPE_MISMATCH',
        path: '',
      });
      expect(codeOf(() => encodeMsgpack(BOOL, 1))).toEqual({ code: 'CTY.TYPE_MISMATCH', path: '' });
      expect(codeOf(() => decodeMsgpack(STRING, bytes('01')))).toEqual({
        code: 'CTY.TYPE_MISMATCH',
        path: '',
      });
    });
  });

  describe('collections and structural types', () => {
    it('round-trips lists, sets, tuples and maps', () => {
      expect(roundTrip(listOf(STRING), ['a', 'b'])).toEqual({
        encoded: '92a161a162',
        decoded: ['a', 'b'],
      });
      // Set order is whatever the value holds: providers' order survives a round trip.
      expect(roundTrip(setOf(NUMBER), [3, 1, 2]).encoded).toBe('93030102');
      expect(roundTrip(tupleOf([STRING, NUMBER, BOOL]), ['x', 1, false]).encoded).toBe(
        '93a178' + '01c2',
      );
      expect(roundTrip(mapOf(NUMBER), { b: 2, a: 1 })).toEqual({
        encoded: '82a16101a16202',
        decoded: { a: 1, b: 2 },
      });
      expect(roundTrip(listOf(STRING), ['a', null, 'c']).decoded).toEqual(['a', null, 'c']);
      expect(roundTrip(listOf(STRING), []).encoded).toBe('90');
      const long = Array.from({ length: 20 }, (_, i) => i);
      expect(roundTrip(listOf(NUMBER), long).encoded.slice(0, 6)).toBe('dc0014');
    });

    it('sorts map keys and object attributes by UTF-8 bytes, as go-cty does', () => {
      const keys = ['b', '😀', 'a', '\uffff', 'é'];
      expect([...keys].sort(compareUtf8)).toEqual(['a', 'b', 'é', '\uffff', '😀']);
      const value = Object.fromEntries(keys.map((k) => [k, true]));
      const encoded = encodeMsgpack(mapOf(BOOL), value);
      const order = Object.keys(decodeMsgpack(mapOf(BOOL), encoded) as object);
      expect(new Set(order)).toEqual(new Set(keys));
      expect(hex(encoded)).toBe(
        '85' + ['a161', 'a162', 'a2c3a9', 'a3efbfbf', 'a4f09f9880'].map((k) => k + 'c3').join(''),
      );
    });

    it('writes every object attribute, null when unset, and refuses unknown attributes', () => {
      const t = objectOf({ b: BOOL, a: NUMBER, c: STRING });
      expect(roundTrip(t, { b: true, a: 1 })).toEqual({
        encoded: '83a16101a162c3a163c0',
        decoded: { a: 1, b: true, c: null },
      });
      expect(codeOf(() => encodeMsgpack(t, { a: 1, z: 2 }))).toEqual({
        code: 'CTY.UNSUPPORTED_ATTRIBUTE',
        path: '',
      });
      expect(codeOf(() => decodeMsgpack(t, bytes('81a17a01')))).toEqual({
        code: 'CTY.UNSUPPORTED_ATTRIBUTE',
        path: '',
      });
    });

    it('fills attributes missing from a provider object with null', () => {
      const t = objectOf({ a: NUMBER, b: STRING });
      expect(decodeMsgpack(t, bytes('81a16105'))).toEqual({ a: 5, b: null });
    });

    it('reads an object attribute named __proto__ as data', () => {
      const type = objectOf({ ['__proto__']: NUMBER, a: NUMBER });
      const decoded = decodeMsgpack(type, bytes('82a95f5f70726f746f5f5f01a16102')) as Record<
        string,
        unknown
      >;
      expect(Object.keys(decoded)).toEqual(['__proto__', 'a']);
      expect(Object.getPrototypeOf(decoded)).toBe(Object.prototype);
      expect(decoded.a).toBe(2);
    });

    it('treats a key named __proto__ as data', () => {
      const decoded = decodeMsgpack(mapOf(NUMBER), bytes('81a95f5f70726f746f5f5f01')) as Record<
        string,
        unknown
      >;
      expect(Object.keys(decoded)).toEqual(['__proto__']);
      expect(Object.getPrototypeOf(decoded)).toBe(Object.prototype);
    });
  });

  describe('dynamic values', () => {
    it('travels as [type JSON bytes, value] and reads back as {value, type}', () => {
      const typeJson = ascii('"string"');
      expect(roundTrip(DYNAMIC, { value: 'hi', type: 'string' })).toEqual({
        encoded: '92c408' + typeJson + 'a2' + ascii('hi'),
        decoded: { value: 'hi', type: 'string' },
      });
    });

    it('writes a typed null with its type and an untyped null as nil', () => {
      const typeJson = ascii('["list","string"]');
      expect(roundTrip(DYNAMIC, { value: null, type: ['list', 'string'] })).toEqual({
        encoded: '92c411' + typeJson + 'c0',
        decoded: { value: null, type: ['list', 'string'] },
      });
      expect(roundTrip(DYNAMIC, null).encoded).toBe('c0');
    });

    it('writes the type JSON canonically, with object attributes sorted', () => {
      const v = { value: { b: 1, a: 'x' }, type: ['object', { b: 'number', a: 'string' }] };
      const typeJson = ascii('["object",{"a":"string","b":"number"}]');
      expect(roundTrip(DYNAMIC, v)).toEqual({
        encoded: `92c4${(typeJson.length / 2).toString(16)}${typeJson}82a161a178a16201`,
        decoded: { value: { a: 'x', b: 1 }, type: ['object', { a: 'string', b: 'number' }] },
      });
    });

    it('refuses a dynamic value that does not say its type', () => {
      const t = objectOf({ d: DYNAMIC });
      expect(codeOf(() => encodeMsgpack(t, { d: 'bare' }))).toEqual({
        code: 'CTY.TYPE_MISMATCH',
        path: 'd',
      });
    });
  });

  describe('unknown values', () => {
    it('are refused wherever they appear, with the path', () => {
      const block: SchemaBlock = {
        attributes: [{ name: 'id', type: 'string' }],
        blockTypes: [
          {
            typeName: 'rule',
            nesting: 'list',
            block: { attributes: [{ name: 'status', type: 'string' }], blockTypes: [] },
          },
        ],
      };
      // {id: "x", rule: [{status: <unknown>}]}, with go-cty's unknown (ext 0) and a refined unknown (ext 12).
      for (const unknown of ['d40000', 'c7030c8101c3']) {
        const data = bytes('82a26964a178a472756c659181a6737461747573' + unknown);
        expect(codeOf(() => decodeMsgpack(blockType(block), data))).toEqual({
          code: 'CTY.UNKNOWN_VALUE',
          path: 'rule[0].status',
        });
      }
    });
  });

  it('reports malformed msgpack as a typed error', () => {
    expect(codeOf(() => decodeMsgpack(STRING, bytes('a5616263')))).toEqual({
      code: 'CTY.MALFORMED_MSGPACK',
      path: '',
    });
    expect(codeOf(() => decodeMsgpack(STRING, bytes('a161a162')))).toEqual({
      code: 'CTY.MALFORMED_MSGPACK',
      path: '',
    });
    // Invalid UTF-8, short and long: a lone continuation byte, a truncated sequence.
    for (const bad of ['a180', 'a3 41 e2 82', `d941${'41'.repeat(64)}ff`]) {
      expect(codeOf(() => decodeMsgpack(STRING, bytes(bad)))).toEqual({
        code: 'CTY.MALFORMED_MSGPACK',
        path: '',
      });
    }
  });
});
