use std::io::BufRead;

use super::*;

/// The line-by-line walk `herdr_fs_read` used before `memchr`, kept as the
/// reference that [`select`] and [`WindowScanner`] must match field for field.
fn reference_window(mut reader: impl BufRead, start: u64, end: u64, budget: usize) -> Window {
    let mut w = Window { content: Vec::new(), returned: 0, total: 0, cut_by_bytes: false, line_cut: false };
    let mut line = Vec::new();
    let mut collecting = true;
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line).unwrap() == 0 {
            break;
        }
        w.total += 1;
        if !collecting || w.total < start {
            continue;
        }
        if w.total > end {
            collecting = false;
            continue;
        }
        if w.content.len() + line.len() <= budget {
            w.content.extend_from_slice(&line);
            w.returned += 1;
        } else {
            if w.returned == 0 {
                let cut = utf8_floor(&line, budget);
                w.content.extend_from_slice(&line[..cut]);
                w.returned = 1;
                w.line_cut = true;
            }
            w.cut_by_bytes = true;
            collecting = false;
        }
    }
    w
}

/// The text conversion used before `simdutf8`, the reference for [`into_text`].
fn reference_text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

fn scan(bytes: &[u8], start: u64, end: u64, budget: usize, chunk: usize) -> Window {
    let mut scanner = WindowScanner::new(start, end, budget);
    for piece in bytes.chunks(chunk) {
        scanner.feed(piece);
    }
    scanner.finish()
}

/// Both new forms (the scanner with chunks that split lines, characters and
/// `\r\n` everywhere) give exactly the reference's window and text.
fn check(bytes: &[u8], start: u64, end: u64, budget: usize) {
    let expected = reference_window(bytes, start, end, budget);
    // The messages are formatted only when an assertion fails.
    let case = || format!("{:?} start={start} end={end} budget={budget}", String::from_utf8_lossy(bytes));
    assert_eq!(select(bytes, start, end, budget).into_window(bytes.to_vec()), expected, "select: {}", case());
    for chunk in [1, 2, 3, 7, bytes.len().max(1)] {
        assert_eq!(scan(bytes, start, end, budget, chunk), expected, "scanner, chunks of {chunk}: {}", case());
    }
    assert_eq!(into_text(expected.content.clone()), reference_text(expected.content), "text: {}", case());
}

/// Byte offsets (from the start of line `start`) at which lines end: budgets
/// equal to these, and one either side, are the edges of the byte cut.
fn line_ends_from(bytes: &[u8], start: u64) -> Vec<usize> {
    let mut lines = bytes.split_inclusive(|&b| b == b'\n').skip(start.saturating_sub(1) as usize);
    let mut ends = Vec::new();
    let mut at = 0;
    for line in lines.by_ref() {
        at += line.len();
        ends.push(at);
    }
    ends
}

fn params(bytes: &[u8], rng: &mut XorShift) -> Vec<(u64, u64, usize)> {
    let total = reference_window(bytes, 1, u64::MAX, 0).total;
    let mut starts = vec![0, 1, 2, 3, total, total + 1, total + 2, 1 + rng.below(total + 2)];
    starts.dedup();
    let mut out = Vec::new();
    for &start in &starts {
        let ends = [start.saturating_sub(1), start, start + 1, start + 2, total, total + 1, super::super::common::MAX_SAFE_INTEGER, start + rng.below(total + 2)];
        let mut budgets = vec![1, 2, 3, 4, 5, bytes.len(), bytes.len() + 1, 1 + rng.below(bytes.len() as u64 + 2) as usize];
        for at in line_ends_from(bytes, start) {
            budgets.extend([at.saturating_sub(1).max(1), at, at + 1]);
        }
        budgets.sort_unstable();
        budgets.dedup();
        for &end in &ends {
            for &budget in &budgets {
                out.push((start, end, budget));
            }
        }
    }
    out
}

/// A small deterministic generator, so a failure replays the same inputs.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }
}

/// Pieces that make the hard cases: line ends of each kind, characters of two to
/// four bytes, a sequence cut short, stray continuation and invalid bytes.
const PIECES: &[&[u8]] = &[
    b"a", b"bc", b"defgh", b"\n", b"\n\n", b"\r\n", b"\r", "é".as_bytes(), "€".as_bytes(), "😀".as_bytes(),
    b"\xff", b"\x80", b"\xe2\x82", b"\xf0\x9f\x98",
];

#[test]
fn matches_the_line_by_line_walk_on_generated_files() {
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    let mut checked = 0;
    for round in 0..1500 {
        let pieces = rng.below(14);
        let mut bytes = Vec::new();
        for _ in 0..pieces {
            bytes.extend_from_slice(PIECES[rng.below(PIECES.len() as u64) as usize]);
        }
        if round % 10 == 0 {
            // A long first line, so that the cut inside a multi-byte character is common.
            bytes.splice(0..0, "€é😀".repeat(1 + rng.below(4) as usize).into_bytes());
        }
        for (start, end, budget) in params(&bytes, &mut rng) {
            check(&bytes, start, end, budget);
            checked += 1;
        }
    }
    assert!(checked > 100_000, "only {checked} cases were generated");
}

#[test]
fn matches_the_line_by_line_walk_on_the_named_edge_cases() {
    let cases: &[&[u8]] = &[
        b"",
        b"\n",
        b"no trailing newline",
        b"one\ntwo",
        b"crlf\r\nlines\r\n",
        b"lone\rcarriage\rreturns\n",
        "€uro-first line longer than the budget\nx\n".as_bytes(),
        "😀😀😀\n".as_bytes(),
        b"invalid \xff\xfe utf-8\n\x80\n",
        b"ab\ncd\nef\n",
    ];
    for bytes in cases {
        let mut rng = XorShift(7);
        for (start, end, budget) in params(bytes, &mut rng) {
            check(bytes, start, end, budget);
        }
    }
}

#[test]
fn a_long_first_line_is_cut_before_a_split_character() {
    let line = "ab€cd\n";
    // Budgets 3 and 4 end inside the three bytes of `€`: the cut keeps "ab".
    for budget in [3, 4] {
        let w = select(line.as_bytes(), 1, 1, budget).into_window(line.as_bytes().to_vec());
        assert_eq!((w.content.as_slice(), w.returned, w.line_cut, w.cut_by_bytes), (&b"ab"[..], 1, true, true));
    }
    let w = select(line.as_bytes(), 1, 1, 5).into_window(line.as_bytes().to_vec());
    assert_eq!(w.content, "ab€".as_bytes());
}

#[test]
fn a_window_that_is_the_whole_buffer_reuses_it() {
    let bytes = b"one\ntwo\n".to_vec();
    let at = bytes.as_ptr();
    let w = select(&bytes, 1, 10, 100).into_window(bytes);
    assert_eq!(w.content.as_ptr(), at, "the buffer was copied");
    assert_eq!((w.returned, w.total), (2, 2));
}

#[test]
fn the_scanner_keeps_at_most_one_byte_beyond_the_budget() {
    let mut scanner = WindowScanner::new(1, u64::MAX, 10);
    scanner.feed(&[b'x'; 1000]);
    assert!(scanner.window.content.capacity() <= 64, "capacity {}", scanner.window.content.capacity());
    let w = scanner.finish();
    assert_eq!((w.content.len(), w.line_cut, w.total), (10, true, 1));
}
