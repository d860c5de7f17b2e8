//! A panic inside the service worker's WASM ends in a bare "unreachable" trap, and the
//! release build carries no function names (scripts/build-extension.sh drops them to keep
//! the WASM small), so the panic's own message and file:line are all a developer gets.
//! This hook sends them to the worker's console before the trap.

use std::panic::PanicHookInfo;

/// The console line for a panic: what went wrong and where.
pub fn panic_line(info: &PanicHookInfo<'_>) -> String {
    let what = info
        .payload()
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| info.payload().downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)");
    match info.location() {
        Some(at) => format!("the extension's WASM panicked at {}:{}: {what}", at.file(), at.line()),
        None => format!("the extension's WASM panicked: {what}"),
    }
}

/// Replaces the panic hook with one that hands [`panic_line`] to `log` at level "error".
pub fn install(log: fn(&str, &str)) {
    std::panic::set_hook(Box::new(move |info| log("error", &panic_line(info))));
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    static LOGGED: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());

    fn record(level: &str, message: &str) {
        LOGGED.lock().unwrap().push((level.to_string(), message.to_string()));
    }

    #[test]
    fn a_panic_is_logged_as_one_error_line_with_its_message_and_place() {
        install(record);
        let line = line!() + 1;
        let caught = std::panic::catch_unwind(|| panic!("tab {} vanished", 7));
        let _ = std::panic::take_hook();
        assert!(caught.is_err());
        let logged = LOGGED.lock().unwrap().clone();
        assert_eq!(logged.len(), 1, "{logged:?}");
        assert_eq!(logged[0].0, "error");
        assert_eq!(
            logged[0].1,
            format!("the extension's WASM panicked at {}:{line}: tab 7 vanished", file!())
        );
    }
}
