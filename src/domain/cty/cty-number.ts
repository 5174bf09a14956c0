/**
 * How a cty number goes on the wire. go-cty writes an integer when the value is
 * an exact int64, else a float64 when that is exact, else the decimal text;
 * following the same rule is what makes our bytes match a provider's.
 */
export type WireNumber =
  | { kind: 'int'; value: bigint }
  | { kind: 'float'; value: number }
  | { kind: 'decimal'; value: string };

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const DECIMAL = /^([+-]?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/;

export function isInt64(v: bigint): boolean {
  return v >= INT64_MIN && v <= INT64_MAX;
}

export function wireNumberFromJs(n: number): WireNumber | null {
  if (Number.isNaN(n)) return null;
  if (Number.isInteger(n)) {
    const big = BigInt(n);
    if (isInt64(big)) return { kind: 'int', value: big };
  }
  return { kind: 'float', value: n };
}

export function wireNumberFromBigInt(v: bigint): WireNumber {
  if (isInt64(v)) return { kind: 'int', value: v };
  const f = Number(v);
  if (Number.isFinite(f) && BigInt(f) === v) return { kind: 'float', value: f };
  return { kind: 'decimal', value: v.toString() };
}

/** Parses decimal text (as found in state or in msgpack's string form); null if it is not a number. */
export function wireNumberFromText(text: string): WireNumber | null {
  const m = DECIMAL.exec(text.trim());
  if (!m) return null;
  const [, sign, intPart, fracPart = '', expPart = '0'] = m;
  const exp = Number(expPart);
  const digits = (intPart + fracPart).replace(/^0+(?=\d)/, '');
  // value = sign * digits * 10^scale
  let scale = exp - fracPart.length;
  let mantissa = digits.replace(/0+$/, '');
  scale += digits.length - mantissa.length;
  if (mantissa === '') return { kind: 'int', value: 0n };
  const negative = sign === '-';
  // Far outside float64's range: only the decimal text can carry it.
  if (mantissa.length + scale > 400 || scale < -1200) {
    return { kind: 'decimal', value: plainDecimal(negative, mantissa, scale) };
  }
  if (scale >= 0) {
    const v = BigInt(mantissa + '0'.repeat(scale)) * (negative ? -1n : 1n);
    return wireNumberFromBigInt(v);
  }
  const f = Number(`${negative ? '-' : ''}${mantissa}e${scale}`);
  if (Number.isFinite(f) && floatEqualsDecimal(Math.abs(f), BigInt(mantissa), -scale)) {
    return { kind: 'float', value: f };
  }
  mantissa = mantissa.replace(/^0+/, '');
  return { kind: 'decimal', value: plainDecimal(negative, mantissa, scale) };
}

/** Whether the finite double f equals num / 10^den exactly. */
function floatEqualsDecimal(f: number, num: bigint, den: number): boolean {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, f);
  const bits = view.getBigUint64(0);
  const biased = Number((bits >> 52n) & 0x7ffn);
  const fraction = bits & ((1n << 52n) - 1n);
  const significand = biased === 0 ? fraction : fraction | (1n << 52n);
  const exp2 = (biased === 0 ? 1 : biased) - 1075;
  // f = significand * 2^exp2; compare significand * 2^exp2 * 10^den with num.
  let left = significand * 10n ** BigInt(den);
  let right = num;
  if (exp2 >= 0) left <<= BigInt(exp2);
  else right <<= BigInt(-exp2);
  return left === right;
}

function plainDecimal(negative: boolean, mantissa: string, scale: number): string {
  let text: string;
  if (scale >= 0) text = mantissa + '0'.repeat(scale);
  else {
    const point = mantissa.length + scale;
    text =
      point > 0
        ? `${mantissa.slice(0, point)}.${mantissa.slice(point)}`
        : `0.${'0'.repeat(-point)}${mantissa}`;
  }
  return negative ? `-${text}` : text;
}
