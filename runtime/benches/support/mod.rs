//! What the benches print besides their own figures: how busy the machine was and
//! how much CPU the bench process itself used.

// Each bench uses only some of these.
#![allow(dead_code)]

/// The 1, 5 and 15 minute load averages, to judge how busy the machine was.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// System and user CPU time of this process so far, in µs.
pub fn cpu_times() -> (f64, f64) {
    let micros = |tv: libc::timeval| tv.tv_sec as f64 * 1e6 + tv.tv_usec as f64;
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::uninit();
    // SAFETY: getrusage fills the whole struct when it returns 0, checked below.
    let usage = unsafe {
        assert_eq!(libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()), 0, "getrusage failed");
        usage.assume_init()
    };
    (micros(usage.ru_stime), micros(usage.ru_utime))
}

/// The `--calls N` argument, or `default` without one; exits with a message when N
/// is not a positive integer.
pub fn calls_arg(default: u32) -> u32 {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == "--calls").map(|i| args.get(i + 1)) {
        None => default,
        Some(Some(n)) if n.parse::<u32>().is_ok_and(|n| n > 0) => n.parse().unwrap_or(default),
        Some(_) => {
            eprintln!("--calls takes a positive integer");
            std::process::exit(2);
        }
    }
}

/// The bench binary's allocator: the system's or mimalloc (the one `herdr-mcp`
/// ships with), chosen by `HERDR_BENCH_ALLOC=mimalloc|system` (default system).
/// The bench spawns its bare rmcp server with the choice set, so the comparison
/// with `herdr-mcp` can be made with the same allocator on both sides. The choice
/// is read once, by the first allocation, before any memory exists: memory is
/// never freed by an allocator other than the one that gave it.
pub struct SwitchableAlloc;

static ALLOC_CHOICE: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);
const CHOICE_SYSTEM: u8 = 1;
const CHOICE_MIMALLOC: u8 = 2;

impl SwitchableAlloc {
    fn uses_mimalloc() -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        let mut choice = ALLOC_CHOICE.load(Relaxed);
        if choice == 0 {
            // getenv does not allocate; every thread that races here finds the same value.
            // SAFETY: the name is a NUL-terminated C string; the result is only read.
            let value = unsafe { libc::getenv(c"HERDR_BENCH_ALLOC".as_ptr()) };
            // SAFETY: a non-null getenv result is a NUL-terminated string.
            let mimalloc = !value.is_null() && unsafe { std::ffi::CStr::from_ptr(value) }.to_bytes() == b"mimalloc";
            choice = if mimalloc { CHOICE_MIMALLOC } else { CHOICE_SYSTEM };
            ALLOC_CHOICE.store(choice, Relaxed);
        }
        choice == CHOICE_MIMALLOC
    }

    /// The allocator this process uses, by name.
    pub fn name() -> &'static str {
        if Self::uses_mimalloc() { "mimalloc" } else { "system" }
    }
}

// SAFETY: every call is forwarded to one allocator, the same for the whole process.
unsafe impl std::alloc::GlobalAlloc for SwitchableAlloc {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { if Self::uses_mimalloc() { mimalloc::MiMalloc.alloc(layout) } else { std::alloc::System.alloc(layout) } }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: as above; `ptr` came from the same allocator.
        unsafe { if Self::uses_mimalloc() { mimalloc::MiMalloc.dealloc(ptr, layout) } else { std::alloc::System.dealloc(ptr, layout) } }
    }
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: as above.
        unsafe { if Self::uses_mimalloc() { mimalloc::MiMalloc.alloc_zeroed(layout) } else { std::alloc::System.alloc_zeroed(layout) } }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as above.
        unsafe {
            if Self::uses_mimalloc() {
                mimalloc::MiMalloc.realloc(ptr, layout, new_size)
            } else {
                std::alloc::System.realloc(ptr, layout, new_size)
            }
        }
    }
}
