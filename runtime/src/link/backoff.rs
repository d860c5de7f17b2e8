//! The pace of reconnect attempts: doubling from [`MIN_BACKOFF`] up to
//! [`MAX_BACKOFF`], back to the minimum once a session was linked (a hello was
//! accepted), so a blip after hours of good service is retried at once while an
//! edge that stays down is not hammered.

use std::time::Duration;

pub const MIN_BACKOFF: Duration = Duration::from_millis(500);
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self { next: MIN_BACKOFF }
    }
}

impl Backoff {
    /// How long to wait before the next attempt, after a session that ended with
    /// `linked` telling whether it got as far as an accepted hello.
    pub fn after_session(&mut self, linked: bool) -> Duration {
        if linked {
            self.next = MIN_BACKOFF;
        }
        let wait = self.next;
        self.next = (self.next * 2).min(MAX_BACKOFF);
        wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(d: Duration) -> u128 {
        d.as_millis()
    }

    #[test]
    fn doubles_from_half_a_second_and_stays_at_the_thirty_second_cap() {
        let mut b = Backoff::default();
        let waits: Vec<u128> = (0..10).map(|_| ms(b.after_session(false))).collect();
        assert_eq!(waits, [500, 1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000, 30_000]);
    }

    #[test]
    fn a_linked_session_resets_the_pace_even_at_the_cap() {
        let mut b = Backoff::default();
        for _ in 0..8 {
            b.after_session(false);
        }
        assert_eq!(ms(b.after_session(false)), 30_000);
        assert_eq!(ms(b.after_session(true)), 500, "a good link starts over at the minimum");
        assert_eq!(ms(b.after_session(false)), 1_000, "and doubles again from there");
        assert_eq!(ms(b.after_session(true)), 500);
    }
}
