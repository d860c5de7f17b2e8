use std::path::Component;

use super::*;

/// The `std::path` normalization these byte functions replace.
fn std_normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::Prefix(p) => out.push(p.as_os_str()),
            Component::RootDir => out.push("/"),
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
        }
    }
    out
}

/// Every path of up to `len` pieces from a set that holds each kind of component
/// and separator, so that the byte functions meet every case `std::path` handles.
fn paths(len: usize) -> Vec<String> {
    const PIECES: [&str; 8] = ["/", "a", "bc", ".", "..", "//", "...", "a.b"];
    let mut all = vec![String::new()];
    let mut last = vec![String::new()];
    for _ in 0..len {
        last = last.iter().flat_map(|p| PIECES.iter().map(move |x| format!("{p}{x}"))).collect();
        all.extend(last.iter().cloned());
    }
    all
}

#[test]
fn normalization_matches_std_path_for_every_short_path() {
    let bases = ["/", "/r", "/r/s", "/r/./s/", "/r//s/..", "rel/x", ""];
    for tail in paths(5) {
        let tail_path = Path::new(&tail);
        assert_eq!(normalize(None, tail.as_bytes()), std_normalize(tail_path), "{tail:?}");
        if tail_path.is_absolute() {
            continue;
        }
        for base in bases {
            let expected = std_normalize(&Path::new(base).join(tail_path));
            assert_eq!(normalize(Some(Path::new(base)), tail.as_bytes()), expected, "{base:?} + {tail:?}");
        }
    }
}

#[test]
fn a_normalized_path_is_in_normal_form() {
    for tail in paths(5) {
        let normalized = normalize(Some(Path::new("/r")), tail.trim_start_matches('/').as_bytes());
        assert!(is_normal_form(normalized.as_os_str().as_bytes()), "{tail:?} → {normalized:?}");
    }
    for not_normal in ["", "/r/", "/r//s", "/r/./s", "/r/..", "./r", "r/."] {
        assert!(!is_normal_form(not_normal.as_bytes()), "{not_normal:?}");
    }
}

#[test]
fn root_matching_and_the_part_below_match_std_path() {
    let roots = ["/", "/r", "/r/s", "/rs", "r", "/r/", "/r/./s", "/r//s", "/r/s/..", ""];
    for candidate in paths(4) {
        let path = std_normalize(Path::new(&candidate));
        let bytes = path.as_os_str().as_bytes();
        if !is_normal_form(bytes) {
            continue;
        }
        for root in roots.iter().map(Path::new) {
            let normal = Normal(bytes);
            assert_eq!(within(normal, root), path.starts_with(root), "{path:?} in {root:?}");
            assert_eq!(below(normal, root), path.strip_prefix(root).unwrap_or(&path), "{path:?} below {root:?}");
        }
    }
}

#[test]
fn a_root_is_not_a_prefix_of_a_longer_sibling_name() {
    let path = Path::new("/srv/repo_evil/x.txt");
    assert!(!within(Normal::trusted(path), Path::new("/srv/repo")));
    assert_eq!(below(Normal::trusted(path), Path::new("/srv/repo")), path);
    assert!(within(Normal::trusted(Path::new("/srv/repo/x")), Path::new("/srv/repo")));
}
