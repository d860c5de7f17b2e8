//! The line window of `herdr_fs_read`: which bytes of a file lines `start..=end` are
//! within a byte budget, and how many lines the file has.
//!
//! Two forms give the same answer: [`select`] over a buffer holding the whole file
//! (small files, read in one go, so the content can be the buffer itself), and
//! [`WindowScanner`] over the file in chunks (big files, where only the window is
//! kept). Line ends are found with `memchr`, which scans many bytes per step.

use std::ops::Range;

use memchr::{memchr, memchr_iter};

/// The selected lines and what stopped the selection.
#[derive(Debug, PartialEq, Eq)]
pub struct Window {
    pub content: Vec<u8>,
    /// Lines put (whole or, see `line_cut`, in part) into `content`.
    pub returned: u64,
    /// Lines in the file; a final line without `\n` counts, a trailing `\n` adds none.
    pub total: u64,
    /// The byte budget stopped the window before `end`.
    pub cut_by_bytes: bool,
    /// The first line alone exceeded the budget and was cut (at a UTF-8 boundary) so
    /// that paging still makes progress.
    pub line_cut: bool,
}

/// A [`Window`] whose content is a range of the buffer it was selected from.
#[derive(Debug, PartialEq, Eq)]
pub struct Selection {
    pub content: Range<usize>,
    pub returned: u64,
    pub total: u64,
    pub cut_by_bytes: bool,
    pub line_cut: bool,
}

impl Selection {
    /// The window over `buf`, the buffer it was selected from. When the window is
    /// the whole buffer (a small file read whole, the usual case) the buffer
    /// becomes the content without a copy.
    pub fn into_window(self, mut buf: Vec<u8>) -> Window {
        let content = if self.content == (0..buf.len()) {
            buf
        } else if self.content.start == 0 {
            buf.truncate(self.content.end);
            buf
        } else {
            buf[self.content].to_vec()
        };
        Window { content, returned: self.returned, total: self.total, cut_by_bytes: self.cut_by_bytes, line_cut: self.line_cut }
    }
}

/// Lines in `bytes`: one per `\n`, plus a final line that has no `\n`.
fn count_lines(bytes: &[u8]) -> u64 {
    let newlines = memchr_iter(b'\n', bytes).count() as u64;
    newlines + u64::from(bytes.last().is_some_and(|&b| b != b'\n'))
}

/// Lines `start..=end` of `buf` (1-based, `start <= end`) that fit in `budget`
/// bytes: whole lines only, except that a first line longer than the budget is
/// cut at the last UTF-8 boundary within it, so that paging still moves on.
pub fn select(buf: &[u8], start: u64, end: u64, budget: usize) -> Selection {
    let empty = |total| Selection { content: 0..0, returned: 0, total, cut_by_bytes: false, line_cut: false };
    // The schema keeps `start >= 1` and the tool `end >= start`; outside that the
    // answer is still that of a plain line-by-line walk: line 0 selects like line 1,
    // and an end before the start selects nothing.
    let start = start.max(1);
    if end < start {
        return empty(count_lines(buf));
    }
    // Where line `start` begins: after the `start - 1`th `\n`.
    let from = match start - 1 {
        0 => Some(0),
        skip => usize::try_from(skip - 1).ok().and_then(|n| memchr_iter(b'\n', buf).nth(n)).map(|newline| newline + 1),
    };
    let Some(from) = from.filter(|&from| from < buf.len()) else {
        return empty(count_lines(buf));
    };
    let rest = &buf[from..];
    let rest_lines = count_lines(rest);
    let wanted = end - start + 1;
    let mut sel = Selection { content: from..from, returned: 0, total: start - 1 + rest_lines, cut_by_bytes: false, line_cut: false };
    if rest.len() <= budget && rest_lines <= wanted {
        // The usual case, a small file read from its start: the window is all the
        // rest, and one count of its `\n` replaces a step per line.
        sel.returned = rest_lines;
        sel.content.end = buf.len();
        return sel;
    }
    for newline in memchr_iter(b'\n', rest) {
        let line_end = newline + 1;
        if line_end > budget {
            return cut(sel, rest, line_end, budget);
        }
        sel.returned += 1;
        sel.content.end = from + line_end;
        if sel.returned == wanted {
            return sel;
        }
    }
    let taken = sel.content.end - from;
    if taken < rest.len() {
        // The file's last line, without a `\n`.
        if rest.len() > budget {
            return cut(sel, rest, rest.len(), budget);
        }
        sel.returned += 1;
        sel.content.end = buf.len();
    }
    sel
}

/// The selection when the line ending at `line_end` (relative to `rest`, where
/// the window starts) does not fit in `budget`.
fn cut(mut sel: Selection, rest: &[u8], line_end: usize, budget: usize) -> Selection {
    sel.cut_by_bytes = true;
    if sel.returned == 0 {
        sel.content.end = sel.content.start + utf8_floor(&rest[..line_end], budget);
        sel.returned = 1;
        sel.line_cut = true;
    }
    sel
}

