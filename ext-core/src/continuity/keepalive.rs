//! The period of the keep-alive alarm (`h2w-keepalive`, spec/extension.md §7.1): Chrome
//! starts a stopped service worker for it, and the worker reopens the push stream, so a
//! settle that happened while no worker ran still wakes its conversation.
//!
//! The period is one minute. An unpacked (development) install may shorten it through a
//! value in `chrome.storage.local` — the e2e tests do, to see the alarm work without
//! waiting a minute per case. Nothing in the extension's pages or messages writes that
//! value, and any other install ignores it, so a published extension always keeps the
//! one-minute period.

/// `chrome.storage.local` key of the development-only override, in minutes.
pub const PERIOD_OVERRIDE_KEY: &str = "herdrKeepaliveMinutes";
/// The period in force unless a development install asks for a shorter one.
pub const DEFAULT_PERIOD_MIN: f64 = 1.0;
/// The shortest override honoured (6 s): short enough for a test, long enough that a wrong
/// value cannot make the browser start the worker many times a second.
pub const MIN_DEV_PERIOD_MIN: f64 = 0.1;

/// The alarm period in minutes for the stored override (if any) and the kind of install.
/// Only a development install honours an override, clamped to
/// [`MIN_DEV_PERIOD_MIN`]..=[`DEFAULT_PERIOD_MIN`]: it can make the keep-alive faster for a
/// test, never slower than production. A missing, non-numeric or non-positive value means
/// the default.
pub fn period_minutes(stored: Option<&serde_json::Value>, development: bool) -> f64 {
    if !development {
        return DEFAULT_PERIOD_MIN;
    }
    match stored.and_then(serde_json::Value::as_f64) {
        Some(v) if v.is_finite() && v > 0.0 => v.clamp(MIN_DEV_PERIOD_MIN, DEFAULT_PERIOD_MIN),
        _ => DEFAULT_PERIOD_MIN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_a_development_install_honours_the_override() {
        assert_eq!(period_minutes(Some(&json!(0.2)), true), 0.2);
        assert_eq!(period_minutes(Some(&json!(0.2)), false), DEFAULT_PERIOD_MIN, "a packed install keeps one minute");
        assert_eq!(period_minutes(None, true), DEFAULT_PERIOD_MIN);
        assert_eq!(period_minutes(None, false), DEFAULT_PERIOD_MIN);
    }

    #[test]
    fn the_override_is_clamped_at_both_edges() {
        assert_eq!(period_minutes(Some(&json!(MIN_DEV_PERIOD_MIN)), true), MIN_DEV_PERIOD_MIN);
        assert_eq!(period_minutes(Some(&json!(0.099)), true), MIN_DEV_PERIOD_MIN, "below the floor: the floor");
        assert_eq!(period_minutes(Some(&json!(0.000_1)), true), MIN_DEV_PERIOD_MIN);
        assert_eq!(period_minutes(Some(&json!(DEFAULT_PERIOD_MIN)), true), DEFAULT_PERIOD_MIN);
        assert_eq!(period_minutes(Some(&json!(1.001)), true), DEFAULT_PERIOD_MIN, "never slower than production");
        assert_eq!(period_minutes(Some(&json!(60)), true), DEFAULT_PERIOD_MIN);
    }

    #[test]
    fn nonsense_means_the_default() {
        for v in [json!(0), json!(-0.5), json!("0.1"), json!(null), json!(true), json!({ "min": 0.1 })] {
            assert_eq!(period_minutes(Some(&v), true), DEFAULT_PERIOD_MIN, "{v}");
        }
    }
}
