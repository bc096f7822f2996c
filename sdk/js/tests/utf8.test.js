// The SDK's UTF-8 fallbacks (what state and http use where the engine has
// no TextEncoder / TextDecoder: QuickJS) against Node's, natively.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { _utf8 } from 'weft-plugin-sdk';

const samples = ['', 'ascii', 'é', 'naïve café', '日本語', '😀 emoji', 'a\u0000b', '\u07ff\u0800\uffff', '\u{10ffff}'];

test('encode matches TextEncoder, lone surrogates included', () => {
  const enc = new TextEncoder();
  for (const s of [...samples, '\ud800', 'x\udc00y', '\ud83d']) {
    assert.deepEqual(_utf8.encode(s), enc.encode(s), JSON.stringify(s));
  }
});

test('decode matches TextDecoder on text and on malformed bytes', () => {
  const enc = new TextEncoder();
  const dec = new TextDecoder();
  for (const s of samples) assert.equal(_utf8.decode(enc.encode(s)), s);
  const bad = [
    [0x80], [0xc0, 0x80], [0xc2], [0xe0, 0x80, 0x80], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80],
    [0xf5, 0x41], [0xff], [0x61, 0xe2, 0x82], [0xe2, 0x82, 0x41],
  ];
  for (const b of bad) {
    const bytes = Uint8Array.from(b);
    // Both replace what is malformed; the count of U+FFFD may differ from
    // TextDecoder's "maximal subpart" rule, the valid text around it not.
    const ours = _utf8.decode(bytes);
    const theirs = dec.decode(bytes);
    assert.equal(ours.replace(/\ufffd+/g, '\ufffd'), theirs.replace(/\ufffd+/g, '\ufffd'), JSON.stringify(b));
  }
});

test('random round trips', () => {
  const enc = new TextEncoder();
  for (let i = 0; i < 500; i++) {
    let s = '';
    for (let k = 0; k < 20; k++) s += String.fromCodePoint(Math.floor(Math.random() * 0x10ffff) & ~0x800 | 0x20);
    assert.deepEqual(_utf8.encode(s), enc.encode(s));
    assert.equal(_utf8.decode(_utf8.encode(s)), new TextDecoder().decode(enc.encode(s)));
  }
});