/// The largest `n <= max` such that `bytes[..n]` does not end inside a UTF-8 sequence.
pub fn utf8_floor(bytes: &[u8], max: usize) -> usize {
    let mut n = max.min(bytes.len());
    while n > 0 && n < bytes.len() && (bytes[n] & 0xC0) == 0x80 {
        n -= 1;
    }
    n
}

/// The bytes as text, without a copy when they are valid UTF-8 (the usual case);
/// invalid sequences become replacement characters. `simdutf8` checks many bytes
/// per step where std checks a word at a time.
pub fn into_text(bytes: Vec<u8>) -> String {
    if simdutf8::basic::from_utf8(&bytes).is_ok() {
        // SAFETY: `simdutf8` has just found `bytes` to be valid UTF-8.
        unsafe { String::from_utf8_unchecked(bytes) }
    } else {
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// [`select`] for a file read in chunks: [`feed`](Self::feed) every chunk in order,
/// then [`finish`](Self::finish). It holds the window and at most one byte more.
pub struct WindowScanner {
    start: u64,
    end: u64,
    budget: usize,
    window: Window,
    /// `\n` seen so far, so the line being read is `newlines + 1`.
    newlines: u64,
    /// The line being read has bytes (it counts even if no `\n` ends it).
    in_line: bool,
    /// Whether lines are still being copied: false once past `end` or the budget.
    collecting: bool,
    /// Length of `window.content` made of whole lines.
    whole: usize,
}

impl WindowScanner {
    pub fn new(start: u64, end: u64, budget: usize) -> Self {
        WindowScanner {
            start,
            end,
            budget,
            window: Window { content: Vec::new(), returned: 0, total: 0, cut_by_bytes: false, line_cut: false },
            newlines: 0,
            in_line: false,
            collecting: true,
            whole: 0,
        }
    }

    pub fn feed(&mut self, chunk: &[u8]) {
        let Some(&last) = chunk.last() else { return };
        let mut rest = chunk;
        while !rest.is_empty() {
            let line = self.newlines + 1;
            if self.collecting && line > self.end {
                self.collecting = false;
            }
            if !self.collecting {
                self.newlines += memchr_iter(b'\n', rest).count() as u64;
                break;
            }
            if line < self.start {
                rest = self.skip_towards_start(rest);
                continue;
            }
            let (piece, ends_line) = match memchr(b'\n', rest) {
                Some(newline) => (&rest[..=newline], true),
                None => (rest, false),
            };
            rest = &rest[piece.len()..];
            self.copy(piece, ends_line);
            if ends_line {
                self.newlines += 1;
            }
        }
        self.in_line = last != b'\n';
    }

    /// Counts the `\n` of `rest` up to the one that ends line `start - 1`, and
    /// returns what follows it (nothing if it is not in `rest`).
    fn skip_towards_start<'a>(&mut self, rest: &'a [u8]) -> &'a [u8] {
        let needed = self.start - 1 - self.newlines;
        let mut seen = 0;
        for newline in memchr_iter(b'\n', rest) {
            seen += 1;
            if seen == needed {
                self.newlines += seen;
                return &rest[newline + 1..];
            }
        }
        self.newlines += seen;
        &[]
    }

    /// Adds `piece`, part of a line inside the window, unless the line turns out
    /// not to fit. One byte over the budget is kept to tell where a cut first
    /// line may end.
    fn copy(&mut self, piece: &[u8], ends_line: bool) {
        let content = &mut self.window.content;
        let room = (self.budget + 1).saturating_sub(content.len());
        content.extend_from_slice(&piece[..piece.len().min(room)]);
        if content.len() > self.budget {
            self.overflow();
        } else if ends_line {
            self.whole = content.len();
            self.window.returned += 1;
        }
    }

    /// The line being copied does not fit: keep the whole lines before it, or,
    /// if it is the first, as much of it as fits.
    fn overflow(&mut self) {
        let w = &mut self.window;
        if w.returned == 0 {
            let cut = utf8_floor(&w.content, self.budget);
            w.content.truncate(cut);
            w.returned = 1;
            w.line_cut = true;
        } else {
            w.content.truncate(self.whole);
        }
        w.cut_by_bytes = true;
        self.collecting = false;
    }

    pub fn finish(mut self) -> Window {
        let line = self.newlines + 1;
        if self.in_line && self.collecting && line >= self.start && line <= self.end {
            // The file's last line, without a `\n`: it was copied whole.
            self.window.returned += 1;
        }
        self.window.total = self.newlines + u64::from(self.in_line);
        self.window
    }
}

#[cfg(test)]
#[path = "fs_read_window_tests.rs"]
mod tests;
