const utf8 = new TextEncoder();

/**
 * The msgpack subset go-cty emits, format for format, so that re-encoding a
 * provider's value gives back its exact bytes: integers in the smallest
 * format (unsigned formats for non-negative values), float64 only, str8 for
 * 32–255 byte strings.
 */
export class MsgpackWriter {
  private buf = new Uint8Array(256);
  private view = new DataView(this.buf.buffer);
  private len = 0;

  bytes(): Uint8Array {
    return this.buf.slice(0, this.len);
  }

  /**
   * Empties the writer for the next value, keeping its buffer (a refresh
   * encodes one state per read) unless a big value grew it past `keepBytes`.
   */
  reset(keepBytes = 1 << 20): void {
    this.len = 0;
    if (this.buf.length > keepBytes) {
      this.buf = new Uint8Array(256);
      this.view = new DataView(this.buf.buffer);
    }
  }

  private ensure(n: number): void {
    if (this.len + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.len + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.len));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }

  private byte(b: number): void {
    this.ensure(1);
    this.buf[this.len++] = b;
  }

  private u16(tag: number, v: number): void {
    this.ensure(3);
    this.buf[this.len] = tag;
    this.view.setUint16(this.len + 1, v);
    this.len += 3;
  }

  private u32(tag: number, v: number): void {
    this.ensure(5);
    this.buf[this.len] = tag;
    this.view.setUint32(this.len + 1, v);
    this.len += 5;
  }

  private raw(data: Uint8Array): void {
    this.ensure(data.length);
    this.buf.set(data, this.len);
    this.len += data.length;
  }

  nil(): void {
    this.byte(0xc0);
  }

  bool(v: boolean): void {
    this.byte(v ? 0xc3 : 0xc2);
  }

  /** Caller guarantees -2^63 <= v < 2^64. */
  int(v: bigint): void {
    if (v >= 0n) {
      if (v < 0x80n) return this.byte(Number(v));
      if (v <= 0xffn) {
        this.byte(0xcc);
        return this.byte(Number(v));
      }
      if (v <= 0xffffn) return this.u16(0xcd, Number(v));
      if (v <= 0xffffffffn) return this.u32(0xce, Number(v));
      this.ensure(9);
      this.buf[this.len] = 0xcf;
      this.view.setBigUint64(this.len + 1, v);
      this.len += 9;
      return;
    }
    if (v >= -32n) return this.byte(Number(v) & 0xff);
    if (v >= -0x80n) {
      this.byte(0xd0);
      return this.byte(Number(v) & 0xff);
    }
    if (v >= -0x8000n) return this.u16(0xd1, Number(v) & 0xffff);
    if (v >= -0x80000000n) return this.u32(0xd2, Number(v) >>> 0);
    this.ensure(9);
    this.buf[this.len] = 0xd3;
    this.view.setBigInt64(this.len + 1, v);
    this.len += 9;
  }

  float64(v: number): void {
    this.ensure(9);
    this.buf[this.len] = 0xcb;
    this.view.setFloat64(this.len + 1, v);
    this.len += 9;
  }

  string(v: string): void {
    // Attribute names and most values are short ASCII: one byte per char, no encoder call.
    const short = v.length;
    if (short < 32) {
      this.ensure(1 + short);
      const start = this.len;
      let i = 0;
      for (; i < short; i++) {
        const c = v.charCodeAt(i);
        if (c > 0x7f) break;
        this.buf[start + 1 + i] = c;
      }
      if (i === short) {
        this.buf[start] = 0xa0 | short;
        this.len = start + 1 + short;
        return;
      }
    }
    const data = utf8.encode(v);
    const n = data.length;
    if (n < 32) this.byte(0xa0 | n);
    else if (n <= 0xff) {
      this.byte(0xd9);
      this.byte(n);
    } else if (n <= 0xffff) this.u16(0xda, n);
    else this.u32(0xdb, n);
    this.raw(data);
  }

  binary(data: Uint8Array): void {
    const n = data.length;
    if (n <= 0xff) {
      this.byte(0xc4);
      this.byte(n);
    } else if (n <= 0xffff) this.u16(0xc5, n);
    else this.u32(0xc6, n);
    this.raw(data);
  }

  arrayHeader(n: number): void {
    if (n < 16) this.byte(0x90 | n);
    else if (n <= 0xffff) this.u16(0xdc, n);
    else this.u32(0xdd, n);
  }

  mapHeader(n: number): void {
    if (n < 16) this.byte(0x80 | n);
    else if (n <= 0xffff) this.u16(0xde, n);
    else this.u32(0xdf, n);
  }
}
