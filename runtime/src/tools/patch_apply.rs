//! Applying parsed hunks to file text, in memory. Line endings (LF or CRLF), a UTF-8
//! BOM and the presence of a final newline survive the round trip unchanged.

use super::patch_parse::Hunk;

/// A text file split into lines, with how to put it back together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextFile {
    pub bom: bool,
    pub crlf: bool,
    pub lines: Vec<String>,
    pub trailing_newline: bool,
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

impl TextFile {
    /// A new file's text: LF endings, final newline.
    pub fn new(lines: Vec<String>) -> Self {
        TextFile { bom: false, crlf: false, lines, trailing_newline: true }
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        let bom = bytes.starts_with(BOM);
        let body = if bom { &bytes[BOM.len()..] } else { bytes };
        let text = std::str::from_utf8(body).map_err(|e| format!("the file is not UTF-8 text ({e})"))?;
        let crlf = text.contains("\r\n");
        let trailing_newline = text.ends_with('\n');
        let text = text.strip_suffix('\n').unwrap_or(text);
        let mut lines: Vec<String> =
            if text.is_empty() && !trailing_newline { Vec::new() } else { text.split('\n').map(str::to_string).collect() };
        if crlf {
            // Only a '\r' that came before a '\n' is part of the line ending; a last line
            // without a newline keeps a '\r' it ends with.
            let ended = if trailing_newline { lines.len() } else { lines.len().saturating_sub(1) };
            for line in &mut lines[..ended] {
                if line.ends_with('\r') {
                    line.pop();
                }
            }
        }
        Ok(TextFile { bom, crlf, lines, trailing_newline })
    }

    pub fn encode(&self) -> Vec<u8> {
        let sep = if self.crlf { "\r\n" } else { "\n" };
        let mut out = Vec::new();
        if self.bom {
            out.extend_from_slice(BOM);
        }
        out.extend_from_slice(self.lines.join(sep).as_bytes());
        if !self.lines.is_empty() && self.trailing_newline {
            out.extend_from_slice(sep.as_bytes());
        }
        out
    }

    /// Replaces the lines; a file that was empty gets a final newline once it has
    /// content, like a file created by the patch.
    pub fn set_lines(&mut self, lines: Vec<String>) {
        if self.lines.is_empty() {
            self.trailing_newline = true;
        }
        self.lines = lines;
    }
}

/// Why a hunk could not be placed (`hunk_index` is 0-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HunkError {
    NotFound { hunk_index: usize },
    Ambiguous { hunk_index: usize, match_count: usize },
    Overlap { hunk_index: usize },
}

/// Places every hunk in the *original* lines (each must match exactly one run, at or
/// after its `@@` anchor line if it has one), refuses overlaps, then rewrites.
/// A hunk with no old lines appends at the end of the file.
pub fn apply_hunks(lines: &[String], hunks: &[Hunk]) -> Result<Vec<String>, HunkError> {
    let mut placed: Vec<(usize, usize, usize)> = Vec::with_capacity(hunks.len()); // (start, old_len, hunk)
    for (hunk_index, hunk) in hunks.iter().enumerate() {
        let old = hunk.old_lines();
        let from = match &hunk.anchor {
            None => 0,
            Some(anchor) => find_anchor(lines, anchor).ok_or(HunkError::NotFound { hunk_index })?,
        };
        if old.is_empty() {
            placed.push((lines.len(), 0, hunk_index));
            continue;
        }
        let matches: Vec<usize> = (from..=lines.len().saturating_sub(old.len()))
            .filter(|&s| s + old.len() <= lines.len() && lines[s..s + old.len()].iter().zip(&old).all(|(a, b)| a == b))
            .collect();
        match matches.len() {
            0 => return Err(HunkError::NotFound { hunk_index }),
            1 => placed.push((matches[0], old.len(), hunk_index)),
            n => return Err(HunkError::Ambiguous { hunk_index, match_count: n }),
        }
    }
    placed.sort_by_key(|&(start, _, idx)| (start, idx));
    for pair in placed.windows(2) {
        let (a_start, a_len, _) = pair[0];
        let (b_start, _, b_idx) = pair[1];
        if b_start < a_start + a_len {
            return Err(HunkError::Overlap { hunk_index: b_idx });
        }
    }
    let mut out = Vec::with_capacity(lines.len());
    let mut cursor = 0;
    for (start, len, idx) in placed {
        out.extend_from_slice(&lines[cursor..start]);
        out.extend(hunks[idx].new_lines().into_iter().map(str::to_string));
        cursor = start + len;
    }
    out.extend_from_slice(&lines[cursor..]);
    Ok(out)
}

