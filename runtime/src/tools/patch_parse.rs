//! The `*** Begin Patch` grammar of `herdr_fs_patch` (Codex apply_patch style):
//!
//! ```text
//! *** Begin Patch
//! *** Add File: path        then lines starting with '+'
//! *** Delete File: path
//! *** Update File: path     optionally followed by '*** Move to: path'
//! @@ optional anchor        hunks: lines starting with ' ', '-' or '+'
//! *** End Patch
//! ```
//!
//! Parsing is pure; it knows nothing about the filesystem.

/// One file operation of a patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Add { path: String, lines: Vec<String> },
    Delete { path: String },
    Update { path: String, move_to: Option<String>, hunks: Vec<Hunk> },
}

impl Op {
    pub fn path(&self) -> &str {
        match self {
            Op::Add { path, .. } | Op::Delete { path } | Op::Update { path, .. } => path,
        }
    }
}

/// A run of lines to find (context and `-` lines) and what replaces it (context and
/// `+` lines). `anchor` is the text after `@@`, if any.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Hunk {
    pub anchor: Option<String>,
    pub lines: Vec<HunkLine>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HunkLine {
    Context(String),
    Remove(String),
    Add(String),
}

impl Hunk {
    /// The lines the file must contain for this hunk to apply.
    pub fn old_lines(&self) -> Vec<&str> {
        self.lines
            .iter()
            .filter_map(|l| match l {
                HunkLine::Context(s) | HunkLine::Remove(s) => Some(s.as_str()),
                HunkLine::Add(_) => None,
            })
            .collect()
    }

    /// The lines that replace them.
    pub fn new_lines(&self) -> Vec<&str> {
        self.lines
            .iter()
            .filter_map(|l| match l {
                HunkLine::Context(s) | HunkLine::Add(s) => Some(s.as_str()),
                HunkLine::Remove(_) => None,
            })
            .collect()
    }
}

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const ADD: &str = "*** Add File: ";
const DELETE: &str = "*** Delete File: ";
const UPDATE: &str = "*** Update File: ";
const MOVE: &str = "*** Move to: ";
const END_OF_FILE: &str = "*** End of File";

/// Parses a whole patch. Errors name the 1-based line of the patch at fault.
pub fn parse(patch: &str) -> Result<Vec<Op>, String> {
    let lines: Vec<&str> = patch.trim().split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).collect();
    if lines.first().map(|l| l.trim()) != Some(BEGIN) {
        return Err(format!("the first line must be {BEGIN:?}"));
    }
    if lines.len() < 2 || lines.last().map(|l| l.trim()) != Some(END) {
        return Err(format!("the last line must be {END:?}"));
    }
    let body = &lines[1..lines.len() - 1];
    let mut ops = Vec::new();
    let mut i = 0;
    while i < body.len() {
        let line = body[i];
        let at = i + 2; // 1-based line number in the patch
        if let Some(path) = header(line, ADD, at)? {
            let mut added = Vec::new();
            i += 1;
            while i < body.len() && !body[i].starts_with("*** ") {
                match body[i].strip_prefix('+') {
                    Some(text) => added.push(text.to_string()),
                    None => return Err(format!("line {}: lines of an added file must start with '+'", i + 2)),
                }
                i += 1;
            }
            ops.push(Op::Add { path, lines: added });
        } else if let Some(path) = header(line, DELETE, at)? {
            ops.push(Op::Delete { path });
            i += 1;
        } else if let Some(path) = header(line, UPDATE, at)? {
            i += 1;
            let mut move_to = None;
            if i < body.len()
                && let Some(dest) = header(body[i], MOVE, i + 2)?
            {
                move_to = Some(dest);
                i += 1;
            }
            let (hunks, next) = parse_hunks(body, i)?;
            if hunks.is_empty() && move_to.is_none() {
                return Err(format!("line {at}: update of {path} has no hunks"));
            }
            ops.push(Op::Update { path, move_to, hunks });
            i = next;
        } else if line.trim().is_empty() {
            i += 1;
        } else {
            return Err(format!("line {at}: expected '*** Add File:', '*** Delete File:' or '*** Update File:', found {line:?}"));
        }
    }
    if ops.is_empty() {
        return Err("No files were modified.".to_string());
    }
    Ok(ops)
}

/// `Some(path)` when `line` is the header `prefix`; an empty path is an error.
fn header(line: &str, prefix: &str, at: usize) -> Result<Option<String>, String> {
    match line.strip_prefix(prefix) {
        None => Ok(None),
        Some(p) if p.trim().is_empty() => Err(format!("line {at}: {}has no path", prefix.trim_end())),
        Some(p) => Ok(Some(p.trim().to_string())),
    }
}

