//! Progress ticks while a bound workspace works (spec/extension.md §7.3).
//!
//! A tick reports output only when it changed in substance: the fingerprint drops what
//! changes on every screen refresh (ANSI escapes, spinner glyphs, clocks, elapsed-time
//! counters, spacing). After the first report of a working round, further reports wait
//! for the cooldown.

use serde::{Deserialize, Serialize};
use std::fmt;

use super::bindings::ProgressState;
use super::render::tail_chars;

pub const DEFAULT_TICK_SEC: u32 = 60;
pub const DEFAULT_COOLDOWN_SEC: u32 = 1_200;
/// Largest tick or cooldown accepted (one day).
pub const MAX_SETTING_SEC: u32 = 86_400;
/// Characters of normalised output a fingerprint keeps (the tail).
pub const FINGERPRINT_CHARS: usize = 1_200;

/// Options-page settings of progress ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgressSettings {
    /// Seconds between ticks; 0 turns progress reports off.
    pub tick_sec: u32,
    /// Seconds after a report before the next one; 0 = no wait beyond the tick.
    pub cooldown_sec: u32,
}

impl Default for ProgressSettings {
    fn default() -> Self {
        ProgressSettings { tick_sec: DEFAULT_TICK_SEC, cooldown_sec: DEFAULT_COOLDOWN_SEC }
    }
}

/// Names of the settings as `herdrContinuitySettings` stores them (spec/extension.md §7.3);
/// errors name the field the same way so the options page can point at it.
pub const TICK_FIELD: &str = "progressTickSec";
pub const COOLDOWN_FIELD: &str = "progressFallbackSec";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettingsError {
    pub field: &'static str,
    /// The refused value as it was given.
    pub value: String,
    pub problem: SettingsProblem,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SettingsProblem {
    /// Not a whole, non-negative number of seconds (empty, decimal, negative, text).
    NotWholeSeconds,
    /// A whole number above [`MAX_SETTING_SEC`].
    OutOfRange,
}

impl fmt::Display for SettingsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.problem {
            SettingsProblem::NotWholeSeconds => write!(f, "{} = \"{}\" is not a whole number of seconds (0..={MAX_SETTING_SEC})", self.field, self.value),
            SettingsProblem::OutOfRange => write!(f, "{} = {} is out of range (0..={MAX_SETTING_SEC} seconds)", self.field, self.value),
        }
    }
}

impl std::error::Error for SettingsError {}

impl ProgressSettings {
    /// Validated settings from raw Options values (which may be anything a form holds).
    pub fn new(tick_sec: u64, cooldown_sec: u64) -> Result<Self, SettingsError> {
        let check = |field, value: u64| {
            u32::try_from(value).ok().filter(|v| *v <= MAX_SETTING_SEC).ok_or(SettingsError { field, value: value.to_string(), problem: SettingsProblem::OutOfRange })
        };
        Ok(ProgressSettings { tick_sec: check(TICK_FIELD, tick_sec)?, cooldown_sec: check(COOLDOWN_FIELD, cooldown_sec)? })
    }

    /// Settings from the options form's text fields: digits only (surrounding spaces
    /// allowed), so "1.5", "-1", "1e3" or an empty field are refused rather than rounded.
    pub fn from_form(tick: &str, cooldown: &str) -> Result<Self, SettingsError> {
        let parse = |field, raw: &str| {
            let digits = raw.trim();
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(SettingsError { field, value: raw.to_string(), problem: SettingsProblem::NotWholeSeconds });
            }
            // Too many digits for u64 is still just "too large".
            Ok(digits.parse::<u64>().unwrap_or(u64::MAX))
        };
        ProgressSettings::new(parse(TICK_FIELD, tick)?, parse(COOLDOWN_FIELD, cooldown)?).map_err(|mut e| {
            // Report what the user typed, not the clamped number.
            e.value = if e.field == TICK_FIELD { tick } else { cooldown }.trim().to_string();
            e
        })
    }

    pub fn validate(self) -> Result<Self, SettingsError> {
        ProgressSettings::new(u64::from(self.tick_sec), u64::from(self.cooldown_sec))
    }

    pub fn enabled(self) -> bool {
        self.tick_sec > 0
    }

    fn tick_ms(self) -> u64 {
        u64::from(self.tick_sec) * 1_000
    }
}

