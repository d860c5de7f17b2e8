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