/// Hunks from `start` up to the next file header; returns them and where parsing stopped.
fn parse_hunks(body: &[&str], start: usize) -> Result<(Vec<Hunk>, usize), String> {
    let mut hunks: Vec<Hunk> = Vec::new();
    let mut current: Option<Hunk> = None;
    let mut i = start;
    while i < body.len() {
        let line = body[i];
        // Only a line that starts with the marker is one: ` *** End of File` is a
        // context line of a file that contains that text.
        if line.trim_end() == END_OF_FILE {
            i += 1;
            continue;
        }
        if line.starts_with("*** ") {
            break;
        }
        if let Some(rest) = line.strip_prefix("@@") {
            if let Some(h) = current.take() {
                hunks.push(h);
            }
            let anchor = rest.trim().trim_end_matches("@@").trim();
            current = Some(Hunk { anchor: (!anchor.is_empty()).then(|| anchor.to_string()), lines: Vec::new() });
            i += 1;
            continue;
        }
        let parsed = match line.chars().next() {
            Some(' ') => HunkLine::Context(line[1..].to_string()),
            Some('-') => HunkLine::Remove(line[1..].to_string()),
            Some('+') => HunkLine::Add(line[1..].to_string()),
            // An empty line inside a hunk is an empty context line whose leading
            // space an editor trimmed.
            None => HunkLine::Context(String::new()),
            Some(_) => return Err(format!("line {}: hunk lines must start with ' ', '-' or '+', found {line:?}", i + 2)),
        };
        current.get_or_insert_with(Hunk::default).lines.push(parsed);
        i += 1;
    }
    if let Some(h) = current {
        hunks.push(h);
    }
    if let Some(pos) = hunks.iter().position(|h| h.lines.is_empty()) {
        return Err(format!("hunk {} of an update has no lines", pos + 1));
    }
    Ok((hunks, i))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_operation() {
        let ops = parse(
            "*** Begin Patch\r\n*** Add File: n.txt\r\n+a\r\n+\r\n*** Delete File: old.txt\n*** Update File: u.txt\n*** Move to: v.txt\n@@ fn main\n ctx\n-old\n+new\n*** End of File\n*** End Patch\n",
        )
        .unwrap();
        assert_eq!(ops.len(), 3);
        assert_eq!(ops[0], Op::Add { path: "n.txt".into(), lines: vec!["a".into(), String::new()] });
        assert_eq!(ops[1], Op::Delete { path: "old.txt".into() });
        let Op::Update { path, move_to, hunks } = &ops[2] else { panic!() };
        assert_eq!((path.as_str(), move_to.as_deref()), ("u.txt", Some("v.txt")));
        assert_eq!(hunks[0].anchor.as_deref(), Some("fn main"));
        assert_eq!(hunks[0].old_lines(), ["ctx", "old"]);
        assert_eq!(hunks[0].new_lines(), ["ctx", "new"]);
    }

    #[test]
    fn rejects_bad_envelopes_and_lines() {
        for (patch, needle) in [
            ("", "first line"),
            ("*** Begin Patch", "last line"),
            ("*** Begin Patch\n*** End Patch", "No files were modified."),
            ("*** Begin Patch\nhello\n*** End Patch", "line 2"),
            ("*** Begin Patch\n*** Add File: a\nno plus\n*** End Patch", "must start with '+'"),
            ("*** Begin Patch\n*** Update File: a\n@@\n*** End Patch", "no lines"),
            ("*** Begin Patch\n*** Update File: a\n*** End Patch", "no hunks"),
            ("*** Begin Patch\n*** Update File: a\n@@\nxbad\n*** End Patch", "hunk lines must start"),
            ("*** Begin Patch\n*** Delete File:  \n*** End Patch", "has no path"),
        ] {
            let err = parse(patch).unwrap_err();
            assert!(err.contains(needle), "{patch:?}: {err}");
        }
    }

    /// Found while writing `patch_props`: a context line whose text is `*** End of File` was taken
    /// for the marker and dropped, so the hunk looked for `a` and `b` side by side.
    #[test]
    fn a_context_line_reading_like_the_end_marker_is_context() {
        let ops = parse("*** Begin Patch\n*** Update File: f\n a\n *** End of File\n-b\n+c\n*** End of File \n*** End Patch").unwrap();
        let Op::Update { hunks, .. } = &ops[0] else { panic!("{ops:?}") };
        assert_eq!(hunks[0].old_lines(), vec!["a", "*** End of File", "b"]);
        assert_eq!(hunks[0].new_lines(), vec!["a", "*** End of File", "c"]);
    }
}
