import { CtyError } from './cty-error';

export type MsgpackToken =
  | { t: 'nil' }
  | { t: 'bool'; v: boolean }
  // A number for the formats of up to 32 bits, a bigint for the 64-bit ones.
  | { t: 'int'; v: number | bigint }
  | { t: 'float'; v: number }
  | { t: 'str'; v: string }
  | { t: 'bin'; v: Uint8Array }
  | { t: 'array'; n: number }
  | { t: 'map'; n: number }
  | { t: 'ext'; type: number; data: Uint8Array };

const utf8 = new TextDecoder('utf-8', { fatal: true });
/** Up to this many bytes, an all-ASCII string is built from its char codes (one byte, one char). */
const ASCII_FAST_PATH_MAX = 64;

/** A pull reader: containers yield only their length, their items follow. */
export class MsgpackReader {
  private pos = 0;
  private readonly view: DataView;

  constructor(private readonly data: Uint8Array) {
    this.view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  }

  get done(): boolean {
    return this.pos >= this.data.length;
  }

  private need(n: number): void {
    if (this.pos + n > this.data.length) {
      throw new CtyError('CTY.MALFORMED_MSGPACK', `truncated msgpack at byte ${this.pos}`);
    }
  }

  private u8(): number {
    this.need(1);
    return this.data[this.pos++];
  }
  private u16(): number {
    this.need(2);
    const v = this.view.getUint16(this.pos);
    this.pos += 2;
    return v;
  }
  private u32(): number {
    this.need(4);
    const v = this.view.getUint32(this.pos);
    this.pos += 4;
    return v;
  }
  private take(n: number): Uint8Array {
    this.need(n);
    const out = this.data.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }
  private str(n: number): MsgpackToken {
    const bytes = this.take(n);
    // Attribute names and most values are short ASCII: no decoder call for them.
    if (n <= ASCII_FAST_PATH_MAX) {
      let ascii = true;
      for (let i = 0; i < n; i++) {
        if (bytes[i] > 0x7f) {
          ascii = false;
          break;
        }
      }
      if (ascii)
        return { t: 'str', v: String.fromCharCode.apply(null, bytes as unknown as number[]) };
    }
    try {
      return { t: 'str', v: utf8.decode(bytes) };
    } catch (e) {
      if (e instanceof CtyError) throw e;
      throw new CtyError('CTY.MALFORMED_MSGPACK', 'string is not valid UTF-8');
    }
  }
  private ext(n: number): MsgpackToken {
    this.need(1 + n);
    const type = this.view.getInt8(this.pos);
    this.pos += 1;
    return { t: 'ext', type, data: this.take(n) };
  }

  next(): MsgpackToken {
    const b = this.u8();
    if (b <= 0x7f) return { t: 'int', v: b };
    if (b >= 0xe0) return { t: 'int', v: b - 0x100 };
    if ((b & 0xf0) === 0x80) return { t: 'map', n: b & 0x0f };
    if ((b & 0xf0) === 0x90) return { t: 'array', n: b & 0x0f };
    if ((b & 0xe0) === 0xa0) return this.str(b & 0x1f);
    let v: MsgpackToken;
    switch (b) {
      case 0xc0:
        return { t: 'nil' };
      case 0xc2:
        return { t: 'bool', v: false };
      case 0xc3:
        return { t: 'bool', v: true };
      case 0xc4:
        return { t: 'bin', v: this.take(this.u8()) };
      case 0xc5:
        return { t: 'bin', v: this.take(this.u16()) };
      case 0xc6:
        return { t: 'bin', v: this.take(this.u32()) };
      case 0xc7:
        return this.ext(this.u8());
      case 0xc8:
        return this.ext(this.u16());
      case 0xc9:
        return this.ext(this.u32());
      case 0xca:
        this.need(4);
        v = { t: 'float', v: this.view.getFloat32(this.pos) };
        this.pos += 4;
        return v;
      case 0xcb:
        this.need(8);
        v = { t: 'float', v: this.view.getFloat64(this.pos) };
        this.pos += 8;
        return v;
      case 0xcc:
        return { t: 'int', v: this.u8() };
      case 0xcd:
        return { t: 'int', v: this.u16() };
      case 0xce:
        return { t: 'int', v: this.u32() };
      case 0xcf:
        this.need(8);
        v = { t: 'int', v: this.view.getBigUint64(this.pos) };
        this.pos += 8;
        return v;
      case 0xd0:
        this.need(1);
        return { t: 'int', v: this.view.getInt8(this.pos++) };
      case 0xd1:
        this.need(2);
        v = { t: 'int', v: this.view.getInt16(this.pos) };
        this.pos += 2;
        return v;
      case 0xd2:
        this.need(4);
        v = { t: 'int', v: this.view.getInt32(this.pos) };
        this.pos += 4;
        return v;
      case 0xd3:
        this.need(8);
        v = { t: 'int', v: this.view.getBigInt64(this.pos) };
        this.pos += 8;
        return v;
      case 0xd4:
        return this.ext(1);
      case 0xd5:
        return this.ext(2);
      case 0xd6:
        return this.ext(4);
      case 0xd7:
        return this.ext(8);
      case 0xd8:
        return this.ext(16);
      case 0xd9:
        return this.str(this.u8());
      case 0xda:
        return this.str(this.u16());
      case 0xdb:
        return this.str(this.u32());
      case 0xdc:
        return { t: 'array', n: this.u16() };
      case 0xdd:
        return { t: 'array', n: this.u32() };
      case 0xde:
        return { t: 'map', n: this.u16() };
      case 0xdf:
        return { t: 'map', n: this.u32() };
      default:
        throw new CtyError('CTY.MALFORMED_MSGPACK', `invalid msgpack byte 0x${b.toString(16)}`);
    }
  }

  /** Skips one whole value, containers included. */
  skip(): void {
    let pending = 1;
    while (pending > 0) {
      const tok = this.next();
      pending--;
      if (tok.t === 'array') pending += tok.n;
      else if (tok.t === 'map') pending += tok.n * 2;
    }
  }
}