/// Starts a working round: the cooldown clock and the baseline output are seeded now.
pub fn arm(state: &mut ProgressState, settings: ProgressSettings, baseline_output: &str, now_ms: u64) {
    state.last_sent_at_ms = now_ms;
    state.sent_this_round = false;
    state.last_fingerprint = fingerprint(baseline_output);
    state.next_tick_at_ms = now_ms.saturating_add(settings.tick_ms());
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProgressDecision {
    /// No tick is due yet (or ticks are off).
    NotDue,
    /// A tick, but nothing new to say or still cooling down.
    Skip,
    /// Report `output`; the state already records the send.
    Send,
}

/// One tick at `now_ms` with the freshest output; updates the state when it reports.
pub fn tick(state: &mut ProgressState, settings: ProgressSettings, output: &str, now_ms: u64) -> ProgressDecision {
    if !settings.enabled() || now_ms < state.next_tick_at_ms {
        return ProgressDecision::NotDue;
    }
    // A late tick (sleeping service worker) is not followed by a burst of catch-up ticks.
    state.next_tick_at_ms = now_ms.saturating_add(settings.tick_ms());
    let print = fingerprint(output);
    if print.is_empty() || print == state.last_fingerprint {
        return ProgressDecision::Skip;
    }
    let cooling = now_ms.saturating_sub(state.last_sent_at_ms) < u64::from(settings.cooldown_sec) * 1_000;
    if state.sent_this_round && cooling {
        return ProgressDecision::Skip;
    }
    state.last_fingerprint = print;
    state.last_sent_at_ms = now_ms;
    state.sent_this_round = true;
    ProgressDecision::Send
}

/// The output with ANSI escapes, spinner glyphs, clock times and short durations removed,
/// white space collapsed, and only its last [`FINGERPRINT_CHARS`] characters kept.
pub fn fingerprint(output: &str) -> String {
    let text = strip_ansi(output);
    let text: String = text.chars().filter(|c| !is_spinner(*c)).collect();
    let text = strip_clocks_and_durations(&text);
    let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    tail_chars(&collapsed, FINGERPRINT_CHARS).to_owned()
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        match chars.next() {
            // CSI: parameters, then one final byte in @..~.
            Some('[') => {
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            // OSC: up to BEL or ESC \.
            Some(']') => {
                while let Some(c) = chars.next() {
                    if c == '\u{7}' {
                        break;
                    }
                    if c == '\u{1b}' && chars.peek() == Some(&'\\') {
                        chars.next();
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    out
}

fn is_spinner(c: char) -> bool {
    ('\u{2800}'..='\u{28ff}').contains(&c) // braille spinners
        || "◐◓◑◒◴◷◶◵◜◝◞◟✢✳✶✻✽✺⏳⌛".contains(c)
}

/// Removes `h:mm`, `hh:mm:ss` and `<digits>` followed by `m`, `s` or `ms` (not followed by
/// a letter, so words like "3 modules" keep their number).
fn strip_clocks_and_durations(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < chars.len() {
        let starts_number = chars[i].is_ascii_digit() && (i == 0 || !chars[i - 1].is_ascii_alphanumeric());
        if starts_number {
            let digits = chars[i..].iter().take_while(|c| c.is_ascii_digit()).count();
            let end = i + digits;
            if let Some(clock_end) = clock_end(&chars, i, digits) {
                i = clock_end;
                continue;
            }
            let unit = match (chars.get(end), chars.get(end + 1)) {
                (Some('m'), Some('s')) => 2,
                (Some('m' | 's'), _) => 1,
                _ => 0,
            };
            if unit > 0 && !chars.get(end + unit).is_some_and(|c| c.is_alphabetic()) {
                i = end + unit;
                continue;
            }
            out.extend(&chars[i..end]);
            i = end;
            continue;
        }
        out.push(chars[i]);
        i += 1;
    }
    out
}

/// End of `h:mm` or `h:mm:ss` starting at `start` (1–2 hour digits), if one is there.
fn clock_end(chars: &[char], start: usize, hour_digits: usize) -> Option<usize> {
    if !(1..=2).contains(&hour_digits) {
        return None;
    }
    let two_digits_after_colon = |at: usize| {
        chars.get(at) == Some(&':')
            && chars.get(at + 1).is_some_and(char::is_ascii_digit)
            && chars.get(at + 2).is_some_and(char::is_ascii_digit)
            && !chars.get(at + 3).is_some_and(char::is_ascii_digit)
    };
    let mut end = start + hour_digits;
    if !two_digits_after_colon(end) {
        return None;
    }
    end += 3;
    if two_digits_after_colon(end) {
        end += 3;
    }
    Some(end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_ignores_screen_noise() {
        let a = "\u{1b}[32m⠋ Building\u{1b}[0m  12:03:04 elapsed 15s   step 3/9 at 9:41\n";
        let b = "⠙ Building 12:03:09 elapsed 20s step 3/9 at 9:42";
        assert_eq!(fingerprint(a), fingerprint(b));
        assert_eq!(fingerprint(a), "Building elapsed step 3/9 at");
        assert_ne!(fingerprint("step 3/9"), fingerprint("step 4/9"));
        assert_eq!(fingerprint("took 150ms, 2m total"), "took , total");
        assert_eq!(fingerprint("3 modules 4mb"), "3 modules 4mb", "units followed by letters stay");
        assert_eq!(fingerprint("\u{1b}]0;title\u{7}done \u{1b}]2;x\u{1b}\\ok"), "done ok");
        assert_eq!(fingerprint("v1:23"), "v1:23", "not a clock when glued to a word");
        assert_eq!(fingerprint("  \n\t"), "");
    }

    #[test]
    fn fingerprint_keeps_the_last_1200_chars() {
        let text = format!("{}{}", "a".repeat(10), "b".repeat(FINGERPRINT_CHARS));
        assert_eq!(fingerprint(&text), "b".repeat(FINGERPRINT_CHARS));
        let text = format!("x{}", "日".repeat(FINGERPRINT_CHARS - 1));
        assert_eq!(fingerprint(&text).chars().count(), FINGERPRINT_CHARS);
        assert!(fingerprint(&text).starts_with('x'));
    }

    #[test]
    fn settings_are_validated_at_their_edges() {
        assert_eq!(ProgressSettings::default(), ProgressSettings { tick_sec: 60, cooldown_sec: 1_200 });
        assert!(ProgressSettings::new(0, 0).is_ok());
        assert!(ProgressSettings::new(86_400, 86_400).is_ok());
        let err = ProgressSettings::new(86_401, 10).unwrap_err();
        assert_eq!(err.field, TICK_FIELD);
        assert!(err.to_string().contains("86401"), "{err}");
        assert_eq!(ProgressSettings::new(10, u64::MAX).unwrap_err().field, COOLDOWN_FIELD);
        assert!(!ProgressSettings::new(0, 5).unwrap().enabled());
    }

    #[test]
    fn form_values_are_whole_seconds_within_a_day() {
        assert_eq!(ProgressSettings::from_form(" 0 ", "86400"), Ok(ProgressSettings { tick_sec: 0, cooldown_sec: 86_400 }));
        assert_eq!(ProgressSettings::from_form("60", "1200"), Ok(ProgressSettings::default()));
        let over = ProgressSettings::from_form("86401", "5").unwrap_err();
        assert_eq!((over.field, over.value.as_str(), over.problem), (TICK_FIELD, "86401", SettingsProblem::OutOfRange));
        let huge = ProgressSettings::from_form("5", "99999999999999999999999").unwrap_err();
        assert_eq!((huge.field, huge.value.as_str(), huge.problem), (COOLDOWN_FIELD, "99999999999999999999999", SettingsProblem::OutOfRange));
        for bad in ["", "  ", "-1", "1.5", "1e3", "+5", "ten", "٣"] {
            let err = ProgressSettings::from_form(bad, "5").unwrap_err();
            assert_eq!((err.field, err.problem), (TICK_FIELD, SettingsProblem::NotWholeSeconds), "{bad:?}");
        }
        let err = ProgressSettings::from_form("5", "abc").unwrap_err();
        assert_eq!(err.field, COOLDOWN_FIELD);
        assert!(err.to_string().contains("\"abc\" is not a whole number"), "{err}");
    }

    #[test]
    fn reports_only_changed_output_and_at_most_once_per_cooldown() {
        let s = ProgressSettings { tick_sec: 60, cooldown_sec: 1_200 };
        let mut st = ProgressState::default();
        arm(&mut st, s, "start", 0);
        assert_eq!(tick(&mut st, s, "changed", 59_999), ProgressDecision::NotDue);
        assert_eq!(tick(&mut st, s, "start", 60_000), ProgressDecision::Skip, "unchanged output");
        assert_eq!(tick(&mut st, s, "", 120_000), ProgressDecision::Skip, "no output");
        assert_eq!(tick(&mut st, s, "step 1", 180_000), ProgressDecision::Send, "first report of the round");
        assert_eq!(tick(&mut st, s, "step 2", 240_000), ProgressDecision::Skip, "cooling down");
        // The cooldown counts from the last report (180 s): 1380 s is its edge.
        assert_eq!(tick(&mut st, s, "step 2", 1_379_999), ProgressDecision::Skip);
        assert_eq!(tick(&mut st, s, "step 2", 1_380_000 + 60_000), ProgressDecision::Send);
        assert_eq!(tick(&mut st, s, "step 2", 9_000_000), ProgressDecision::Skip, "no change, no report");
    }

    #[test]
    fn cooldown_edge_is_exact_and_zero_tick_is_off() {
        let s = ProgressSettings { tick_sec: 1, cooldown_sec: 10 };
        let mut st = ProgressState::default();
        arm(&mut st, s, "", 0);
        assert_eq!(tick(&mut st, s, "a", 1_000), ProgressDecision::Send);
        let mut early = st.clone();
        assert_eq!(tick(&mut early, s, "b", 10_999), ProgressDecision::Skip);
        assert_eq!(tick(&mut st, s, "b", 11_000), ProgressDecision::Send);
        let off = ProgressSettings { tick_sec: 0, cooldown_sec: 0 };
        let mut st = ProgressState::default();
        arm(&mut st, off, "", 0);
        assert_eq!(tick(&mut st, off, "x", u64::MAX), ProgressDecision::NotDue);
    }

    #[test]
    fn a_late_tick_does_not_burst() {
        let s = ProgressSettings { tick_sec: 60, cooldown_sec: 0 };
        let mut st = ProgressState::default();
        arm(&mut st, s, "", 0);
        assert_eq!(tick(&mut st, s, "a", 600_000), ProgressDecision::Send);
        assert_eq!(tick(&mut st, s, "b", 600_001), ProgressDecision::NotDue);
        assert_eq!(st.next_tick_at_ms, 660_000);
    }
}