/// The first line equal to the anchor (ignoring surrounding whitespace), else the
/// first line containing it.
fn find_anchor(lines: &[String], anchor: &str) -> Option<usize> {
    lines.iter().position(|l| l.trim() == anchor).or_else(|| lines.iter().position(|l| l.contains(anchor)))
}

#[cfg(test)]
#[path = "patch_props.rs"]
mod props;

#[cfg(test)]
mod tests {
    use super::super::patch_parse::HunkLine::{Add, Context, Remove};
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    fn hunk(anchor: Option<&str>, lines: Vec<super::super::patch_parse::HunkLine>) -> Hunk {
        Hunk { anchor: anchor.map(str::to_string), lines }
    }

    #[test]
    fn round_trips_bom_crlf_and_final_newline() {
        for bytes in [&b"a\nb\n"[..], b"a\nb", b"\xEF\xBB\xBFa\r\nb\r\n", b"a\r\nb", b"", b"\n"] {
            assert_eq!(TextFile::decode(bytes).unwrap().encode(), bytes, "{bytes:?}");
        }
        assert!(TextFile::decode(b"\xff").is_err());
    }

    /// Found by `props`: a CRLF file whose last line has no newline but ends in '\r'
    /// lost that '\r' on the way through a patch.
    #[test]
    fn a_lone_carriage_return_at_the_end_of_a_crlf_file_survives() {
        for bytes in [&b"\r\n\r"[..], b"a\r\nb\r", b"a\r\nb\r\r"] {
            assert_eq!(TextFile::decode(bytes).unwrap().encode(), bytes, "{bytes:?}");
        }
        assert_eq!(TextFile::decode(b"a\r\nb\r").unwrap().lines, vec!["a".to_string(), "b\r".to_string()]);
    }

    #[test]
    fn replaces_a_unique_run_and_appends_without_context() {
        let lines = s(&["a", "b", "c"]);
        let h1 = hunk(None, vec![Context("a".into()), Remove("b".into()), Add("B".into())]);
        let h2 = hunk(None, vec![Add("d".into())]);
        assert_eq!(apply_hunks(&lines, &[h1, h2]).unwrap(), s(&["a", "B", "c", "d"]));
    }

    #[test]
    fn reports_missing_ambiguous_and_overlapping_hunks() {
        let lines = s(&["x", "y", "x", "y"]);
        let missing = hunk(None, vec![Remove("z".into())]);
        assert_eq!(apply_hunks(&lines, &[missing]), Err(HunkError::NotFound { hunk_index: 0 }));
        let twice = hunk(None, vec![Context("x".into()), Remove("y".into())]);
        assert_eq!(apply_hunks(&lines, &[twice]), Err(HunkError::Ambiguous { hunk_index: 0, match_count: 2 }));
        let lines = s(&["a", "b", "c"]);
        let h1 = hunk(None, vec![Context("a".into()), Remove("b".into())]);
        let h2 = hunk(None, vec![Context("b".into()), Remove("c".into())]);
        assert_eq!(apply_hunks(&lines, &[h1, h2]), Err(HunkError::Overlap { hunk_index: 1 }));
    }

    #[test]
    fn an_anchor_disambiguates() {
        let lines = s(&["fn a", "  x", "fn b", "  x"]);
        let h = hunk(Some("fn b"), vec![Remove("  x".into()), Add("  y".into())]);
        assert_eq!(apply_hunks(&lines, &[h]).unwrap(), s(&["fn a", "  x", "fn b", "  y"]));
        let h = hunk(Some("fn c"), vec![Remove("  x".into())]);
        assert_eq!(apply_hunks(&lines, &[h]), Err(HunkError::NotFound { hunk_index: 0 }));
    }
}
