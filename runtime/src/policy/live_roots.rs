//! The managed roots in force right now.
//!
//! Configured roots never change, but with Herdr running the roots of the projects its
//! panes and agents work in are managed too (spec §2.1), and those come and go. The
//! current set lives behind one shared snapshot: a tool call takes a read lock just
//! long enough to look at it, while the Herdr side swaps in a whole new list when the
//! panes change. Every clone of a [`Policy`](super::Policy) shares the same snapshot.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use tokio::sync::watch;

#[derive(Clone)]
pub struct LiveRoots {
    inner: Arc<Inner>,
}

struct Inner {
    /// Canonical roots, deepest first.
    current: RwLock<Arc<Vec<PathBuf>>>,
    /// Bumped on every change, so waiters need no polling.
    changes: watch::Sender<u64>,
}

impl std::fmt::Debug for LiveRoots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("LiveRoots").field(&*self.snapshot()).finish()
    }
}

impl LiveRoots {
    /// A set that starts as `roots` (already canonical and deepest first).
    pub fn new(roots: Vec<PathBuf>) -> Self {
        let (changes, _) = watch::channel(0);
        LiveRoots { inner: Arc::new(Inner { current: RwLock::new(Arc::new(roots)), changes }) }
    }

    /// The roots in force now.
    pub fn snapshot(&self) -> Arc<Vec<PathBuf>> {
        Arc::clone(&self.inner.current.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Runs `f` on the current roots without cloning the list (the per-call path).
    pub fn with<T>(&self, f: impl FnOnce(&[PathBuf]) -> T) -> T {
        f(&self.inner.current.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Replaces the set; returns whether it changed.
    pub fn replace(&self, roots: Vec<PathBuf>) -> bool {
        {
            let mut current = self.inner.current.write().unwrap_or_else(|e| e.into_inner());
            if **current == roots {
                return false;
            }
            *current = Arc::new(roots);
        }
        self.inner.changes.send_modify(|g| *g += 1);
        true
    }

    /// Changes whenever the set changes.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.inner.changes.subscribe()
    }
}

/// Why a directory derived from a pane may not become a managed root, if it may not:
/// the filesystem root, the home directory, or a directory that contains the home
/// directory (that would serve the whole home) are never managed.
pub fn refusal_of(root: &Path, home: Option<&Path>) -> Option<&'static str> {
    if !root.is_absolute() {
        return Some("not an absolute path");
    }
    if root.parent().is_none() {
        return Some("the filesystem root");
    }
    match home {
        Some(h) if h == root => Some("the home directory"),
        Some(h) if h.starts_with(root) => Some("a parent of the home directory"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_one_set_and_changes_are_signalled_once() {
        let a = LiveRoots::new(vec![PathBuf::from("/p/a")]);
        let b = a.clone();
        let rx = a.changes();
        assert!(!b.replace(vec![PathBuf::from("/p/a")]), "same list is no change");
        assert!(!rx.has_changed().unwrap());
        assert!(b.replace(vec![PathBuf::from("/p/a/x"), PathBuf::from("/p/a")]));
        assert!(rx.has_changed().unwrap());
        assert_eq!(a.snapshot().len(), 2);
        assert_eq!(a.with(|r| r[0].clone()), PathBuf::from("/p/a/x"));
    }

    #[test]
    fn filesystem_root_home_and_its_parents_are_refused() {
        let home = Path::new("/home/u");
        assert_eq!(refusal_of(Path::new("/"), Some(home)), Some("the filesystem root"));
        assert_eq!(refusal_of(home, Some(home)), Some("the home directory"));
        assert_eq!(refusal_of(Path::new("/home"), Some(home)), Some("a parent of the home directory"));
        assert_eq!(refusal_of(Path::new("relative"), Some(home)), Some("not an absolute path"));
        assert_eq!(refusal_of(Path::new("/home/u/repo"), Some(home)), None);
        assert_eq!(refusal_of(Path::new("/srv/repo"), None), None);
    }
}
