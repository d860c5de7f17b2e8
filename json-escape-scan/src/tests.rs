extern crate std;

use std::vec::Vec;

use proptest::prelude::*;

use super::*;

/// Every scan from `from` agrees with the byte scan: exactly, or (the word scan) by
/// stopping short where its eight-byte steps no longer fit.
fn check_all_scans(text: &[u8], from: usize) {
    let expected = scan_bytes(text, from);
    let words = scan_words(text, from);
    assert!(words == expected || (words < expected && words + 8 > text.len()), "words from {from}: {words}");
    assert_eq!(scan_bytes(text, words), expected, "words then bytes from {from}");
    #[cfg(target_arch = "x86_64")]
    {
        let blocks = from + sse2::scan(&text[from..]);
        assert!(blocks == expected || (blocks < expected && blocks + 16 > text.len()), "blocks from {from}: {blocks}");
    }
    assert_eq!(from + clean_prefix_len(&text[from..]), expected, "from {from}");
}

#[test]
fn the_escaped_set_is_exactly_serde_jsons() {
    for b in 0..=255u8 {
        assert_eq!(needs_escape(b), b < 0x20 || b == b'"' || b == b'\\', "byte {b:#04x}");
    }
}

#[test]
fn every_byte_value_at_every_offset_of_a_long_run() {
    for len in [1usize, 7, 8, 9, 15, 16, 17, 63, 64, 65, 80, 130] {
        for at in 0..len {
            for b in 0..=255u8 {
                let mut text = std::vec![b'a'; len];
                text[at] = b;
                let want = if needs_escape(b) { at } else { len };
                assert_eq!(clean_prefix_len(&text), want, "len {len}, byte {b:#04x} at {at}");
                assert_eq!(scan_bytes(&text, scan_words(&text, 0)), want, "len {len}, byte {b:#04x} at {at} (words)");
            }
        }
    }
}

#[test]
fn dense_mixes_of_escapes_and_clean_bytes_from_every_start() {
    let mut text: Vec<u8> = Vec::new();
    for (period, count) in [(37u32, 600u32), (151, 1200)] {
        for i in 0..count {
            let piece = match i % period {
                0 => "\"",
                5 => "\\",
                11 => "\u{1}",
                17 => "\u{1f}",
                23 => "é",
                29 => "\u{7f}",
                31 => " ",
                32 => "!",
                33 => "#",
                34 => "¢",
                35 => "]",
                _ => "x",
            };
            text.extend_from_slice(piece.as_bytes());
        }
    }
    for from in 0..=text.len() {
        check_all_scans(&text, from);
    }
}

#[test]
fn empty_and_all_escapes() {
    assert_eq!(clean_prefix_len(b""), 0);
    assert_eq!(clean_prefix_len(&[b'\\'; 100]), 0);
    assert_eq!(clean_prefix_len(&[0u8; 100]), 0);
    assert_eq!(clean_prefix_len(&[0xffu8; 100]), 100);
}

proptest! {
    #[test]
    fn any_bytes_from_any_start(text in prop::collection::vec(any::<u8>(), 0..300), from in 0usize..300) {
        check_all_scans(&text, from.min(text.len()));
    }

    #[test]
    fn long_clean_runs_with_rare_escapes(
        run in 0usize..200,
        escape in prop::sample::select(std::vec![0u8, 0x1f, b'"', b'\\', b'\n']),
        filler in prop::sample::select(std::vec![b'a', b' ', 0x7f, 0x80, 0xff, b'!', b'#', 0x21, 0x23, 0x5b, 0x5d]),
    ) {
        let mut text = std::vec![filler; run];
        text.push(escape);
        text.extend_from_slice(&[filler; 20]);
        prop_assert_eq!(clean_prefix_len(&text), run);
        prop_assert_eq!(scan_bytes(&text, scan_words(&text, 0)), run);
    }
}
