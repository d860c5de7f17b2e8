use std::cell::RefCell;
use std::path::PathBuf;

use super::*;

/// An `openat2` stand-in that answers `answer(path)` and records every path asked.
struct Fake<F: Fn(&Path) -> io::Result<()>> {
    answer: F,
    asked: RefCell<Vec<PathBuf>>,
}

impl<F: Fn(&Path) -> io::Result<()>> Fake<F> {
    fn new(answer: F) -> Self {
        Fake { answer, asked: RefCell::new(Vec::new()) }
    }

    /// The errno `support` answers for `path` (0 for success).
    fn call(&self, support: &Openat2Support, path: &str) -> i32 {
        let answer = support.call(Path::new(path), &|p| {
            self.asked.borrow_mut().push(p.to_path_buf());
            (self.answer)(p)
        });
        answer.map_or_else(|e| e.raw_os_error().expect("an errno"), |()| 0)
    }

    fn asked(&self) -> Vec<PathBuf> {
        self.asked.borrow().clone()
    }
}

fn errno(n: i32) -> io::Result<()> {
    Err(io::Error::from_raw_os_error(n))
}

fn paths(list: &[&str]) -> Vec<PathBuf> {
    list.iter().map(PathBuf::from).collect()
}

#[test]
fn enosys_is_remembered_and_later_opens_make_no_system_call() {
    let support = Openat2Support::new();
    let fake = Fake::new(|_| errno(libc::ENOSYS));
    for _ in 0..3 {
        assert_eq!(fake.call(&support, "/r/a"), libc::ENOSYS);
    }
    assert_eq!(fake.asked(), paths(&["/r/a"]));
}

#[test]
fn eperm_is_remembered_when_openat2_of_the_root_directory_is_refused_too() {
    let support = Openat2Support::new();
    let fake = Fake::new(|_| errno(libc::EPERM));
    assert_eq!(fake.call(&support, "/r/a"), libc::EPERM);
    assert_eq!(fake.call(&support, "/r/b"), libc::ENOSYS);
    assert_eq!(fake.call(&support, "/r/c"), libc::ENOSYS);
    assert_eq!(fake.asked(), paths(&["/r/a", "/"]));
}

/// A file's own EPERM (a fanotify denial, say) must not turn `openat2` off.
#[test]
fn an_eperm_of_one_file_is_not_remembered() {
    let support = Openat2Support::new();
    let fake = Fake::new(|p| if p == Path::new("/") { Ok(()) } else { errno(libc::EPERM) });
    assert_eq!(fake.call(&support, "/r/a"), libc::EPERM);
    assert_eq!(fake.call(&support, "/r/a"), libc::EPERM);
    assert_eq!(fake.asked(), paths(&["/r/a", "/", "/r/a"]));
}

/// Any answer but a refusal, success or an error of the file, shows that the
/// kernel runs `openat2`: no probe, and every later open asks the kernel again.
#[test]
fn any_other_first_answer_keeps_asking_the_kernel() {
    for first in [0, libc::ENOENT, libc::ELOOP, libc::EACCES] {
        let support = Openat2Support::new();
        let answers = RefCell::new(vec![libc::ENOSYS, first]);
        let fake = Fake::new(|_| match answers.borrow_mut().pop().unwrap() {
            0 => Ok(()),
            n => errno(n),
        });
        assert_eq!(fake.call(&support, "/r/a"), first);
        // Only a seccomp filter installed later could do this; the open falls back
        // for this call (see `open_checked`) but nothing is remembered.
        assert_eq!(fake.call(&support, "/r/b"), libc::ENOSYS);
        assert_eq!(fake.asked(), paths(&["/r/a", "/r/b"]), "first answer {first}");
    }
}

/// Which way `open_checked` went and how it ended, for an `openat2` answering `n`.
fn checked(n: i32) -> (Way, Result<&'static str, String>, bool) {
    let legacy_ran = std::cell::Cell::new(false);
    let no_symlinks = |_: &Path| if n == 0 { Ok("openat2") } else { Err(io::Error::from_raw_os_error(n)) };
    let legacy = |_: &Path| {
        legacy_ran.set(true);
        Ok("legacy")
    };
    let (way, result) = open_checked(Path::new("/r/a"), &no_symlinks, legacy);
    let result = result.map_err(|e| match e {
        CheckedOpenError::Swapped => "swapped".to_string(),
        CheckedOpenError::Io(e) => format!("errno {}", e.raw_os_error().unwrap()),
    });
    (way, result, legacy_ran.get())
}

#[test]
fn open_checked_falls_back_only_when_openat2_is_unavailable() {
    assert_eq!(checked(0), (Way::NoSymlinks, Ok("openat2"), false));
    assert_eq!(checked(libc::ENOSYS), (Way::Legacy, Ok("legacy"), true));
    assert_eq!(checked(libc::EPERM), (Way::Legacy, Ok("legacy"), true));
    assert_eq!(checked(libc::ELOOP), (Way::NoSymlinks, Err("swapped".into()), false));
    assert_eq!(checked(libc::EACCES), (Way::NoSymlinks, Err(format!("errno {}", libc::EACCES)), false));
}

#[test]
fn the_legacy_open_reports_its_own_error() {
    let no_symlinks = |_: &Path| -> io::Result<()> { Err(io::Error::from_raw_os_error(libc::ENOSYS)) };
    let (way, result) = open_checked(Path::new("/r/a"), &no_symlinks, |_| Err(io::Error::from_raw_os_error(libc::ENOENT)));
    assert_eq!(way, Way::Legacy);
    assert!(matches!(result, Err(CheckedOpenError::Io(e)) if e.raw_os_error() == Some(libc::ENOENT)));
}
